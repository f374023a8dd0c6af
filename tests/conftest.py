"""Shared fixtures: one Spark session (with Delta) per test run.

The package takes its jar folders from ``SPARK_PURGE_KAFKA_JARS`` / ``SPARK_PURGE_DELTA_JARS`` (and
the test helpers' from ``SPARK_PURGE_SPARK_KAFKA_JARS`` / ``SPARK_PURGE_KAFKA_STREAMS_JARS``, and the
local file system's jar from ``SPARK_PURGE_LOCAL_FS_JAR``;
``./dev.sh`` exports them all); a bare ``python -m pytest`` in this checkout defaults them to the
checkout's ``.cache/jars`` (filled by ``./dev.sh setup``), here in the tests, never in the package.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_purge import class_archive
from spark_purge.session import DELTA_JARS_ENV, LOCAL_FS_JAR_ENV, get_spark
from spark_purge.testing.cluster import KAFKA_JARS_ENV, TIERED_STORAGE_JARS_ENV
from spark_purge.testing.share import STREAMS_JARS_ENV
from spark_purge.testing.workload import SPARK_KAFKA_JARS_ENV, spark_kafka_jars

REPO_ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault(KAFKA_JARS_ENV, str(REPO_ROOT / ".cache/jars/kafka"))
os.environ.setdefault(DELTA_JARS_ENV, str(REPO_ROOT / ".cache/jars/delta"))
# Spark's Kafka connector (spark-sql-kafka-0-10), for tests running a real Structured Streaming
# consumer (they skip when the folder is absent); Kafka Streams, for the streams-group member.
os.environ.setdefault(SPARK_KAFKA_JARS_ENV, str(REPO_ROOT / ".cache/jars/spark-kafka"))
os.environ.setdefault(STREAMS_JARS_ENV, str(REPO_ROOT / ".cache/jars/kafka-streams"))
# Kafka's LocalTieredStorage (the 4.3.1 storage test jar), for the tiered-storage broker.
os.environ.setdefault(TIERED_STORAGE_JARS_ENV, str(REPO_ROOT / ".cache/jars/tiered-storage"))
# The package's local file system (compiled by ./dev.sh setup), on the test session's driver.
os.environ.setdefault(LOCAL_FS_JAR_ENV, str(REPO_ROOT / ".cache/jars/local-fs/spark-purge-local-fs.jar"))
# A developer's shell may name a `spark-purge serve` for their own commands; the tests' CLI
# processes run locally (tests/integration/test_server.py names its server with --server).
os.environ.pop("SPARK_PURGE_SERVER", None)


#: Heavy optional runs, out of the default command: each runs only when its marker is selected
#: (``./dev.sh test -m wheel``, ``./dev.sh test -m multiprocess``, ``./dev.sh test -m airflow``,
#: ``./dev.sh test -m sigkill``).
OPT_IN = {
    "wheel": "builds a wheel and a virtualenv (minutes)",
    "multiprocess": "its own Spark driver process (local-cluster executors; TLS purges with the event log on): minutes",
    "sigkill": "SIGKILLs a real `spark-purge run --follow` holding the lease, then waits for its expiry (minutes)",
    "airflow": "loads the DAG in a real DagBag from the Airflow environment (./dev.sh airflow-env, minutes the first time)",
}


#: Under pytest-xdist (``./dev.sh test`` runs two workers with ``--dist loadgroup``) the
#: real-broker tests on a cluster the session shares stay on one worker, so that each cluster
#: is started once: "integration" holds every test on the shared one-node cluster
#: (``kafka_cluster``); "faults" every test on the fault suite's 3-node cluster
#: (``fault_cluster``) or on the secured one (``secure_cluster``). Any other integration test
#: (one that starts a cluster of its own, such as tiered storage or a short offsets retention,
#: or needs no Kafka) is grouped by its module only, so that a module's fixtures are made once,
#: and runs on whichever worker is free, as unit tests do. (Until stop 61 those modules joined
#: "faults": that worker then ran about two thirds of the suite's time, 32 minutes of a
#: 32-minute run on a slow day.)
FAULT_CLUSTER_FIXTURE = "fault_cluster"
SHARED_CLUSTER_FIXTURE = "kafka_cluster"
SECURE_CLUSTER_FIXTURE = "secure_cluster"


def _xdist_group(item: pytest.Item) -> str | None:
    path = Path(str(item.fspath)).resolve().relative_to(REPO_ROOT).as_posix()
    if not path.startswith("tests/integration/"):
        return None
    fixtures = set(getattr(item, "fixturenames", ()))
    if FAULT_CLUSTER_FIXTURE in fixtures or SECURE_CLUSTER_FIXTURE in fixtures:
        return "faults"
    if SHARED_CLUSTER_FIXTURE in fixtures:
        return "integration"
    return f"module:{path}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected = config.option.markexpr or ""
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        for marker, why in OPT_IN.items():
            if item.get_closest_marker(marker) is not None and marker not in selected:
                item.add_marker(pytest.mark.skip(reason=f"{why}: run with -m {marker}"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], UTC, 1 shuffle partition, UI off, Delta (and Spark's Kafka connector, when
    resolved) on the classpath. A 2 GB driver heap: one session serves a worker's whole share of
    the suite, and on Spark's default 1 GB one fresh-clone run (stop 42) ran out of heap in the
    property test after an hour of tests (the same examples pass alone)."""
    session = get_spark(
        "spark-purge-tests",
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2", "spark.driver.memory": "2g"},
        extra=spark_kafka_jars(),
    )
    yield session
    session.stop()
    # The worker process may end without its exit handlers (pytest-xdist): when this session's
    # JVM writes the class archive, wait for it here, not leave the JVM writing it alone.
    class_archive.finish_pending()
