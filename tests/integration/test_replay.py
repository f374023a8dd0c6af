"""Replays and checkpoints on a real broker with real Spark + Delta (issue 11, items 2 and 3):
a replayed batch executes its recorded intents bounded by a fresh snapshot, a stale one deletes
nothing, a ``file://`` checkpoint is the same from any working directory, and a reset checkpoint
next to an existing audit is refused."""
from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig, config_fingerprint
from spark_purge.errors import ConfigError
from spark_purge.pipeline import PurgePipeline, default_client_factory, start_stream
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit,
    commit_topic,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    recreate_topic,
    run_available_now,
    run_cycle,
)


def crash_after_intents(step: str, batch_id: int) -> None:
    if step == "intents_written":
        raise RuntimeError("simulated driver crash after the intent write")


def run_once(spark: SparkSession, cfg: PurgeConfig) -> PurgePipeline:
    return run_available_now(spark, cfg, timeout_s=300)


def deletes_without_intent(spark: SparkSession, audit_path: str) -> list[Any]:
    """The README's anti-join: every delete has an intent in the same batch."""
    return spark.sql(f"""
        SELECT o.batch_id, o.topic, o.partition FROM delta.`{audit_path}` o
        LEFT ANTI JOIN (SELECT * FROM delta.`{audit_path}` WHERE record_type = 'intent') i
          ON o.query_id = i.query_id AND o.batch_id = i.batch_id AND o.topic = i.topic AND o.partition = i.partition
        WHERE o.record_type = 'outcome' AND o.status = 'deleted'""").collect()


def test_replay_executes_the_recorded_intents_bounded_by_a_rewind_under_a_changed_config(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    w, x, y = new_topic("w"), new_topic("x"), new_topic("y")
    for topic in (w, x, y):
        produce(bootstrap, topic, [100])
    ga, gb = f"{w}-a", f"{w}-b"
    commit(admin, ga, {(w, 0): 60, (x, 0): 100, (y, 0): 80})
    topics = f"{re.escape(w)}|{re.escape(x)}|{re.escape(y)}"
    listed = purge_config(tmp_path, bootstrap, topics, [ga])
    assert listed.stream is not None

    crashing = PurgePipeline(
        spark, listed, default_client_factory(listed), checkpoint_location=listed.stream.checkpoint_location, fault_hook=crash_after_intents
    )
    query, _ = start_stream(spark, listed, available_now=True, pipeline=crashing)
    with pytest.raises(Exception, match="simulated driver crash"):  # Spark wraps it in a JVM exception
        query.awaitTermination(300)
    crashing.close()
    intents = audit_rows(spark, listed, "intent")
    assert sorted((r["topic"], r["cutoff"]) for r in intents) == sorted([(w, 60), (x, 100), (y, 80)])
    assert audit_rows(spark, listed) == [] and log_starts(admin, w, 1) == log_starts(admin, y, 1) == [0]

    # Before the restart: x is deleted and recreated with 100 records nobody has read (Kafka drops
    # ga's commit with the old topic), ga rewinds on y, gb appears on w, the rule turns to discovery.
    recreate_topic(admin, x, 1)
    produce(bootstrap, x, [100])
    commit(admin, ga, {(y, 0): 20})
    commit(admin, gb, {(w, 0): 90})
    discovering = purge_config(tmp_path, bootstrap, topics, None)
    assert config_fingerprint(discovering) != intents[0]["config_fingerprint"]
    restarted = run_once(spark, discovering)

    # w: the intent's 60 (the fresh plan, min(60, 90), agrees); y: never past the rewound ga;
    # x: the intent's 100 was for the old incarnation: the new one keeps every record.
    assert log_starts(admin, w, 1) == [60] and log_starts(admin, y, 1) == [20] and log_starts(admin, x, 1) == [0]
    replayed = audit_rows(spark, listed, batch_id=0)
    (x_row,) = [r for r in replayed if r["topic"] == x]
    assert (x_row["status"], x_row["records_deleted"]) == ("skipped", 0), x_row
    replayed = [r for r in replayed if r["topic"] != x]
    assert sorted((r["topic"], r["status"], r["cutoff"], r["low_watermark"], r["records_deleted"], r["blocking_group"]) for r in replayed) == sorted(
        [(w, "deleted", 60, 60, 60, ga), (y, "deleted", 20, 20, 20, ga)]
    )
    # The outcomes are the intents' own: same fingerprint, planned_at, query; nothing unplanned.
    assert {(r["config_fingerprint"], r["planned_at"], r["query_id"]) for r in replayed} == {
        (intents[0]["config_fingerprint"], intents[0]["planned_at"], restarted.query_id)
    }
    assert deletes_without_intent(spark, listed.audit.path) == []
    later = [r for r in audit_rows(spark, listed) if r["batch_id"] > 0]  # a next batch plans anew: nothing left
    assert all(r["status"] == "skipped" for r in later)


def test_a_replay_older_than_max_snapshot_age_deletes_nothing(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("stale")
    produce(bootstrap, topic, [100])
    commit_topic(admin, f"{topic}-a", topic, [70])
    cfg = purge_config(tmp_path, bootstrap, re.escape(topic), [f"{topic}-a"])
    first = new_pipeline(spark, cfg, fault_hook=crash_after_intents, query_id="q-stale")
    with pytest.raises(RuntimeError, match="simulated driver crash"):
        run_cycle(first, 0)
    first.close()

    stale = purge_config(
        tmp_path, bootstrap, re.escape(topic), [f"{topic}-a"],
        stream={"checkpoint_location": str(tmp_path / "checkpoint"), "max_snapshot_age": "1ms"},
    )
    restarted = new_pipeline(spark, stale, query_id="q-stale")
    try:
        result = run_cycle(restarted, 0)
    finally:
        restarted.close()

    assert log_starts(admin, topic, 1) == [0] and result.deleted == 0
    (row,) = audit_rows(spark, cfg, batch_id=0)
    assert (row["status"], row["binding_constraint"], row["cutoff"], row["records_deleted"]) == ("skipped", "stale_snapshot", 70, 0)
    assert row["config_fingerprint"] == config_fingerprint(cfg) != config_fingerprint(stale)


def test_a_file_uri_checkpoint_from_two_working_directories_then_a_reset_is_refused(
    spark: SparkSession,
    kafka_cluster: LocalKafka,
    admin: KafkaAdminClient,
    new_topic: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("cp")
    group = f"{topic}-a"
    produce(bootstrap, topic, [100])
    commit_topic(admin, group, topic, [50])
    stream = {"checkpoint_location": f"file://{tmp_path}/cp", "trigger_interval": "1s"}
    cfg = purge_config(tmp_path, bootstrap, re.escape(topic), [group], stream=stream)
    here, there = tmp_path / "a", tmp_path / "b"
    here.mkdir()
    there.mkdir()

    monkeypatch.chdir(here)
    first = run_once(spark, cfg)
    commit_topic(admin, group, topic, [80])
    monkeypatch.chdir(there)
    second = run_once(spark, cfg)

    assert log_starts(admin, topic, 1) == [80]
    assert first.query_id == second.query_id
    rows = audit_rows(spark, cfg, None)
    assert {r["query_id"] for r in rows} == {first.query_id}
    # each run took the purger lease (its audit fence row), the second after the first released it
    assert [(r["record_type"], r["status"]) for r in rows if r["record_type"] == "lease"] == [("lease", "acquired")] * 2
    assert [(r["batch_id"], r["record_type"], r["cutoff"], r["status"]) for r in rows if r["record_type"] != "lease"] == [
        (0, "intent", 50, "planned"), (0, "outcome", 50, "deleted"), (1, "intent", 80, "planned"), (1, "outcome", 80, "deleted"),
    ]
    assert [p.name for p in [*here.iterdir(), *there.iterdir()]] == []  # no local folder named "file:"

    # The checkpoint is removed; the audit still knows its query: refused, nothing deleted.
    shutil.rmtree(tmp_path / "cp")
    commit_topic(admin, group, topic, [100])
    with pytest.raises(ConfigError, match=r"^stream\.checkpoint_location: file:.*/cp now holds no streaming query") as info:
        start_stream(spark, cfg, available_now=True)
    assert first.query_id in str(info.value)
    assert log_starts(admin, topic, 1) == [80] and len(audit_rows(spark, cfg, None)) == 6  # 4 decisions, 2 leases
