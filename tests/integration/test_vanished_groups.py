"""Vanished groups on a real broker: Kafka expires an empty group's offsets
(``offsets.retention.minutes``), and the purge keeps holding the group's last seen position until
an operator forgets it (issue 10, item 3)."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_purge.cli import EXIT_OK, EXIT_USAGE, main
from spark_purge.config import from_dict
from spark_purge.kafka import ClientConfig, ConnectionSettings, open_client
from spark_purge.pipeline import check_offsets_retention, read_snapshot
from spark_purge.policy import split_snapshot
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    create_topic,
    log_starts,
    new_admin,
    new_pipeline,
    produce,
    purge_config_dict,
    run_cycle,
)

# Kafka's minimums (GroupCoordinatorConfig: both at least 1): offsets of an empty group expire
# one minute after its last commit; the broker checks every second.
SHORT_RETENTION = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"}
EXPIRY_DEADLINE_S = 240.0


@pytest.fixture(scope="module")
def forgetful_kafka() -> Iterator[LocalKafka]:
    """A dedicated single-node broker that forgets empty groups' offsets after one minute."""
    with LocalKafka(nodes=1, broker_config=SHORT_RETENTION) as cluster:
        yield cluster


def committed(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], int]:
    """OffsetFetch for every partition the group has a commit on (empty once Kafka forgot it)."""
    found = admin.list_group_offsets({group: None}).get(group, {})
    return {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}


def config_dict(tmp: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    data = purge_config_dict(tmp, bootstrap, topic, None)  # discovered groups
    data["rules"] = [{"name": "r", "topics": topic, "stale_after": "30d", "on_stale_group": "block"}]
    return data


def test_expired_group_keeps_holding_until_forgotten(
    spark: SparkSession, forgetful_kafka: LocalKafka, tmp_path: Path
) -> None:
    bootstrap = forgetful_kafka.bootstrap_servers
    admin = new_admin(bootstrap)
    try:
        topic = create_topic(admin, "vanish", partitions=1)
        produce(bootstrap, topic, [100])
        commit_topic(admin, "gone", topic, [30])  # no members: Kafka will expire it
        commit_topic(admin, "fast", topic, [100])
        data = config_dict(tmp_path, bootstrap, topic)
        cfg = from_dict(data)

        # The broker's setting is read (DescribeConfigs on a broker) and the operator warned.
        with open_client(ClientConfig(ConnectionSettings(bootstrap), topics=(topic,))) as client:
            assert client.snapshot().offsets_retention_ms == 60_000
        warning = check_offsets_retention(cfg)
        assert warning is not None and "offsets.retention.minutes (1m)" in warning and "by memory" in warning

        # Cycle 1: gone is live in Kafka and binds at 30.
        pipeline = new_pipeline(spark, cfg)
        run_cycle(pipeline, 0)
        assert log_starts(admin, topic, 1) == [30]

        # Wait (bounded) until Kafka has expired gone's offsets; keep fast's commit fresh meanwhile.
        deadline = time.monotonic() + EXPIRY_DEADLINE_S
        last_fast = time.monotonic()
        while committed(admin, "gone"):
            assert time.monotonic() < deadline, f"Kafka kept gone's offsets for {EXPIRY_DEADLINE_S}s"
            if time.monotonic() - last_fast > 15:
                commit_topic(admin, "fast", topic, [100])
                last_fast = time.monotonic()
            time.sleep(2)
        commit_topic(admin, "fast", topic, [100])
        assert committed(admin, "gone") == {} and committed(admin, "fast") == {(topic, 0): 100}

        # The planner's input no longer has gone at all: only the progress store knows it.
        _, groups = split_snapshot(read_snapshot(spark, cfg))
        assert {r["group_id"] for r in groups.where(F.col("committed_offset") >= 0).collect()} == {"fast"}

        # Cycle 2: still held at 30 by the remembered position.
        run_cycle(pipeline, 1)
        assert log_starts(admin, topic, 1) == [30]
        (outcome,) = audit_rows(spark, cfg, batch_id=1)
        assert (outcome["cutoff"], outcome["blocking_group"], outcome["status"]) == (30, "gone", "skipped")
        bound_by = outcome["binding_constraint"]
        print(f"cycle 2: log start 30, cutoff {outcome['cutoff']}, bound by {bound_by} ({outcome['blocking_group']}): {outcome}")

        # The operator forgets gone (bad arguments first: exit 2).
        path = tmp_path / "purge.json"
        path.write_text(json.dumps(data))
        no_checkpoint = tmp_path / "nockpt.json"
        no_checkpoint.write_text(json.dumps({k: v for k, v in data.items() if k != "stream"}))
        assert main(["forget-group", "gone", "-c", str(no_checkpoint)]) == EXIT_USAGE
        assert main(["forget-group", "gone", "-c", str(path), "--topic", "("]) == EXIT_USAGE
        assert main(["forget-group", "gone", "-c", str(path), "--topic", "other"]) == EXIT_OK  # nothing there
        assert main(["forget-group", "gone", "-c", str(path)]) == EXIT_OK
        (forgot,) = audit_rows(spark, cfg, "forget")
        assert (forgot["blocking_group"], forgot["topic"], forgot["partition"], forgot["cutoff"]) == ("gone", topic, 0, 30)
        assert forgot["status"] == "forgotten" and forgot["operator"]

        # Cycle 3: nothing holds the topic back any more.
        commit_topic(admin, "fast", topic, [100])
        run_cycle(pipeline, 2)
        assert log_starts(admin, topic, 1) == [100]
        pipeline.close()
    finally:
        admin.close()
    assert bound_by == "vanished_group"


def test_snapshot_reads_the_default_offsets_retention(kafka_cluster: LocalKafka) -> None:
    with open_client(ClientConfig(ConnectionSettings(kafka_cluster.bootstrap_servers), topic_include="none-such")) as client:
        assert client.snapshot().offsets_retention_ms == 7 * 24 * 60 * 60_000  # 10080 minutes, not overridden
        assert client.offsets_retention_ms() == 7 * 24 * 60 * 60_000
