"""Purger leases on a real broker with real Spark + Delta (issue 13): overlapping jobs, a job
killed while holding the lease, a fenced job's late audit write. Everything is checked against
Kafka's log start offsets and the Delta audit, not the jobs' own word."""
from __future__ import annotations

import re
import shutil
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient
from pyspark.sql import Row, SparkSession

from spark_purge import cli
from spark_purge.audit import AuditSink
from spark_purge.config import PurgeConfig, purger_id_of
from spark_purge.errors import FencedError
from spark_purge.lease import FencedAudit, LeaseState, LeaseTable, PurgerLease, lease_app_id, txn_version
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import kill_group, python_env, spawn
from spark_purge.testing.workload import (
    audit_rows,
    commit,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    purge_config_dict,
    retry,
    run_cycle,
)

REPO = Path(__file__).resolve().parents[2]


def fence_commits(spark: SparkSession, audit_path: str) -> list[int]:
    """Delta versions of the audit's lease (fence) commits, oldest first."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{audit_path}`").collect()
    return sorted(h["version"] for h in history if h["userMetadata"] == "lease:-1")


def generations_at(spark: SparkSession, audit_path: str, version: int | None = None) -> list[Any]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted((r["lease_generation"], r["record_type"]) for r in reader.load(audit_path).collect())


def test_overlapping_jobs_the_fenced_one_sends_no_delete_and_its_late_audit_write_is_refused(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("lease")
    produce(bootstrap, topic, [100])
    old_group, new_group = f"{topic}-old", f"{topic}-new"
    commit(admin, old_group, {(topic, 0): 60})
    commit(admin, new_group, {(topic, 0): 30})
    lease = {"purger_id": f"p-{topic}", "ttl": "2s", "wait": "60s"}
    # Job A runs an older config (only old_group); job B the newer one that also requires new_group.
    old = purge_config(tmp_path, bootstrap, re.escape(topic), [old_group], lease=lease)
    new = purge_config(tmp_path, bootstrap, re.escape(topic), [old_group, new_group], lease=lease)
    seen: dict[str, Any] = {}

    def stall(step: str, batch_id: int) -> None:
        # A has planned 60 and written its intent, then stalls past its ttl (a long GC pause, a
        # slow driver): B starts meanwhile, waits for A's lease to expire and takes it over.
        if step == "intents_written" and "b" not in seen:
            b = new_pipeline(spark, new)
            seen["b"] = run_cycle(b, 0)
            seen["b_generation"] = b.lease.generation if b.lease else None
            b.close()  # released

    a = new_pipeline(spark, old, fault_hook=stall)
    with pytest.raises(FencedError, match=rf"purger_id p-{re.escape(topic)}: this job's generation 1 .* is fenced right before DeleteRecords: now generation 2"):
        run_cycle(a, 0)
    assert a.lease is not None and not a.lease.held
    assert seen["b_generation"] == 2 and seen["b"].deleted == 1

    # Kafka: only B's cut (30) happened; A's 60 was never sent.
    assert log_starts(admin, topic, 1) == [30]
    rows = audit_rows(spark, old, None)
    leases = {r["lease_generation"]: (r["status"], r["run_id"]) for r in rows if r["record_type"] == "lease"}
    assert sorted(leases) == [1, 2] and leases[1] == ("acquired", a.run_id) and leases[2][0] == "takeover"
    takeover = next(r for r in rows if r["record_type"] == "lease" and r["lease_generation"] == 2)
    assert "generation 1 held by" in takeover["error"] and a.run_id in takeover["error"]
    decisions = sorted((r["lease_generation"], r["record_type"], r["status"], r["cutoff"]) for r in rows if r["record_type"] != "lease")
    assert decisions == [(1, "intent", "planned", 60), (2, "intent", "planned", 30), (2, "outcome", "deleted", 30)]

    # A's late outcome write, as if it had not noticed: Delta refuses it inside the commit ...
    sink = AuditSink(spark, old.audit.path, app_id=a.query_id)
    late = [r for r in rows if r["record_type"] == "intent" and r["lease_generation"] == 1]
    late_rows = [Row(**{**r, "record_type": "outcome", "status": "deleted", "error": "LATE"}) for r in late]
    sink.write(late_rows, "outcome", 0, txn=(lease_app_id(purger_id_of(old)), txn_version(1, 99)))
    # ... and through the job's own fenced audit it raises instead of passing unnoticed.
    stale = PurgerLease(LeaseTable.of(spark, old), purger_id_of(old), a.run_id, "fp", 2000, 0, generation=1)
    with pytest.raises(FencedError, match="after its audit outcome write for batch 0"):
        FencedAudit(sink, stale).write(late_rows, "outcome", 0)
    final = audit_rows(spark, old, None)
    assert [r for r in final if r["error"] == "LATE"] == [] and len(final) == len(rows)
    # No row of generation 1 was committed after generation 2's fence commit.
    fence = fence_commits(spark, old.audit.path)[-1]
    assert [g for g in generations_at(spark, old.audit.path) if g[0] == 1] == [
        g for g in generations_at(spark, old.audit.path, fence) if g[0] == 1
    ]
    # B took over only once A's lease had expired.
    assert _takeover_at(spark, old, 2) >= _last_expiry(spark, old, 1)


def test_a_job_that_waited_for_the_lease_plans_from_a_fresh_snapshot(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """B's snapshot is taken before its batch waits for A's lease; the group rewinds from 60 to
    10 during that wait. B must plan from a snapshot taken after the wait (cut 10), not from
    the one before it (cut 60: records 10..59 the group reads again)."""
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("leasewait")
    produce(bootstrap, topic, [100])
    group = f"{topic}-g"
    commit(admin, group, {(topic, 0): 60})
    cfg = purge_config(tmp_path, bootstrap, re.escape(topic), [group], lease={"purger_id": f"w-{topic}", "ttl": "20s", "wait": "60s"})
    a, b = new_pipeline(spark, cfg), new_pipeline(spark, cfg)
    try:
        assert a.lease is not None and b.lease is not None
        a_lease, b_lease = a.lease, b.lease
        b_acquire = b_lease.acquire

        def acquire() -> LeaseState:
            a_lease.acquire()  # A holds the lease when B's batch asks for it, and does nothing more
            return b_acquire()

        b_lease.acquire = acquire  # type: ignore[method-assign]
        rewound: list[float] = []

        def sleep(seconds: float) -> None:
            if not rewound:
                commit(admin, group, {(topic, 0): 10})  # the group moves back while B waits
                rewound.append(seconds)
            time.sleep(seconds)

        b_lease.sleep = sleep
        result = run_cycle(b, 0)
        assert rewound and b_lease.waited_s > 0
        assert (result.deleted, log_starts(admin, topic, 1)) == (1, [10])
        (outcome,) = audit_rows(spark, cfg)
        assert (outcome["status"], outcome["cutoff"]) == ("deleted", 10)
    finally:
        b.close()
        a.close()


@pytest.mark.sigkill  # out of the default command (the suite's 30-minute budget): ./dev.sh test -m sigkill
def test_a_job_killed_holding_the_lease_is_taken_over_after_its_expiry(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("killed")
    produce(bootstrap, topic, [50])
    commit(admin, f"{topic}-g", {(topic, 0): 20})
    data = purge_config_dict(tmp_path, bootstrap, re.escape(topic), [f"{topic}-g"])
    data["lease"] = {"purger_id": f"k-{topic}", "ttl": "5s", "wait": "60s"}
    path = tmp_path / "purge.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = purge_config(tmp_path, bootstrap, re.escape(topic), [f"{topic}-g"], lease=data["lease"])
    table = LeaseTable.of(spark, cfg)

    proc = spawn([sys.executable, "-m", "spark_purge.cli", "run", "-c", str(path), "--follow"], cwd=REPO, env=python_env(),
                 log=tmp_path / "job.log")
    try:
        retry(lambda: _held_by(table, f"k-{topic}", proc.pid), "the job's lease", 600, also=(AssertionError,))
        retry(lambda: _assert(log_starts(admin, topic, 1) == [20]), "the job's first cut", 600, also=(AssertionError,))
    finally:
        kill_group(proc, signal.SIGKILL)  # no clean shutdown: the lease stays until it expires
    assert proc.returncode == -signal.SIGKILL

    assert cli.main(["lease", "-c", str(path)]) == 0
    shown = capsys.readouterr().out
    assert f"purger k-{topic}: generation 1 " in shown and f"pid={proc.pid}" in shown

    commit(admin, f"{topic}-g", {(topic, 0): 35})
    b = new_pipeline(spark, cfg)
    run_cycle(b, 0)
    state = table.current(f"k-{topic}")
    assert state is not None and (state.generation, state.run_id) == (2, b.run_id)  # taken over, then renewed
    assert _takeover_at(spark, cfg, 2) >= _last_expiry(spark, cfg, 1)  # never before the killed job's lease expired
    b.close()
    assert cli.main(["lease", "-c", str(path)]) == 0
    assert re.search(rf"purger k-{re.escape(topic)}: generation 2 released; holder \S+ pid=\d+ run {b.run_id}", capsys.readouterr().out)
    assert log_starts(admin, topic, 1) == [35]
    takeover = [r for r in audit_rows(spark, cfg, "lease") if r["lease_generation"] == 2]
    assert len(takeover) == 1 and takeover[0]["status"] == "takeover" and f"pid={proc.pid}" in takeover[0]["error"]


def _lease_rows(spark: SparkSession, cfg: PurgeConfig, generation: int) -> list[Row]:
    table = LeaseTable.of(spark, cfg)
    df = spark.read.format("delta").load(table.path)
    return df.where((df.purger_id == purger_id_of(cfg)) & (df.generation == generation)).collect()


def _last_expiry(spark: SparkSession, cfg: PurgeConfig, generation: int) -> datetime:
    return max(r["expires_at"] for r in _lease_rows(spark, cfg, generation) if r["event"] != "released")


def _takeover_at(spark: SparkSession, cfg: PurgeConfig, generation: int) -> datetime:
    (row,) = [r for r in _lease_rows(spark, cfg, generation) if r["event"] == "takeover"]
    return row["at"]  # type: ignore[no-any-return]


def _assert(condition: bool) -> None:
    assert condition


def _held_by(table: LeaseTable, purger_id: str, pid: int) -> Any:
    state = table.current(purger_id)
    assert state is not None and f"pid={pid}" in state.holder and state.generation == 1, state
    return state


def _append_behind(spark: SparkSession, path: str, state: LeaseState) -> None:
    """A lease row written as another process would (not through this process's LeaseTable)."""
    from spark_purge.schemas import LEASES

    (
        spark.createDataFrame([tuple(getattr(state, f.name) for f in LEASES.fields)], LEASES)
        .write.format("delta").mode("append")
        .option("txnAppId", lease_app_id(state.purger_id)).option("txnVersion", str(state.version))
        .save(path)
    )


def test_a_write_delta_skipped_is_not_taken_for_this_jobs_own(spark: SparkSession, tmp_path: Path) -> None:
    """Two jobs race for one generation with the same txn version (an acquisition race): Delta
    keeps the first write and skips the second, and the second job must see the first job's row,
    not remember its own write as the newest (its commit mark is not in the log)."""
    path, now = str(tmp_path / "leases"), datetime.now(timezone.utc)
    first, second = LeaseTable(spark, path), LeaseTable(spark, path)
    for table, run in ((first, "run-a"), (second, "run-b")):
        table.append(LeaseState("race", 1, run, f"host-{run}", "fp", "acquired", now, now + timedelta(minutes=1), txn_version(1, 0)))
    newest = second.current("race")
    assert newest is not None and newest.run_id == "run-a"
    with pytest.raises(FencedError, match="run run-a"):  # run-a's lease is live: run-b holds nothing
        PurgerLease(second, "race", "run-b", "fp", ttl_ms=60_000, wait_ms=0).acquire()


def test_a_lease_check_reads_the_table_only_when_its_delta_version_moved(spark: SparkSession, tmp_path: Path) -> None:
    """The lease check's read-through (``deltalog.table_state``): an unchanged table, or one
    whose newest commit is this job's own write, answers with no Spark job; a row another
    process appended (a new version) is read at the very next check, so a takeover is never
    hidden; a table created again at the same path is read anew, even at the version read before."""
    from spark_purge.deltalog import table_version

    path = str(tmp_path / "leases")
    mine = PurgerLease(LeaseTable(spark, path), "cache-check", "run-a", "fp", ttl_ms=60_000, wait_ms=0)
    tracker = spark.sparkContext._jsc.sc().statusStore()

    def jobs_during(step: Callable[[], Any]) -> int:
        before = tracker.jobsList(None).size()
        step()
        return int(tracker.jobsList(None).size() - before)

    assert mine.acquire().generation == 1
    version = table_version(spark, path)
    assert version is not None and version >= 0
    assert jobs_during(lambda: mine.check("unchanged")) == 0, "an unchanged lease table was read again"
    # This job's own write (a renewal) is not read back: its commit carries its own txn.
    now = datetime.now(timezone.utc)
    renewal = LeaseState("cache-check", 1, "run-a", mine.holder, "fp", "renewed", now, now + timedelta(minutes=1), txn_version(1, 1))
    mine.table.append(renewal)
    assert table_version(spark, path) == version + 1
    assert jobs_during(lambda: mine.table.current("cache-check")) == 0, "this job's own write was read back"
    assert mine.check("after its own renewal") == renewal
    # Another process takes over (expired by its clock): a new version, read at the next check.
    now = datetime.now(timezone.utc) + timedelta(minutes=5)
    _append_behind(spark, path, LeaseState("cache-check", 2, "run-b", "host-b", "fp", "takeover", now, now + timedelta(minutes=1), txn_version(2, 0)))
    assert table_version(spark, path) == version + 2
    with pytest.raises(FencedError, match=r"generation 2 held by .* run run-b"):
        mine.check("after the takeover")
    # The table deleted and created again at the same path: its versions start over, and the
    # one last read (run-b's, at this version) must not answer for the new table's.
    seen = table_version(spark, path)
    assert seen is not None
    shutil.rmtree(path)
    now = datetime.now(timezone.utc)
    for n in range(seen + 1):  # versions 0..seen, written without a read in between
        _append_behind(spark, path, LeaseState("cache-check", 1, "run-c", "host", "fp", "acquired", now, now + timedelta(minutes=1), txn_version(1, n)))
    assert table_version(spark, path) == seen
    newest = LeaseTable(spark, path).current("cache-check")
    assert newest is not None and newest.run_id == "run-c"


def test_the_lease_table_is_tidied_every_tidy_every_commits_and_fencing_holds_after(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-running holder's renewals do not pile up: every TIDY_EVERY-th commit makes the
    next batch start delete the superseded renewals and compact the files (real Delta). The
    newest row stays, and a takeover after the tidy still fences the old holder."""
    from spark_purge import lease as lease_module

    monkeypatch.setattr(lease_module, "TIDY_EVERY", 5)
    path = str(tmp_path / "leases")
    now = [datetime.now(timezone.utc)]

    def holder(run: str) -> PurgerLease:
        return PurgerLease(LeaseTable(spark, path), "tidy", run, "fp", ttl_ms=6000, wait_ms=0, clock=lambda: now[0])

    def rows() -> list[tuple[int, str, int]]:
        found = spark.read.format("delta").load(path).collect()
        return sorted((r["generation"], r["event"], r["version"]) for r in found)

    def data_files() -> int:
        return len(spark.read.format("delta").load(path).inputFiles())

    a = holder("run-a")
    a.acquire()  # commit 1 (0 created the table)
    for _ in range(3):  # renewals: commits 2, 3, 4
        now[0] += timedelta(seconds=2)
        a.keep("batch")
    assert len(rows()) == 4 and data_files() == 4  # nothing due yet
    now[0] += timedelta(seconds=2)
    a.keep("batch")  # commit 5 is due: this very batch start tidies below its renewal
    assert rows() == [(1, "acquired", txn_version(1, 0)), (1, "renewed", txn_version(1, 4))]
    assert data_files() == 1  # compacted
    newest = LeaseTable(spark, path).current("tidy")  # a fresh process's read
    assert newest is not None and (newest.run_id, newest.event, newest.version) == ("run-a", "renewed", txn_version(1, 4))
    assert a.confirm("right before DeleteRecords").version == txn_version(1, 4)
    # a stops renewing; b takes over after the expiry: a is fenced, and its late renewal refused.
    now[0] += timedelta(seconds=7)
    b = holder("run-b")
    assert b.acquire().generation == 2
    with pytest.raises(FencedError, match=r"generation 1 \(run run-a\) is fenced"):
        a.keep("batch after the takeover")
    current = LeaseTable(spark, path).current("tidy")
    assert current is not None and (current.generation, current.run_id) == (2, "run-b")


def test_deletes_are_sent_only_while_the_confirmed_lease_is_certainly_this_jobs(
    spark: SparkSession, kafka_cluster: LocalKafka, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A confirmed lease is this job's for two thirds of its ttl; DeleteRecords, resends included
    (``spark_purge.kafka.delete``), gets no longer, or another job could take the lease over
    while this one still sends. A longer ``kafka.delete_timeout`` is cut down, with a warning
    naming both settings."""
    bootstrap = kafka_cluster.bootstrap_servers

    def pipeline(name: str, ttl: str) -> Any:
        cfg = purge_config(tmp_path / name, bootstrap, "none", ["g"], kafka={"delete_timeout": "10s"}, lease={"ttl": ttl})
        return new_pipeline(spark, cfg)

    with caplog.at_level("WARNING", logger="spark_purge.pipeline"):
        short = pipeline("short", "3s")
    assert short.delete_timeout_ms == 2000 and short.runner.delete_timeout_ms == 2000
    assert any(
        "kafka.delete_timeout 10000 ms is longer than two thirds of lease.ttl (3000 ms): DeleteRecords gets 2000 ms" in r.getMessage()
        for r in caplog.records
    )
    assert pipeline("long", "60s").runner.delete_timeout_ms == 10000
