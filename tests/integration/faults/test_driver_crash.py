"""The Spark driver SIGKILLed mid-batch — a real subprocess running the real CLI — then
restarted from its checkpoint: no duplicate audit rows, no missing outcome, every delete has an
intent committed before it, and Kafka is cut exactly where the audit says."""
from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge import cli, schemas
from spark_purge._time import Deadline
from spark_purge.config import from_dict
from spark_purge.retirement import RetirementRegistry
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_commit_versions,
    audit_rows,
    commit_topic,
    log_starts,
    produce,
    purge_config_dict,
)
from tests.integration.faults.helpers import create_topic
from tests.integration.faults.killing_driver import run_killing_driver

# Three real driver processes (minutes): opt-in, like the lease takeover after a real SIGKILL
# (`./dev.sh test -m sigkill ...`), for the suite's 30-minute budget. The checker's
# driver_kill_rewind kind and test_replay/test_pipeline cover the replay in the default run.
pytestmark = [pytest.mark.faults, pytest.mark.sigkill]

def run_driver(config_path: Path, kill_at: str | None) -> subprocess.CompletedProcess[str]:
    """``spark-purge run -c config`` as its own process, killed at ``kill_at`` (None: not)."""
    return run_killing_driver(["run", "-c", str(config_path)], kill_at)


def test_driver_killed_at_each_step_of_a_batch_and_of_its_replay_restarts_exactly_once(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    """Killed after the intents; a group rewinds; the restart (replaying that batch) killed after
    its deletes; the third start completes. Three real driver processes, one checkpoint. No broker
    is harmed: it runs on the shared cluster (and the other xdist worker than the 3-node one's)."""
    topic = create_topic(admin, "dk", partitions=3, replication=1)
    produce(kafka_cluster.bootstrap_servers, topic, [100, 100, 100])
    group = f"{topic}-g"
    first_commits = [30, 50, 70]
    commit_topic(admin, group, topic, first_commits)
    data = purge_config_dict(tmp_path, kafka_cluster.bootstrap_servers, topic, [group])
    data["lease"] = {"ttl": "3s"}  # the killed driver's lease: the restart takes it over once it expired
    config_path = tmp_path / "purge.yaml"
    config_path.write_text(yaml.safe_dump(data))
    cfg = from_dict(data)

    def intents_only() -> None:
        assert [(r["batch_id"], r["cutoff"]) for r in audit_rows(spark, cfg, "intent")] == [(0, c) for c in first_commits]
        assert audit_rows(spark, cfg) == []  # died before any outcome

    crashed = run_driver(config_path, "intents_written")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert "SIGKILL at intents_written of batch 0" in crashed.stderr
    intents_only()
    assert log_starts(admin, topic, 3) == [0, 0, 0]

    # While the driver is down the group rewinds on p0 and moves on elsewhere. The replay
    # executes batch 0's recorded intents (never a new plan), each bounded by a fresh snapshot:
    # p0 only to the rewound 20, p2 no further than its intent's 70. It dies again, this time
    # after its deletes reached Kafka.
    commit_topic(admin, group, topic, [20, 90, 90])
    replayed = [20, 50, 70]
    crashed_again = run_driver(config_path, "deletes_sent")
    assert crashed_again.returncode == -signal.SIGKILL, crashed_again.stderr[-3000:]
    assert "SIGKILL at deletes_sent of batch 0" in crashed_again.stderr
    intents_only()  # the replay wrote no second intent
    assert log_starts(admin, topic, 3) == replayed

    restarted = run_driver(config_path, None)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    intents, outcomes = audit_rows(spark, cfg, "intent"), audit_rows(spark, cfg)
    # No duplicates: one row per (batch, type, partition).
    keys = Counter((r["batch_id"], r["record_type"], r["topic"], r["partition"]) for r in intents + outcomes)
    assert max(keys.values()) == 1, keys
    # No missing outcome: every batch with intents has an outcome per intent.
    intent_keys = {(r["batch_id"], r["partition"]): r for r in intents}
    outcome_keys = {(r["batch_id"], r["partition"]): r for r in outcomes}
    assert set(intent_keys) <= set(outcome_keys)
    # Batch 0 replayed twice, bounded by the rewind, and counted its deletes once.
    replay = [outcome_keys[(0, p)] for p in range(3)]
    assert [(r["status"], r["cutoff"], r["low_watermark"]) for r in replay] == [("deleted", c, c) for c in replayed]
    assert [r["records_deleted"] for r in replay] == replayed
    # Every delete has an intent whose cutoff is at least its own, committed to Delta before it.
    versions = audit_commit_versions(spark, cfg)
    for (batch, part), r in outcome_keys.items():
        if r["status"] == "deleted":
            assert intent_keys[(batch, part)]["cutoff"] >= r["cutoff"]
            assert versions[f"intent:{batch}"] < versions[f"outcome:{batch}"]
    # Kafka is cut exactly where the last deleted outcome says, never further.
    final = log_starts(admin, topic, 3)
    last_cut = [max(r["cutoff"] for r in outcomes if r["partition"] == p and r["status"] == "deleted") for p in range(3)]
    assert final == last_cut
    assert final[0] == 20  # the rewound group's position: nothing past it, ever
    assert all(start <= 90 for start in final)


def test_driver_killed_between_the_reclaim_intent_and_its_delete_resumes_the_reclaim(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    """Issue 15 with a real crash: a retired partition, drained and quiet, gets its registry
    intent (``reclaim_intent``) and the driver is SIGKILLed before DeleteRecords. Nothing is cut;
    the next start replays that batch's recorded reclaim, re-checked, to exactly the high
    watermark, and the partition becomes None, with one intent and one outcome."""
    bootstrap = kafka_cluster.bootstrap_servers
    topic = create_topic(admin, "dk-retire", partitions=2, replication=1)
    produce(bootstrap, topic, [10, 10])
    group = f"{topic}-g"
    commit_topic(admin, group, topic, [10, 4])  # behind on the partition to retire
    data = purge_config_dict(tmp_path, bootstrap, topic, [group])
    data["lease"] = {"ttl": "3s"}
    data["retirement"] = {"enable": True, "delay": "2s"}
    config_path = tmp_path / "purge.yaml"
    config_path.write_text(yaml.safe_dump(data))
    cfg = from_dict(data)
    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    assert cli.main(["retire", f"{topic}:1", "-c", str(config_path), "--reason", "over-partitioned"]) == cli.EXIT_OK

    def state() -> tuple[object, ...]:
        row = registry.current().where(f"topic = '{topic}' AND partition = 1").collect()[0]
        return (row["status"], row["event"], row["reclaimed_to"])

    # Batch 0: the ordinary purge to the group's position; it records p1's high watermark.
    first = run_driver(config_path, None)
    assert first.returncode == 0, first.stderr[-3000:]
    quiet_since = Deadline(2.3)
    assert log_starts(admin, topic, 2) == [10, 4]
    assert state() == (schemas.READ_ONLY, "retire", None)

    # Drained; the high watermark has been still for the delay: batch 1 writes the reclaim's
    # registry intent and its audit intent, and dies before DeleteRecords.
    commit_topic(admin, group, topic, [10, 10])
    time.sleep(quiet_since.remaining())
    crashed = run_driver(config_path, "intents_written")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert "SIGKILL at intents_written of batch 1" in crashed.stderr
    assert state() == (schemas.READ_ONLY, "reclaim_intent", None)
    assert log_starts(admin, topic, 2) == [10, 4]
    reclaim = [(r["partition"], r["cutoff"], r["binding_constraint"]) for r in audit_rows(spark, cfg, "intent", batch_id=1)]
    assert reclaim == [(1, 10, "retiring")]
    assert audit_rows(spark, cfg, batch_id=1) == []

    # The restart replays batch 1: the recorded reclaim runs to exactly the high watermark.
    restarted = run_driver(config_path, None)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert log_starts(admin, topic, 2) == [10, 10]
    assert state() == (schemas.RETIRED, "reclaimed", 10)
    outcome = [(r["partition"], r["status"], r["cutoff"], r["records_deleted"]) for r in audit_rows(spark, cfg, batch_id=1)]
    assert outcome == [(1, "deleted", 10, 6)]
    assert len(audit_rows(spark, cfg, "intent", batch_id=1)) == 1  # the replay wrote no second intent
    events = registry.read().where(f"topic = '{topic}'").orderBy("since").collect()
    assert [(e["event"], e["status"], e["high_watermark"]) for e in events] == [
        ("retire", 1, None), ("reclaim_intent", 1, 10), ("reclaimed", -1, 10)
    ]
