"""``deltalog.table_state``: a Delta without the ``DeltaLog`` API used gives it up for the
process; one call that fails for another reason (an I/O error, a thread interrupted by a
streaming query's stop) answers None for that call only, and the next call reads the log again."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from spark_purge import deltalog


def failing_spark(error: Exception, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A session whose ``DeltaLog.forTable`` raises ``error`` (``deltalog`` names its JVM
    methods through ``py4j_calls.static``, replaced here)."""

    def for_table(*_: Any) -> Any:
        raise error

    methods = {("org.apache.spark.sql.delta.DeltaLog", "forTable"): for_table, ("scala.Option", "empty"): lambda: None}
    monkeypatch.setattr(deltalog, "static", lambda _jvm, fqn, name: methods[(fqn, name)])
    return NS(sparkContext=NS(_jvm=NS()), _jsparkSession=None)


def test_a_failed_call_answers_none_once_and_the_next_reads_the_log(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltalog, "_UNSUPPORTED", [])
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    interrupted = Py4JError("An error occurred while calling o91.update: java.nio.channels.ClosedByInterruptException")
    failed = deltalog.failed_calls()
    for n, error in enumerate((interrupted, OSError("java.io.FileNotFoundException: File file:/x/_delta_log/00001.json does not exist")), 1):
        with monkeypatch.context() as patched:
            assert deltalog.table_state(failing_spark(error, patched), path) is None
        assert deltalog._UNSUPPORTED == []
        assert deltalog.failed_calls() == failed + n
    state = deltalog.table_state(spark, path)
    assert state is not None and state[1] == 0 and state[0]
    spark.range(2).write.format("delta").mode("append").save(path)
    assert deltalog.table_state(spark, path) == (state[0], 1)


@pytest.mark.parametrize(
    "error",
    [
        Py4JError("org.apache.spark.sql.delta.DeltaLog does not exist in the JVM"),
        Py4JError("An error occurred while calling o7.update. Trace:\npy4j.Py4JException: Method update([class java.lang.Boolean]) does not exist"),
        Py4JError("An error occurred while calling z:DeltaLog.forTable.\n: java.lang.NoSuchMethodError: 'DeltaLog DeltaLog.forTable(...)'"),
    ],
)
def test_a_delta_without_the_api_gives_it_up_for_the_process(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    monkeypatch.setattr(deltalog, "_UNSUPPORTED", [])
    path = str(tmp_path / "t")
    spark.range(1).write.format("delta").save(path)
    with monkeypatch.context() as patched:
        assert deltalog.table_state(failing_spark(error, patched), path) is None
    assert [str(error)] == deltalog._UNSUPPORTED
    assert deltalog.table_state(spark, path) is None  # not tried again in this process


def test_the_purges_own_tables_checkpoint_every_100_commits(spark: SparkSession, tmp_path: Path) -> None:
    """The audit table, the group progress store, the append history and the lease table are
    created with ``delta.checkpointInterval`` 100 (a checkpoint is made inside the commit that
    reaches it: every 10 commits was 1-5 s every few batches); a table that exists keeps its own."""
    from spark_purge.audit import AuditSink, ProgressStore
    from spark_purge.history import AppendHistory
    from spark_purge.lease import LeaseTable, PurgerLease

    def interval(path: Path) -> str | None:
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
        return detail["properties"].get("delta.checkpointInterval")

    AuditSink(spark, str(tmp_path / "audit"), app_id="t").ensure_table()
    ProgressStore(spark, str(tmp_path / "progress"), app_id="t").ensure_table()
    AppendHistory(spark, str(tmp_path / "history")).ensure_table()
    PurgerLease(LeaseTable(spark, str(tmp_path / "leases")), "p", "run", "fp", ttl_ms=60_000, wait_ms=0).acquire()
    for name in ("audit", "progress", "history", "leases"):
        assert interval(tmp_path / name) == str(deltalog.CHECKPOINT_INTERVAL) == "100", name
    spark.range(1).write.format("delta").save(str(tmp_path / "older"))
    older = AuditSink(spark, str(tmp_path / "older"), app_id="t")
    older.ensure_table()  # an existing table: nothing is changed
    assert interval(tmp_path / "older") is None
