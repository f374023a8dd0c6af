"""Delta appends kept exactly once by a txn id, committed through Delta's own transaction with
the id looked up in the snapshot's checksum (``spark_purge.txn_append``), on real Delta tables:
the same commits, skips and conflicts as Delta's writer gives, and the writer's way wherever the
checksum does not answer."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from delta.exceptions import ConcurrentTransactionException
from pyspark.sql import DataFrame, Row, SparkSession

from spark_purge import txn_append
from spark_purge.deltalog import latest_snapshot


def rows(spark: SparkSession, n: int, start: int = 0) -> DataFrame:
    return spark.range(start, start + n).selectExpr("id", "cast(id as string) as name")


def delta_transactions(spark: SparkSession, path: str) -> dict[str, int]:
    """What Delta itself answers (its reconstructed state), to check the checksum's answer by."""
    snapshot = latest_snapshot(spark, path)
    found: dict[str, int] = {}
    listed = snapshot.setTransactions()
    for i in range(listed.size()):
        found[listed.apply(i).appId()] = int(listed.apply(i).version())
    return found


def commits(path: str) -> list[list[dict[str, Any]]]:
    log = sorted((Path(path) / "_delta_log").glob("*.json"))
    return [[json.loads(line) for line in f.read_text().splitlines() if line.strip()] for f in log]


def counts() -> dict[str, int]:
    return dict(txn_append.COUNTS)


def delta(before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in txn_append.COUNTS.items()}


@pytest.fixture
def table(spark: SparkSession, tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    rows(spark, 3).write.format("delta").save(path)
    return path


def test_a_txn_append_commits_directly_and_a_replay_is_skipped(spark: SparkSession, table: str) -> None:
    before = counts()
    txn_append.append(spark, table, rows(spark, 5, 100), "query-1:intent", 7, "intent:7")
    txn_append.append(spark, table, rows(spark, 5, 100), "query-1:intent", 7, "intent:7")  # a replay
    txn_append.append(spark, table, rows(spark, 5, 200), "query-1:intent", 6, "intent:6")  # older: skipped too
    assert delta(before) == {"fast": 1, "skipped": 2, "writer": 0}
    assert spark.read.format("delta").load(table).count() == 8
    last = commits(table)[-1]
    assert {k: v for k, v in next(a["txn"] for a in last if "txn" in a).items() if k != "lastUpdated"} == {"appId": "query-1:intent", "version": 7}
    info = next(a["commitInfo"] for a in last if "commitInfo" in a)
    assert info["userMetadata"] == "intent:7" and info["operation"] == "WRITE"
    assert info["operationParameters"]["mode"] == "Append"
    assert delta_transactions(spark, table) == {"query-1:intent": 7}


def test_the_checksum_answers_what_delta_answers_across_both_ways(spark: SparkSession, table: str) -> None:
    for version in (1, 2, 3):
        txn_append.append(spark, table, rows(spark, 1, version), "a", version)
        rows(spark, 1).write.format("delta").mode("append").option("txnAppId", "b").option("txnVersion", str(version)).save(table)
    txn_append.append(spark, table, rows(spark, 1), "b", 2)  # written by the writer at 3: skipped
    snapshot = latest_snapshot(spark, table)
    assert {app: txn_append.checksum_version(snapshot, app) for app in ("a", "b", "c")} == {"a": 3, "b": 3, "c": -1}
    assert delta_transactions(spark, table) == {"a": 3, "b": 3}
    assert spark.read.format("delta").load(table).count() == 3 + 6


def test_a_commit_of_the_same_app_id_after_the_snapshot_fails_the_append(spark: SparkSession, table: str) -> None:
    """The fence: another job's commit under the same app id between this one's snapshot and its
    commit (a lease taken over) makes this commit fail, as Delta's writer's would."""
    def other_job(path: str) -> None:
        txn_append.BEFORE_COMMIT.clear()
        rows(spark, 1).write.format("delta").mode("append").option("txnAppId", "lease:p").option("txnVersion", "9").save(path)

    txn_append.BEFORE_COMMIT.append(other_job)
    try:
        with pytest.raises(ConcurrentTransactionException):
            txn_append.append(spark, table, rows(spark, 2, 50), "lease:p", 5, "lease renewed")
    finally:
        txn_append.BEFORE_COMMIT.clear()
    assert delta_transactions(spark, table) == {"lease:p": 9}
    assert spark.read.format("delta").load(table).count() == 4  # the other job's row only
    assert all((a.get("commitInfo") or {}).get("userMetadata") != "lease renewed" for c in commits(table) for a in c)


def test_another_app_id_committing_meanwhile_does_not_fail_the_append(spark: SparkSession, table: str) -> None:
    def other_query(path: str) -> None:
        txn_append.BEFORE_COMMIT.clear()
        rows(spark, 1).write.format("delta").mode("append").option("txnAppId", "other").option("txnVersion", "1").save(path)

    txn_append.BEFORE_COMMIT.append(other_query)
    try:
        txn_append.append(spark, table, rows(spark, 2, 50), "mine", 1)
    finally:
        txn_append.BEFORE_COMMIT.clear()
    assert delta_transactions(spark, table) == {"other": 1, "mine": 1}
    assert spark.read.format("delta").load(table).count() == 6


def record_app_ids(spark: SparkSession, path: str, app_ids: list[str]) -> None:
    """Commit ``app_ids`` to the table at ``path`` at version 1 each, in one Delta commit of
    ``SetTransaction`` actions and no data: the same ids a writer's appends with these txn ids
    would leave, without a hundred Spark jobs."""
    started = txn_append._start(spark, path)  # the transaction a direct write starts
    assert started is not None
    jvm, none, txn = started
    actions = jvm.java.util.ArrayList()
    for app_id in app_ids:
        actions.add(jvm.org.apache.spark.sql.delta.actions.SetTransaction(app_id, 1, jvm.scala.Some(1_700_000_000_000)))
    txn_append._commit(jvm, txn, path, jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toSeq(), "Append", none)


def test_over_100_app_ids_delta_lists_none_and_the_writer_checks(spark: SparkSession, table: str) -> None:
    """Delta keeps a table's app ids in the checksum only while there are at most 100, and then
    leaves them all out (never some): the writer's own check answers from then on."""
    record_app_ids(spark, table, [f"app-{i}" for i in range(99)])
    rows(spark, 1).write.format("delta").mode("append").option("txnAppId", "app-99").option("txnVersion", "1").save(table)
    snapshot = latest_snapshot(spark, table)
    # 100 ids: all listed, the writer's and those committed beside no data alike.
    assert txn_append.checksum_version(snapshot, "app-0") == 1
    assert txn_append.checksum_version(snapshot, "app-99") == 1
    assert len(delta_transactions(spark, table)) == 100
    rows(spark, 1).write.format("delta").mode("append").option("txnAppId", "app-100").option("txnVersion", "1").save(table)
    snapshot = latest_snapshot(spark, table)
    assert txn_append.checksum_version(snapshot, "app-0") is None
    assert txn_append.checksum_version(snapshot, "app-100") is None
    before = counts()
    txn_append.append(spark, table, rows(spark, 1), "app-7", 1)  # recorded: the writer skips it
    txn_append.append(spark, table, rows(spark, 1), "app-7", 2)
    assert delta(before) == {"fast": 0, "skipped": 0, "writer": 2}
    assert spark.read.format("delta").load(table).count() == 3 + 2 + 1


def test_a_schema_not_the_tables_goes_the_writers_way_and_merges(spark: SparkSession, table: str) -> None:
    before = counts()
    txn_append.append(spark, table, rows(spark, 1).selectExpr("*", "'x' as added"), "q", 1, merge_schema=True)
    assert delta(before) == {"fast": 0, "skipped": 0, "writer": 1}
    assert spark.read.format("delta").load(table).columns == ["id", "name", "added"]
    txn_append.append(spark, table, rows(spark, 1).selectExpr("*", "'y' as added"), "q", 2)
    assert delta(before) == {"fast": 1, "skipped": 0, "writer": 1}


def test_a_delta_release_it_was_not_checked_on_goes_the_writers_way(
    spark: SparkSession, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(txn_append, "_UNSUPPORTED", [])
    monkeypatch.setattr(txn_append, "_DELTA_VERSION", [])
    monkeypatch.setattr(txn_append, "TESTED_DELTA", ("9.9.",))
    before = counts()
    txn_append.append(spark, table, rows(spark, 1), "q", 1)
    txn_append.append(spark, table, rows(spark, 1), "q", 1)
    assert delta(before) == {"fast": 0, "skipped": 0, "writer": 2}
    assert txn_append._DELTA_VERSION[0].startswith("4.4.")  # what the installed Delta says it is
    assert spark.read.format("delta").load(table).count() == 4


def test_a_direct_write_failing_otherwise_is_made_the_writers_way_once(spark: SparkSession, table: str) -> None:
    def broken(path: str) -> None:
        raise RuntimeError("the disk went away for a moment")

    txn_append.BEFORE_COMMIT.append(broken)
    before = counts()
    try:
        txn_append.append(spark, table, rows(spark, 2, 10), "q", 1, "outcome:1")
    finally:
        txn_append.BEFORE_COMMIT.clear()
    assert delta(before) == {"fast": 0, "skipped": 0, "writer": 1}
    txn_append.append(spark, table, rows(spark, 2, 10), "q", 1, "outcome:1")  # a replay: skipped directly
    assert delta(before) == {"fast": 0, "skipped": 1, "writer": 1}
    assert spark.read.format("delta").load(table).count() == 5
    assert delta_transactions(spark, table) == {"q": 1}


def test_driver_rows_are_written_by_one_task_as_one_file(spark: SparkSession, tmp_path: Path) -> None:
    """An audit write of a batch's rows (``txn_append.driver_rows``) is one file in its commit,
    where the rows as ``createDataFrame`` slices them were one file per core."""
    from spark_purge.audit import AuditSink
    from spark_purge.schemas import AUDIT
    from spark_purge.testing.workload import outcome_rows

    sink = AuditSink(spark, str(tmp_path / "audit"), app_id="q")
    sink.ensure_table()
    batch = outcome_rows(1, 500, datetime.now(timezone.utc))
    assert spark.sparkContext.defaultParallelism > 1 and spark.createDataFrame(batch, AUDIT).rdd.getNumPartitions() > 1
    assert txn_append.driver_rows(spark, batch, AUDIT).rdd.getNumPartitions() == 1
    assert sink.write(batch, "outcome", 1)
    added = [a["add"] for a in commits(sink.path)[-1] if "add" in a]
    assert len(added) == 1 and json.loads(added[0]["stats"])["numRecords"] == 500
    assert spark.read.format("delta").load(sink.path).count() == 500


def changed(row: Row, **values: Any) -> Row:
    return Row(**{**row.asDict(), **values})


def _audit_sink(spark: SparkSession, path: Path) -> Any:
    from spark_purge.audit import AuditSink

    sink = AuditSink(spark, str(path), app_id="q")
    sink.ensure_table()
    return sink


def _added(path: str) -> list[dict[str, Any]]:
    return [a["add"] for a in commits(path)[-1] if "add" in a]


def test_rows_the_driver_holds_are_written_by_it_as_delta_writes_them(spark: SparkSession, tmp_path: Path) -> None:
    """An audit write of a batch's rows makes its file on the driver, with no Spark job; Delta
    reads back the rows its own writer would have written, and the statistics are the writer's
    (the same rows written through Spark's writer beside, as the oracle)."""
    from spark_purge.schemas import AUDIT
    from spark_purge.testing.workload import outcome_rows

    at = datetime(2026, 11, 29, 4, 32, 16, 384999, tzinfo=timezone.utc)  # sub-millisecond: the statistics cut it
    batch = outcome_rows(7, 300, at)
    batch += [changed(row, blocking_group="g" * 40, partition=-5, cutoff=3) for row in outcome_rows(7, 1, at)]
    mine, theirs = _audit_sink(spark, tmp_path / "mine"), _audit_sink(spark, tmp_path / "theirs")
    before, files_before = counts(), dict(txn_append.DRIVER_FILES)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("driver-files", "the driver's own audit write")
    try:
        assert mine.write(batch, "outcome", 7)
    finally:
        spark.sparkContext.setJobGroup("other", "other")
    assert list(tracker.getJobIdsForGroup("driver-files")) == []  # no Spark job
    assert delta(before)["fast"] == 1 and txn_append.DRIVER_FILES["written"] == files_before["written"] + 1
    txn_append.append(spark, theirs.path, txn_append.driver_rows(spark, batch, AUDIT), "q:outcome", 7, "outcome:7")
    assert txn_append.DRIVER_FILES["written"] == files_before["written"] + 1  # a DataFrame: Spark's writer made the file

    ours, delta_s = _added(mine.path), _added(theirs.path)
    assert len(ours) == 1 and ours[0]["partitionValues"] == delta_s[0]["partitionValues"] == {"event_date": "2026-11-29"}
    assert ours[0]["path"].startswith("event_date=2026-11-29/part-")
    our_stats, its_stats = json.loads(ours[0]["stats"]), json.loads(delta_s[0]["stats"])
    # The one documented difference: a string maximum longer than 32 characters, which Delta
    # writes cut and marked, is left out.
    assert its_stats["maxValues"].pop("blocking_group").startswith("g" * 32) and "blocking_group" not in our_stats["maxValues"]
    assert our_stats == its_stats
    a, b = mine.read(), theirs.read()
    assert a.count() == b.count() == 301
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0
    assert a.schema == b.schema
    # Data skipping on the statistics keeps every row a filter matches: the exact sub-millisecond
    # time, the minimum partition, the long string.
    for where in ("planned_at = timestamp'2026-11-29 04:32:16.384999'", "partition = -5", f"blocking_group = '{'g' * 40}'", "batch_id = 7"):
        assert a.where(where).count() == b.where(where).count() > 0, where
    assert a.where("planned_at > timestamp'2026-11-29 04:32:16.384999'").count() == 0
    # Answers Delta may give from the statistics alone.
    assert a.selectExpr("count(*)", "min(partition)", "max(partition)", "max(batch_id)").first() == (301, -5, 299, 7)


def test_rows_delta_would_refuse_are_refused_as_before(spark: SparkSession, tmp_path: Path) -> None:
    """A null in a NOT NULL column is not written by the driver: the rows go Spark's way, whose
    schema check refuses them, and nothing is committed."""
    from spark_purge.testing.workload import outcome_rows

    sink = _audit_sink(spark, tmp_path / "audit")
    good = outcome_rows(1, 2, datetime.now(timezone.utc))
    bad = [good[0], changed(good[1], run_id=None)]
    with pytest.raises(Exception, match="run_id"):
        sink.write(bad, "outcome", 1)
    assert sink.read().count() == 0


def test_a_table_with_a_check_constraint_gets_its_files_from_spark_which_enforces_it(spark: SparkSession, tmp_path: Path) -> None:
    """A later Delta writer version (here a CHECK constraint's) is not written by the driver: its
    features may need what a driver-made file does not carry, so Spark's writer writes, and
    enforces, as before."""
    from spark_purge.testing.workload import outcome_rows

    sink = _audit_sink(spark, tmp_path / "audit")
    spark.sql(f"ALTER TABLE delta.`{sink.path}` ADD CONSTRAINT non_negative CHECK (partition >= 0)")
    files_before = dict(txn_append.DRIVER_FILES)
    assert sink.write(outcome_rows(1, 3, datetime.now(timezone.utc)), "outcome", 1)
    assert {**files_before, "not": files_before["not"] + 1} == txn_append.DRIVER_FILES
    negative = [changed(row, partition=-1) for row in outcome_rows(2, 1, datetime.now(timezone.utc))]
    with pytest.raises(Exception, match="non_negative"):
        sink.write(negative, "outcome", 2)
    assert sink.read().count() == 3


def test_a_driver_written_append_is_fenced_as_the_writers_is(spark: SparkSession, tmp_path: Path) -> None:
    """A commit of the same app id after the snapshot fails the driver-written append too (its
    file stays unreferenced, as the writer's would)."""
    from delta.exceptions import ConcurrentTransactionException

    from spark_purge.schemas import AUDIT
    from spark_purge.testing.workload import outcome_rows

    sink = _audit_sink(spark, tmp_path / "audit")

    def other_job(path: str) -> None:
        txn_append.BEFORE_COMMIT.clear()
        txn_append.append(spark, path, txn_append.driver_rows(spark, outcome_rows(9, 1, datetime.now(timezone.utc)), AUDIT), "lease:p", 9)

    txn_append.BEFORE_COMMIT.append(other_job)
    try:
        with pytest.raises(ConcurrentTransactionException):
            txn_append.append(spark, sink.path, txn_append.DriverRows(outcome_rows(5, 4, datetime.now(timezone.utc)), AUDIT), "lease:p", 5)
    finally:
        txn_append.BEFORE_COMMIT.clear()
    assert delta_transactions(spark, sink.path) == {"lease:p": 9}
    assert sink.read().count() == 1


def test_a_rewrite_after_this_process_rewrote_finds_the_files_from_the_log(spark: SparkSession, table: str) -> None:
    """The second rewrite of a table lists no state (no "Compute snapshot" job): it removes the
    files the first left plus those other commits added since, read from the log, and leaves
    exactly its own rows, as the state's listing did."""
    def version() -> int:
        return int(spark.sql(f"DESCRIBE HISTORY delta.`{table}`").agg({"version": "max"}).first()[0])

    before = dict(txn_append.REWRITE_LISTINGS)
    assert txn_append.rewrite(spark, table, rows(spark, 4, 10), version()) == 4  # the first: from the state
    assert {"state": before["state"] + 1, "log": before["log"]} == txn_append.REWRITE_LISTINGS
    rows(spark, 2, 50).write.format("delta").mode("append").save(table)  # another writer, twice
    rows(spark, 1, 60).write.format("delta").mode("append").save(table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 11")  # and a delete (removes a file, adds its rest)
    assert sorted(r["id"] for r in spark.read.format("delta").load(table).collect()) == [10, 12, 13, 50, 51, 60]
    sc = spark.sparkContext
    sc.setJobGroup("second-rewrite", "the second rewrite")
    try:
        assert txn_append.rewrite(spark, table, rows(spark, 3, 100), version()) == 3
    finally:
        sc.setJobGroup("other", "other")
    assert {"state": before["state"] + 1, "log": before["log"] + 1} == txn_append.REWRITE_LISTINGS
    jobs = [sc.statusTracker().getJobInfo(j) for j in sc.statusTracker().getJobIdsForGroup("second-rewrite")]
    stages = [sc.statusTracker().getStageInfo(s) for job in jobs for s in job.stageIds]
    assert not any("snapshot" in (stage.name or "").lower() for stage in stages if stage is not None)
    assert sorted(r["id"] for r in spark.read.format("delta").load(table).collect()) == [100, 101, 102]
    # The table's files are the rewrite's own: every other one removed.
    assert {path.rsplit("/", 1)[-1] for path in _live_paths(spark, table)} == {a["path"] for a in _added(table)}


def test_a_rewrite_from_the_log_still_conflicts_with_a_commit_after_its_start(spark: SparkSession, table: str) -> None:
    """A rewrite whose files came from the log reads the whole table too: another writer's
    append between its start and its commit fails it, and nothing of the append is lost."""
    from spark_purge.audit import DELTA_CONFLICTS

    def version() -> int:
        return int(spark.sql(f"DESCRIBE HISTORY delta.`{table}`").agg({"version": "max"}).first()[0])

    assert txn_append.rewrite(spark, table, rows(spark, 2, 10), version()) == 2
    before = dict(txn_append.REWRITE_LISTINGS)

    def another_writer(path: str) -> None:
        txn_append.BEFORE_COMMIT.clear()
        rows(spark, 1, 70).write.format("delta").mode("append").save(path)

    txn_append.BEFORE_COMMIT.append(another_writer)
    try:
        with pytest.raises(DELTA_CONFLICTS):
            txn_append.rewrite(spark, table, rows(spark, 3, 100), version())
    finally:
        txn_append.BEFORE_COMMIT.clear()
    assert txn_append.REWRITE_LISTINGS["log"] == before["log"] + 1
    assert sorted(r["id"] for r in spark.read.format("delta").load(table).collect()) == [10, 11, 70]


def _live_paths(spark: SparkSession, path: str) -> set[str]:
    return {r[0] for r in spark.read.format("delta").load(path).selectExpr("_metadata.file_path").distinct().collect()}
