"""A replayed batch: its recorded intents, re-validated against a fresh snapshot (pure).

Spark re-runs a micro-batch after a crash (foreachBatch is at-least-once). Such a batch never
plans anew: it executes exactly the intents it recorded in the audit, each bounded by a fresh
safety check, so a group rewound or a config changed between the crash and the restart can only
make the replay delete less:

- ``cut = min(intent cutoff, fresh cutoff)``, the fresh cutoff planned from a fresh snapshot
  under the current config; a partition with no fresh cutoff (blocked, no longer selected) is
  ``skipped`` and names the fresh reason (or ``not_in_snapshot``);
- intents older than ``stream.max_snapshot_age`` execute nothing: every one is recorded as
  ``skipped`` with binding constraint ``stale_snapshot``;
- the outcome rows keep the intents' planned_at, config fingerprint and dry_run flag, so each
  outcome sits beside the intent it executes (the README's anti-join finds nothing).

Functions map audit intent rows (``schemas.AUDIT``) and fresh plan rows (``schemas.PLAN``) to
plan-shaped rows for ``runner.BatchRunner.execute``: no Spark job, no Kafka, no clock.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import Row

from spark_purge._time import as_utc
from spark_purge.audit import BatchContext
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.schemas import NOT_IN_SNAPSHOT, PLAN, STALE_SNAPSHOT


def replay_context(intents: Sequence[Row], run_id: str) -> BatchContext:
    """The batch context the intents were written under (this process's ``run_id``)."""
    first = intents[0]
    return BatchContext(
        run_id,
        first["query_id"],
        int(first["batch_id"]),
        as_utc(first["planned_at"]),
        bool(first["dry_run"]),
        first["config_fingerprint"],
    )


def is_stale(planned_at: datetime, now: datetime, max_age_ms: int) -> bool:
    """The intents planned at ``planned_at`` are too old to execute at ``now``."""
    return (as_utc(now) - as_utc(planned_at)).total_seconds() * 1000 > max_age_ms


def _plan_row(intent: Row, **changes: Any) -> Row:
    """An intent (audit row) back in ``PLAN`` shape, with ``changes`` applied."""
    values: dict[str, Any] = dict(
        snapshot_id=intent["snapshot_id"],
        topic=intent["topic"],
        partition=intent["partition"],
        # The incarnation the intent was planned for: the runner's recheck before DeleteRecords
        # skips the partition when the topic was recreated since (topic_recreated).
        topic_id=intent.asDict().get("topic_id"),
        leader=intent["leader"],
        log_start_offset=intent["prior_log_start_offset"],
        high_watermark=intent["high_watermark"],
        cutoff=intent["cutoff"],
        records_to_delete=0,
        binding_constraint=intent["binding_constraint"],
        blocking_group=intent["blocking_group"],
        blocking_group_type=intent["blocking_group_type"],
        rule=intent["rule"],
        stale_groups=list(intent["stale_groups"] or []),
        actionable=True,
        remote_storage_enable=intent["remote_storage_enable"],
        detail=None,
        time_floor_source=intent.asDict().get("time_floor_source"),
        size_bytes=intent.asDict().get("size_bytes_before"),
        local_log_start_offset=intent.asDict().get("prior_local_log_start_offset"),
        cuts_remote=intent.asDict().get("cuts_remote"),
    )
    values.update(changes)
    values["records_to_delete"] = max(0, (values["cutoff"] or 0) - values["log_start_offset"]) if values["actionable"] else 0
    return Row(**{f.name: values[f.name] for f in PLAN.fields})


def stale_rows(intents: Sequence[Row]) -> list[Row]:
    """Every intent skipped as ``stale_snapshot``: nothing is deleted."""
    return [_plan_row(i, actionable=False, binding_constraint=STALE_SNAPSHOT) for i in intents]


def bounded_rows(intents: Sequence[Row], fresh: Mapping[TopicPartitionKey, Row]) -> list[Row]:
    """Each intent bounded by the fresh plan row of its partition (see module doc)."""
    return [_bounded(i, fresh.get((i["topic"], i["partition"]))) for i in intents]


def _bounded(intent: Row, fresh: Row | None) -> Row:
    if fresh is None:
        return _plan_row(intent, actionable=False, cutoff=None, binding_constraint=NOT_IN_SNAPSHOT)
    reason = dict(
        binding_constraint=fresh["binding_constraint"],
        blocking_group=fresh["blocking_group"],
        blocking_group_type=fresh["blocking_group_type"],
        stale_groups=list(fresh["stale_groups"] or []),
    )
    if fresh["cutoff"] is None:  # blocked now (a missing commit, an unreadable group, ...)
        return _plan_row(intent, actionable=False, cutoff=None, **reason)
    cut = min(int(intent["cutoff"]), int(fresh["cutoff"]))
    # Re-sending a cut the first attempt already made is harmless (DeleteRecords is monotonic)
    # and records what the batch deleted; a cut at or below the planned log start deletes nothing.
    actionable = cut > int(intent["prior_log_start_offset"])
    if int(fresh["cutoff"]) < int(intent["cutoff"]):  # the fresh check binds: say why
        return _plan_row(intent, cutoff=cut, actionable=actionable, **reason)
    return _plan_row(intent, cutoff=cut, actionable=actionable)


__all__ = ["bounded_rows", "is_stale", "replay_context", "stale_rows"]
