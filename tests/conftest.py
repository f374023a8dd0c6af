"""Shared fixtures: one Spark session (with Delta) per test run."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_purge.session import get_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], UTC, 1 shuffle partition, UI off, Delta on the classpath."""
    session = get_spark(
        "spark-purge-tests",
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()
