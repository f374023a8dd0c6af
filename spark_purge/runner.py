"""The batch runner: a batch's plan rows -> intents -> DeleteRecords -> outcomes, in the audit.

1. write the actionable rows to the Delta audit as **intents**, before any delete;
2. confirm the purger lease (``before_delete``: a fenced job stops here), re-read which topics are
   having tiered storage disabled (``transitions``: a disablement started since the plan means
   the purge leaves that topic alone, outcome ``skipped``, ``TIERING_TRANSITION``), then send
   DeleteRecords batched per leader, leaders in parallel (the client does the batching);
3. write one **outcome** row per planned partition (exactly once per batch: Delta txn ids);
   a tiered partition's outcome also records its local log start offset re-read after the cut.

With partition retirement on, ``retirements`` records a reclaim's intent in the registry after
the audit intents (before any delete) and its result after the outcomes (``spark_purge.retirement``).

The rows themselves come from the pure mapping in ``audit`` (``intent_table``/``outcome_table``),
column by column: a batch's plan stays an Arrow table from ``toArrow`` to the audit's Parquet.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

import pyarrow as pa
from pyspark.sql import Row

from spark_purge.audit import NO_OUTCOME, BatchContext, actionable_rows, intent_table, outcome_table, plan_table
from spark_purge.delta_files import rows_of
from spark_purge.errors import KafkaError
from spark_purge.kafka.model import TIERING_TRANSITION, DeleteOutcome, TopicPartitionKey
from spark_purge.kafka.producers import OpenTransactions

log = logging.getLogger(__name__)


class AuditWriter(Protocol):
    """The audit table as the runner uses it (``audit.AuditSink``)."""

    def ensure_table(self) -> None: ...

    def write(self, rows: Sequence[Row] | pa.Table, kind: str, batch_id: int) -> bool: ...


class RetirementHooks(Protocol):
    """The retirement registry as the runner uses it (``retirement.RegistryTracker``)."""

    def before_deletes(self, plan: Sequence[Row], ctx: BatchContext) -> None: ...

    def after_outcomes(self, plan: Sequence[Row], outcomes: Sequence[Row], ctx: BatchContext) -> None: ...


class PurgeClient(Protocol):
    """What the pipeline needs from Kafka: ``@timestamp`` lookups and deletes (see ``spark_purge.kafka``)."""

    def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> Mapping[TopicPartitionKey, int]: ...

    def delete_records(
        self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int, topic_ids: Mapping[str, str] | None = None
    ) -> Sequence[DeleteOutcome]: ...

    def open_transactions(self, tps: Iterable[TopicPartitionKey]) -> OpenTransactions: ...
    def local_log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]: ...

    def close(self) -> None: ...


@dataclass
class BatchResult:
    """What one batch did, for progress reports (the audit has every row)."""

    batch_id: int
    planned: int = 0
    actionable: int = 0
    deleted: int = 0
    failed: int = 0
    records_deleted: int = 0
    failures: list[str] = field(default_factory=list)

    def count(self, outcomes: pa.Table) -> None:
        """Add up the ``deleted``/``failed`` outcome rows of the batch (``audit.outcome_table``)."""
        columns = (outcomes.column(c).to_pylist() for c in ("status", "records_deleted", "error", "topic", "partition"))
        for status, deleted, error, topic, partition in zip(*columns):
            if status == "deleted":
                self.deleted += 1
                self.records_deleted += deleted or 0
            elif status == "failed":
                self.failed += 1
                reason = "no outcome" if error == NO_OUTCOME else error
                self.failures.append(f"{topic}-{partition}: {reason}")


@dataclass
class BatchRunner:
    """Executes one batch's plan. ``client`` opens (or returns) the Kafka client, lazily: a batch
    with nothing actionable, or a dry run, never connects. ``fault_hook`` is a test hook called
    between steps (``"intents_written"``, ``"lease_checked"``, ``"deletes_sent"``) to simulate a
    crash or a pause."""

    audit: AuditWriter
    client: Callable[[], PurgeClient]
    delete_timeout_ms: int
    fault_hook: Callable[[str, int], None] | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    # Called right before DeleteRecords is sent (the purger lease's confirmation: a fenced job
    # raises ``FencedError`` there and sends nothing).
    before_delete: Callable[[], object] | None = None
    retirements: RetirementHooks | None = None
    # Re-read right before DeleteRecords: topics whose tiered storage is being disabled
    # (``TieringTable.in_transition``); the plan read them once, a disablement may start since.
    transitions: Callable[[], Collection[str]] | None = None

    def run(self, plan: Sequence[Row] | pa.Table, ctx: BatchContext) -> BatchResult:
        """Intents first, then :meth:`execute`. ``plan``: the plan's rows (``ANNOTATED_PLAN``),
        as an Arrow table or ``Row``s."""
        batch = _Batch(plan_table(plan))
        self.audit.ensure_table()
        # 1. intents: persisted before anything is deleted.
        self.audit.write(intent_table(batch.table, ctx), "intent", ctx.batch_id)
        if self.retirements is not None:
            self.retirements.before_deletes(batch.rows(), ctx)
        self._fault("intents_written", ctx.batch_id)
        return self._deletes_and_outcomes(batch, ctx)

    def execute(self, plan: Sequence[Row] | pa.Table, ctx: BatchContext) -> BatchResult:
        """Deletes and outcomes of a plan whose intents are already recorded (a replayed batch
        comes straight here with its recorded intents, re-bounded: ``spark_purge.replay``)."""
        batch = _Batch(plan_table(plan))
        self.audit.ensure_table()
        if self.retirements is not None:  # recorded already unless the batch died before: idempotent
            self.retirements.before_deletes(batch.rows(), ctx)
        return self._deletes_and_outcomes(batch, ctx)

    def _deletes_and_outcomes(self, batch: _Batch, ctx: BatchContext) -> BatchResult:
        plan = batch.table
        result = BatchResult(ctx.batch_id, planned=plan.num_rows)
        acting = actionable_rows(plan)
        result.actionable = acting.num_rows
        topics, partitions, cuts, ids = (acting.column(c).to_pylist() for c in ("topic", "partition", "cutoff", "topic_id"))

        # 2. deletes, batched per leader.
        outcomes: dict[TopicPartitionKey, DeleteOutcome] = {}
        if acting.num_rows and not ctx.dry_run:
            cutoffs = {(t, p): int(c) for t, p, c in zip(topics, partitions, cuts)}
            # The topic ids the plan was made for: a topic recreated since is never cut by name.
            topic_ids = {t: i for t, i in zip(topics, ids) if i is not None}
            # What may take a while comes before the lease check (its Delta read, the client):
            # DeleteRecords' window (at most two thirds of lease.ttl) starts at the check.
            outcomes.update(self._held_by_transitions(cutoffs))
            cutoffs = {tp: c for tp, c in cutoffs.items() if tp not in outcomes}
            client = self.client() if cutoffs else None
            if self.before_delete is not None:
                self.before_delete()
            checked = time.monotonic()
            self._fault("lease_checked", ctx.batch_id)
            if client is not None:
                log.info("batch %d: DeleteRecords for %d partitions", ctx.batch_id, len(cutoffs))
                timeout_ms = max(1, self.delete_timeout_ms - round((time.monotonic() - checked) * 1000))
                for outcome in client.delete_records(cutoffs, timeout_ms=timeout_ms, topic_ids=topic_ids):
                    outcomes[(outcome.topic, outcome.partition)] = outcome
        self._fault("deletes_sent", ctx.batch_id)

        # 3. outcomes: one per planned partition, exactly once per batch.
        tiered = [tp for tp, on in zip(zip(topics, partitions), acting.column("remote_storage_enable").to_pylist()) if on]
        table = outcome_table(plan, outcomes, ctx, executed_at=self.clock(), local_log_starts=self._local_log_starts(tiered, outcomes))
        self.audit.write(table, "outcome", ctx.batch_id)
        if self.retirements is not None:
            self.retirements.after_outcomes(batch.rows(), rows_of(table), ctx)
        result.count(table)
        return result

    def _held_by_transitions(self, cutoffs: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, DeleteOutcome]:
        """Skipped outcomes for the cuts of topics that began DISABLING since the plan."""
        if self.transitions is None:
            return {}
        moving = set(self.transitions())
        held = {tp: c for tp, c in cutoffs.items() if tp[0] in moving}
        for topic in sorted({t for t, _ in held}):
            log.warning("topic %s: tiered storage is being disabled since the plan; not cut in this batch", topic)
        return {
            tp: DeleteOutcome(
                tp[0], tp[1], c, None, None, error=TIERING_TRANSITION,
                error_message="tiered storage began to be disabled on the topic after the plan (spark-purge tiering); not cut",
            )
            for tp, c in held.items()
        }

    def _local_log_starts(
        self, tiered: Sequence[TopicPartitionKey], outcomes: Mapping[TopicPartitionKey, DeleteOutcome]
    ) -> dict[TopicPartitionKey, int]:
        """The actionable ``tiered`` partitions cut successfully: their local log start offset
        now (one ListOffsets per leader; none at all without tiered topics). A failed read
        leaves them null."""
        tiered = [tp for tp in tiered if (o := outcomes.get(tp)) is not None and o.ok]
        if not tiered:
            return {}
        try:
            return dict(self.client().local_log_start_offsets(tiered))
        except KafkaError as exc:
            log.warning("could not re-read the local log start of %d tiered partition(s): %s", len(tiered), exc)
            return {}

    def _fault(self, step: str, batch_id: int) -> None:
        if self.fault_hook is not None:
            self.fault_hook(step, batch_id)


class _Batch:
    """A batch's plan table, and its ``Row``s made once, only if asked (the retirement hooks)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._rows: list[Row] | None = None

    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = rows_of(self.table)
        return self._rows


__all__ = ["AuditWriter", "BatchResult", "BatchRunner", "PurgeClient", "RetirementHooks"]
