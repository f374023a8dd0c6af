"""A short run of the seeded invariant workload (``spark_purge.testing.invariants``) with the fault
kinds whose product paths are the most intricate once each (the others are left to the long run), a real share consumer (KIP-932) on the discovered topic and a real Spark Structured
Streaming query on both topics (twice), on the fault suite's 3-node cluster, and a
check that the checker does catch an unsafe delete. (``group_expiry`` needs a cluster with a
one-minute offsets retention: an opt-in kind of the command-line checker.) And a run paused
between cycles and resumed on its own 1-node cluster, started again on its data."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.errors import WorkloadError
from spark_purge.testing.invariants import (
    FAULTS,
    LIFE_FILE,
    RUNNING_FILE,
    SLOW_FAULTS,
    load_life,
    load_state,
    run_invariants,
)

pytestmark = pytest.mark.faults


def test_every_fault_kind_then_a_quiet_cycle_has_no_violations(
    spark: SparkSession, fault_cluster: LocalKafka, tmp_path: Path
) -> None:
    # The Spark query and the share consumer first (each then holds its topics), then the fault
    # kinds whose product paths are the most intricate once each: a replay after the driver died
    # (intents -> rewind -> restart), both topics recreated (B, the time-floor topic, refilled
    # past its old high watermark with backdated records; then A), the audit's maintenance racing
    # a batch; and a quiet last cycle, which must still purge safely. The suite's 30-minute budget leaves
    # the other kinds to the long run (`--cycles 200`), each also covered by its own test here:
    # node and leader kills (faults/test_replica_faults, test_cycle_faults), group rewinds and
    # added partitions (test_cycle_faults), backdated records (test_append_floor), overlapping
    # jobs (test_lease), retired partitions (test_retirement); and SLOW_FAULTS (nodes hung or
    # restarting for 10-25 s each).
    schedule = [
        "spark_stream", "share_consume", "driver_kill_rewind", "topic_recreate", "topic_recreate", "audit_maintenance", None,
    ]
    assert not set(schedule) & set(SLOW_FAULTS) and set(schedule) - {None} <= set(FAULTS) | {"spark_stream", "share_consume"}
    lines: list[str] = []
    report = run_invariants(
        spark, fault_cluster, cycles=len(schedule), seed=11, workdir=tmp_path, schedule=schedule, out=lines.append
    )
    print(report.summary())

    assert report.violations == [], report.summary()
    assert report.cycles == len(schedule)
    assert set(report.faults) == set(schedule) - {None}, report.summary()
    assert report.faults["share_consume"] == 1 and report.share_accepted > 0, report.summary()
    assert report.stream_runs == 1 and report.stream_records > 0, report.summary()
    assert report.faults["topic_recreate"] == 2, report.summary()
    assert any(n.startswith("topic_recreate: recreated A 1, B (refilled") and n.endswith(" 1") for n in report.notes), report.summary()
    assert report.records_deleted > 0 and report.audit_rows_checked >= len(schedule) * 6, report.summary()
    assert len(report.cycle_errors) <= 2, report.summary()  # a cycle may fail under a fault, not most
    # The driver process really died by SIGKILL at its step (else the cycle would have failed).
    assert any(note.startswith("driver_kill_rewind: killed at") for note in report.notes), report.summary()
    # Every cycle is timed, and its purge once: whole or failed.
    timed = report.phase_seconds
    assert len(timed["whole cycle"]) == len(schedule), report.summary()
    assert len(timed.get("purge", [])) + len(timed.get("purge (failed)", [])) == len(schedule), report.summary()
    assert len(timed["spark query"]) == 1 and len(timed["share consumer"]) == 1, report.summary()


def test_checker_catches_an_unsafe_delete(spark: SparkSession, fault_cluster: LocalKafka, tmp_path: Path) -> None:
    report = run_invariants(
        spark, fault_cluster, cycles=1, seed=3, workdir=tmp_path, fault_rate=0.0, sabotage_cycle=0, out=lambda s: None
    )

    assert any("log start" in v and "> allowed" in v for v in report.violations), report.summary()


def test_a_run_paused_between_cycles_resumes_on_its_restarted_cluster(spark: SparkSession, tmp_path: Path) -> None:
    # The long run outlasts a session: it stops between cycles (--minutes), and goes on later
    # with a new checker on the same cluster data, started again on new ports.
    kinds = ("group_rewind", "partitions_added", "backdated_records", "share_consume")
    workdir = tmp_path / "run"
    first_ports = ""
    with LocalKafka(nodes=1, workdir=workdir / "kafka") as cluster:
        first_ports = cluster.bootstrap_servers
        paused = run_invariants(
            spark, cluster, cycles=4, seed=5, workdir=workdir, kinds=kinds, fault_rate=1.0, minutes=0, out=lambda s: None
        )
    assert paused.cycles == 1 and paused.paused and not paused.interrupted, paused.summary()
    assert load_state(workdir)["next_cycle"] == 1
    assert not (workdir / RUNNING_FILE).exists()

    lines: list[str] = []
    with LocalKafka(nodes=1, workdir=workdir / "kafka") as cluster:
        assert cluster.bootstrap_servers != first_ports  # a new life: the config follows the new ports
        with pytest.raises(WorkloadError, match="saved by a run of"):  # another seed is another run
            run_invariants(spark, cluster, cycles=4, seed=6, workdir=workdir, kinds=kinds, fault_rate=1.0, resume=True)
        report = run_invariants(
            spark, cluster, cycles=4, seed=5, workdir=workdir, kinds=kinds, fault_rate=1.0, resume=True, out=lines.append
        )
    print(report.summary())

    assert report.violations == [], report.summary()
    assert report.cycles == 4 and report.resumes == 1 and not report.paused, report.summary()
    assert lines[0].startswith("resuming at cycle 2/4"), lines
    assert sum(report.faults.values()) == 4 + report.faults["share_consume"], report.summary()  # every cycle drew a fault
    assert len(report.phase_seconds["whole cycle"]) == 4, report.summary()  # the first life's timings kept
    assert report.records_deleted > 0 and report.audit_rows_checked > 0, report.summary()
    # One job: the resumed pipeline runs under the first one's query id, batches 0 to 3.
    audit = workload.audit_rows(spark, str(workdir / "audit"), None)
    batches = {(r["query_id"], r["batch_id"]) for r in audit if r["record_type"] == "outcome"}
    assert {b for _, b in batches} == {0, 1, 2, 3} and len({q for q, _ in batches}) == 1, batches

    # A machine that keeps no files between sessions: the small life file alone goes on, on a
    # fresh cluster in a fresh workdir (new topics, audit and oracle; the draws and tallies go on).
    life = load_life(workdir / LIFE_FILE)
    assert life["next_cycle"] == 4 and life["report"]["cycles"] == 4
    lines.clear()
    life_dir = tmp_path / "life2"
    life_dir.mkdir()
    with LocalKafka(nodes=1) as cluster:
        again = run_invariants(
            spark, cluster, cycles=5, seed=5, workdir=life_dir, kinds=kinds, fault_rate=1.0, new_life=life,
            out=lines.append,
        )
    assert lines[0].startswith("a new life on a fresh cluster at cycle 5/5"), lines
    assert again.cycles == 5 and again.fresh_lives == 1 and again.resumes == 1 and again.violations == [], again.summary()
    assert again.records_produced > report.records_produced and len(again.phase_seconds["whole cycle"]) == 5

    # A run stopped in the middle of a cycle leaves its marker: it cannot resume.
    (workdir / RUNNING_FILE).write_text("4\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="in the middle of cycle 5"):
        load_state(workdir)
