"""Partition retirement (seed 002): stop writing to a partition, let every consumer drain it, then
reclaim its disk. Kafka cannot drop a partition; this retires one.

Statuses (``schemas``): ReadWrite (0) -> ReadOnly (1, retiring) -> None (-1, retired). An
operator moves ReadWrite -> ReadOnly (``spark-purge retire``) or back while still ReadOnly
(``retire --cancel``); the purge job moves ReadOnly -> None once the partition is drained and its
high watermark has been still for ``retirement.delay`` (``policy.retirement`` decides; the runner
calls :class:`RegistryTracker`). Producers stay off ReadOnly and None partitions with
``spark_purge.partitioner`` (kafka-python) or a custom Java ``Partitioner`` (README).

The registry is an append-only Delta table (``schemas.RETIREMENTS``) beside the audit, at
``<audit.path>_retirements``: one row per event, a partition's state is its newest row. The job
writes intent first, as the audit does: a ``reclaim_intent`` row (with the offset) before
DeleteRecords, a ``reclaimed`` row (status None) once the partition's log start reached it. A
job killed in between leaves the partition ReadOnly: the next cycle checks the drain rule again
and reclaims, or records a reclaim the broker already made (log start at the high watermark).
Each registry write also rewrites ``<audit.path>_retirements.json`` (:func:`export_document`):
the ReadOnly and None partitions, for producers that have no Spark (the partitioner reads it).

    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    retire(registry, cfg, facts, [("orders", 7)], reason="over-partitioned", operator="ops@host")
    registry.current()          # topic, partition, status, event, since, requested_by, reason, reclaimed_to
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from spark_purge import txn_append
from spark_purge.audit import BatchContext, CheckpointTable, absolute_location, retry_conflicts
from spark_purge.config import PurgeConfig
from spark_purge.errors import AuditError, ConfigError, ConfigProblems
from spark_purge.fs import HadoopFiles
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.policy.inputs import required_groups
from spark_purge.policy.retirement import is_reclaim
from spark_purge.schemas import (
    EXTERNAL_CONSUMER_TYPES,
    READ_ONLY,
    READ_WRITE,
    RETIRED,
    RETIREMENT_STATUS_NAMES,
    RETIREMENTS,
)

log = logging.getLogger(__name__)

REGISTRY_SUFFIX = "_retirements"
EXPORT_FORMAT = 1  # the JSON export's "format": bumped if its shape ever changes
_PARTITION_SPEC = re.compile(r"^(?P<topic>[A-Za-z0-9._-]{1,249}):(?P<partition>\d{1,9})$")


# ---- parsing and checking requests (pure) -----------------------------------------------------


def parse_partitions(text: str) -> list[TopicPartitionKey]:
    """``"orders:3,orders:7"`` -> [("orders", 3), ("orders", 7)]; ``ConfigError`` naming the bad item."""
    found: list[TopicPartitionKey] = []
    for item in (part.strip() for part in text.split(",")):
        match = _PARTITION_SPEC.match(item)
        if match is None:
            raise ConfigError(f"retire: expected TOPIC:PARTITION[,TOPIC:PARTITION...], got {item!r} in {text!r}")
        key = (match["topic"], int(match["partition"]))
        if key not in found:
            found.append(key)
    return found


@dataclass(frozen=True)
class TopicFacts:
    """What the cluster says of a topic, for checking a retirement request."""

    partitions: tuple[int, ...]
    internal: bool
    cleanup_policy: str | None


def _name(key: TopicPartitionKey) -> str:
    return f"{key[0]}:{key[1]}"


def _topic_problem(topic: str, facts: TopicFacts | None, config: PurgeConfig) -> str | None:
    if topic.startswith("__") or (facts is not None and facts.internal):
        return f"topic {topic!r} is internal: never retired"
    if facts is None:
        return f"unknown topic {topic!r}: the cluster has no such topic"
    if config.is_protected(topic):
        return f"topic {topic!r} matches protected_topics: never purged, so never retired"
    policies = [p.strip() for p in (facts.cleanup_policy or "delete").lower().split(",")]
    if "delete" not in policies:
        return f"topic {topic!r} has cleanup.policy={facts.cleanup_policy}, which lacks delete: its disk cannot be reclaimed"
    if config.rule_for(topic) is None:
        return f"topic {topic!r} matches no rule: the purge would never reclaim it (add a rule selecting it)"
    return None


def check_retire(
    requests: Sequence[TopicPartitionKey],
    facts: Mapping[str, TopicFacts],
    statuses: Mapping[TopicPartitionKey, int],
    config: PurgeConfig,
) -> None:
    """Raise ``ConfigError`` (``ConfigProblems``: every problem) unless each request may move
    ReadWrite -> ReadOnly: a known, non-internal, unprotected, delete-policy topic a rule selects,
    a partition it has, not retiring already, and at least one partition of the topic left ReadWrite."""
    _require_enabled(config)
    problems: list[str] = []
    for topic in dict.fromkeys(t for t, _ in requests):
        problem = _topic_problem(topic, facts.get(topic), config)
        asked = [k for k in requests if k[0] == topic]
        if problem is not None:
            problems.append(f"retire {', '.join(map(_name, asked))}: {problem}")
            continue
        known = facts[topic].partitions
        for key in asked:
            status = statuses.get(key, READ_WRITE)
            if key[1] not in known:
                problems.append(f"retire {_name(key)}: unknown partition {key[1]} (topic {topic!r} has partitions 0..{max(known)})")
            elif status != READ_WRITE:
                problems.append(f"retire {_name(key)}: already {RETIREMENT_STATUS_NAMES[status]}")
        writable = [p for p in known if statuses.get((topic, p), READ_WRITE) == READ_WRITE and (topic, p) not in asked]
        if not writable:
            problems.append(
                f"retire {', '.join(map(_name, asked))}: would leave topic {topic!r} with no writable (ReadWrite) partition "
                f"of its {len(known)}"
            )
    _raise(problems)


def check_cancel(requests: Sequence[TopicPartitionKey], statuses: Mapping[TopicPartitionKey, int], config: PurgeConfig) -> None:
    """Raise ``ConfigError`` unless each request is ReadOnly (a None partition is reclaimed already)."""
    _require_enabled(config)
    problems = []
    for key in requests:
        status = statuses.get(key, READ_WRITE)
        if status != READ_ONLY:
            problems.append(
                f"retire --cancel {_name(key)}: is {RETIREMENT_STATUS_NAMES[status]}, expected ReadOnly "
                "(only a retiring partition not yet reclaimed can be cancelled)"
            )
    _raise(problems)


def _require_enabled(config: PurgeConfig) -> None:
    if not config.retirement.enable:
        raise ConfigError("retirement.enable: is false; set it to true to retire partitions (the purge job must reclaim them)")


def check_request(config: PurgeConfig, reason: str | None, cancelling: bool) -> None:
    """What can be refused before reading anything: retirement off, a retire without a reason."""
    _require_enabled(config)
    if not cancelling and not (reason or "").strip():
        raise ConfigError("retire --reason: expected why the partitions are retired (recorded in the registry), got nothing")


def _raise(problems: Sequence[str]) -> None:
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigProblems(problems)


def event_row(
    key: TopicPartitionKey,
    status: int,
    event: str,
    since: datetime,
    requested_by: str | None = None,
    reason: str | None = None,
    high_watermark: int | None = None,
    batch_id: int | None = None,
) -> Row:
    """One ``RETIREMENTS`` row."""
    values: dict[str, Any] = dict(
        topic=key[0], partition=key[1], status=status, event=event, since=since, requested_by=requested_by,
        reason=reason, high_watermark=high_watermark, batch_id=batch_id,
    )
    return Row(**{f.name: values[f.name] for f in RETIREMENTS.fields})


def export_document(current: Iterable[Row], written_at: datetime) -> dict[str, Any]:
    """The JSON export: every partition not ReadWrite, with its status (``RetirementRegistry.current`` rows)."""
    listed = [
        {"topic": r["topic"], "partition": r["partition"], "status": r["status"], "status_name": RETIREMENT_STATUS_NAMES[r["status"]]}
        for r in sorted(current, key=lambda r: (r["topic"], r["partition"]))
        if r["status"] != READ_WRITE
    ]
    return {"format": EXPORT_FORMAT, "written_at": written_at.isoformat(), "partitions": listed}


# ---- the registry table ------------------------------------------------------------------------


@dataclass(frozen=True)
class RetirementRegistry(CheckpointTable):
    """The retirement registry at ``path`` (see the module docstring)."""

    @classmethod
    def beside(cls, spark: SparkSession, audit_path: str) -> RetirementRegistry:
        return cls(spark, absolute_location(audit_path).rstrip("/") + REGISTRY_SUFFIX)

    @property
    def export_path(self) -> str:
        return self.path + ".json"

    def read(self) -> DataFrame:
        """Every event (``RETIREMENTS``; empty before the first)."""
        df = self._stored()
        return self.spark.createDataFrame([], RETIREMENTS) if df is None else df.select(*RETIREMENTS.fieldNames())

    def current(self) -> DataFrame:
        """One row per partition ever retired: its newest event's status, event and time, the
        retire's requester and reason, and ``reclaimed_to`` (its newest ``reclaimed`` offset)."""
        events = self.read()
        newest = Window.partitionBy("topic", "partition").orderBy(F.col("since").desc())
        reclaimed = events.where(F.col("event") == "reclaimed").groupBy("topic", "partition").agg(
            F.max_by("high_watermark", "since").alias("reclaimed_to")
        )
        return (
            events.withColumn("_n", F.row_number().over(newest))
            .where(F.col("_n") == 1)
            .join(reclaimed, ["topic", "partition"], "left")
            .select("topic", "partition", "status", "event", "since", "requested_by", "reason", "reclaimed_to")
        )

    def statuses(self) -> dict[TopicPartitionKey, int]:
        """(topic, partition) -> status, for every partition ever retired."""
        return {(r["topic"], r["partition"]): int(r["status"]) for r in self.current().collect()}

    def append(self, rows: Sequence[Row], txn: tuple[str, int] | None = None) -> None:
        """Append events, then rewrite the JSON export. ``txn`` (app id, version): Delta skips a
        write it already committed under them (a replayed batch)."""
        if not rows:
            return
        held = txn_append.DriverRows(list(rows), RETIREMENTS)

        def write() -> None:
            if txn is not None:
                txn_append.append(self.spark, self.path, held, txn[0], txn[1])
            else:
                held.frame(self.spark).write.format("delta").mode("append").save(self.path)

        try:
            retry_conflicts(f"retirement registry append to {self.path}", write)
        except AuditError:
            raise
        except Exception as exc:
            raise AuditError(f"cannot write the retirement registry at {self.path}: {exc}") from exc
        self.export()

    def export(self) -> None:
        """Rewrite ``export_path`` from the current state (through Hadoop's FileSystem)."""
        document = export_document(self.current().collect(), datetime.now(timezone.utc))
        HadoopFiles(self.spark).write_text(self.export_path, json.dumps(document, indent=1))


# ---- operator actions --------------------------------------------------------------------------


def retire(
    registry: RetirementRegistry,
    config: PurgeConfig,
    facts: Mapping[str, TopicFacts],
    requests: Sequence[TopicPartitionKey],
    reason: str,
    operator: str | None,
    now: datetime,
) -> list[Row]:
    """Move ``requests`` ReadWrite -> ReadOnly (checked first: nothing changes on bad input)."""
    check_request(config, reason, cancelling=False)
    check_retire(requests, facts, registry.statuses(), config)
    rows = [event_row(key, READ_ONLY, "retire", now, operator, reason) for key in requests]
    registry.append(rows)
    return rows


def cancel(
    registry: RetirementRegistry, config: PurgeConfig, requests: Sequence[TopicPartitionKey], operator: str | None, now: datetime
) -> list[Row]:
    """Move ``requests`` ReadOnly -> ReadWrite (checked first: nothing changes on bad input)."""
    current = {(r["topic"], r["partition"]): r for r in registry.current().collect()}
    check_cancel(requests, {k: int(r["status"]) for k, r in current.items()}, config)
    rows = [event_row(key, READ_WRITE, "cancel", now, operator, current[key]["reason"]) for key in requests]
    registry.append(rows)
    return rows


# ---- reading the cluster for the operator (rows of a ``SNAPSHOT``, collected) ------------------


def topic_facts(snapshot_rows: Iterable[Row]) -> dict[str, TopicFacts]:
    """topic -> ``TopicFacts`` from ``SNAPSHOT`` rows."""
    parts: dict[str, list[int]] = {}
    first: dict[str, Row] = {}
    for row in snapshot_rows:
        parts.setdefault(row["topic"], []).append(int(row["partition"]))
        first.setdefault(row["topic"], row)
    return {
        t: TopicFacts(tuple(sorted(ps)), bool(first[t]["internal"]), first[t]["cleanup_policy"]) for t, ps in parts.items()
    }


def drain_rows(snapshot_rows: Sequence[Row], current: Iterable[Row], config: PurgeConfig) -> list[dict[str, Any]]:
    """Drain progress of every ReadOnly or None partition: one row per required consumer (Kafka
    groups as the topic's rule requires them, external consumers), its position against the
    partition's high watermark. A required group with no position on it shows ``position`` None."""
    states = {(r["topic"], r["partition"]): r for r in current if r["status"] != READ_WRITE}
    on_topic: dict[str, set[str]] = {}
    for row in snapshot_rows:
        on_topic.setdefault(row["topic"], set()).update(
            g["group_id"] for g in row["groups"] if g["group_type"] not in EXTERNAL_CONSUMER_TYPES
        )
    out: list[dict[str, Any]] = []
    for row in sorted(snapshot_rows, key=lambda r: (r["topic"], r["partition"])):
        state = states.get((row["topic"], row["partition"]))
        if state is None:
            continue
        rule = config.rule_for(row["topic"])
        required = set(required_groups(rule, on_topic.get(row["topic"], ()), config)) if rule is not None else set()
        seen = {g["group_id"]: g for g in row["groups"] if g["group_id"] in required or g["group_type"] in EXTERNAL_CONSUMER_TYPES}
        hw = int(row["high_watermark"])
        for name in sorted(required | set(seen)):
            g = seen.get(name)
            position = int(g["committed_offset"]) if g is not None and g["committed_offset"] >= 0 else None
            out.append(
                dict(
                    topic=row["topic"], partition=row["partition"], status=RETIREMENT_STATUS_NAMES[int(state["status"])],
                    consumer=name, type=g["group_type"] if g is not None else None, position=position,
                    high_watermark=hw, behind=None if position is None else max(0, hw - position),
                    drained=position is not None and position >= hw,
                )
            )
    return out


# ---- the purge job's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryTracker:
    """The runner's hooks: reclaim intents before DeleteRecords, None once reclaimed."""

    registry: RetirementRegistry
    clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)

    def _now(self) -> datetime:
        return self.clock()

    def before_deletes(self, plan: Sequence[Row], ctx: BatchContext) -> None:
        """A ``reclaim_intent`` row per actionable reclaim of the batch (none in a dry run)."""
        reclaims = [r for r in plan if r["actionable"] and is_reclaim(r)]
        if ctx.dry_run or not reclaims:  # the common batch: no registry read at all
            return
        current = self._current()
        now = self._now()
        rows = [_carry(r, current, "reclaim_intent", now, ctx.batch_id, status=_status_of(r, current)) for r in reclaims]
        self.registry.append(rows, (f"{ctx.query_id}:retirements:reclaim_intent", ctx.batch_id))

    def after_outcomes(self, plan: Sequence[Row], outcomes: Sequence[Row], ctx: BatchContext) -> None:
        """A ``reclaimed`` row (status None) per reclaim whose log start reached its cutoff:
        deleted now, or already (a job killed after the delete, before this row)."""
        reclaims = [r for r in plan if is_reclaim(r)]
        if ctx.dry_run or not reclaims:  # the common batch: no registry read at all
            return
        by_key = {(o["topic"], o["partition"]): o for o in outcomes}
        current = self._current()
        now = self._now()
        rows = []
        for r in reclaims:
            outcome = by_key.get((r["topic"], r["partition"]))
            deleted = outcome is not None and outcome["status"] == "deleted" and (outcome["low_watermark"] or -1) >= r["cutoff"]
            already = not r["actionable"] and int(r["log_start_offset"]) >= int(r["cutoff"])
            if deleted or already:
                rows.append(_carry(r, current, "reclaimed", now, ctx.batch_id, status=RETIRED))
        self.registry.append(rows, (f"{ctx.query_id}:retirements:reclaimed", ctx.batch_id))
        for row in rows:
            log.info("retired %s:%d reclaimed to its high watermark %d (status None)", row["topic"], row["partition"], row["high_watermark"])

    def _current(self) -> dict[TopicPartitionKey, Row]:
        return {(r["topic"], r["partition"]): r for r in self.registry.current().collect()}


def _status_of(plan: Row, current: Mapping[TopicPartitionKey, Row]) -> int:
    found = current.get((plan["topic"], plan["partition"]))
    return int(found["status"]) if found is not None else READ_ONLY


def _carry(plan: Row, current: Mapping[TopicPartitionKey, Row], event: str, now: datetime, batch_id: int, status: int) -> Row:
    """An event row for a plan row, carrying the retirement's requester and reason."""
    found = current.get((plan["topic"], plan["partition"]))
    return event_row(
        (plan["topic"], plan["partition"]), status, event, now,
        found["requested_by"] if found is not None else None,
        found["reason"] if found is not None else None,
        int(plan["cutoff"]), batch_id,
    )


__all__ = [
    "EXPORT_FORMAT",
    "REGISTRY_SUFFIX",
    "RegistryTracker",
    "RetirementRegistry",
    "TopicFacts",
    "cancel",
    "check_cancel",
    "check_request",
    "check_retire",
    "drain_rows",
    "event_row",
    "export_document",
    "parse_partitions",
    "retire",
    "topic_facts",
]
