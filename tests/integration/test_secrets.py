"""Secrets on a real SASL/SCRAM broker: a ``{spark_conf: key}`` password, resolved from the
active Spark session, drives a plan and a purge and appears nowhere.

Grepped for the password: what PySpark ships to executors (the read function and partitions,
written by PySpark's own ``write_read_func_and_partitions`` for a data source that went through
the same pickling as in Spark), the stream reader's pickled state, every log record, the
process's stdout/stderr (Spark's JVM included), the printed plan, the audit rows and every file
the run left. Spark's event log and the executors' own processes are covered by
``test_multiprocess.py`` (it needs a session of its own).
"""
from __future__ import annotations

import io
import json
import logging
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.worker.plan_data_source_read import write_read_func_and_partitions

from spark_purge import schemas
from spark_purge.cli import EXIT_OK, EXIT_USAGE, main
from spark_purge.config import from_dict
from spark_purge.pipeline import source_options
from spark_purge.source import KafkaStateDataSource, KafkaStateStreamReader
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    create_topic,
    log_starts,
    new_admin,
    produce,
    purge_config_dict,
)
from tests.integration.secure_helpers import ADMIN_PASSWORD, LogCollector

PASSWORD_KEY = "spark.purge.test.secrets.password"
RECORDS, COMMITTED = [40, 40], [10, 30]




@contextmanager
def _collecting() -> Iterator[LogCollector]:
    """Every log record of the process at DEBUG, kafka-python's included (around the product's
    calls only: the harness's own admin clients log in with the password themselves)."""
    handler, root, kafka = LogCollector(), logging.getLogger(), logging.getLogger("kafka")
    old = root.level, kafka.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    kafka.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old[0])
        kafka.setLevel(old[1])


@pytest.fixture
def password_in_spark_conf(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(PASSWORD_KEY, ADMIN_PASSWORD)
    try:
        yield
    finally:
        spark.conf.unset(PASSWORD_KEY)


def _executor_bound_bytes(options: dict[str, str], streaming: bool) -> bytes:
    """What PySpark's planning worker sends back for executors, after the data source made the
    same trip as in Spark (pickled where created, unpickled in the planner)."""
    data_source = pickle.loads(cloudpickle.dumps(KafkaStateDataSource(options)))
    reader = data_source.streamReader(schemas.SNAPSHOT) if streaming else data_source.reader(schemas.SNAPSHOT)
    out = io.BytesIO()
    write_read_func_and_partitions(
        out, reader=reader, data_source=data_source, schema=schemas.SNAPSHOT, max_arrow_batch_size=1000, binary_as_bytes=True
    )
    return out.getvalue()


def test_spark_conf_password_plans_purges_and_leaks_nowhere(
    spark: SparkSession,
    secure_cluster: LocalKafka,
    password_in_spark_conf: None,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    servers = secure_cluster.bootstrap_servers
    admin = new_admin(servers, **secure_cluster.client_kwargs())
    try:
        topic = create_topic(admin, "secrets", len(RECORDS))
        produce(servers, topic, RECORDS, **secure_cluster.client_kwargs())
        commit_topic(admin, f"{topic}-g", topic, COMMITTED)
    finally:
        admin.close()
    capfd.readouterr()
    security = {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "admin",
        "sasl_password": {"spark_conf": PASSWORD_KEY},
    }
    data = purge_config_dict(tmp_path, servers, topic, [f"{topic}-g"], security=security)
    config = tmp_path / "purge.yaml"
    config.write_text(yaml.safe_dump(data))

    with _collecting() as records:
        # What executors get: the batch read (the planner connects: the rows are real) and the stream.
        options = source_options(from_dict(data))
        batch_bytes = _executor_bound_bytes(options, streaming=False)
        assert topic.encode() in batch_bytes  # the snapshot's rows travel in the partitions
        stream_options = dict(options)
        stream_bytes = _executor_bound_bytes(stream_options, streaming=True)
        stream_reader = KafkaStateStreamReader(KafkaStateDataSource(stream_options).parsed)
        try:
            assert stream_reader.latestOffset({"seq": 0}) == {"seq": 1}  # connects with the password
            chunks = stream_reader.partitions({"seq": 0}, {"seq": 1})
            assert {t for c in chunks for b in c.batches() for t in b.column("topic").to_pylist()} == {topic}  # type: ignore[attr-defined]
            stream_pickle = pickle.dumps(stream_reader)
        finally:
            stream_reader.stop()

        plan_code = main(["-v", "plan", "-c", str(config), "--all", "--json"])
        plan_out = capfd.readouterr()
        run_code = main(["-v", "run", "-c", str(config)])
        run_out = capfd.readouterr()
        spark.conf.unset(PASSWORD_KEY)
        unset_code = main(["plan", "-c", str(config)])
        unset_out = capfd.readouterr()

    assert plan_code == EXIT_OK, plan_out.err[-3000:]
    plan = [json.loads(line) for line in plan_out.out.splitlines() if line.startswith("{")]
    assert sorted((r["partition"], r["cutoff"]) for r in plan) == list(enumerate(COMMITTED))
    assert run_code == EXIT_OK, run_out.err[-3000:]
    admin = new_admin(servers, **secure_cluster.client_kwargs())
    try:
        assert log_starts(admin, topic, len(RECORDS)) == COMMITTED
    finally:
        admin.close()
    rows = audit_rows(spark, data["audit"]["path"], None)
    assert [(r["record_type"], r["partition"], r["cutoff"], r["status"], r["low_watermark"]) for r in rows] == [
        ("lease", -1, None, "acquired", None),  # the run's purger lease (its audit fence row)
        ("intent", 0, COMMITTED[0], "planned", None),
        ("intent", 1, COMMITTED[1], "planned", None),
        ("outcome", 0, COMMITTED[0], "deleted", COMMITTED[0]),
        ("outcome", 1, COMMITTED[1], "deleted", COMMITTED[1]),
    ]
    # An unset key: a usage error naming the config key and the Spark conf key.
    assert unset_code == EXIT_USAGE
    assert f"kafka.security.sasl_password: secret reference spark_conf '{PASSWORD_KEY}' is not set" in unset_out.err

    secret = ADMIN_PASSWORD.encode()
    assert secret not in batch_bytes and secret not in stream_bytes and secret not in stream_pickle
    for name, text in (("plan", plan_out), ("run", run_out), ("unset", unset_out)):
        assert ADMIN_PASSWORD not in text.out + text.err, f"password on the {name} output"
    assert [line for line in records.lines if ADMIN_PASSWORD in line] == []
    assert any("SCRAM" in line or "sasl" in line.lower() for line in records.lines)  # the handler saw the login
    assert not any(ADMIN_PASSWORD in json.dumps(r, default=str) for r in rows)
    assert [str(p) for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()] == []
