"""Consumers that keep their positions outside Kafka (issue 10, item 4), on a real broker with
real Spark + Delta: a real Spark Structured Streaming query (Spark's Kafka connector) whose
position is in its checkpoint, a missing/corrupt checkpoint, and static holds."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig
from spark_purge.errors import ConfigError
from spark_purge.external import read_checkpoint_position
from spark_purge.external_snapshot import CHECKPOINT_UNREADABLE
from spark_purge.fs import HadoopFiles
from spark_purge.pipeline import plan_snapshot
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    run_cycle,
    run_stream_query,
    spark_kafka_jars,
)

needs_connector = pytest.mark.skipif(not spark_kafka_jars(), reason="Spark's Kafka connector not resolved (./dev.sh setup)")


def run_spark_query(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, sink: Path) -> None:
    """A real Structured Streaming consumer: Kafka -> Delta, from the earliest offsets, at most
    30 records per micro-batch, until what is available now has been read; then it stops."""
    run_stream_query(spark, bootstrap, [topic], checkpoint, sink, max_per_batch=30)


def external_config(tmp: Path, bootstrap: str, topic: str, consumers: list[dict[str, Any]], groups: list[str] | None = None) -> PurgeConfig:
    """One rule on ``topic`` (discovery unless ``groups``), min_retention 0s, min_step 1."""
    return purge_config(tmp, bootstrap, topic.replace(".", r"\."), groups, external_consumers=consumers)


def plan_rows(spark: SparkSession, cfg: PurgeConfig) -> dict[int, dict[str, Any]]:
    plan = plan_snapshot(spark, cfg)
    assert plan is not None
    return {r["partition"]: r.asDict() for r in plan.rows.collect()}


def purge_once(spark: SparkSession, cfg: PurgeConfig) -> dict[int, dict[str, Any]]:
    pipeline = new_pipeline(spark, cfg)
    try:
        run_cycle(pipeline, 0)
    finally:
        pipeline.close()
    return {r["partition"]: r for r in audit_rows(spark, cfg)}


@needs_connector
def test_spark_streaming_query_holds_the_purge_at_its_checkpoint_position(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("enrich", partitions=2)
    produce(bootstrap, topic, [40, 40])
    checkpoint = tmp_path / "query-checkpoint"
    run_spark_query(spark, bootstrap, topic, checkpoint, tmp_path / "sink")
    # The query read everything there was (80 records, in 3 micro-batches of <= 30) and stopped.
    assert spark.read.format("delta").load(str(tmp_path / "sink")).count() == 80
    position = read_checkpoint_position(HadoopFiles(spark), str(checkpoint))
    assert dict(position.offsets) == {(topic, 0): 40, (topic, 1): 40} and position.batch_id == 2
    produce(bootstrap, topic, [60, 60])  # it stopped mid-way: 60 records per partition unread
    commit_topic(admin, f"{topic}-fast", topic, [100, 100])  # a classic group read everything
    cfg = external_config(tmp_path, bootstrap, topic, [{"name": "enrich-query", "spark_checkpoint": f"file://{checkpoint}", "topics": topic}])

    planned = plan_rows(spark, cfg)
    outcomes = purge_once(spark, cfg)

    assert log_starts(admin, topic, 2) == [40, 40]
    for p in (0, 1):
        assert planned[p]["cutoff"] == 40 and planned[p]["blocking_group"] == "enrich-query", planned[p]
        assert outcomes[p]["status"] == "deleted" and outcomes[p]["low_watermark"] == 40
        assert outcomes[p]["blocking_group"] == "enrich-query"
    # The lead's policy names external consumers' binding constraint `external` (issue 10).
    assert [outcomes[p]["binding_constraint"] for p in (0, 1)] == ["external", "external"]


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_unreadable_checkpoint_blocks_the_topic(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path, damage: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("lost", partitions=2)
    produce(bootstrap, topic, [100, 100])
    commit_topic(admin, f"{topic}-fast", topic, [100, 100])
    checkpoint = tmp_path / "query-checkpoint"
    if damage == "corrupt":  # a committed batch whose offsets file is garbage
        (checkpoint / "offsets").mkdir(parents=True)
        (checkpoint / "commits").mkdir()
        (checkpoint / "offsets" / "0").write_text("v1\n{not json")
        (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    cfg = external_config(tmp_path, bootstrap, topic, [{"name": "lost-query", "spark_checkpoint": str(checkpoint), "topics": topic}])

    planned = plan_rows(spark, cfg)
    outcomes = purge_once(spark, cfg)

    assert log_starts(admin, topic, 2) == [0, 0]
    for p in (0, 1):
        assert planned[p]["binding_constraint"] == "group_unreadable" and planned[p]["cutoff"] is None, planned[p]
        assert "lost-query" in planned[p]["detail"] and CHECKPOINT_UNREADABLE in planned[p]["detail"]
        assert str(checkpoint) in planned[p]["detail"]
        assert outcomes[p]["status"] == "skipped" and outcomes[p]["binding_constraint"] == "group_unreadable"
        assert outcomes[p]["blocking_group"] == "lost-query"
    shutil.rmtree(checkpoint, ignore_errors=True)


def test_static_hold_keeps_its_partition(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("flink", partitions=2)
    produce(bootstrap, topic, [100, 100])
    commit_topic(admin, f"{topic}-fast", topic, [100, 100])
    cfg = external_config(tmp_path, bootstrap, topic, [{"name": "flink-job", "hold": {"topic": topic, "partition": 0, "offset": 25}}])

    outcomes = purge_once(spark, cfg)

    starts = log_starts(admin, topic, 2)
    assert starts[0] == 25
    assert outcomes[0]["blocking_group"] == "flink-job" and outcomes[0]["binding_constraint"] == "external"
    # Nothing holds partition 1 but the classic group, which read all of it: a hold on partition 0
    # says nothing of partition 1.
    assert starts[1] == 100, (starts, outcomes[1])


def test_external_consumers_count_even_when_a_rule_lists_its_groups(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("listed", partitions=1)
    produce(bootstrap, topic, [100])
    commit_topic(admin, f"{topic}-fast", topic, [100])
    cfg = external_config(
        tmp_path, bootstrap, topic, [{"name": "flink-job", "hold": {"topic": topic, "offset": 30}}], groups=[f"{topic}-fast"]
    )

    outcomes = purge_once(spark, cfg)

    assert log_starts(admin, topic, 1) == [30]
    assert outcomes[0]["blocking_group"] == "flink-job"


def test_a_kafka_group_named_like_an_external_consumer_stops_the_purge(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    # The Kafka group "<topic>-twin" read 10 records of partition 0 and has no commit on
    # partition 1: a rule that discovers groups must not cut partition 1 (it would read it from
    # the start). An external consumer of the same name holding partition 1 at 90 used to be
    # taken for the group there: partition 1 was cut to 90. Now the purge stops, naming the key.
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("twin", partitions=2)
    produce(bootstrap, topic, [100, 100])
    commit_topic(admin, f"{topic}-fast", topic, [100, 100])
    commit_topic(admin, f"{topic}-twin", topic, [10, None])
    cfg = external_config(tmp_path, bootstrap, topic, [{"name": f"{topic}-twin", "hold": {"topic": topic, "partition": 1, "offset": 90}}])

    with pytest.raises(ConfigError, match=rf"external_consumers\[0\]\.name: '{topic}-twin' is also the id of a Kafka consumer group"):
        purge_once(spark, cfg)

    assert log_starts(admin, topic, 2) == [0, 0]
