"""Shared fixtures: one Spark session (with Delta) per test run.

The package takes its jar folders from ``SPARK_PURGE_KAFKA_JARS`` / ``SPARK_PURGE_DELTA_JARS``
(``./dev.sh`` exports both); a bare ``python -m pytest`` in this checkout defaults them to the
checkout's ``.cache/jars`` (filled by ``./dev.sh setup``), here in the tests, never in the package.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_purge.session import DELTA_JARS_ENV, get_spark
from spark_purge.testing.cluster import KAFKA_JARS_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault(KAFKA_JARS_ENV, str(REPO_ROOT / ".cache/jars/kafka"))
os.environ.setdefault(DELTA_JARS_ENV, str(REPO_ROOT / ".cache/jars/delta"))


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
