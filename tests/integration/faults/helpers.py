"""Plain helpers for the fault tests (and nothing else): topics with replication factor 3,
acks=all producers, real group commits, log start offsets read from Kafka itself, one purge
cycle in-process, and the audit read back with Spark."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic, OffsetSpec
from kafka.structs import OffsetAndMetadata, TopicPartition
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig, from_dict
from spark_purge.invariants import retry_kafka
from spark_purge.pipeline import BatchResult, PurgePipeline, default_client_factory, read_snapshot

REPLICATION = 3
MIN_ISR = "2"


def retry(fn: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    """Call ``fn`` until it stops raising a retriable kafka-python error (a node just restarted)."""
    return retry_kafka(fn, what, timeout_s, fail=AssertionError)


def create_topic(admin: KafkaAdminClient, prefix: str, partitions: int, replication: int = REPLICATION) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    configs = {"min.insync.replicas": MIN_ISR} if replication >= 3 else {}
    admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs)])
    retry(lambda: _assert_leaders(admin, name, partitions), f"leaders for {name}")
    return name


def _assert_leaders(admin: KafkaAdminClient, topic: str, partitions: int) -> None:
    found = leaders(admin, topic)
    assert len(found) == partitions and all(v >= 0 for v in found.values()), found


def leaders(admin: KafkaAdminClient, topic: str) -> dict[int, int]:
    """partition -> leader broker id, from a fresh metadata request."""
    meta = admin.describe_topics([topic])
    return {p["partition_index"]: p["leader_id"] for p in meta[0]["partitions"]}


def replicas(admin: KafkaAdminClient, topic: str) -> dict[int, list[int]]:
    meta = admin.describe_topics([topic])
    return {p["partition_index"]: list(p["replica_nodes"]) for p in meta[0]["partitions"]}


def produce(bootstrap: str, topic: str, counts: Iterable[int], **client: Any) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **client)
    try:
        for partition, count in enumerate(counts):
            for i in range(count):
                producer.send(topic, value=b"r%d" % i, partition=partition)
        producer.flush(timeout=60)
    finally:
        producer.close()


def commit(admin: KafkaAdminClient, group: str, topic: str, offsets: list[Optional[int]]) -> None:
    """A real OffsetCommit for an (empty) group, as a consumer's commit would be."""
    wanted = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in enumerate(offsets) if o is not None}

    attempts: list[int] = []

    def once() -> None:
        # kafka-python caches the group coordinator forever; after a node kill the stale one
        # answers NOT_COORDINATOR, so retries go through a fresh client.
        attempts.append(1)
        client = admin if len(attempts) == 1 else KafkaAdminClient(bootstrap_servers=admin.config["bootstrap_servers"])
        try:
            result = client.alter_group_offsets(group, wanted)
        finally:
            if client is not admin:
                client.close()
        assert all(err.__name__ == "NoError" for err in result.values()), result

    retry(once, f"commit {group}")


def log_starts(admin: KafkaAdminClient, topic: str, n: int) -> list[int]:
    tps = [TopicPartition(topic, p) for p in range(n)]

    def once() -> list[int]:
        found = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        return [found[tp].offset for tp in tps]

    return retry(once, f"log starts of {topic}")  # type: ignore[no-any-return]


def make_config(
    tmp: Path, bootstrap: str, topics_regex: str, groups: Optional[list[str]], **extra: Any
) -> PurgeConfig:
    rule: dict[str, Any] = {"name": "r", "topics": topics_regex}
    if groups is not None:
        rule["required_groups"] = groups
    kafka = {"bootstrap_servers": bootstrap, "request_timeout": "10s", "delete_timeout": "10s"}
    kafka.update(extra.pop("kafka", {}))
    data: dict[str, Any] = {
        "kafka": kafka,
        "defaults": {"min_retention": "0s", "min_step": 1},
        "rules": [rule],
        "audit": {"path": str(tmp / "audit")},
        "stream": {"checkpoint_location": str(tmp / "checkpoint"), "trigger_interval": "1s"},
    }
    data.update(extra)
    return from_dict(data)


def config_dict(tmp: Path, bootstrap: str, topics_regex: str, groups: list[str], **kafka: Any) -> dict[str, Any]:
    """The same config as a plain dict (to write as YAML for a CLI subprocess)."""
    return {
        "kafka": {"bootstrap_servers": bootstrap, "request_timeout": "10s", "delete_timeout": "10s", **kafka},
        "defaults": {"min_retention": "0s", "min_step": 1},
        "rules": [{"name": "r", "topics": topics_regex, "required_groups": groups}],
        "audit": {"path": str(tmp / "audit")},
        "stream": {"checkpoint_location": str(tmp / "checkpoint"), "trigger_interval": "1s"},
    }


def new_pipeline(
    spark: SparkSession, cfg: PurgeConfig, fault_hook: Optional[Callable[[str, int], None]] = None
) -> PurgePipeline:
    assert cfg.stream is not None
    return PurgePipeline(
        spark, cfg, default_client_factory(cfg), checkpoint_location=cfg.stream.checkpoint_location, fault_hook=fault_hook
    )


def run_cycle(pipeline: PurgePipeline, batch_id: int) -> BatchResult:
    """One purge cycle on a fresh snapshot (what one foreachBatch call does)."""
    snapshot = read_snapshot(pipeline.spark, pipeline.config).cache()
    try:
        snapshot.count()
        return pipeline.process_batch(snapshot, batch_id)
    finally:
        snapshot.unpersist()


def audit_rows(spark: SparkSession, cfg: PurgeConfig, record_type: str = "outcome") -> list[dict[str, Any]]:
    df = spark.read.format("delta").load(cfg.audit.path).where(f"record_type = '{record_type}'")
    return [r.asDict() for r in df.orderBy("batch_id", "topic", "partition").collect()]


def audit_commit_versions(spark: SparkSession, cfg: PurgeConfig) -> dict[str, int]:
    """Delta commit version per ``userMetadata`` (``intent:<batch>`` / ``outcome:<batch>``)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{cfg.audit.path}`").collect()
    return {h["userMetadata"]: h["version"] for h in history if h["userMetadata"]}
