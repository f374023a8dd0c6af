"""The Delta audit sink on real Spark + Delta: exactly-once per batch, and the operator queries."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from delta.exceptions import ConcurrentAppendException
from pyspark.sql import Row, SparkSession

from spark_purge import txn_append
from spark_purge.audit import CONFLICT_ATTEMPTS, AuditSink, blocked_now, deleted_per_topic_per_day, errors
from spark_purge.errors import AuditError
from spark_purge.schemas import AUDIT

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def _row(**kw: object) -> Row:
    base: dict[str, object] = dict(
        run_id="r1", query_id="q1", batch_id=0, record_type="outcome", planned_at=T0, executed_at=T0, snapshot_id="s0",
        topic="orders", partition=0, leader=1, prior_log_start_offset=0, high_watermark=100, cutoff=40,
        low_watermark=40, records_deleted=40, binding_constraint="group", blocking_group="billing", blocking_group_type="classic",
        stale_groups=[], rule="orders", status="deleted", error=None, dry_run=False,
        remote_storage_enable=False, config_fingerprint="abc", event_date="2026-11-22", operator=None, time_floor_source=None, topic_id=None,
        size_bytes_before=None, bytes_reclaimed_estimate=None,
        prior_local_log_start_offset=None, local_log_start_offset=None, cuts_remote=None, remote_bytes_removed=None,
        lease_generation=None, active_producers=None,
    )
    base.update(kw)
    return Row(**{f.name: base[f.name] for f in AUDIT.fields})


def test_replayed_batch_writes_no_duplicates(spark: SparkSession, tmp_path: Path) -> None:
    sink = AuditSink(spark, str(tmp_path / "audit"), app_id="job-a")
    sink.ensure_table()
    rows = [_row(partition=0), _row(partition=1, records_deleted=5)]

    assert sink.write(rows, "outcome", batch_id=3)
    sink.write(rows, "outcome", batch_id=3)  # the replay after a crash
    sink.write([_row(record_type="intent", status="planned")], "intent", batch_id=3)  # other app id

    table = sink.read()
    assert table.where("record_type = 'outcome'").count() == 2
    assert table.where("record_type = 'intent'").count() == 1
    # A later batch does land.
    sink.write([_row(batch_id=4, partition=2)], "outcome", batch_id=4)
    assert sink.read().where("record_type = 'outcome'").count() == 3


def test_operator_queries(spark: SparkSession, tmp_path: Path) -> None:
    sink = AuditSink(spark, str(tmp_path / "audit"), app_id="job-b")
    sink.ensure_table()
    later = T0.replace(hour=11)
    sink.write(
        [
            _row(partition=0, records_deleted=40),
            _row(partition=1, records_deleted=2),
            _row(topic="clicks", partition=0, status="failed", error="POLICY_VIOLATION", records_deleted=None,
                 low_watermark=None),
        ],
        "outcome",
        batch_id=0,
    )
    sink.write(
        [
            _row(batch_id=1, planned_at=later, partition=0, status="skipped", binding_constraint="missing_commit",
                 blocking_group="analytics", records_deleted=0, cutoff=None),
            _row(batch_id=1, planned_at=later, partition=1, status="deleted", records_deleted=3),
            # A group sitting at the log start holds back every record: it binds as ``group``.
            _row(batch_id=1, planned_at=later, partition=2, status="skipped", prior_log_start_offset=30, cutoff=30,
                 low_watermark=30, records_deleted=0, blocking_group="reporting"),
        ],
        "outcome",
        batch_id=1,
    )
    audit = sink.read()

    per_day = {(r.event_date, r.topic): r.records_deleted for r in deleted_per_topic_per_day(audit).collect()}
    assert per_day == {("2026-11-22", "orders"): 45}
    blocked = [(r.topic, r.partition, r.blocking_group) for r in blocked_now(audit).collect()]
    # partition 1's latest outcome is also bound by a group, partition 0's by a missing commit.
    assert ("orders", 0, "analytics") in blocked
    held = {(r.topic, r.partition): r.records_held for r in blocked_now(audit).collect()}
    assert held[("orders", 2)] == 70  # 100 - 30: the group at the log start, every record
    assert [(r.topic, r.error) for r in errors(audit).collect()] == [("clicks", "POLICY_VIOLATION")]


def _conflicts(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the next ``times`` txn appends fail as if another writer had appended first."""
    real = txn_append.append
    calls: list[int] = []

    def append(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise ConcurrentAppendException("simulated concurrent append")
        real(*args, **kwargs)

    monkeypatch.setattr(txn_append, "append", append)
    return calls


def test_conflicting_write_is_retried_after_growing_pauses(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    sink = AuditSink(spark, str(tmp_path / "audit"), app_id="job-c", sleep=pauses.append)
    sink.ensure_table()
    calls = _conflicts(monkeypatch, times=2)

    assert sink.write([_row()], "outcome", batch_id=0)

    assert len(calls) == 3 and pauses == [0.2, 0.4]  # Backoff(first=0.2): a pause before each retry
    assert sink.read().count() == 1


def test_write_that_keeps_conflicting_gives_up_with_an_audit_error(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    sink = AuditSink(spark, str(tmp_path / "audit"), app_id="job-d", sleep=pauses.append)
    sink.ensure_table()
    _conflicts(monkeypatch, times=CONFLICT_ATTEMPTS)

    with pytest.raises(AuditError, match="kept conflicting"):
        sink.write([_row()], "intent", batch_id=0)
    assert len(pauses) == CONFLICT_ATTEMPTS - 1
