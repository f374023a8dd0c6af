"""Topic identity and lineage on a real broker (issue 11, items 1 and 6): a topic recreated
between the snapshot and DeleteRecords is never cut; commits of another history (above the
high watermark, or with a leader epoch the log contradicts) block; a forced manual cut stops at
an open transaction's last stable offset."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit,
    commit_topic,
    list_offsets,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    recreate_topic,
    run_cycle,
)


def test_topic_recreated_between_snapshot_and_delete_is_never_cut(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("lineage-x")
    produce(kafka_cluster.bootstrap_servers, topic, [100])
    commit_topic(admin, f"{topic}-g", topic, [100])
    cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, topic, [f"{topic}-g"])

    def recreate(step: str, batch_id: int) -> None:
        # After the intents, before DeleteRecords: the old topic (and its group's commits) go,
        # a new one with the same name gets 30 records nobody has read.
        if step == "intents_written":
            recreate_topic(admin, topic, 1)
            produce(kafka_cluster.bootstrap_servers, topic, [30])

    pipeline = new_pipeline(spark, cfg, fault_hook=recreate)
    try:
        result = run_cycle(pipeline, 0)
    finally:
        pipeline.close()

    assert log_starts(admin, topic, 1) == [0]  # every record of the new topic is still there
    assert list_offsets(admin, [(topic, 0)], spec=OffsetSpec.LATEST)[(topic, 0)] == 30
    [intent] = audit_rows(spark, cfg, "intent")
    [outcome] = audit_rows(spark, cfg)
    assert (intent["cutoff"], intent["status"]) == (100, "planned")
    assert (outcome["status"], outcome["records_deleted"], outcome["low_watermark"]) == ("skipped", 0, None)
    assert outcome["error"].startswith(f"topic_recreated: topic {topic!r} was recreated: id {intent['topic_id']} when planned")
    assert intent["topic_id"] is not None and outcome["topic_id"] == intent["topic_id"]
    assert (result.deleted, result.failed) == (0, 0)


def test_commits_of_another_history_block_the_partition(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("lineage-c", partitions=3)
    produce(kafka_cluster.bootstrap_servers, topic, [20, 20, 20])
    group = f"{topic}-g"
    commit(admin, group, {(topic, 0): 50})  # above the high watermark 20
    commit(admin, group, {(topic, 1): 10}, leader_epoch=7)  # an epoch this log never had (it is at 0)
    commit(admin, group, {(topic, 2): 10}, leader_epoch=0)  # consistent: the log's epoch 0 ends at 20
    cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, topic, [group])

    pipeline = new_pipeline(spark, cfg)
    try:
        run_cycle(pipeline, 0)
    finally:
        pipeline.close()

    assert log_starts(admin, topic, 3) == [0, 0, 10]
    got = {r["partition"]: (r["status"], r["binding_constraint"], r["blocking_group"], r["cutoff"]) for r in audit_rows(spark, cfg)}
    assert got == {
        0: ("skipped", "commit_beyond_end", group, None),
        1: ("skipped", "commit_diverged", group, None),
        2: ("deleted", "group", group, 10),
    }


def test_forced_manual_cut_stops_at_an_open_transaction(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("lineage-t")
    produce(kafka_cluster.bootstrap_servers, topic, [20])
    # A long transaction timeout: the broker must not abort it (and move the LSO) mid-test.
    producer = KafkaProducer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, transactional_id=f"{topic}-tx", transaction_timeout_ms=600_000
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        produce(producer, topic, [10])  # offsets 20..29, left open: the last stable offset stays 20
        cfg = purge_config(
            tmp_path, kafka_cluster.bootstrap_servers, topic, None, manual=[{"topic": topic, "offset": "end", "force": True}]
        )
        pipeline = new_pipeline(spark, cfg)
        try:
            run_cycle(pipeline, 0)
        finally:
            pipeline.close()
        assert log_starts(admin, topic, 1) == [20]
    finally:
        producer.abort_transaction()
        producer.close()
    [outcome] = audit_rows(spark, cfg)
    assert (outcome["status"], outcome["cutoff"], outcome["high_watermark"]) == ("deleted", 20, 30)
    assert outcome["binding_constraint"] == "last_stable_offset"
