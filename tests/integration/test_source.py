"""The kafka_state data source on real Spark and a real broker: each batch view, and a
readStream with Trigger.AvailableNow into foreachBatch, with the exact offsets produced."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition
from pyspark.sql import DataFrame, SparkSession

from spark_purge import schemas
from spark_purge.source import register
from spark_purge.testing.cluster import LocalKafka, free_port
from spark_purge.testing.workload import commit, create_topic, produce


@pytest.fixture(scope="module")
def seeded(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> dict[str, str]:
    register(spark)
    topic = new_topic("src", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 12, 1: 4})
    admin.delete_records({TopicPartition(topic, 0): 2})
    prefix = f"sg-{uuid.uuid4().hex[:6]}"
    commit(admin, f"{prefix}-x", {(topic, 0): 9, (topic, 1): 4})
    commit(admin, f"{prefix}-y", {(topic, 0): 3})
    return {"topic": topic, "prefix": prefix, "bootstrap": kafka_cluster.bootstrap_servers}


@pytest.fixture(scope="module")
def new_topic(admin: KafkaAdminClient) -> Callable[..., str]:  # module-scoped twin of conftest's
    def create(prefix: str = "t", partitions: int = 1) -> str:
        return create_topic(admin, prefix, partitions)

    return create


def _read(spark: SparkSession, seeded: dict[str, str], view: str) -> DataFrame:
    return (
        spark.read.format("kafka_state")
        .option("bootstrap.servers", seeded["bootstrap"])
        .option("topics", seeded["topic"])
        .option("group.include", f"{seeded['prefix']}-.*")
        .option("view", view)
        .option("time.floors", '[{"topic_regex": "src-.*", "min_retention_ms": 0}]')
        .load()
    )


def test_partitions_view(spark: SparkSession, seeded: dict[str, str]) -> None:
    df = _read(spark, seeded, "partitions")
    assert df.schema == schemas.PARTITION_STATE
    rows = sorted(df.collect(), key=lambda r: r.partition)
    assert [(r.topic, r.partition, r.log_start_offset, r.high_watermark, r.last_stable_offset) for r in rows] == [
        (seeded["topic"], 0, 2, 12, 12),
        (seeded["topic"], 1, 0, 4, 4),
    ]
    assert [r.time_floor_offset for r in rows] == [12, 4]  # every record older than "now"
    assert {r.cleanup_policy for r in rows} == {"delete"} and {r.leader for r in rows} == {1}
    assert len({r.snapshot_id for r in rows}) == 1
    # The topic's id (Metadata v10+), the same on every partition: a recreated topic gets another.
    assert len({r.topic_id for r in rows}) == 1 and len(rows[0].topic_id) == 36


def test_groups_view(spark: SparkSession, seeded: dict[str, str]) -> None:
    df = _read(spark, seeded, "groups")
    assert df.schema == schemas.GROUP_OFFSETS
    got = sorted((r.group_id, r.partition, r.committed_offset, r.group_type, r.group_state) for r in df.collect())
    p = seeded["prefix"]
    assert got == [
        (f"{p}-x", 0, 9, "classic", "Empty"),
        (f"{p}-x", 1, 4, "classic", "Empty"),
        (f"{p}-y", 0, 3, "classic", "Empty"),
    ]


def test_snapshot_view(spark: SparkSession, seeded: dict[str, str]) -> None:
    df = _read(spark, seeded, "snapshot")
    assert df.schema == schemas.SNAPSHOT
    rows = {r.partition: r for r in df.collect()}
    p = seeded["prefix"]
    assert sorted((g.group_id, g.committed_offset) for g in rows[0].groups) == [(f"{p}-x", 9), (f"{p}-y", 3)]
    assert [(g.group_id, g.committed_offset) for g in rows[1].groups] == [(f"{p}-x", 4)]


def test_stream_available_now_emits_one_snapshot_and_persists_nothing(
    spark: SparkSession, seeded: dict[str, str], tmp_path: Path
) -> None:
    batches: list[tuple[int, list[tuple[str, int, int, int]]]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        batches.append(
            (batch_id, sorted((r.topic, r.partition, r.high_watermark, len(r.groups)) for r in df.collect()))
        )

    checkpoint = tmp_path / "cp"
    stream = (
        spark.readStream.format("kafka_state")
        .option("bootstrap.servers", seeded["bootstrap"])
        .option("topics", seeded["topic"])
        .option("group.include", f"{seeded['prefix']}-.*")
        .option("poll.interval", "1s")
        .load()
    )
    assert stream.schema == schemas.SNAPSHOT
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert batches == [(0, [(seeded["topic"], 0, 12, 2), (seeded["topic"], 1, 4, 1)])]
    # Nothing persisted beside Spark's own checkpoint files (a replay gets a fresh snapshot).
    assert not (checkpoint / "snapshots").exists()


def test_bad_option_names_the_key(spark: SparkSession, seeded: dict[str, str]) -> None:
    register(spark)
    with pytest.raises(Exception) as info:
        spark.read.format("kafka_state").option("bootstrap.servers", seeded["bootstrap"]).option("view", "bogus").load()
    assert "view: expected one of" in str(info.value)


def test_unreachable_cluster_error_names_the_servers(spark: SparkSession) -> None:
    register(spark)
    servers = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception) as info:
        (
            spark.read.format("kafka_state")
            .option("bootstrap.servers", servers)
            .option("request.timeout.ms", "1500")
            .load()
            .collect()
        )
    assert "ClusterUnreachable" in str(info.value) and servers in str(info.value)
