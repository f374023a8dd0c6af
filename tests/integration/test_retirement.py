"""Partition retirement on a real broker, Spark and Delta (issue 15): retire while a consumer is
behind, drain, recent writes, a job killed between the registry intent and the delete, writes to
a retired partition, the kafka-python partitioner, and bad requests changing nothing.

One topic's whole life runs in one test (the cycles share their setup); ``retirement.delay`` is
2 s, and each wait for it starts when the cycle that recorded the high watermark returned."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient, KafkaProducer
from kafka.partitioner import murmur2
from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge._time import Deadline
from spark_purge.audit import blocked_now
from spark_purge.cli import EXIT_OK, EXIT_USAGE, main
from spark_purge.config import PurgeConfig, from_dict
from spark_purge.partitioner import RetirementPartitioner
from spark_purge.pipeline import PurgePipeline
from spark_purge.retirement import RetirementRegistry
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    list_offsets,
    log_starts,
    new_pipeline,
    produce,
    purge_config_dict,
    run_cycle,
)

DELAY_S = 2.0


class Killed(RuntimeError):
    """The driver 'dies' where the fault hook raises."""


def _config(tmp_path: Path, bootstrap: str, topics: str, groups: list[str], **extra: Any) -> tuple[Path, PurgeConfig]:
    data = purge_config_dict(tmp_path, bootstrap, topics, groups)
    data["retirement"] = {"enable": True, "delay": f"{int(DELAY_S)}s"}
    data.update(extra)
    path = tmp_path / "purge.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, from_dict(data)


def _high_watermarks(admin: KafkaAdminClient, topic: str, partitions: int) -> list[int]:
    from kafka.admin import OffsetSpec

    found = list_offsets(admin, [(topic, p) for p in range(partitions)], OffsetSpec.LATEST)
    return [found[(topic, p)] for p in range(partitions)]


def _state(registry: RetirementRegistry, topic: str, partition: int) -> tuple[Any, ...]:
    row = registry.current().where(f"topic = '{topic}' AND partition = {partition}").collect()[0]
    return (row["status"], row["event"], row["reclaimed_to"])


def _outcome(spark: SparkSession, cfg: PurgeConfig, batch: int, partition: int) -> dict[str, Any]:
    return next(r for r in audit_rows(spark, cfg, batch_id=batch) if r["partition"] == partition)


def _brief(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["status"], row["binding_constraint"], row["cutoff"], row["blocking_group"])


def _cycle(pipeline: PurgePipeline, batch: int) -> Deadline:
    """One cycle; returns the deadline after which its high watermarks are ``retirement.delay`` old."""
    try:
        run_cycle(pipeline, batch)
    finally:
        pipeline.close()
    return Deadline(DELAY_S + 0.3)


def _wait(deadline: Deadline) -> None:
    time.sleep(deadline.remaining())


def test_retire_drain_reclaim_and_writes_to_a_retired_partition(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic, group = new_topic("retire", partitions=3), "retire-g"
    produce(bootstrap, topic, {0: 10, 1: 10, 2: 10})
    path, cfg = _config(tmp_path, bootstrap, topic, [group])
    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    # A producer started before the retirement picks it up at its next send (refresh 0 s).
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", partitioner=RetirementPartitioner(registry.export_path, 0))
    home_of_2 = next(k for k in (b"key-%d" % i for i in range(100)) if (murmur2(k) & 0x7FFFFFFF) % 3 == 2)
    try:
        assert producer.send(topic, key=home_of_2, value=b"v").get(30).partition == 2  # still open
        assert main(["retire", f"{topic}:2", "-c", str(path), "--reason", "over-partitioned"]) == EXIT_OK
        assert _state(registry, topic, 2) == (schemas.READ_ONLY, "retire", None)
        export = json.loads(Path(registry.export_path.removeprefix("file:")).read_text())
        assert export["partitions"] == [{"topic": topic, "partition": 2, "status": 1, "status_name": "ReadOnly"}]
        keys = [home_of_2] + [None if i % 2 else b"key-%d" % i for i in range(39)]
        sent = [producer.send(topic, key=key, value=b"v") for key in keys]
        producer.flush(30)
        assert {f.get(30).partition for f in sent} <= {0, 1}
    finally:
        producer.close()
    high = _high_watermarks(admin, topic, 3)
    assert high[2] == 11 and high[0] + high[1] == 60

    # 1. Retired while the group is behind on it: the ordinary partial purge goes on, the plan
    #    says `retiring` and names the group.
    commit_topic(admin, group, topic, [high[0], high[1], 4])
    pipeline = new_pipeline(spark, cfg)
    query_id = pipeline.query_id
    _cycle(pipeline, 0)
    assert log_starts(admin, topic, 3) == [high[0], high[1], 4]
    row = _outcome(spark, cfg, 0, 2)
    assert _brief(row) == ("deleted", "retiring", 4, group) and row["blocking_group_type"] == "classic"
    held = blocked_now(spark.read.format("delta").load(cfg.audit.path)).where(f"topic = '{topic}'").collect()
    assert [(r["partition"], r["binding_constraint"], r["blocking_group"], r["records_held"]) for r in held] == [(2, "retiring", group, 7)]
    capsys.readouterr()
    assert main(["retirements", "-c", str(path)]) == EXIT_OK
    listing = capsys.readouterr().out
    assert "over-partitioned" in listing and f"retiring: retiring, not drained: group {group} at 4, log start 4: holds back 7 records" in listing, listing
    drain = listing.split("== drain progress")[1].splitlines()
    assert [line.split() for line in drain if line.startswith(topic)] == [
        [topic, "2", "ReadOnly", group, "classic", "4", "11", "7", "no"]
    ]

    # 2. Drained, but written to just now: recent writes hold it, nothing is deleted.
    produce(bootstrap, topic, {2: 1})
    commit_topic(admin, group, topic, [high[0], high[1], 12])
    quiet = _cycle(new_pipeline(spark, cfg, query_id=query_id), 1)
    row = _outcome(spark, cfg, 1, 2)
    assert _brief(row) == ("skipped", "retiring", None, None)
    assert log_starts(admin, topic, 3)[2] == 4

    # 3. Drained and quiet: the reclaim's registry intent is written, then the driver dies
    #    before DeleteRecords. Nothing is deleted; the partition is still ReadOnly.
    def kill(step: str, batch: int) -> None:
        if step == "intents_written":
            raise Killed(f"killed after the intents of batch {batch}")

    _wait(quiet)
    with pytest.raises(Killed):
        _cycle(new_pipeline(spark, cfg, fault_hook=kill, query_id=query_id), 2)
    assert _state(registry, topic, 2) == (schemas.READ_ONLY, "reclaim_intent", None)
    assert log_starts(admin, topic, 3)[2] == 4
    intents = audit_rows(spark, cfg, "intent", batch_id=2)
    assert [(r["partition"], r["cutoff"], r["binding_constraint"]) for r in intents] == [(2, 12, "retiring")]
    assert audit_rows(spark, cfg, batch_id=2) == []  # no outcome yet

    # 4. Restarted (same query, same batch, as Spark replays it): the recorded reclaim runs,
    #    re-checked, to exactly the high watermark; the partition becomes None.
    _cycle(new_pipeline(spark, cfg, query_id=query_id), 2)
    assert log_starts(admin, topic, 3)[2] == 12
    row = _outcome(spark, cfg, 2, 2)
    assert _brief(row) == ("deleted", "retiring", 12, None) and (row["low_watermark"], row["records_deleted"]) == (12, 8)
    assert _state(registry, topic, 2) == (schemas.RETIRED, "reclaimed", 12)
    events = registry.read().where(f"topic = '{topic}'").orderBy("since").collect()
    assert [(e["event"], e["status"], e["high_watermark"], e["reason"]) for e in events] == [
        ("retire", 1, None, "over-partitioned"),
        ("reclaim_intent", 1, 12, "over-partitioned"),
        ("reclaimed", -1, 12, "over-partitioned"),
    ]
    export = json.loads(Path(registry.export_path.removeprefix("file:")).read_text())
    assert export["partitions"] == [{"topic": topic, "partition": 2, "status": -1, "status_name": "None"}]

    # 5. A producer writes to the retired partition anyway (an explicit partition): reported in
    #    the plan and the audit, and not purged while the group has not read it.
    produce(bootstrap, topic, {2: 3})
    quiet = _cycle(new_pipeline(spark, cfg, query_id=query_id), 3)
    row = _outcome(spark, cfg, 3, 2)
    assert _brief(row) == ("skipped", "writes_to_retired_partition", 12, group)
    assert log_starts(admin, topic, 3)[2] == 12

    # 6. Drained again and quiet: purged again to the new high watermark, under the same rule.
    commit_topic(admin, group, topic, [high[0], high[1], 15])
    _wait(quiet)
    _cycle(new_pipeline(spark, cfg, query_id=query_id), 4)
    assert _brief(_outcome(spark, cfg, 4, 2)) == ("deleted", "writes_to_retired_partition", 15, None)
    assert log_starts(admin, topic, 3)[2] == 15
    assert _state(registry, topic, 2) == (schemas.RETIRED, "reclaimed", 15)


def test_bad_retirements_change_nothing(
    spark: SparkSession, kafka_cluster: LocalKafka, new_topic: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    two, compact, kept, stray = (
        new_topic("ret-two", partitions=2),
        new_topic("ret-compact", configs={"cleanup.policy": "compact"}),
        new_topic("ret-kept"),
        new_topic("ret-stray"),
    )
    path, cfg = _config(tmp_path, bootstrap, f"({two}|{compact}|{kept})", ["g"], protected_topics=[kept])
    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    assert main(["retire", f"{two}:1", "-c", str(path), "--reason", "shrink"]) == EXIT_OK
    before = registry.read().collect()
    version = spark.sql(f"DESCRIBE HISTORY delta.`{registry.path}`").collect()[0]["version"]
    capsys.readouterr()

    bad = f"{two}:0,{two}:1,{two}:7,{compact}:0,{kept}:0,nosuch-topic:0,__consumer_offsets:0,{stray}:0"
    assert main(["retire", bad, "-c", str(path), "--reason", "shrink"]) == EXIT_USAGE
    err = capsys.readouterr().err
    for problem in (
        f"retire {two}:1: already ReadOnly",
        f"retire {two}:7: unknown partition 7 (topic '{two}' has partitions 0..1)",
        f"retire {two}:0, {two}:1, {two}:7: would leave topic '{two}' with no writable (ReadWrite) partition of its 2",
        f"retire {compact}:0: topic '{compact}' has cleanup.policy=compact, which lacks delete",
        f"retire {kept}:0: topic '{kept}' matches protected_topics",
        "retire nosuch-topic:0: unknown topic 'nosuch-topic'",
        "retire __consumer_offsets:0: topic '__consumer_offsets' is internal",
        f"retire {stray}:0: topic '{stray}' matches no rule",
    ):
        assert problem in err, (problem, err)
    assert main(["retire", "--cancel", f"{two}:0", "-c", str(path)]) == EXIT_USAGE
    assert f"retire --cancel {two}:0: is ReadWrite, expected ReadOnly" in capsys.readouterr().err
    assert main(["retire", f"{two}", "-c", str(path), "--reason", "x"]) == EXIT_USAGE
    assert f"expected TOPIC:PARTITION[,TOPIC:PARTITION...], got '{two}'" in capsys.readouterr().err
    off = tmp_path / "off.yaml"
    off.write_text(yaml.safe_dump({k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "retirement"}))
    assert main(["retire", f"{two}:0", "-c", str(off), "--reason", "x"]) == EXIT_USAGE
    assert "retirement.enable: is false" in capsys.readouterr().err

    assert registry.read().collect() == before
    assert spark.sql(f"DESCRIBE HISTORY delta.`{registry.path}`").collect()[0]["version"] == version
    # A cancel while still ReadOnly moves it back.
    assert main(["retire", "--cancel", f"{two}:1", "-c", str(path)]) == EXIT_OK
    assert _state(registry, two, 1) == (schemas.READ_WRITE, "cancel", None)
