"""``spark-purge why TOPIC[:PARTITION]``: why a partition is not shrinking, in a few lines.

From the latest plan (a fresh snapshot, as ``spark-purge plan`` makes it) and the audit's
outcomes for the partition: the binding constraint and the consumer behind it, how far that
consumer lags (records, and bytes pro rata of the partition's size on the leader), since when
the audit has seen this same reason, the last delete, and a delete that got no answer and may
still take effect (``unconfirmed``). ``explain`` is pure (plan row +
audit rows -> text lines); ``parse_target`` and ``partition_history`` are the edges.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_purge._units import format_bytes
from spark_purge.audit import with_audit_columns
from spark_purge.errors import ConfigError

HISTORY_COLUMNS = (
    "planned_at", "executed_at", "batch_id", "status", "binding_constraint", "blocking_group", "records_deleted",
    "bytes_reclaimed_estimate", "cutoff", "error", "topic_id",
)
# The errors of a delete that got no answer (spark_purge.kafka.delete): it may have been
# applied by a broker that has not led the partition since, and may yet take effect.
UNANSWERED = ("REQUEST_TIMED_OUT", "LEADER_UNREACHABLE")


def parse_target(target: str) -> tuple[str, Optional[int]]:
    """``"orders"`` -> ("orders", None); ``"orders:3"`` -> ("orders", 3). Kafka topic names have
    no ``:``, so the last one separates the partition."""
    topic, sep, part = target.rpartition(":")
    if not sep:
        topic, part = target, ""
    if not topic.strip():
        raise ConfigError(f"why: expected TOPIC or TOPIC:PARTITION, got {target!r}")
    if not sep:
        return topic, None
    if not part.isdigit():
        raise ConfigError(f"why: expected a partition number after ':' in {target!r}, got {part!r}")
    return topic, int(part)


def partition_history(audit: DataFrame, topic: str, partition: Optional[int]) -> dict[int, list[dict[str, Any]]]:
    """The audit's outcome rows of ``topic`` (one partition or all), newest first, per partition."""
    rows = with_audit_columns(audit).where((F.col("record_type") == "outcome") & (F.col("topic") == topic))
    if partition is not None:
        rows = rows.where(F.col("partition") == partition)
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows.select("partition", *HISTORY_COLUMNS).orderBy(F.col("planned_at").desc(), F.col("batch_id").desc()).collect():
        out.setdefault(int(r["partition"]), []).append(r.asDict())
    return out


def _when(at: Optional[datetime]) -> str:
    return "?" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _pro_rata(size: Optional[int], records: int, present: int) -> Optional[int]:
    if size is None:
        return None
    return 0 if present <= 0 else size * min(max(records, 0), present) // present


def _since(plan: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    """When the audit first recorded the current reason, in the run of decisions up to now."""
    same = _run_of_same(plan, history)
    if not same:
        return "not in the audit yet (this is the first decision for this reason)"
    return f"{_when(same[-1]['planned_at'])} ({len(same)} decision(s) in the audit for this reason)"


def _run_of_same(plan: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    key = (plan["binding_constraint"], plan["blocking_group"])
    run = []
    for h in history:  # newest first
        if (h["binding_constraint"], h["blocking_group"]) != key:
            break
        run.append(h)
    return run


def explain(plan: Mapping[str, Any], history: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """Text lines explaining one ``PLAN`` row, with its partition's audit outcomes (newest first)."""
    log_start, hw, cutoff = int(plan["log_start_offset"]), int(plan["high_watermark"]), plan["cutoff"]
    size = plan.get("size_bytes")
    present = hw - log_start
    group = plan["blocking_group"]
    who = f" ({group}, {plan['blocking_group_type'] or 'unknown type'})" if group else ""
    lines = [f"{plan['topic']}:{plan['partition']}  bound by {plan['binding_constraint']}{who}"]
    lines.append(f"  why:          {plan['detail'] or '-'}")
    lines.append(
        f"  log:          start {log_start}, high watermark {hw}: {present} records, {format_bytes(size)} on the leader"
    )
    lines.append(f"  cutoff:       {'none (blocked)' if cutoff is None else cutoff}"
                 + (f", would delete {plan['records_to_delete']} records now" if plan["actionable"] else ", nothing to do now"))
    if group:
        position = log_start if cutoff is None else int(cutoff)
        lag = hw - position
        lines.append(
            f"  lag:          {group} is {lag} records (~{format_bytes(_pro_rata(size, lag, present))}) behind the high watermark"
            + (" (blocked: every record from the log start is held)" if cutoff is None else f" (position {position})")
        )
    lines.append(f"  since:        {_since(plan, history)}")
    last = next((h for h in history if h["status"] == "deleted"), None)
    if last is None:
        lines.append("  last delete:  none in the audit")
    else:
        lines.append(
            f"  last delete:  {_when(last['executed_at'])}, {last['records_deleted']} records "
            f"(~{format_bytes(last['bytes_reclaimed_estimate'])}), batch {last['batch_id']}"
        )
    if plan["stale_groups"]:
        lines.append(f"  stale groups: {', '.join(plan['stale_groups'])}")
    pending = _unconfirmed(plan, history)
    if pending is not None:
        lines.append(
            f"  unconfirmed:  the delete to {pending['cutoff']} of {_when(pending['executed_at'])} (batch {pending['batch_id']}) "
            f"got no answer ({str(pending['error']).split(':')[0]}) and the log start is {log_start}: a broker that got it may "
            f"still apply it when it leads again; do not rewind a consumer below {pending['cutoff']}"
        )
    return lines


def _unconfirmed(plan: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """The highest cut among the partition's ``failed`` outcomes that got no answer (``UNANSWERED``)
    and that the log start has not reached, on the topic the plan is for (None: none)."""
    log_start, topic_id = int(plan["log_start_offset"]), plan.get("topic_id")
    found = [
        h for h in history
        if h["status"] == "failed" and h.get("cutoff") is not None and int(h["cutoff"]) > log_start
        and str(h.get("error") or "").split(":")[0] in UNANSWERED
        and (topic_id is None or h.get("topic_id") is None or h.get("topic_id") == topic_id)
    ]
    return max(found, key=lambda h: int(h["cutoff"]), default=None)


__all__ = ["explain", "parse_target", "partition_history"]
