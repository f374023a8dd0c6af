"""The Spark driver SIGKILLed mid-batch — a real subprocess running the real CLI — then
restarted from its checkpoint: no duplicate audit rows, no missing outcome, every delete has an
intent committed before it, and Kafka is cut exactly where the audit says."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge.config import from_dict
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
from tests.integration.faults.killing_driver import KILL_AT_ENV

pytestmark = pytest.mark.faults

DRIVER_TIMEOUT_S = 300
REPO_ROOT = Path(__file__).resolve().parents[3]  # the driver runs `-m tests.integration...`


def run_driver(config_path: Path, kill_at: str | None) -> subprocess.CompletedProcess[str]:
    """``spark-purge run -c config`` as its own process (and process group), reaped by its id."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    env.pop(KILL_AT_ENV, None)
    if kill_at:
        env[KILL_AT_ENV] = kill_at
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.faults.killing_driver", "run", "-c", str(config_path)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its JVM joins this group: killed with it below
    )
    try:
        out, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver's own group: its Spark JVM, if left
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("kill_at", ["intents_written", "deletes_sent"])
def test_driver_killed_mid_batch_restarts_exactly_once(
    spark: SparkSession, fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path, kill_at: str
) -> None:
    topic = create_topic(fadmin, f"dk-{kill_at.split('_')[0]}", partitions=3)
    produce(fault_cluster.bootstrap_servers, topic, [100, 100, 100])
    group = f"{topic}-g"
    first_commits = [30, 50, 70]
    commit_topic(fadmin, group, topic, first_commits)
    data = purge_config_dict(tmp_path, fault_cluster.bootstrap_servers, topic, [group])
    data["lease"] = {"ttl": "3s"}  # the killed driver's lease: the restart takes it over once it expired
    config_path = tmp_path / "purge.yaml"
    config_path.write_text(yaml.safe_dump(data))
    cfg = from_dict(data)

    crashed = run_driver(config_path, kill_at)

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert f"SIGKILL at {kill_at} of batch 0" in crashed.stderr
    assert [(r["batch_id"], r["cutoff"]) for r in audit_rows(spark, cfg, "intent")] == [(0, c) for c in first_commits]
    assert audit_rows(spark, cfg) == []  # died before any outcome
    expected_now = [0, 0, 0] if kill_at == "intents_written" else first_commits
    assert log_starts(fadmin, topic, 3) == expected_now

    # Consumers move on while the driver is down; the replayed batch must still plan from
    # the snapshot it persisted before the crash.
    commit_topic(fadmin, group, topic, [90, 90, 90])
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
    # Batch 0 replayed with its own cutoffs, and counted its deletes once.
    replay = [outcome_keys[(0, p)] for p in range(3)]
    assert [(r["status"], r["cutoff"], r["low_watermark"]) for r in replay] == [("deleted", c, c) for c in first_commits]
    assert [r["records_deleted"] for r in replay] == first_commits
    # Every delete has an intent with the same cutoff, committed to Delta before the outcome.
    versions = audit_commit_versions(spark, cfg)
    for (batch, part), r in outcome_keys.items():
        if r["status"] == "deleted":
            assert intent_keys[(batch, part)]["cutoff"] == r["cutoff"]
            assert versions[f"intent:{batch}"] < versions[f"outcome:{batch}"]
    # Kafka is cut exactly where the last deleted outcome says, never further.
    final = log_starts(fadmin, topic, 3)
    last_cut = [max(r["cutoff"] for r in outcomes if r["partition"] == p and r["status"] == "deleted") for p in range(3)]
    assert final == last_cut
    assert all(start <= 90 for start in final)
