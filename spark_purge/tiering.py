"""Disabling tiered storage on a topic: a resumable state machine, persisted intent-first.

    ENABLED ──disable(policy)──> DISABLING(policy) ──Kafka confirms──> DISABLED(policy)

Every step is appended to a Delta table beside the audit (``<audit.path>_tiering``, schema
``schemas.TIERING``) *before* it acts, then driven through Kafka's own configs (KIP-950) and
retried until Kafka confirms:

1. ``copy_disable``: ``remote.log.copy.disable=true`` (no more segments copied to remote
   storage) with ``local.retention.ms=-2`` and ``local.retention.bytes=-2`` (Kafka refuses a
   copy-disabled topic whose local retention is shorter than its retention: the local log must
   keep everything from now on);
2. ``storage_disable`` (policy ``delete`` only): ``remote.storage.enable=false`` with
   ``remote.log.delete.on.disable=true``; the brokers delete the remote segments and move the
   log start offset up to the local log start. (Kafka refuses ``remote.storage.enable=false``
   without ``remote.log.delete.on.disable=true``: ``retain`` keeps tiering on, read-only.)
3. ``confirm``: read back until every partition leader reports the configs and, for
   ``delete``, no partition has offsets left only in remote storage (log start offset = local
   log start offset); then DISABLED.

A job killed anywhere resumes from the newest row: the step recorded is acted again (each is an
idempotent SET) and the machine goes on; it never sets ``remote.storage.enable=true`` and never
changes the recorded policy (asking for another one while DISABLING is refused). While a topic
is DISABLING the purge does not cut it (binding constraint ``tiering_transition``).

Kafka's admin API reports no remote size per partition, so the bytes removed remotely are not
measured. The purge principal needs AlterConfigs (and Describe, DescribeConfigs) on the topic.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Optional, Protocol

from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spark_purge._time import Backoff, Deadline, as_utc
from spark_purge.audit import CheckpointTable, absolute_location
from spark_purge.config import TieringEntry, check_tiering_policy
from spark_purge.errors import ConfigError, KafkaError, TieringRefused, TieringUnconfirmed
from spark_purge.kafka.model import TopicTiering
from spark_purge.kafka.tiering import (
    LOCAL_RETENTION_BYTES,
    LOCAL_RETENTION_MS,
    REMOTE_COPY_DISABLE,
    REMOTE_DELETE_ON_DISABLE,
    REMOTE_STORAGE_ENABLE,
)
from spark_purge.schemas import TIERING, TIERING_DISABLED, TIERING_DISABLING, TIERING_ENABLED
from spark_purge.txn_append import driver_rows

log = logging.getLogger(__name__)

COPY_DISABLE, STORAGE_DISABLE, CONFIRM, DONE = "copy_disable", "storage_disable", "confirm", "done"
STEPS = {"retain": (COPY_DISABLE, CONFIRM), "delete": (COPY_DISABLE, STORAGE_DISABLE, CONFIRM)}
# What each acting step SETs on the topic.
STEP_CONFIGS = {
    COPY_DISABLE: {REMOTE_COPY_DISABLE: "true", LOCAL_RETENTION_MS: "-2", LOCAL_RETENTION_BYTES: "-2"},
    STORAGE_DISABLE: {REMOTE_STORAGE_ENABLE: "false", REMOTE_DELETE_ON_DISABLE: "true"},
}


class TieringKafka(Protocol):
    """What the state machine needs from Kafka (``kafka.KafkaPythonClient``)."""

    def tiering(self, topic: str) -> TopicTiering: ...

    def alter_topic_configs(self, topic: str, values: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class TieringRecord:
    """One row of the tiering table (``schemas.TIERING``)."""

    topic: str
    topic_id: Optional[str]
    state: str
    policy: str
    step: str
    since: datetime
    recorded_at: datetime
    operator: Optional[str] = None
    detail: Optional[str] = None

    def row(self) -> Row:
        return Row(**{f.name: getattr(self, f.name) for f in TIERING.fields})

    @classmethod
    def of(cls, row: Row) -> TieringRecord:
        values = {f.name: row[f.name] for f in TIERING.fields}
        values.update(since=as_utc(row["since"]), recorded_at=as_utc(row["recorded_at"]))  # Spark gives naive UTC
        return cls(**values)


@dataclass(frozen=True)
class TieringTable(CheckpointTable):
    """The state machine's Delta table (append-only; the newest row per topic is its state)."""

    @classmethod
    def beside(cls, spark: SparkSession, audit_path: str) -> TieringTable:
        return cls(spark, absolute_location(audit_path).rstrip("/") + "_tiering")

    def latest(self, topics: Optional[Iterable[str]] = None) -> dict[str, TieringRecord]:
        """The newest record of each topic (of ``topics`` only, when given)."""
        df = self._stored()
        if df is None:
            return {}
        if topics is not None:
            df = df.where(F.col("topic").isin(sorted(set(topics))))
        newest = Window.partitionBy("topic").orderBy(F.col("recorded_at").desc())
        rows = df.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1).drop("_n").collect()
        return {r["topic"]: TieringRecord.of(r) for r in rows}

    def in_transition(self) -> frozenset[str]:
        """Topics whose newest state is DISABLING: the purge leaves them alone."""
        return frozenset(t for t, r in self.latest().items() if r.state == TIERING_DISABLING)

    def append(self, record: TieringRecord) -> None:
        from delta.tables import DeltaTable

        if self.path not in _TABLES_READY:
            DeltaTable.createIfNotExists(self.spark).location(self.path).addColumns(TIERING).execute()
            _TABLES_READY.add(self.path)
        driver_rows(self.spark, [record.row()], TIERING).write.format("delta").mode("append").save(self.path)


_TABLES_READY: set[str] = set()  # tiering tables append() created (or found) in this process


@dataclass
class Disabler:
    """Runs topics to DISABLED through ``kafka``, persisting each step in ``table`` first.

    ``timeout_s`` bounds each step's retries and the wait for Kafka's confirmation (then
    ``TieringUnconfirmed``: the state stays DISABLING and a rerun resumes). ``fault_hook`` is a
    test hook called with the step's name right after it acted (to simulate a crash there).
    """

    kafka: TieringKafka
    table: TieringTable
    operator: Optional[str] = None
    timeout_s: float = 120.0
    fault_hook: Optional[Callable[[str], None]] = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def disable(self, topic: str, policy: str) -> TieringRecord:
        """Disable tiered storage on ``topic`` with ``policy``, or resume its disablement.

        Raises ``ConfigError`` for an unknown policy and ``TieringRefused`` (naming the topic)
        for an unknown topic, a topic without tiered storage, or a disablement already under way
        with the other policy: in each case nothing is recorded or changed.
        """
        check_policy(topic, policy)
        facts = self.kafka.tiering(topic)  # TieringRefused: no such topic
        record = self._current(topic, facts)
        if record is None or (record.state == TIERING_DISABLED and record.policy == "retain" and policy == "delete"):
            record = self._start(facts, policy)
        elif record.policy != policy and record.state == TIERING_DISABLING:
            raise TieringRefused(
                f"topic {topic!r} is already DISABLING with policy {record.policy!r} (since {record.since:%Y-%m-%d %H:%M:%S}): "
                f"its policy is never changed midway; rerun with --policy {record.policy} to resume it"
            )
        elif record.state == TIERING_DISABLED:
            log.info("topic %s: tiered storage already DISABLED (%s) since %s", topic, record.policy, record.since)
            return record
        return self._run(record)

    def resume_all(self) -> list[TieringRecord]:
        """Every topic left DISABLING, run to DISABLED with its recorded policy."""
        pending = [r for r in self.table.latest().values() if r.state == TIERING_DISABLING]
        return [self.disable(r.topic, r.policy) for r in sorted(pending, key=lambda r: r.topic)]

    def apply(self, entries: Iterable[TieringEntry]) -> list[TieringRecord]:
        """The config's ``tiering`` entries, and any disablement left DISABLING, to DISABLED."""
        done = [self.disable(e.topic, e.disable) for e in entries]
        seen = {r.topic for r in done}
        return done + [r for r in self.resume_all() if r.topic not in seen]

    # ---- steps -------------------------------------------------------------------------------
    def _current(self, topic: str, facts: TopicTiering) -> Optional[TieringRecord]:
        """The topic's recorded state, unless it was recorded for an older incarnation."""
        record = self.table.latest([topic]).get(topic)
        if record is not None and record.topic_id is not None and facts.topic_id is not None and record.topic_id != facts.topic_id:
            log.info("topic %s was recreated since its tiering record (%s): starting afresh", topic, record.topic_id)
            return None
        return record

    def _start(self, facts: TopicTiering, policy: str) -> TieringRecord:
        enabled = facts.configs.get(REMOTE_STORAGE_ENABLE)
        if facts.flag(REMOTE_STORAGE_ENABLE) is not True:
            raise TieringRefused(
                f"topic {facts.topic!r} does not have tiered storage enabled "
                f"({REMOTE_STORAGE_ENABLE}={enabled if enabled is not None else 'not agreed by every leader'}): nothing to disable"
            )
        now = self.clock()
        record = TieringRecord(facts.topic, facts.topic_id, TIERING_DISABLING, policy, STEPS[policy][0], now, now, self.operator)
        self.table.append(record)  # persisted before anything acts
        log.info("topic %s: ENABLED -> DISABLING (%s)", facts.topic, policy)
        return record

    def _run(self, record: TieringRecord) -> TieringRecord:
        steps = STEPS[record.policy]
        facts: Optional[TopicTiering] = None
        for step in steps[steps.index(record.step) if record.step in steps else 0 :]:
            if step != record.step:
                record = self._record(record, TIERING_DISABLING, step)
            if step == CONFIRM:
                facts = self._confirm(record)
            else:
                self._act(record.topic, STEP_CONFIGS[step])
            self._fault(step)
        detail = _summary(facts) if facts is not None else None
        record = self._record(replace(record, since=self.clock()), TIERING_DISABLED, DONE, detail)
        log.info("topic %s: DISABLING -> DISABLED (%s): %s", record.topic, record.policy, detail)
        return record

    def _record(self, record: TieringRecord, state: str, step: str, detail: Optional[str] = None) -> TieringRecord:
        new = replace(record, state=state, step=step, recorded_at=self.clock(), operator=self.operator, detail=detail)
        self.table.append(new)
        return new

    def _act(self, topic: str, values: Mapping[str, str]) -> None:
        """SET ``values``, retried while Kafka's error is retriable, until the deadline."""
        deadline, backoff = Deadline(self.timeout_s), Backoff(first=0.5, cap=5.0)
        while True:
            try:
                self.kafka.alter_topic_configs(topic, values)
                return
            except KafkaError as exc:
                if not exc.retriable or deadline.expired():
                    raise
                log.warning("topic %s: %s; retrying", topic, exc)
                self.sleep(backoff.within(deadline))

    def _confirm(self, record: TieringRecord) -> TopicTiering:
        """Read back until Kafka confirms the policy (see ``confirmed``)."""
        deadline, backoff = Deadline(self.timeout_s), Backoff(first=0.5, cap=2.0)
        while True:
            facts = self.kafka.tiering(record.topic)
            missing = confirmed(facts, record.policy)
            if missing is None:
                return facts
            if deadline.expired():
                raise TieringUnconfirmed(
                    f"topic {record.topic!r}: Kafka has not confirmed the {record.policy} disablement after "
                    f"{self.timeout_s:.0f}s ({missing}); state stays DISABLING, run again to resume"
                )
            self.sleep(backoff.within(deadline))

    def _fault(self, step: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(step)


def check_policy(topic: str, policy: str) -> None:
    """``ConfigError`` naming the value unless ``policy`` is ``retain`` or ``delete``."""
    try:
        check_tiering_policy(policy)
    except ConfigError:
        raise ConfigError(f"tiering disable {topic}: --policy: expected 'retain' or 'delete', got {policy!r}") from None


def confirmed(facts: TopicTiering, policy: str) -> Optional[str]:
    """None when Kafka reports ``policy`` done on every leader; else what is still missing.

    ``retain``: copying stopped (``remote.log.copy.disable=true``, or tiering off altogether).
    ``delete``: ``remote.storage.enable=false`` and no partition has offsets left only in remote
    storage (its log start offset is its local log start offset).
    """
    copy_off = facts.flag(REMOTE_COPY_DISABLE) is True or facts.flag(REMOTE_STORAGE_ENABLE) is False
    if policy == "retain":
        return None if copy_off else f"{REMOTE_COPY_DISABLE} not yet true on every leader"
    if facts.flag(REMOTE_STORAGE_ENABLE) is not False:
        return f"{REMOTE_STORAGE_ENABLE} not yet false on every leader"
    unknown = sorted(set(facts.log_start) - set(facts.local_log_start))
    if unknown:
        return f"local log start unknown for partition(s) {unknown}"
    remote = {p: n for p, n in sorted(facts.remote_only.items()) if n > 0}
    if remote:
        return "offsets still only in remote storage: " + ", ".join(f"partition {p}: {n}" for p, n in remote.items())
    return None


def _summary(facts: TopicTiering) -> str:
    starts = ", ".join(f"{p}: {facts.log_start[p]}/{facts.local_log_start.get(p)}" for p in sorted(facts.log_start))
    return (
        f"{REMOTE_STORAGE_ENABLE}={facts.configs.get(REMOTE_STORAGE_ENABLE)}, "
        f"{REMOTE_COPY_DISABLE}={facts.configs.get(REMOTE_COPY_DISABLE)}; log start/local log start per partition: {starts}"
    )


def status_rows(table: TieringTable, entries: Iterable[TieringEntry] = ()) -> list[dict[str, object]]:
    """Each topic's state and since when (config entries not started yet: ENABLED, since -)."""
    latest = table.latest()
    rows: list[dict[str, object]] = [
        {"topic": r.topic, "state": r.state, "policy": r.policy, "step": r.step, "since": r.since, "detail": r.detail}
        for r in latest.values()
    ]
    rows += [
        {"topic": e.topic, "state": TIERING_ENABLED, "policy": e.disable, "step": None, "since": None, "detail": "configured, not started"}
        for e in entries
        if e.topic not in latest
    ]
    return sorted(rows, key=lambda r: str(r["topic"]))


__all__ = ["STEPS", "Disabler", "TieringKafka", "TieringRecord", "TieringTable", "check_policy", "confirmed", "status_rows"]
