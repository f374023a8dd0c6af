"""The pure plan + outcomes -> audit rows mapping, and the batch tally built from it (no Spark job)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from pyspark.sql import Row

from spark_purge.audit import (
    NO_OUTCOME,
    BatchContext,
    intent_rows,
    intent_table,
    outcome_rows,
    outcome_table,
    reclaimed_estimate,
)
from spark_purge.kafka.model import DeleteOutcome
from spark_purge.runner import BatchResult
from spark_purge.schemas import AUDIT, PLAN

PLANNED = datetime(2026, 11, 22, 23, 59, tzinfo=timezone.utc)
EXECUTED = datetime(2026, 11, 23, 0, 1, tzinfo=timezone.utc)
CTX = BatchContext("run-1", "query-1", 7, PLANNED, dry_run=False, config_fingerprint="fp")


def plan_row(partition: int, cutoff: int | None, actionable: bool, binding: str = "group", **kw: Any) -> Row:
    values: dict[str, Any] = dict(
        snapshot_id="s1", topic="orders", partition=partition, topic_id="id-orders", leader=1, log_start_offset=10, high_watermark=500,
        cutoff=cutoff, records_to_delete=(cutoff - 10) if actionable and cutoff else 0, binding_constraint=binding,
        blocking_group="billing" if binding == "group" else None,
        blocking_group_type="classic" if binding == "group" else None, rule="orders", stale_groups=["old"] if partition == 1 else [],
        actionable=actionable, remote_storage_enable=None, detail="why", time_floor_source="append_history", size_bytes=None,
        local_log_start_offset=None, cuts_remote=False,
    )
    values.update(kw)
    return Row(**{f.name: values[f.name] for f in PLAN.fields})


PLAN_ROWS = [
    plan_row(0, 100, True),  # deleted
    plan_row(1, 200, True),  # failed with a message, low watermark re-read
    plan_row(2, 300, True),  # the client returned nothing for it
    plan_row(3, None, False, binding="missing_commit"),  # skipped
    plan_row(4, 50, True),  # failed, no message, no low watermark
    plan_row(5, 60, True),  # never sent: the topic was recreated since the plan
]
OUTCOMES = {
    ("orders", 0): DeleteOutcome("orders", 0, 100, 1, 100),
    ("orders", 1): DeleteOutcome("orders", 1, 200, 1, 150, "REQUEST_TIMED_OUT", "leader did not answer"),
    ("orders", 4): DeleteOutcome("orders", 4, 50, 1, -1, "POLICY_VIOLATION"),
    ("orders", 5): DeleteOutcome("orders", 5, 60, None, None, "TOPIC_RECREATED", "id A when planned, B now: not cut"),
}


def brief(row: Row) -> tuple[Any, ...]:
    return (row.partition, row.status, row.low_watermark, row.records_deleted, row.error)


def test_intents_are_the_actionable_rows_with_the_batch_context() -> None:
    rows = intent_rows(PLAN_ROWS, CTX)
    assert [r.partition for r in rows] == [0, 1, 2, 4, 5]
    first = rows[0].asDict()
    assert list(first) == AUDIT.fieldNames()
    assert first == {
        "run_id": "run-1", "query_id": "query-1", "batch_id": 7, "record_type": "intent", "planned_at": PLANNED,
        "executed_at": None, "snapshot_id": "s1", "topic": "orders", "partition": 0, "leader": 1,
        "prior_log_start_offset": 10, "high_watermark": 500, "cutoff": 100, "low_watermark": None,
        "records_deleted": None, "binding_constraint": "group", "blocking_group": "billing", "blocking_group_type": "classic", "stale_groups": [],
        "rule": "orders", "status": "planned", "error": None, "dry_run": False, "remote_storage_enable": None,
        "config_fingerprint": "fp", "operator": None, "time_floor_source": "append_history", "topic_id": "id-orders",
        "lease_generation": None, "active_producers": None,
        "size_bytes_before": None, "bytes_reclaimed_estimate": None, "event_date": "2026-11-22",  # the planning day, not the execution day
        "prior_local_log_start_offset": None, "local_log_start_offset": None, "cuts_remote": False, "remote_bytes_removed": None,
    }


def test_outcomes_one_per_plan_row_never_silently_deleted() -> None:
    rows = outcome_rows(PLAN_ROWS, OUTCOMES, CTX, EXECUTED)
    assert [brief(r) for r in rows] == [
        (0, "deleted", 100, 90, None),
        (1, "failed", 150, 140, "REQUEST_TIMED_OUT: leader did not answer"),
        (2, "failed", None, 0, NO_OUTCOME),
        (3, "skipped", None, 0, None),
        (4, "failed", None, 0, "POLICY_VIOLATION"),
        (5, "skipped", None, 0, "topic_recreated: id A when planned, B now: not cut"),
    ]
    assert {r.record_type for r in rows} == {"outcome"} and {r.executed_at for r in rows} == {EXECUTED}
    assert rows[1].stale_groups == ["old"]
    # Every kind of row in the audit's column order: the write reads rows by position, as Spark does.
    assert all(list(r.asDict()) == AUDIT.fieldNames() for r in rows)


def test_the_plan_as_spark_gives_it_in_arrow_makes_the_same_audit_rows() -> None:
    """The pipeline hands the runner the plan as ``toArrow`` gives it (Spark's Arrow types, no
    ``active_producers`` unless annotated); the audit's rows are those of the plan as rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_purge.delta_files import rows_of

    table = pa.Table.from_pylist([r.asDict() for r in PLAN_ROWS], to_arrow_schema(PLAN))
    assert rows_of(intent_table(table, CTX)) == intent_rows(PLAN_ROWS, CTX)
    outcomes = outcome_table(table, OUTCOMES, CTX, EXECUTED, local_log_starts={("orders", 0): 95})
    assert rows_of(outcomes) == outcome_rows(PLAN_ROWS, OUTCOMES, CTX, EXECUTED, local_log_starts={("orders", 0): 95})
    assert outcomes.schema == intent_table(table, CTX).schema and outcomes.column_names == AUDIT.fieldNames()
    assert outcomes.column("local_log_start_offset").to_pylist() == [95, None, None, None, None, None]  # the deleted row's only


def test_dry_run_outcomes_ignore_any_outcome() -> None:
    dry = BatchContext("run-1", "query-1", 7, PLANNED, dry_run=True, config_fingerprint="fp")
    rows = outcome_rows(PLAN_ROWS, OUTCOMES, dry, EXECUTED)
    assert [(r.status, r.dry_run, r.records_deleted) for r in rows] == [("dry_run", True, 0)] * 3 + [("skipped", True, 0)] + [("dry_run", True, 0)] * 2


def test_batch_result_counts_the_outcome_rows() -> None:
    result = BatchResult(7)
    result.count(outcome_table(PLAN_ROWS, OUTCOMES, CTX, EXECUTED))
    assert (result.deleted, result.records_deleted, result.failed) == (1, 90, 3)
    assert result.failures == [
        "orders-1: REQUEST_TIMED_OUT: leader did not answer",
        "orders-2: no outcome",
        "orders-4: POLICY_VIOLATION",
    ]


def test_bytes_before_and_the_reclaimed_estimate_pro_rata_of_records() -> None:
    # 490 records present (10..500) in 49,000 bytes: 100 bytes a record.
    sized = [plan_row(0, 100, True, size_bytes=49_000), plan_row(1, 200, True, size_bytes=49_000), plan_row(3, None, False, size_bytes=7)]
    intents = intent_rows(sized, CTX)
    assert [(r.size_bytes_before, r.bytes_reclaimed_estimate) for r in intents] == [(49_000, None), (49_000, None)]
    rows = outcome_rows(sized, OUTCOMES, CTX, EXECUTED)
    # p0 deleted 90 records: 9,000 bytes; p1 failed after the log start reached 150 (140 records
    # gone): the estimate follows what went; p3 skipped: 0. No size known: no estimate.
    assert [(r.partition, r.status, r.size_bytes_before, r.bytes_reclaimed_estimate) for r in rows] == [
        (0, "deleted", 49_000, 9_000), (1, "failed", 49_000, 14_000), (3, "skipped", 7, 0),
    ]
    assert [r.bytes_reclaimed_estimate for r in outcome_rows(PLAN_ROWS[:1], OUTCOMES, CTX, EXECUTED)] == [None]


def test_reclaimed_estimate_bounds() -> None:
    assert reclaimed_estimate(1000, 5, 0, 10) == 500
    assert reclaimed_estimate(1000, 50, 0, 10) == 1000  # never more than the partition's size
    assert reclaimed_estimate(1000, 0, 0, 10) == 0
    assert reclaimed_estimate(1000, 3, 10, 10) == 0  # an empty log frees nothing
    assert reclaimed_estimate(None, 5, 0, 10) is None and reclaimed_estimate(1000, None, 0, 10) is None


def test_a_tiered_cut_records_the_local_log_start_before_and_after() -> None:
    plan = [plan_row(0, 100, True, remote_storage_enable=True, local_log_start_offset=60, cuts_remote=True)]
    outcome = DeleteOutcome("orders", 0, 100, 1, 100)
    (intent,) = intent_rows(plan, CTX)
    (row,) = outcome_rows(plan, {("orders", 0): outcome}, CTX, EXECUTED, local_log_starts={("orders", 0): 100})
    assert (intent["prior_local_log_start_offset"], intent["local_log_start_offset"], intent["cuts_remote"]) == (60, None, True)
    assert {k: row[k] for k in ("status", "prior_local_log_start_offset", "local_log_start_offset", "cuts_remote", "remote_bytes_removed")} == {
        "status": "deleted", "prior_local_log_start_offset": 60, "local_log_start_offset": 100, "cuts_remote": True, "remote_bytes_removed": None
    }


def test_every_audit_column_takes_its_own_value() -> None:
    """Each column comes from its own source, every value distinct, so no two swap unseen (the
    row is filled by position in AUDIT's order)."""
    plan = plan_row(
        3, 140, True, leader=11, log_start_offset=12, high_watermark=1300, size_bytes=1400, local_log_start_offset=15,
        remote_storage_enable=True, cuts_remote=True, stale_groups=["st"], blocking_group="bg", blocking_group_type="bgt",
        binding_constraint="bc", rule="ru", time_floor_source="tfs", topic_id="tid", snapshot_id="sid", topic="tp",
    )
    plan = Row(**{**plan.asDict(), "active_producers": 21})
    ctx = BatchContext("run", "query", 16, PLANNED, dry_run=False, config_fingerprint="cfp", lease_generation=17)
    outcome = DeleteOutcome("tp", 3, 140, 18, 120)
    (row,) = outcome_rows([plan], {("tp", 3): outcome}, ctx, EXECUTED, local_log_starts={("tp", 3): 19})
    assert row.asDict() == {
        "run_id": "run", "query_id": "query", "batch_id": 16, "record_type": "outcome", "planned_at": PLANNED,
        "executed_at": EXECUTED, "snapshot_id": "sid", "topic": "tp", "partition": 3, "leader": 18,
        "prior_log_start_offset": 12, "high_watermark": 1300, "cutoff": 140, "low_watermark": 120, "records_deleted": 108,
        "binding_constraint": "bc", "blocking_group": "bg", "blocking_group_type": "bgt", "stale_groups": ["st"], "rule": "ru",
        "status": "deleted", "error": None, "dry_run": False, "remote_storage_enable": True, "config_fingerprint": "cfp",
        "operator": None, "time_floor_source": "tfs", "topic_id": "tid", "lease_generation": 17, "active_producers": 21,
        "size_bytes_before": 1400, "bytes_reclaimed_estimate": 1400 * 108 // 1288, "prior_local_log_start_offset": 15,
        "local_log_start_offset": 19, "cuts_remote": True, "remote_bytes_removed": None, "event_date": "2026-11-22",
    }
    assert list(row.asDict()) == AUDIT.fieldNames()
