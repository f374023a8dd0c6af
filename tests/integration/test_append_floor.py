"""The time floor in append time on a real broker, Spark and Delta (issue 11, item 4): records
appended just before the run carrying two-day-old CreateTimes are kept under ``min_retention:
1h``; with an append history old enough, the cut is exactly that history's high watermark."""
from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    recreate_topic,
    run_cycle,
    topic_id,
)

TWO_DAYS_MS = 2 * 86_400_000


def test_backdated_records_appended_within_min_retention_are_kept(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("backdated", partitions=2)
    old = int(time.time() * 1000) - TWO_DAYS_MS
    # Partition 1: 30 records, then history proving they were appended 2h ago (the store's own
    # API), then 20 more. Partition 0: 50 records and no history at all.
    produce(bootstrap, topic, {1: 30}, timestamps_ms={1: [old] * 30})
    cfg = purge_config(tmp_path, bootstrap, topic, [f"{topic}-g"], defaults={"min_retention": "1h", "min_step": 1})
    pipeline = new_pipeline(spark, cfg)
    two_hours_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    pipeline.history.record(spark.createDataFrame([(topic, 1, two_hours_ago, 30, topic_id(admin, topic))], schemas.APPEND_HISTORY), batch_id=-1)
    produce(bootstrap, topic, {0: 50, 1: 20}, timestamps_ms={0: [old] * 50, 1: [old] * 20})
    commit_topic(admin, f"{topic}-g", topic, [50, 50])  # consumed everything

    try:
        run_cycle(pipeline, 0)
    finally:
        pipeline.close()

    # The timestamp index alone says every record is two days old (it would cut both to 50).
    assert log_starts(admin, topic, 2) == [0, 30]
    rows = {r["partition"]: r for r in audit_rows(spark, cfg)}
    brief = {p: (r["status"], r["cutoff"], r["low_watermark"], r["binding_constraint"], r["time_floor_source"]) for p, r in rows.items()}
    assert brief == {
        0: ("skipped", 0, None, "time_floor", "no_history"),
        1: ("deleted", 30, 30, "time_floor", "append_history"),
    }
    assert rows[1]["records_deleted"] == 30
    intents = audit_rows(spark, cfg, "intent")
    assert [(r["partition"], r["cutoff"], r["time_floor_source"]) for r in intents] == [(1, 30, "append_history")]
    # The batch recorded what it saw: both high watermarks at 50, as of the snapshot's time.
    recorded = {(r["partition"], r["high_watermark"]) for r in pipeline.history.read().collect()}
    assert recorded == {(0, 50), (1, 30), (1, 50)}


def test_a_topic_recreated_and_refilled_past_its_history_keeps_its_fresh_records(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The append history proves an offset old only for the topic incarnation it saw: a topic
    deleted and recreated between two batches, and refilled past the old one's high watermark
    with backdated records, has nothing old enough to cut under ``min_retention``."""
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("recreated-floor", partitions=1)
    old = int(time.time() * 1000) - TWO_DAYS_MS
    produce(bootstrap, topic, {0: 30}, timestamps_ms={0: [old] * 30})
    cfg = purge_config(tmp_path, bootstrap, topic, [f"{topic}-g"], defaults={"min_retention": "1h", "min_step": 1})
    pipeline = new_pipeline(spark, cfg)
    # The first incarnation's 30 records, proven appended over 2h ago (the store's own API).
    first_id = topic_id(admin, topic)
    two_hours_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    pipeline.history.record(spark.createDataFrame([(topic, 0, two_hours_ago, 30, first_id)], schemas.APPEND_HISTORY), batch_id=-1)
    # Deleted and created again under the same name, then refilled past 30 with records
    # carrying two-day-old CreateTimes (a mirror, a replay), all read by the group.
    recreate_topic(admin, topic, 1)
    second_id = topic_id(admin, topic)
    assert second_id not in (None, first_id)
    produce(bootstrap, topic, {0: 50}, timestamps_ms={0: [old] * 50})
    commit_topic(admin, f"{topic}-g", topic, [50])

    try:
        run_cycle(pipeline, 0)
    finally:
        pipeline.close()

    # The timestamp index says two days old and the old row says "below 30 before 2h ago":
    # both wrong for these records, appended seconds ago. Nothing is cut.
    assert log_starts(admin, topic, 1) == [0]
    [row] = audit_rows(spark, cfg)
    assert (row["status"], row["cutoff"], row["binding_constraint"], row["time_floor_source"], row["topic_id"]) == (
        "skipped", 0, "time_floor", "no_history", second_id
    )
    # The batch recorded the new incarnation's high watermark under its own id.
    recorded = {(r["high_watermark"], r["topic_id"]) for r in pipeline.history.read().collect()}
    assert recorded == {(30, first_id), (50, second_id)}


def test_broker_clock_from_a_log_append_time_probe(kafka_cluster: LocalKafka, new_topic: Callable[..., str]) -> None:
    from spark_purge.errors import ConfigError
    from spark_purge.kafka.clock import BrokerClock, ClockReading, describe_skew
    from spark_purge.kafka.settings import ConnectionSettings

    settings = ConnectionSettings(kafka_cluster.bootstrap_servers)
    probe = f"clock-probe-{time.monotonic_ns()}"  # created by the probe itself, LogAppendTime
    with BrokerClock(settings, probe) as clock:
        first, second = clock.read(), clock.read()
    for reading in (first, second):
        # One machine: the broker stamps the record between our send and its acknowledgement.
        assert reading.sent_ms - 5 <= reading.broker_ms <= reading.acked_ms + 5, reading
        assert abs(reading.skew_ms) <= reading.uncertainty_ms + 5 and describe_skew(reading) is None
    assert describe_skew(ClockReading(broker_ms=10_000, sent_ms=7_000, acked_ms=7_010)) == (
        "broker clock is 3.0s ahead of the driver's (+/- 5ms); time floors compare driver time with driver time "
        "(append history), record timestamps are the broker's or producers'"
    )
    create_time = new_topic("clock-createtime")  # an existing topic keeping producer timestamps
    with BrokerClock(settings, create_time) as clock, pytest.raises(ConfigError, match=f"{create_time}.*LogAppendTime"):
        clock.read()
