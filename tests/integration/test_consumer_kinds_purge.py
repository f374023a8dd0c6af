"""End to end on a real Kafka 4.4 broker with real Spark + Delta: a purge never cuts past a share
group's acknowledged position, nor past partitions a KIP-848 group's members or a streams
group's (KIP-1071) tasks hold without a commit. (Before the snapshot read these, the share group's 90 unacknowledged records were
deleted under discovery; the KIP-848 group's were too.)"""
from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge.kafka import ClientConfig, ConnectionSettings, open_client
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    run_cycle,
)
from tests.integration.share_helpers import kip848_consumer, set_group_config, share_consume, streams_member


def _wait_for_row(cluster: LocalKafka, topic: str, group: str, want: Callable[[int], bool], timeout_s: float = 30.0) -> None:
    """Until the snapshot shows ``group``'s rows on ``topic`` all satisfying ``want`` (the share
    coordinator persists acknowledgements asynchronously; a KIP-848 assignment takes a heartbeat)."""
    config = ClientConfig(ConnectionSettings(cluster.bootstrap_servers), topics=(topic,), group_include=re.escape(group))
    deadline = time.monotonic() + timeout_s
    with open_client(config) as client:
        while True:
            rows = [c.committed_offset for c in client.snapshot().commits if c.group_id == group]
            if rows and all(want(o) for o in rows):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{group} on {topic}: rows {rows} never satisfied the condition")
            time.sleep(0.3)


def test_share_group_holds_the_purge_at_its_start_offset(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("orders")
    produce(kafka_cluster.bootstrap_servers, topic, {0: 100})
    share, fast = f"sq-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
    set_group_config(admin, share, {"share.auto.offset.reset": "earliest"})
    commit_topic(admin, fast, topic, [100])
    assert share_consume(kafka_cluster.bootstrap_servers, share, topic, accept=10, settle=True) == [(topic, 0, o) for o in range(10)]
    _wait_for_row(kafka_cluster, topic, share, lambda o: o == 10)

    cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), None)  # discovery
    pipeline = new_pipeline(spark, cfg)
    try:
        run_cycle(pipeline, 0)
    finally:
        pipeline.close()

    assert log_starts(admin, topic, 1) == [10]  # not 100: 90 records are still unacknowledged
    (row,) = audit_rows(spark, cfg)
    assert (row["status"], row["binding_constraint"], row["blocking_group"], row["blocking_group_type"]) == (
        "deleted", "group", share, "share"
    )


def test_kip848_members_without_a_commit_block_the_purge(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("events", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 50, 1: 50})
    group, fast = f"k848-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
    commit_topic(admin, fast, topic, [50, 50])
    with kip848_consumer(kafka_cluster.bootstrap_servers, group, topic) as consumer:
        assert consumer.wait_assigned() == {(topic, 0), (topic, 1)}
        _wait_for_row(kafka_cluster, topic, group, lambda o: o == -1)
        cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), None)
        pipeline = new_pipeline(spark, cfg)
        try:
            run_cycle(pipeline, 0)
        finally:
            pipeline.close()

    assert log_starts(admin, topic, 2) == [0, 0]  # the group's members may read from the start
    rows = audit_rows(spark, cfg)
    assert [(r["partition"], r["status"], r["binding_constraint"], r["blocking_group"]) for r in rows] == [
        (0, "skipped", "missing_commit", group),
        (1, "skipped", "missing_commit", group),
    ]


def test_streams_group_tasks_without_a_commit_block_the_purge(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A real Kafka Streams application (group.protocol=streams) whose active tasks read both
    partitions and that never commits: StreamsGroupDescribe's tasks hold them as missing commits."""
    topic = new_topic("clicks", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 40, 1: 40})
    app, fast = f"streams-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
    commit_topic(admin, fast, topic, [40, 40])
    with streams_member(kafka_cluster.bootstrap_servers, app, topic) as member:
        assert member.wait_assigned(timeout_s=90) == {(topic, 0), (topic, 1)}
        _wait_for_row(kafka_cluster, topic, app, lambda o: o == -1)
        cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), None)
        pipeline = new_pipeline(spark, cfg)
        try:
            run_cycle(pipeline, 0)
        finally:
            pipeline.close()

    assert log_starts(admin, topic, 2) == [0, 0]  # the application may still read from the start
    rows = audit_rows(spark, cfg)
    assert [(r["partition"], r["status"], r["binding_constraint"], r["blocking_group"], r["blocking_group_type"]) for r in rows] == [
        (0, "skipped", "missing_commit", app, "streams"),
        (1, "skipped", "missing_commit", app, "streams"),
    ]
