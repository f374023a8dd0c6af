"""The Delta audit table: every purge decision, written intent-first and exactly once.

Layout: one append-only Delta table (schema ``schemas.AUDIT``) partitioned by ``event_date``.
Each micro-batch writes at most two commits:

1. **intents** — one row per actionable partition, ``record_type = "intent"``, status
   ``planned``, committed *before* any DeleteRecords leaves the process;
2. **outcomes** — one row per planned partition (actionable or not), ``record_type = "outcome"``,
   status ``deleted`` / ``failed`` / ``dry_run`` / ``skipped``.

Both commits are idempotent per batch through Delta's ``txnAppId``/``txnVersion`` (the batch
id): a batch that Spark re-runs after a crash (foreachBatch is at-least-once) finds its commit
already recorded and Delta skips it, so no row is ever duplicated. The two commits use different
app ids, as Delta requires for two writes to one table in one batch. A write that conflicts
with another writer is retried with a pause (``_time.Backoff``).

``intent_table`` and ``outcome_table`` are the pure mapping from plan rows (``schemas.PLAN``, as
one Arrow table) and DeleteRecords outcomes to audit rows (``AUDIT``'s Arrow table, made column
by column): no Spark job, no Kafka, no clock. ``intent_rows`` and ``outcome_rows`` give the same
as ``Row``s.

Readers: Spark SQL (``SELECT * FROM delta.`<path>```), Databricks, delta-rs and DuckDB.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType
from pyspark.sql.window import Window

from spark_purge import delta_files, txn_append
from spark_purge._time import Backoff
from spark_purge.deltalog import latest_snapshot, table_state, with_own_properties
from spark_purge.detach import cut, drop
from spark_purge.errors import AuditError
from spark_purge.schemas import (
    ANNOTATED_PLAN,
    AUDIT,
    CHECKPOINT_QUERIES,
    LEASE_RECORD,
    PROGRESS_STORE,
    RETIREMENT_CONSTRAINTS,
)

if TYPE_CHECKING:
    from spark_purge.kafka.model import DeleteOutcome, TopicPartitionKey
    from spark_purge.policy.positions import LogFile

log = logging.getLogger(__name__)
_T = TypeVar("_T")  # what a retried Delta write returns

# Delta's Python concurrency exceptions share no base class (DESIGN.md pitfalls): catch a tuple.
try:  # pragma: no cover - import shape depends on delta-spark version
    from delta.exceptions import (
        ConcurrentAppendException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        MetadataChangedException,
        ProtocolChangedException,
    )

    DELTA_CONFLICTS: tuple[type[BaseException], ...] = (
        ConcurrentAppendException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        MetadataChangedException,
        ProtocolChangedException,
    )
except ImportError:  # pragma: no cover
    DELTA_CONFLICTS = ()

BLOCKING_CONSTRAINTS = ("group", "missing_commit", "stale_group", "vanished_group", "external", "group_unreadable")
CONFLICT_ATTEMPTS = 5  # Delta commits tried per audit write before giving up
NO_OUTCOME = "NO_OUTCOME"  # error of a planned delete the client returned nothing for


# ---- plan rows + outcomes -> audit rows (pure) ---------------------------------------------


@dataclass(frozen=True)
class BatchContext:
    """What every audit row of one batch shares."""

    run_id: str
    query_id: str
    batch_id: int
    planned_at: datetime  # the snapshot's time: the batch plans as of it
    dry_run: bool
    config_fingerprint: str
    lease_generation: int | None = None  # the purger lease generation writing (None: no lease)


def plan_table(plan: Sequence[Row] | pa.Table) -> pa.Table:
    """A batch's plan rows as one Arrow table of ``ANNOTATED_PLAN``'s columns (and any other
    the table has): the runner's and this mapping's input. The pipeline hands over the plan as
    ``toArrow`` gave it (with ``pipeline.with_producers``' column); rows (a replay's, the
    tests') are read by name, a missing ``active_producers`` as null."""
    if isinstance(plan, pa.Table):
        if "active_producers" in plan.column_names:
            return plan
        return plan.append_column(pa.field("active_producers", pa.int32()), pa.nulls(plan.num_rows, pa.int32()))
    return delta_files.arrow_table([r.asDict() for r in plan], ANNOTATED_PLAN)


def _audit_table(
    plan: pa.Table,
    ctx: BatchContext,
    record_type: str,
    executed_at: datetime | None,
    status: str | list[str],
    *,
    low_watermark: list[int | None] | None = None,
    records_deleted: list[int | None] | None = None,
    error: list[str | None] | None = None,
    local_log_start: list[int | None] | None = None,
    leader: list[int | None] | None = None,
) -> pa.Table:
    """The audit rows (``AUDIT``'s Arrow table) of ``plan``'s rows, column by column: what all of
    a batch's rows share made once, the plan's columns taken as they are, the outcome's values
    (lists, one per plan row; None: null in every row) (issue 12: a ``Row`` per audit row cost
    about 0.3 s of the driver's time a batch at 10k partitions)."""
    n = plan.num_rows

    def same(name: str, value: Any) -> pa.Array:
        return pa.array([value] * n, _AUDIT_ARROW.field(name).type)

    def each(name: str, values: list[Any] | None) -> pa.Array:
        return pa.array(values if values is not None else [None] * n, _AUDIT_ARROW.field(name).type)

    def planned(name: str, source: str | None = None) -> pa.ChunkedArray:
        return plan.column(source or name).cast(_AUDIT_ARROW.field(name).type)

    stale = plan.column("stale_groups")
    if stale.null_count:  # named either way in a plan; an old row may hold a null
        stale = pa.chunked_array([pa.array([g or [] for g in stale.to_pylist()], stale.type)])
    estimate = None  # intents: nothing deleted yet, no estimate
    if records_deleted is not None:
        size, first, last = (plan.column(c).to_pylist() for c in ("size_bytes", "log_start_offset", "high_watermark"))
        estimate = [reclaimed_estimate(*row) for row in zip(size, records_deleted, first, last)]
    columns = {
        "run_id": same("run_id", ctx.run_id),
        "query_id": same("query_id", ctx.query_id),
        "batch_id": same("batch_id", int(ctx.batch_id)),
        "record_type": same("record_type", record_type),
        "planned_at": same("planned_at", delta_files.utc(ctx.planned_at)),
        "executed_at": same("executed_at", delta_files.utc(executed_at)),
        "snapshot_id": planned("snapshot_id"),
        "topic": planned("topic"),
        "partition": planned("partition"),
        "leader": planned("leader") if leader is None else each("leader", leader),
        "prior_log_start_offset": planned("prior_log_start_offset", "log_start_offset"),
        "high_watermark": planned("high_watermark"),
        "cutoff": planned("cutoff"),
        "low_watermark": each("low_watermark", low_watermark),
        "records_deleted": each("records_deleted", records_deleted),
        "binding_constraint": planned("binding_constraint"),
        "blocking_group": planned("blocking_group"),
        "blocking_group_type": planned("blocking_group_type"),
        "stale_groups": stale.cast(_AUDIT_ARROW.field("stale_groups").type),
        "rule": planned("rule"),
        "status": same("status", status) if isinstance(status, str) else each("status", status),
        "error": each("error", error),
        "dry_run": same("dry_run", ctx.dry_run),
        "remote_storage_enable": planned("remote_storage_enable"),
        "config_fingerprint": same("config_fingerprint", ctx.config_fingerprint),
        "operator": same("operator", None),
        "time_floor_source": planned("time_floor_source"),
        "topic_id": planned("topic_id"),
        "lease_generation": same("lease_generation", ctx.lease_generation),
        "active_producers": planned("active_producers"),
        "size_bytes_before": planned("size_bytes_before", "size_bytes"),
        "bytes_reclaimed_estimate": each("bytes_reclaimed_estimate", estimate),
        "prior_local_log_start_offset": planned("prior_local_log_start_offset", "local_log_start_offset"),
        "local_log_start_offset": each("local_log_start_offset", local_log_start),
        "cuts_remote": planned("cuts_remote"),
        "remote_bytes_removed": same("remote_bytes_removed", None),  # Kafka reports no remote size per partition (see schemas.AUDIT)
        "event_date": same("event_date", _day(ctx.planned_at)),
    }
    return pa.Table.from_arrays([columns[name] for name in _AUDIT_ARROW.names], schema=_AUDIT_ARROW)


# AUDIT as the driver writes it (``delta_files.ARROW_TYPES``).
_AUDIT_ARROW = delta_files.arrow_schema(AUDIT)


@functools.lru_cache(maxsize=16)
def _day(at: datetime) -> str:
    """``at``'s day, yyyy-MM-dd: the audit's partition value (one per batch, asked once a row)."""
    return at.strftime("%Y-%m-%d")


def reclaimed_estimate(size_bytes: int | None, records_deleted: int | None, log_start: int, high_watermark: int) -> int | None:
    """Bytes a delete of ``records_deleted`` records frees, estimated as ``size_bytes`` x
    records deleted / records present (null when the size or the count is unknown).

    Kafka exposes no segment boundaries, so records are taken as equally large. Kafka frees only
    whole segments below the new log start offset, never the active one, and asynchronously (the
    log cleaner's next pass, ``log.retention.check.interval.ms``): the bytes actually freed are
    at most this, and appear as a smaller ``size_bytes_before`` in a later decision.
    """
    if size_bytes is None or records_deleted is None:
        return None
    present = high_watermark - log_start
    if present <= 0 or records_deleted <= 0:
        return 0
    return size_bytes * min(records_deleted, present) // present


def intent_table(plan: Sequence[Row] | pa.Table, ctx: BatchContext) -> pa.Table:
    """One ``planned`` intent per actionable plan row, written before any delete (``AUDIT``'s
    Arrow table)."""
    return _audit_table(actionable_rows(plan_table(plan)), ctx, "intent", None, "planned")


def actionable_rows(plan: pa.Table) -> pa.Table:
    """The rows of a plan table (``plan_table``) that act (``actionable``; null: not)."""
    return plan.filter(pc.fill_null(plan.column("actionable"), False))


def outcome_table(
    plan: Sequence[Row] | pa.Table,
    outcomes: Mapping[TopicPartitionKey, DeleteOutcome],
    ctx: BatchContext,
    executed_at: datetime,
    local_log_starts: Mapping[TopicPartitionKey, int] | None = None,
) -> pa.Table:
    """One outcome per plan row (``AUDIT``'s Arrow table): ``skipped`` (not actionable),
    ``dry_run``, ``deleted`` or ``failed`` (an error, or no outcome at all: never silently
    "deleted"). ``local_log_starts``: tiered partitions' local log start offsets re-read after
    the deletes (the ``deleted`` rows' ``local_log_start_offset``)."""
    table = plan_table(plan)
    starts = local_log_starts or {}
    status: list[str] = []
    low: list[int | None] = []
    deleted: list[int | None] = []
    error: list[str | None] = []
    leader: list[int | None] = []
    local: list[int | None] = []
    keys = ("topic", "partition", "actionable", "log_start_offset", "leader")
    for topic, partition, actionable, log_start, planned_leader in zip(*(table.column(k).to_pylist() for k in keys)):
        tp = (topic, partition)
        outcome = outcomes.get(tp) if actionable and not ctx.dry_run else None
        state, watermark, removed, text, at = _outcome_values(bool(actionable), ctx.dry_run, outcome, log_start)
        status.append(state)
        low.append(watermark)
        deleted.append(removed)
        error.append(text)
        leader.append(planned_leader if at is None else at)
        local.append(starts.get(tp) if state == "deleted" else None)
    return _audit_table(
        table, ctx, "outcome", executed_at, status, low_watermark=low, records_deleted=deleted, error=error,
        local_log_start=local, leader=leader,
    )


def _outcome_values(
    actionable: bool, dry_run: bool, outcome: DeleteOutcome | None, log_start: int
) -> tuple[str, int | None, int, str | None, int | None]:
    """An outcome row's status, low watermark, records deleted (0 when not known), error and
    the leader that answered (None: the planned one)."""
    if not actionable:
        return "skipped", None, 0, None, None
    if dry_run:
        return "dry_run", None, 0, None, None
    if outcome is None:
        return "failed", None, 0, NO_OUTCOME, None
    if outcome.skipped:  # never sent: the topic was recreated or deleted since the plan
        return "skipped", None, 0, f"{str(outcome.error).lower()}: {outcome.error_message}", None
    low = outcome.low_watermark if outcome.low_watermark is not None and outcome.low_watermark >= 0 else None
    deleted = max(0, low - int(log_start)) if low is not None else 0
    if outcome.error:
        text = f"{outcome.error}: {outcome.error_message}" if outcome.error_message else str(outcome.error)
        return "failed", low, deleted, text, outcome.leader
    return "deleted", outcome.low_watermark, deleted, None, outcome.leader


def intent_rows(plan: Sequence[Row] | pa.Table, ctx: BatchContext) -> list[Row]:
    """``intent_table``'s rows as ``Row``s."""
    return delta_files.rows_of(intent_table(plan, ctx))


def outcome_rows(
    plan: Sequence[Row] | pa.Table,
    outcomes: Mapping[TopicPartitionKey, DeleteOutcome],
    ctx: BatchContext,
    executed_at: datetime,
    local_log_starts: Mapping[TopicPartitionKey, int] | None = None,
) -> list[Row]:
    """``outcome_table``'s rows as ``Row``s."""
    return delta_files.rows_of(outcome_table(plan, outcomes, ctx, executed_at, local_log_starts))


def lease_row(
    run_id: str, query_id: str, at: datetime, purger_id: str, generation: int, event: str, holder: str,
    detail: str | None, config_fingerprint: str,
) -> Row:
    """The audit row a new lease generation writes first (``spark_purge.lease``): record_type
    and binding_constraint ``lease``, status ``acquired`` or ``takeover``, ``operator`` the
    holder, ``error`` what was taken over, ``snapshot_id`` ``lease:<purger id>``; no partition
    (topic ``""``, partition and log offsets -1)."""
    values: dict[str, Any] = dict(
        run_id=run_id, query_id=query_id, batch_id=-1, record_type=LEASE_RECORD, planned_at=at, executed_at=at,
        snapshot_id=f"{LEASE_RECORD}:{purger_id}", topic="", partition=-1, prior_log_start_offset=-1, high_watermark=-1,
        binding_constraint=LEASE_RECORD, stale_groups=[], status=event, error=detail, dry_run=False,
        config_fingerprint=config_fingerprint, operator=holder, lease_generation=generation, event_date=at.strftime("%Y-%m-%d"),
    )
    return Row(**{f.name: values.get(f.name) for f in AUDIT.fields})  # every other column: null


FORGET = "forget"  # record_type (and binding_constraint) of an operator's forget-group
FORGOTTEN = "forgotten"  # its status


def forget_rows(
    forgotten: Sequence[Row], run_id: str, query_id: str, at: datetime, operator: str | None, config_fingerprint: str
) -> list[Row]:
    """One audit row per forgotten progress key (``PROGRESS_STORE`` rows): ``record_type``
    ``forget``, status ``forgotten``, ``blocking_group`` the group, ``cutoff`` the position it
    held, ``operator`` who did it (user@host). Log offsets are unknown here: -1."""
    out = []
    for r in forgotten:
        values: dict[str, Any] = dict(
            run_id=run_id,
            query_id=query_id,
            batch_id=-1,
            record_type=FORGET,
            planned_at=at,
            executed_at=at,
            snapshot_id=f"{FORGET}:{run_id}",
            topic=r["topic"],
            partition=r["partition"],
            leader=None,
            prior_log_start_offset=-1,
            high_watermark=-1,
            cutoff=r["committed_offset"],
            low_watermark=None,
            records_deleted=None,
            binding_constraint=FORGET,
            blocking_group=r["group_id"],
            blocking_group_type=r["group_type"],
            stale_groups=[],
            rule=None,
            status=FORGOTTEN,
            error=None,
            dry_run=False,
            remote_storage_enable=None,
            config_fingerprint=config_fingerprint,
            operator=operator,
            event_date=at.strftime("%Y-%m-%d"),
        )
        out.append(Row(**{f.name: values.get(f.name) for f in AUDIT.fields}))  # every other column: null
    return out


def absolute_location(path: str) -> str:
    """``path`` unchanged when it has a scheme (s3a://, dbfs:/, file:/), else made absolute."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
        return path
    return os.path.abspath(path)


# (location, table name) pairs ensure_table() already created or found in this process.
_AUDIT_TABLES_READY: set[tuple[str, str | None]] = set()


@dataclass(frozen=True)
class AuditSink:
    """Appends audit rows to the Delta table at ``path``, exactly once per (kind, batch)."""

    spark: SparkSession
    path: str
    # Stable across restarts of the same purge job (derived from its checkpoint): the key
    # Delta uses to remember which batches were already written.
    app_id: str
    # Also register the table in the catalog under this name (audit.table_name), if given.
    table_name: str | None = None
    # Pause between conflicting commits (a test may pass a recorder).
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Delta's table builder rejects relative locations; a local path is made absolute.
        object.__setattr__(self, "path", absolute_location(self.path))

    def ensure_table(self) -> None:
        """Create the table (partitioned by event_date) if it does not exist yet (once per
        process and location: every batch calls this, and the builder reads the table's log)."""
        from delta.tables import DeltaTable

        if (self.path, self.table_name) in _AUDIT_TABLES_READY and DeltaTable.isDeltaTable(self.spark, self.path):
            return
        try:
            (
                with_own_properties(DeltaTable.createIfNotExists(self.spark))
                .location(self.path)
                .addColumns(AUDIT)
                .partitionedBy("event_date")
                .property("delta.appendOnly", "true")
                .execute()
            )
            if self.table_name:
                self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.table_name} USING DELTA LOCATION '{self.path}'")
            _AUDIT_TABLES_READY.add((self.path, self.table_name))
        except Exception as exc:  # Py4J errors carry the JVM message; keep it
            raise AuditError(f"cannot create the audit table at {self.path}: {exc}") from exc

    def write(self, rows: Sequence[Row] | pa.Table | DataFrame, kind: str, batch_id: int, txn: tuple[str, int] | None = None) -> bool:
        """Append ``rows`` (``AUDIT``'s: ``Row``s, an Arrow table such as ``intent_table`` makes,
        or a DataFrame) as the ``kind`` commit of ``batch_id``; a replay is skipped by Delta.

        ``txn`` replaces the (app id, version) Delta dedupes on — ``(<query id>:<kind>,
        batch_id)`` by default; a purger lease passes its own (``spark_purge.lease``), under
        which Delta skips the write of a generation the audit has seen superseded.
        Returns False when there was nothing to write.
        """
        if kind not in ("intent", "outcome", "forget", LEASE_RECORD):
            raise ValueError(f"audit write kind must be 'intent', 'outcome', 'forget' or 'lease', got {kind!r}")
        app_id, version = txn if txn is not None else (f"{self.app_id}:{kind}", batch_id)
        if isinstance(rows, pa.Table):
            if not rows.num_rows:
                return False
            df: DataFrame | txn_append.DriverRows = txn_append.DriverRows(rows, AUDIT)
        elif isinstance(rows, DataFrame):
            df = rows
        elif not rows:
            return False
        else:
            df = txn_append.DriverRows(list(rows), AUDIT)
        backoff = Backoff(first=0.2, cap=2.0)
        attempt = 0
        while True:
            attempt += 1
            try:
                # mergeSchema: tables written before a column was added; the user metadata:
                # DESCRIBE HISTORY shows the order.
                txn_append.append(self.spark, self.path, df, app_id, version, f"{kind}:{batch_id}", merge_schema=True)
                return True
            except DELTA_CONFLICTS as exc:  # another writer appended at the same time: retry
                if attempt >= CONFLICT_ATTEMPTS:
                    raise AuditError(f"audit {kind} write for batch {batch_id} kept conflicting: {exc}") from exc
                pause = backoff.next()
                log.warning("audit %s write for batch %d conflicted (%s); retrying in %.1fs", kind, batch_id, exc, pause)
                self.sleep(pause)

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def recorded(self, batch_id: int) -> RecordedBatch:
        """What this query (``app_id``) already recorded for ``batch_id``: its intents and
        whether its outcomes are in (one Delta commit each, so all or none)."""
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.path):
            return RecordedBatch([], False)
        rows = (
            self.read()
            .where((F.col("query_id") == self.app_id) & (F.col("batch_id") == batch_id))
            .where(F.col("record_type").isin("intent", "outcome"))
            .orderBy("topic", "partition")
            .collect()
        )
        return RecordedBatch([r for r in rows if r["record_type"] == "intent"], any(r["record_type"] == "outcome" for r in rows))


@dataclass(frozen=True)
class RecordedBatch:
    """A batch as the audit has it (``AuditSink.recorded``)."""

    intents: list[Row]
    has_outcomes: bool


@dataclass(frozen=True)
class CheckpointRegistry:
    """Which streaming query ids each checkpoint location has held (``schemas.CHECKPOINT_QUERIES``,
    a Delta table beside the audit: ``<audit.path>_checkpoints``). A checkpoint removed or reset
    starts a new query id; finding its location registered under another id is how the
    pipeline refuses to run there (``pipeline.check_checkpoint``)."""

    spark: SparkSession
    path: str

    @classmethod
    def beside(cls, spark: SparkSession, audit_path: str) -> CheckpointRegistry:
        return cls(spark, absolute_location(audit_path).rstrip("/") + "_checkpoints")

    def query_ids(self, location: str) -> list[str]:
        """The query ids registered for ``location`` (a qualified URI), oldest first."""
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.path):
            return []
        rows = (
            self.spark.read.format("delta").load(self.path)
            .where(F.col("checkpoint_location") == location)
            .orderBy("registered_at")
            .select("query_id")
            .collect()
        )
        return list(dict.fromkeys(str(r["query_id"]) for r in rows))

    def register(self, location: str, query_id: str, query_name: str | None, at: datetime) -> None:
        """Record that ``location`` holds ``query_id`` (a blind append: never conflicts)."""
        try:
            (
                txn_append.driver_rows(self.spark, [(location, query_id, query_name, at)], CHECKPOINT_QUERIES)
                .write.format("delta").mode("append").save(self.path)
            )
        except Exception as exc:
            raise AuditError(f"cannot register checkpoint {location} in {self.path}: {exc}") from exc


# ---- queries an operator or auditor runs (also exposed by `spark-purge audit`) ------------


def with_audit_columns(audit: DataFrame) -> DataFrame:
    """``audit`` with every ``AUDIT`` column: those a table written before lacks, as nulls."""
    missing = [f for f in AUDIT.fields if f.name not in audit.columns]
    return audit.select("*", *[F.lit(None).cast(f.dataType).alias(f.name) for f in missing]) if missing else audit


def deleted_per_topic_per_day(audit: DataFrame) -> DataFrame:
    """Records deleted and bytes reclaimed (estimated) per topic per day (outcomes with status
    deleted); ``bytes_reclaimed_est`` is null where no size was known."""
    return (
        with_audit_columns(audit)
        .where((F.col("record_type") == "outcome") & (F.col("status") == "deleted"))
        .groupBy("event_date", "topic")
        .agg(
            F.sum("records_deleted").alias("records_deleted"),
            F.sum("bytes_reclaimed_estimate").alias("bytes_reclaimed_est"),
            F.countDistinct("partition").alias("partitions"),
            F.count(F.lit(1)).alias("deletes"),
        )
        .orderBy("event_date", "topic")
    )


def reclaimed_over_time(audit: DataFrame) -> DataFrame:
    """Every delete in time order (topic, executed_at, records_deleted, bytes_reclaimed_estimate):
    the series ``spark-purge audit --plot`` draws."""
    return (
        with_audit_columns(audit)
        .where((F.col("record_type") == "outcome") & (F.col("status") == "deleted"))
        .select("topic", "executed_at", "records_deleted", "bytes_reclaimed_estimate")
        .orderBy("executed_at", "topic")
    )


def measured_sizes(audit: DataFrame) -> DataFrame:
    """Each delete beside the size a later decision measured on the same partition (the next
    outcome's ``size_bytes_before``): ``bytes_measured_drop`` = size before - size after, which
    also counts records appended meanwhile (so it can be lower, even negative, on a busy topic)
    and is null until a later cycle has run."""
    w = Window.partitionBy("topic", "partition").orderBy("planned_at", "batch_id")
    outcomes = with_audit_columns(audit).where(F.col("record_type") == "outcome")
    return (
        outcomes.withColumn("size_bytes_after", F.lead("size_bytes_before").over(w))
        .where(F.col("status") == "deleted")
        .select(
            "topic", "partition", "executed_at", "records_deleted", "size_bytes_before", "bytes_reclaimed_estimate",
            "size_bytes_after", (F.col("size_bytes_before") - F.col("size_bytes_after")).alias("bytes_measured_drop"),
        )
        .orderBy("executed_at", "topic", "partition")
    )


def latest_outcomes(audit: DataFrame) -> DataFrame:
    """Each partition's most recent outcome row."""
    w = Window.partitionBy("topic", "partition").orderBy(F.col("planned_at").desc(), F.col("batch_id").desc())
    return (
        audit.where(F.col("record_type") == "outcome")
        .withColumn("_rank", F.row_number().over(w))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )


def held_bytes(records: Column) -> Column:
    """Bytes of ``records`` of a partition, pro rata of its size (null when the size is unknown)."""
    present = F.col("high_watermark") - F.col("prior_log_start_offset")
    return F.when(present > 0, (F.col("size_bytes_before") * F.least(records, present) / present).cast("long")).otherwise(F.lit(0))


def held_back_ranking(audit: DataFrame) -> DataFrame:
    """Who holds the most back now: ``blocked_now`` summed per (binding constraint, group),
    largest first (records, bytes, partitions)."""
    return (
        blocked_now(audit)
        .groupBy("blocking_group", "binding_constraint")
        .agg(F.sum("records_held").alias("records_held"), F.sum("bytes_held").alias("bytes_held"), F.count(F.lit(1)).alias("partitions"))
        .orderBy(F.col("records_held").desc(), "blocking_group")
    )


def blocked_now(audit: DataFrame) -> DataFrame:
    """Partitions whose latest decision was held back by a consumer group (a retiring one too), by
    which, and how much it holds back (records, and bytes pro rata of the partition's size)."""
    return (
        latest_outcomes(with_audit_columns(audit))
        .withColumn(
            "records_held",
            F.col("high_watermark") - F.greatest(F.coalesce("low_watermark", "prior_log_start_offset"), F.coalesce("cutoff", F.lit(0))),
        )
        .withColumn("bytes_held", held_bytes(F.col("records_held")))
        # A group that has read everything binds at the high watermark but holds nothing back.
        .where(
            (
                F.col("binding_constraint").isin(*BLOCKING_CONSTRAINTS)
                | (F.col("binding_constraint").isin(*RETIREMENT_CONSTRAINTS) & F.col("blocking_group").isNotNull())
            )
            & (F.col("records_held") > 0)
        )
        .select(
            "topic",
            "partition",
            "binding_constraint",
            "blocking_group",
            "records_held",
            "bytes_held",
            "stale_groups",
            "cutoff",
            "high_watermark",
            "planned_at",
        )
        .orderBy("topic", "partition")
    )


def errors(audit: DataFrame) -> DataFrame:
    """Every failed partition outcome, newest first."""
    return (
        audit.where((F.col("record_type") == "outcome") & (F.col("status") == "failed"))
        .select("planned_at", "run_id", "batch_id", "topic", "partition", "leader", "cutoff", "error")
        .orderBy(F.col("planned_at").desc(), "topic", "partition")
    )


# ---- group progress: every position the purge has seen, and when it last moved ---------------

PROGRESS_KEY = ("group_id", "topic", "partition")
_PROGRESS_ADDED = ("group_type", "topic_id")  # string columns added to the table after its first version
_PROGRESS_TABLES_READY: set[str] = set()  # paths ensure_table() already created/migrated in this process
COMPACT_EVERY = 100  # batches between compactions of the progress table's small files
LOG_FACTOR = 3  # the progress log is pruned once it holds more rows than this many per key
PROGRESS_LOG = StructType(list(PROGRESS_STORE.fields) + [StructField("batch_id", LongType(), True)])
# The progress table's own properties, set on a table written before them too (``ensure_table``):
# no per-column statistics in its files (each keeps its row count). The table is always read
# whole (its newest row a key), so they skip nothing, and collecting them is a quarter of an
# append's time (500,000 rows: 0.85 -> 0.63 s median, ``bench/progress_append_bench.py``).
PROGRESS_PROPERTIES = {"delta.dataSkippingNumIndexedCols": "0"}


@dataclass
class _LogSize:
    """Rows and keys of a progress log, as this process last knew them."""

    rows: int
    keys: int

    def over(self, appended: int = 0) -> bool:
        """Whether ``appended`` more rows take the log past ``LOG_FACTOR`` rows a key (a prune due)."""
        return self.rows + appended > LOG_FACTOR * max(self.keys, 1)


# Progress appends of this process by the way they went: a file the store match's task made,
# committed as it is, or Spark's writer (the tests and the benches read them).
PROGRESS_APPENDS = {"file": 0, "writer": 0, "rewrite file": 0, "rewrite writer": 0}


def _rewrite_files(log_file: LogFile | None) -> list[tuple[bytes, int]] | None:
    """The files (bytes, rows) of a rewrite of the log from the match's task (its changed
    positions and the rest), or None when it made none for this rewrite."""
    if log_file is None or log_file.rest is None or log_file.rest_rows is None:
        return None
    if log_file.rows and log_file.body is None:
        return None
    return [(body, rows) for body, rows in ((log_file.body, log_file.rows), (log_file.rest, log_file.rest_rows)) if rows and body]


_PROGRESS_LOG_SIZE: dict[str, _LogSize] = {}  # path -> the log's size, kept by _tidy(), prune() and _rewrite()


@dataclass(frozen=True)
class _KnownState:
    """A progress store's rows as this process recorded them (``ProgressStore.record``), and the
    table state (Delta table id, version) they are the store at."""

    table: tuple[str, int]
    held: DataFrame  # ``Positions.after`` rows (flat or nested), cut and held (``detach.cut``): drop to free them
    rows: Callable[[], DataFrame]  # makes their ``PROGRESS_STORE`` columns (only ``read`` needs them)
    nested: DataFrame | None = None  # them nested by partition (``positions.NESTED_STORE``, or packed), when recorded so


_PROGRESS_STATE: dict[str, _KnownState] = {}  # path -> the store's rows this process wrote last
_PROGRESS_READ: dict[str, tuple[str, int] | None] = {}  # path -> the table state the last read() answered at


@dataclass(frozen=True)
class CheckpointTable:
    """A Delta table the job keeps beside its checkpoint (the progress store, the append
    history): its absolute location, whether a batch wrote it yet, and its rows."""

    spark: SparkSession
    path: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", absolute_location(self.path))

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, self.path))

    def _stored(self) -> DataFrame | None:
        """The table as stored, or None before the first batch wrote it."""
        return self.spark.read.format("delta").load(self.path) if self.exists() else None

    @staticmethod
    def _with_strings(df: DataFrame, added: Sequence[str]) -> DataFrame:
        """``df`` with a null string column for each of ``added`` it lacks (rows written
        before those columns existed)."""
        for name in added:
            if name not in df.columns:
                df = df.withColumn(name, F.lit(None).cast("string"))
        return df

    def _add_strings(self, added: Sequence[str]) -> list[str]:
        """Add each of ``added`` the stored table lacks as a string column; returns the
        table's columns as they were before."""
        columns = self.spark.read.format("delta").load(self.path).columns
        for name in added:
            if name not in columns:
                self.spark.sql(f"ALTER TABLE delta.`{self.path}` ADD COLUMNS ({name} STRING)")
        return columns


@dataclass(frozen=True)
class ProgressStore(CheckpointTable):
    """A Delta table (``schemas.PROGRESS_STORE``) of every (group, topic, partition) position the
    purge has seen (>= 0), the group's type, and when the position last changed.

    Kept as a log: each batch **appends** only its new or changed keys (``Positions.changed``
    gives their final values), tagged with the batch id; a key's newest row (highest batch id)
    is its position (``read``). No row is rewritten per batch. Once the log holds more than
    ``LOG_FACTOR`` times as many rows as it has keys, the superseded rows are deleted: by the
    batch whose append makes that due, when it knows the store's rows after it (``record``, the
    table not moved since its read), by rewriting the log as those rows in one commit that
    conflicts with any other commit since that read (no read of the log: issue 12); otherwise by
    one MERGE, which never touches a key's newest row, so an operator's concurrent ``forget``
    stays forgotten either way. Every ``COMPACT_EVERY`` batches the small files are compacted
    (not in a batch that rewrote the log: it left only its own files).
    **No key is ever dropped** because its group is gone from a snapshot — a group whose
    offsets Kafka expired keeps holding its last seen position (see ``spark_purge.vanished``).
    Only an operator removes keys (``forget``). Re-running a batch's update is harmless: the
    same positions find their keys already at those offsets and nothing is appended.

    A batch that records through ``record`` leaves its process the store's rows as they are after
    its append, held (issue 12): the next ``read`` answers with them, with no Delta read and no
    reduction of the log, as long as the table is still at the version that append made
    (or that append and the prune right after it, which changes no key's newest row), checked
    by the table's version (``deltalog.table_state``, no Spark job). Any other commit (an
    operator's ``forget``, another process, a compaction) moves the version past them, and the
    next ``read`` reads the table again.

    In a batch of the nested match (``NestedPositions``, given the batch id), the match's own
    task writes the appended rows as a Parquet file, and when the store told it the log is due a
    rewrite (``rewrite_above``), the log's other rows too: ``record`` commits those files as
    they are (``txn_append.append_file``, ``rewrite_files``), with no Spark write job. A table
    they do not fit (per-column statistics, partitions, other columns, a later Delta writer
    feature), or a batch whose task made none, is written by Spark's writer as before.
    """

    app_id: str
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def read(self) -> DataFrame:
        """The store: each key's newest row (``PROGRESS_STORE`` columns; empty when there is no
        table yet); the rows this process recorded last when the table has not moved since."""
        return self._read(self._read_state())

    def _read_state(self) -> tuple[str, int] | None:
        """The table's state now, remembered as the state the read answers at."""
        state = _PROGRESS_READ[self.path] = table_state(self.spark, self.path)
        return state

    def _read(self, state: tuple[str, int] | None) -> DataFrame:
        """``read()`` with the table at ``state`` (``_read_state``)."""
        known = _PROGRESS_STATE.get(self.path)
        if known is not None and known.table == state:
            return known.rows()
        self._forget_known()  # the table moved past them (or they were never kept)
        df = self._stored()
        if df is None:
            return self.spark.createDataFrame([], PROGRESS_STORE)
        df = self._with_strings(df, _PROGRESS_ADDED)  # a table written before these columns existed
        if "batch_id" not in df.columns:  # a table written before it was a log: one row per key
            return df.select(*PROGRESS_STORE.fieldNames())
        values = [c for c in PROGRESS_STORE.fieldNames() if c not in PROGRESS_KEY]
        newest = F.max_by(F.struct(*values), F.struct(F.coalesce(F.col("batch_id"), F.lit(-1)), F.col("last_progress_time")))
        return df.groupBy(*PROGRESS_KEY).agg(newest.alias("v")).select(*PROGRESS_KEY, *[F.col(f"v.{c}").alias(c) for c in values])

    def read_if_exists(self) -> DataFrame | None:
        """``read()``, or None before the first batch wrote the table (nothing remembered yet:
        the planner then adds no vanished rows and treats no group as stale, as with an empty store)."""
        return self.read() if self.exists() else None

    def read_nested(self) -> DataFrame:
        """``read()`` nested by partition (``positions.NESTED_STORE``): the rows this process
        recorded last, held so (packed, as the match gave them: ``positions.PACKED_STORE``),
        when the table has not moved since (no Spark job); otherwise
        the table's rows nested (one shuffle, in the job that reads them)."""
        from spark_purge.policy.positions import nest_store

        state = self._read_state()
        known = _PROGRESS_STATE.get(self.path)
        if known is not None and known.table == state and known.nested is not None:
            return known.nested
        return nest_store(self._read(state))

    def read_nested_if_exists(self) -> DataFrame | None:
        """``read_nested()``, or None before the first batch wrote the table (``read_if_exists``)."""
        return self.read_nested() if self.exists() else None

    def ensure_table(self) -> None:
        """Create the table if needed; add ``group_type`` / ``topic_id`` / ``batch_id`` to a table
        written before they existed."""
        from delta.tables import DeltaTable

        if self.path in _PROGRESS_TABLES_READY and self.exists():
            return
        try:
            builder = with_own_properties(DeltaTable.createIfNotExists(self.spark)).location(self.path).addColumns(PROGRESS_LOG)
            for key, value in PROGRESS_PROPERTIES.items():
                builder = builder.property(key, value)
            builder.execute()
            columns = self._add_strings(_PROGRESS_ADDED)
            if "batch_id" not in columns:
                self.spark.sql(f"ALTER TABLE delta.`{self.path}` ADD COLUMNS (batch_id BIGINT)")
            self._set_properties()
            _PROGRESS_TABLES_READY.add(self.path)
        except Exception as exc:
            raise AuditError(f"cannot create the group progress table at {self.path}: {exc}") from exc

    def _set_properties(self) -> None:
        """Give a table written before ``PROGRESS_PROPERTIES`` those it lacks (one commit, once)."""
        configuration = latest_snapshot(self.spark, self.path).metadata().configuration()

        def value(key: str) -> str | None:
            found = configuration.get(key)  # a Scala Option
            return str(found.get()) if found.isDefined() else None

        missing = {k: v for k, v in PROGRESS_PROPERTIES.items() if value(k) != v}
        if missing:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(missing.items()))
            self.spark.sql(f"ALTER TABLE delta.`{self.path}` SET TBLPROPERTIES ({pairs})")

    def update(self, groups: DataFrame, now: datetime, batch_id: int, partitions: DataFrame | None = None) -> None:
        """Record the positions of a snapshot's group rows (``GROUP_OFFSETS``) in the store
        (``record``: the new or moved ones appended).

        Rows with ``committed_offset < 0`` (a member holding a partition without a position)
        are not positions and are never stored. ``partitions`` (the snapshot's
        ``PARTITION_STATE``) gives each position its topic's id; a position seen on a new
        incarnation of a topic replaces the old one's. Nothing is collected to the driver.
        """

        from spark_purge.policy.positions import Positions

        self.ensure_table()
        positions = Positions.match(partitions, groups, self.read())
        try:
            after = cut(positions.after(now), serialized=True)
            positions.release()  # nothing held reads the store while it is written
            self.record(after, batch_id)
        finally:
            positions.release()

    def record(self, after: DataFrame, batch_id: int, holder: DataFrame | None = None, log_file: LogFile | None = None) -> None:
        """Record batch ``batch_id``'s positions: ``after`` is ``Positions.after`` of the
        positions matched with this store's last ``read``, or ``NestedPositions.after`` of them
        nested (``read_nested``), cut from their lineage (``detach.cut``); the store takes them
        over. Its ``changed`` keys are appended (``apply``); the rows become what ``read`` (and
        ``read_nested``) answers next when nothing but that append and the prune right after it
        moved the table since the read (otherwise they are dropped, and the table is read).
        ``holder``: the held rows ``after`` reads (``NestedPositions.hand_over``), dropped in its
        place; None: ``after`` is held itself. ``log_file``: the changed positions as the match's
        task wrote them (``NestedPositions.log_file``; with the others too when the log is due a
        rewrite): batch ``batch_id``'s append or rewrite commits those files, with no Spark job,
        where the table allows (``txn_append.append_file``, ``rewrite_files``)."""
        from spark_purge.policy.positions import CHANGED, flat_store, is_nested

        held = after if holder is None else holder
        if log_file is not None and log_file.batch_id != batch_id:
            log_file = None  # made for another batch id (a replay planned under its own): not these rows
        read_at = _PROGRESS_READ.get(self.path)
        self._forget_known()
        kept = False
        try:
            self.ensure_table()
            before = table_state(self.spark, self.path)
            nested = after if is_nested(after) else None
            changed: Callable[[], DataFrame]
            everything: Callable[[], DataFrame]
            if nested is not None:
                # Nested by partition, each with its count of changed positions: the count is a
                # sum over O(partitions) rows, and only the changed positions are made flat.
                # Made flat only when read: the match's files need neither (a DataFrame's
                # Py4J calls, about 0.03 s each, issue 12).
                changed = functools.partial(flat_store, nested, changed_only=True)
                everything = functools.partial(flat_store, nested)
                if log_file is not None:
                    rows = log_file.rows
                else:
                    total = nested.agg(F.sum("changed")).first()
                    rows = int(total[0] or 0) if total is not None else 0
            else:
                log_file = None  # a file is of a nested match's rows only
                changed_rows = after.where(F.col(CHANGED)).select(*PROGRESS_STORE.fieldNames())
                flat = after.select(*PROGRESS_STORE.fieldNames())
                changed, everything = (lambda: changed_rows), (lambda: flat)
                rows = changed_rows.count()
            # The table's state when ``after`` was made from it, if it has not moved since (None: it has).
            unmoved = before if before is not None and before == read_at else None
            commits: int | None
            if unmoved is not None and self._prune_due(rows) and self._rewrite(everything, batch_id, unmoved[1], log_file):
                # The log rewritten as ``after``: its append and prune in one commit (and no
                # compaction this batch: the table is left with the rewrite's files only).
                commits = 1
            else:
                self._append(changed, batch_id, rows, log_file)
                # A prune changes no key's newest row: the rows still answer when the table moved
                # by exactly this call's own commits since the read (any other commit adds to the count).
                tidied = self._tidy(batch_id, rows)
                commits = None if tidied is None else (1 if rows else 0) + tidied
            now = table_state(self.spark, self.path)
            if commits is not None and unmoved is not None and now == (unmoved[0], unmoved[1] + commits):
                _PROGRESS_STATE[self.path] = _KnownState(now, held, everything, nested)
                kept = True
        finally:
            if not kept:
                drop(held)

    def _forget_known(self) -> None:
        known = _PROGRESS_STATE.pop(self.path, None)
        if known is not None:
            drop(known.held)

    def apply(self, changed: DataFrame, batch_id: int) -> None:
        """Append ``changed`` (``Positions.changed``: new or changed keys only, with their final
        values) as batch ``batch_id``'s rows; nothing when it is empty (in a steady state, no
        Delta commit per batch). Then prune superseded rows when the log has grown past
        ``LOG_FACTOR`` rows per key, and compact small files every ``COMPACT_EVERY`` batches."""
        self.ensure_table()
        self._tidy(batch_id, self._append(lambda: changed, batch_id, changed.count()))

    def _append(self, changed: Callable[[], DataFrame], batch_id: int, rows: int, log_file: LogFile | None = None) -> int:
        """Append the ``rows`` rows ``changed()`` makes (called only when Spark's writer writes
        them) as batch ``batch_id``'s rows (no commit when there are none); how many.
        ``log_file``: the same rows as a file made already (``NestedPositions.log_file``),
        committed as it is where the table allows (``txn_append.append_file``), else written by
        Spark's writer."""
        body = None if log_file is None else log_file.body
        if rows and body is not None:
            done = self._retry(
                f"progress append for batch {batch_id}",
                lambda: txn_append.append_file(self.spark, self.path, body, rows, PROGRESS_LOG),
            )
            if done:
                PROGRESS_APPENDS["file"] += 1
                return rows
        if rows:
            PROGRESS_APPENDS["writer"] += 1
            frame = changed()
            self._retry(
                f"progress append for batch {batch_id}",
                lambda: stamped(frame.select(*PROGRESS_STORE.fieldNames()), batch_id)
                .write.format("delta").mode("append").save(self.path),
            )
        return rows

    def _tidy(self, batch_id: int, appended: int) -> int | None:
        """Prune the log when ``appended`` more rows took it past ``LOG_FACTOR`` rows a key, and
        compact it every ``COMPACT_EVERY`` batches. Returns how many commits this made, when that
        is sure (nothing done: 0; a prune that deleted rows: its MERGE's one commit), else None
        (a compaction, or a prune that deleted nothing, may or may not have committed)."""
        commits: int | None = 0
        if appended:
            size = _PROGRESS_LOG_SIZE.get(self.path)
            if size is None:  # the first append of this process: count the log once
                size = _PROGRESS_LOG_SIZE[self.path] = self._log_size()
            else:
                size.rows += appended
            if size.over():
                deleted = self.prune(batch_id)
                commits = 1 if deleted else None
        if batch_id % COMPACT_EVERY == COMPACT_EVERY - 1:
            self.compact()
            commits = None
        return commits

    def rewrite_above(self) -> int | None:
        """How many rows an append may add before the log is due a rewrite (``_prune_due``: more
        than this; it may be below 0), as far as this process knows the log's size (None: not
        yet)."""
        size = _PROGRESS_LOG_SIZE.get(self.path)
        return None if size is None else LOG_FACTOR * max(size.keys, 1) - size.rows

    def _prune_due(self, appended: int) -> bool:
        """Whether appending ``appended`` rows takes the log past ``LOG_FACTOR`` rows a key, as
        far as this process knows its size (not yet: False; ``_tidy`` counts it after the
        process's first append)."""
        size = _PROGRESS_LOG_SIZE.get(self.path)
        return bool(appended) and size is not None and size.over(appended)

    def _rewrite(self, after: Callable[[], DataFrame], batch_id: int, version: int, log_file: LogFile | None = None) -> bool:
        """Replace the log with ``after()`` (every key's values once this batch is recorded, the
        store at ``version`` plus its changes; made only when Spark's writer writes them), one
        row a key, as batch ``batch_id``'s rows: the
        append and the prune it makes due in one commit, with no read of the log (a prune's
        MERGE reads it all and joins it with its newest rows). Only while the table is at
        ``version``; False when not done (another commit since, or Delta's direct path not
        available: ``txn_append.rewrite``): the caller appends and prunes instead. ``log_file``:
        the same rows as files made already (``NestedPositions.log_file`` with its ``rest``),
        committed as they are where the table allows (``txn_append.rewrite_files``)."""
        files = _rewrite_files(log_file)
        try:
            way, written = "rewrite file", None if files is None else txn_append.rewrite_files(self.spark, self.path, files, PROGRESS_LOG, version)
            if written is None:
                way, written = "rewrite writer", txn_append.rewrite(self.spark, self.path, stamped(after().select(*PROGRESS_STORE.fieldNames()), batch_id), version)
        except DELTA_CONFLICTS as exc:
            log.info("progress log at %s moved under its rewrite at batch %d (%s); appending instead", self.path, batch_id, type(exc).__name__)
            return False
        if written is None:
            return False
        PROGRESS_APPENDS[way] += 1
        _PROGRESS_LOG_SIZE[self.path] = _LogSize(rows=written, keys=written)
        return True

    def _log_size(self) -> _LogSize:
        stored = self._stored()
        if stored is None:
            return _LogSize(0, 0)
        return _LogSize(rows=stored.count(), keys=stored.select(*PROGRESS_KEY).distinct().count())

    def prune(self, batch_id: int) -> int | None:
        """Delete every row a newer row of its key supersedes (a MERGE that only matches rows
        with a lower batch id than their key's newest: a key's newest row is never deleted).
        Returns how many rows it deleted, as the MERGE reports it (None: unknown, or no MERGE)."""
        from delta.tables import DeltaTable

        stored = self._stored()
        if stored is None or "batch_id" not in stored.columns:
            return None
        batch = F.coalesce(F.col("batch_id"), F.lit(-1))
        newest = stored.groupBy(*PROGRESS_KEY).agg(F.max(batch).alias("newest"), F.count(F.lit(1)).alias("n")).where(F.col("n") > 1)
        on = " AND ".join(f"t.{k} = s.{k}" for k in PROGRESS_KEY) + " AND coalesce(t.batch_id, -1) < s.newest"
        metrics = self._retry(
            f"progress log pruning at batch {batch_id}",
            lambda: DeltaTable.forPath(self.spark, self.path).alias("t").merge(newest.alias("s"), on).whenMatchedDelete().execute(),
        )
        # One row per key is left. The MERGE reports how many it deleted (a local result, no
        # Spark job); the table is counted again only when it does not say, or the count known
        # before is off (another writer: e.g. forget-group).
        size = _PROGRESS_LOG_SIZE.get(self.path)
        deleted = _merge_deleted(metrics)
        if size is not None and deleted is not None and 0 <= deleted <= size.rows:
            keys = size.rows - deleted
        else:
            pruned = self._stored()
            keys = 0 if pruned is None else pruned.count()
        _PROGRESS_LOG_SIZE[self.path] = _LogSize(rows=keys, keys=keys)
        return deleted

    def compact(self) -> None:
        """Rewrite the MERGEs' small files into few (a failure only costs read speed)."""
        from delta.tables import DeltaTable

        try:
            DeltaTable.forPath(self.spark, self.path).optimize().executeCompaction()
        except Exception as exc:
            log.warning("compacting the group progress table at %s failed (%s); continuing", self.path, exc)

    def remembered(self, group_id: str, topic_regex: str | None = None) -> list[Row]:
        """``group_id``'s remembered positions (``PROGRESS_STORE`` rows), all or on topics fully
        matching ``topic_regex`` (Python syntax, like the config's regexes). One group: small."""
        if not self.exists():
            return []
        pattern = re.compile(topic_regex) if topic_regex is not None else None
        mine = self.read().where(F.col("group_id") == group_id).orderBy("topic", "partition").collect()
        return [r for r in mine if pattern is None or pattern.fullmatch(r["topic"])]

    def remove(self, rows: Sequence[Row]) -> None:
        """Delete these keys from the store (``forget-group``); absent keys are ignored."""
        from delta.tables import DeltaTable

        if not rows or not self.exists():
            return
        key_schema = StructType([PROGRESS_STORE[k] for k in PROGRESS_KEY])
        keys = self.spark.createDataFrame([tuple(r[k] for k in PROGRESS_KEY) for r in rows], key_schema)
        on = " AND ".join(f"t.{k} = s.{k}" for k in PROGRESS_KEY)
        self._retry(
            f"forgetting {len(rows)} position(s)",
            lambda: DeltaTable.forPath(self.spark, self.path).alias("t").merge(keys.alias("s"), on).whenMatchedDelete().execute(),
        )

    def _retry(self, what: str, action: Callable[[], _T]) -> _T:
        return retry_conflicts(f"{what} on {self.path}", action, self.sleep)


def stamped(rows: DataFrame, batch_id: int) -> DataFrame:
    """``rows`` with a ``batch_id`` column of ``batch_id`` (LongType), taken from a one-row table
    joined on rather than written into the query: Spark inlines a long constant into the code it
    generates, so each batch would compile (twice) and run unoptimized new code for the same
    write; with the value in a row, the write's code is the same every batch (issue 12). The row
    is a local table broadcast to the tasks (Spark 4.2 runs a small job for that broadcast, about
    10 ms here)."""
    one = rows.sparkSession.sql(f"SELECT * FROM VALUES (CAST({int(batch_id)} AS BIGINT)) AS stamp(batch_id)")
    return rows.crossJoin(F.broadcast(one))


def _merge_deleted(metrics: DataFrame) -> int | None:
    """``num_deleted_rows`` of a Delta MERGE's result (its metrics), or None when absent."""
    if "num_deleted_rows" not in metrics.columns:
        return None
    rows = metrics.select("num_deleted_rows").collect()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def retry_conflicts(what: str, action: Callable[[], _T], sleep: Callable[[float], None] = time.sleep) -> _T:
    """Run a Delta write and return what it returns (a MERGE: its metrics), retrying a
    conflicting commit (another writer, e.g. forget-group next to the stream) up to
    ``CONFLICT_ATTEMPTS`` times with a pause; then ``AuditError``."""
    backoff = Backoff(first=0.2, cap=2.0)
    attempt = 1
    while True:
        try:
            return action()
        except DELTA_CONFLICTS as exc:
            if attempt >= CONFLICT_ATTEMPTS:
                raise AuditError(f"{what} kept conflicting: {exc}") from exc
            pause = backoff.next()
            log.warning("%s conflicted (%s); retrying in %.1fs", what, exc, pause)
            sleep(pause)
            attempt += 1
