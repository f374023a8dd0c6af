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
# Spark's Kafka connector (spark-sql-kafka-0-10), for tests running a real Structured Streaming
# consumer; tests needing it skip when the folder is absent (see ``spark_kafka_available``).
SPARK_KAFKA_JARS_ENV = "SPARK_PURGE_SPARK_KAFKA_JARS"
os.environ.setdefault(KAFKA_JARS_ENV, str(REPO_ROOT / ".cache/jars/kafka"))
os.environ.setdefault(DELTA_JARS_ENV, str(REPO_ROOT / ".cache/jars/delta"))
os.environ.setdefault(SPARK_KAFKA_JARS_ENV, str(REPO_ROOT / ".cache/jars/spark-kafka"))


def spark_kafka_jars() -> list[str]:
    """The connector's folder, when it holds jars (``./dev.sh setup`` fills it)."""
    folder = Path(os.environ[SPARK_KAFKA_JARS_ENV])
    return [str(folder)] if folder.is_dir() and any(folder.glob("*.jar")) else []


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], UTC, 1 shuffle partition, UI off, Delta (and Spark's Kafka connector, when
    resolved) on the classpath."""
    session = get_spark(
        "spark-purge-tests",
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2"},
        extra=spark_kafka_jars(),
    )
    yield session
    session.stop()
