"""The purge pipeline: snapshot -> plan -> intents -> DeleteRecords -> outcomes.

This module is the only place that wires I/O together. Per micro-batch (``foreachBatch``),
``PurgePipeline.process_batch``:

0. takes the purger lease before its first batch (writing the generation's ``lease`` audit row)
   and keeps it renewed (``PurgerLease.keep``, ``spark_purge.lease``); a fenced job raises
   ``FencedError``. A dry run takes no lease;
   then adds the configured external consumers (a Spark query's checkpoint position, static holds)
   to the snapshot as group rows (``external_snapshot``), read on the driver through Hadoop's
   FileSystem, fresh for every batch (a replayed batch sees the current positions);
1. plans the snapshot with a ``planner.Planner``, as of the snapshot's own time. The stream
   reads the source's ``packed`` view (``schemas.PACKED_SNAPSHOT``: the group rows packed as
   Arrow IPC, ``spark_purge.snapshot_pack``); the store match's task reads them from the blobs,
   and what needs them nested (``schemas.SNAPSHOT``) unpacks them (``policy.with_groups``);
   With ``retirement.enable``, the planner also reads the retirement registry
   (``spark_purge.retirement``) and the runner records each reclaim in it (intent first);
2. runs the plan with a ``runner.BatchRunner``: intents to the Delta audit before any delete,
   the lease confirmed right before DeleteRecords (``PurgerLease.confirm``), DeleteRecords batched per leader, one outcome
   row per planned partition (exactly once; under the lease's Delta txn ids, so a fenced
   generation's writes are refused). Partitions with an open transaction get their active
   producers named first (``with_producers``: DescribeProducers, ``policy.producers``).
   A batch Spark replays after a crash never plans anew: it executes the intents it recorded,
   each bounded by the fresh snapshot's plan, none older than ``stream.max_snapshot_age``
   (``spark_purge.replay``); a batch whose outcomes are recorded is not redone;
3. remembers every group position it saw and when it last moved (``audit.ProgressStore``,
   a MERGE: stale-group detection, and vanished groups — a position Kafka forgot keeps holding,
   see ``spark_purge.vanished``);
4. when some rule has a ``min_retention`` or ``retirement.enable`` is set, records the
   partitions' high watermarks (``history.AppendHistory``), so later time floors hold records by
   append time and a retiring partition's quiet time is known; with
   ``kafka.clock_probe_topic`` set, measures the broker's clock (``kafka.clock``) and warns when
   it is more than a second off the driver's.

Streaming: :func:`start_stream` (processingTime trigger, or ``available_now`` for one-shot runs
under Airflow / Databricks Jobs). Both keep their state in the configured checkpoint, read and
written only through Hadoop's FileSystem on the driver (``fs.HadoopFiles``), so any URI works.
The audit's app id is the streaming query's id (``<checkpoint>/metadata``); a checkpoint whose
location the audit knows under another query id (removed or reset) is refused
(:func:`check_checkpoint`). A dry run keeps its own checkpoint, ``<checkpoint>/dry_run``.
:func:`plan_snapshot` plans one batch snapshot without a stream (``spark-purge plan``).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_purge.audit import AuditSink, BatchContext, CheckpointRegistry, ProgressStore, absolute_location, lease_row
from spark_purge.config import PurgeConfig, StreamConfig, config_fingerprint, connection_settings, field_default
from spark_purge.delta_files import rows_of
from spark_purge.detach import drop, held
from spark_purge.errors import ConfigError, KafkaError, SparkPurgeError, from_spark_exception
from spark_purge.external_snapshot import with_external_consumers
from spark_purge.fs import Files, HadoopFiles, join
from spark_purge.history import AppendHistory
from spark_purge.kafka.clock import BrokerClock, ClockReading, describe_skew
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.producers import OpenTransactions
from spark_purge.keepwarm import JOB_GROUP, IdleKeeper, touch
from spark_purge.lease import FencedAudit, PurgerLease, delete_window_ms
from spark_purge.planner import LastPairs, Plan, Planner
from spark_purge.policy import history_keep_ms, partition_rows, retention_floors, split_snapshot, with_groups
from spark_purge.policy.producers import annotate
from spark_purge.replay import bounded_rows, is_stale, replay_context, stale_rows
from spark_purge.retirement import RegistryTracker, RetirementRegistry
from spark_purge.runner import AuditWriter, BatchResult, BatchRunner, PurgeClient
from spark_purge.session import activate
from spark_purge.snapshot_pack import PACKED_COLUMN
from spark_purge.tiering import TieringTable
from spark_purge.vanished import retention_warning

log = logging.getLogger(__name__)

SOURCE_FORMAT = "kafka_state"


# ---- snapshot plumbing ----------------------------------------------------------------------


def source_options(config: PurgeConfig, poll_interval_ms: int | None = None) -> dict[str, str]:
    """Data-source options for the ``kafka_state`` source derived from the purge config.

    The connection is ``connection_settings(config)`` as options (every setting, the same the
    deletes use); Spark redacts option values whose key matches ``spark.redaction.regex``
    (passwords) in plans and logs.
    """
    opts: dict[str, str] = connection_settings(config).to_options()
    # Only the topics some rule or manual entry can select are read.
    patterns = [f"(?:{r.topics})" for r in config.rules] + [re.escape(m.topic) for m in config.manual]
    opts["topic.include"] = "|".join(patterns)
    # Floors relative to each snapshot's own time (the policy plans as of that time).
    floors = [{"topic_regex": f.topics, "min_retention_ms": f.min_retention_ms} for f in retention_floors(config)]
    if floors:
        opts["time.floors"] = json.dumps(floors)
    if poll_interval_ms is not None:
        opts["poll.interval"] = f"{poll_interval_ms}ms"
    return opts


def read_snapshot(spark: SparkSession, config: PurgeConfig, topics: Sequence[str] | None = None, packed: bool = False) -> DataFrame:
    """One batch snapshot (SNAPSHOT schema) of the cluster: the topics the config can select, or
    exactly ``topics`` (internal ones included, so they can be named as such). ``packed``: its
    group rows packed (``PACKED_SNAPSHOT``, the pipeline's own: ``spark_purge.snapshot_pack``)."""
    from spark_purge.source import register

    register(spark)
    options = source_options(config)
    if topics is not None:
        options["topic.include"] = "|".join(re.escape(t) for t in topics)
        options["include.internal"] = "true"
    return spark.read.format(SOURCE_FORMAT).options(**options).option("view", "packed" if packed else "snapshot").load()


def with_external(spark: SparkSession, config: PurgeConfig, snapshot: DataFrame, files: Files | None = None) -> DataFrame:
    """The snapshot plus the config's ``external_consumers`` (see ``external_snapshot``), read
    through Hadoop's FileSystem of ``spark`` unless ``files`` is given."""
    if not config.external_consumers:
        return snapshot
    return with_external_consumers(with_groups(snapshot), config.external_consumers, files or HadoopFiles(spark))


# ---- the batch ------------------------------------------------------------------------------

RECENT_RESULTS = 100  # BatchResults kept under --follow; the totals cover every batch


@dataclass
class RunTotals:
    """Every batch of a run, added up (``PurgePipeline.results`` keeps only the recent ones)."""

    batches: int = 0
    deleted: int = 0
    failed: int = 0
    records_deleted: int = 0

    def add(self, result: BatchResult) -> None:
        self.batches += 1
        self.deleted += result.deleted
        self.failed += result.failed
        self.records_deleted += result.records_deleted


@dataclass
class PurgePipeline:
    """Runs one purge cycle per snapshot DataFrame; give ``process_batch`` to foreachBatch.

    A ``Planner`` (snapshot -> plan) and a ``BatchRunner`` (plan -> intents -> deletes ->
    outcomes) share one lazily opened Kafka client; this class wires them to the checkpoint
    (query id, group progress) and reports each batch.
    """

    spark: SparkSession
    config: PurgeConfig
    client_factory: Callable[[], PurgeClient]
    checkpoint_location: str
    dry_run: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    on_batch: Callable[[BatchResult], None] | None = None
    # Test hook: called between steps ("intents_written", "deletes_sent") to simulate a crash.
    fault_hook: Callable[[str, int], None] | None = None
    # Harnesses that call process_batch without a stream (no checkpoint metadata) name the
    # query themselves; a stream's id is always read from its checkpoint.
    query_id_override: str | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    results: deque[BatchResult] = field(default_factory=lambda: deque(maxlen=RECENT_RESULTS))
    totals: RunTotals = field(default_factory=RunTotals)

    def __post_init__(self) -> None:
        self._fingerprint = config_fingerprint(self.config)
        self._client: PurgeClient | None = None
        self._query_id: str | None = self.query_id_override
        self._registered = False
        self._last_batch: int | None = None
        # When the last batch ended (monotonic seconds), None while one runs: what a continuous
        # query's keep-warm thread waits on (``idle_since``, ``start_stream``).
        self._idle_since: float | None = time.monotonic()
        self._keeper: IdleKeeper | None = None
        self._last_pairs = LastPairs()  # the planner's, from one batch to the next
        self._clock: BrokerClock | None = broker_clock(self.config)
        # A dry run deletes nothing and never fences the real job: no lease.
        self.lease: PurgerLease | None = (
            PurgerLease.of(self.spark, self.config, self.run_id) if self.config.lease.enabled and not self.dry_run else None
        )
        # DeleteRecords (every attempt: spark_purge.kafka.delete) is sent only while the lease
        # confirmed right before it is still this job's: at least two thirds of its ttl.
        self.delete_timeout_ms = self.config.kafka.delete_timeout
        if self.lease is not None and self.delete_timeout_ms > delete_window_ms(self.config.lease.ttl):
            self.delete_timeout_ms = delete_window_ms(self.config.lease.ttl)
            log.warning(
                "kafka.delete_timeout %d ms is longer than two thirds of lease.ttl (%d ms): DeleteRecords gets %d ms, "
                "so that no attempt is sent once another job may have taken the lease over (raise lease.ttl to give it more)",
                self.config.kafka.delete_timeout, self.config.lease.ttl, self.delete_timeout_ms,
            )

    # The query id lives in the checkpoint's metadata file (Spark writes it when the query
    # first starts): stable across restarts, so it is the key Delta uses to make each batch's
    # audit commits exactly-once.
    @property
    def query_id(self) -> str:
        if self._query_id is None:
            found = query_id_of(self.files, self.checkpoint_location)
            if found is None:
                raise ConfigError(
                    f"stream.checkpoint_location: no streaming query metadata at {join(self.checkpoint_location, 'metadata')} "
                    "(process_batch runs inside the stream started on that checkpoint)"
                )
            self._query_id = found
        return self._query_id

    @property
    def files(self) -> HadoopFiles:
        return HadoopFiles(self.spark)

    @property
    def audit(self) -> AuditSink:
        return AuditSink(self.spark, self.config.audit.path, app_id=self.query_id, table_name=self.config.audit.table_name)

    @property
    def progress(self) -> ProgressStore:
        return progress_store(self.spark, self.checkpoint_location, app_id=self.query_id)

    @property
    def registry(self) -> CheckpointRegistry:
        return CheckpointRegistry.beside(self.spark, self.config.audit.path)

    @property
    def history(self) -> AppendHistory:
        return history_store(self.spark, self.checkpoint_location)

    @property
    def retirements(self) -> RetirementRegistry:
        return RetirementRegistry.beside(self.spark, self.config.audit.path)

    @property
    def planner(self) -> Planner:
        return Planner(
            self.config,
            lambda timestamps: self.client().offsets_for_times(timestamps),
            self.progress.read_nested_if_exists,
            self.history.read_if_exists,
            retirements=self.retirements.current,
            tiering_transitions=TieringTable.beside(self.spark, self.config.audit.path).in_transition,
            rewrite_above=self.progress.rewrite_above,
            last_pairs=self._last_pairs,
        )

    @property
    def runner(self) -> BatchRunner:
        lease = self.lease
        tracker = RegistryTracker(self.retirements) if self.config.retirement.enable else None
        transitions = TieringTable.beside(self.spark, self.config.audit.path).in_transition
        audit: AuditWriter = self.audit if lease is None else FencedAudit(self.audit, lease)
        return BatchRunner(
            audit, self.client, self.delete_timeout_ms, fault_hook=self.fault_hook,
            before_delete=None if lease is None else lambda: lease.confirm("right before DeleteRecords"),
            retirements=tracker, transitions=transitions,
        )

    @property
    def max_snapshot_age_ms(self) -> int:
        stream = self.config.stream
        return stream.max_snapshot_age if stream is not None else field_default(StreamConfig, "max_snapshot_age")

    def client(self) -> PurgeClient:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def idle_since(self) -> float | None:
        """When the last batch ended (or the pipeline was made), monotonic seconds; None while a
        batch runs."""
        return self._idle_since

    def keep_warm(self, every_ms: int, alive: Callable[[], bool] = lambda: True) -> IdleKeeper | None:
        """While no batch runs, keep the session's Python workers alive with a tiny Spark job
        (``keepwarm.touch``, in job group ``keepwarm.JOB_GROUP``) every ``every_ms`` ms of
        idleness (``keepwarm.IdleKeeper``; 0: not at all), until ``close`` or ``alive`` turns
        false (the stream's query stopped). The keeper (None: none)."""
        if every_ms > 0 and self._keeper is None:
            spark = self.spark
            self._keeper = IdleKeeper(every_ms / 1000, self.idle_since, lambda: touch(spark, JOB_GROUP), alive).start()
        return self._keeper

    def close(self) -> None:
        """Stop keeping the workers warm, release the lease (a clean shutdown: the next job
        takes over at once), close clients."""
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        if self.lease is not None:
            self.lease.release()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._clock is not None:
            self._clock.close()

    def check_checkpoint(self) -> None:
        """Refuse a checkpoint whose location the audit knows under another query id (see
        :func:`check_checkpoint`); before a stream starts, a fresh checkpoint has no id yet."""
        query_id = self._query_id or query_id_of(self.files, self.checkpoint_location)
        location = self.files.qualify(self.checkpoint_location)
        check_checkpoint(self.registry.query_ids(location), location, query_id, self.registry.path)

    def _register(self) -> None:
        """Once per pipeline, before its first batch acts: check, then remember, this query id
        at this checkpoint location."""
        if self._registered or self.query_id_override is not None:  # a harness: no checkpoint to guard
            return
        location = self.files.qualify(self.checkpoint_location)
        known = self.registry.query_ids(location)
        check_checkpoint(known, location, self.query_id, self.registry.path)
        if self.query_id not in known:
            name = self.config.stream.query_name if self.config.stream is not None else None
            self.registry.register(location, self.query_id, name, self.clock())
        self._registered = True

    def _hold_lease(self, batch_id: int) -> tuple[int | None, float]:
        """Acquire the lease before the first batch (and write its audit fence row), keep it
        renewed at later ones (``PurgerLease.keep``); (the generation held, None: no lease; the
        seconds this acquisition waited, 0 when none was needed). ``FencedError`` when fenced."""
        lease = self.lease
        if lease is None:
            return None, 0.0
        if lease.held:
            return lease.keep(f"at the start of batch {batch_id}"), 0.0
        state = lease.acquire()
        before = lease.taken_over
        detail = f"took over from the expired {before.describe()}" if before is not None else None
        row = lease_row(
            self.run_id, self.query_id, state.at, state.purger_id, state.generation, state.event, state.holder, detail, self._fingerprint
        )
        sink = self.audit
        sink.ensure_table()
        sink.write([row], "lease", -1, txn=lease.fence_txn())
        lease.check(f"after writing its generation's audit fence ({state.event})")
        return state.generation, lease.waited_s

    def process_batch(self, snapshot: DataFrame, batch_id: int) -> BatchResult:
        self._idle_since = None
        try:
            return self._process_batch(snapshot, batch_id)
        finally:
            self._idle_since = time.monotonic()

    def _process_batch(self, snapshot: DataFrame, batch_id: int) -> BatchResult:
        base = kept(snapshot)
        joined: DataFrame | None = None  # the snapshot with external consumers' rows, when held
        plan: Plan | None = None
        try:
            self._register()
            generation, waited_s = self._hold_lease(batch_id)
            if waited_s > 0:
                # The snapshot was taken before this job waited for the lease (another job held
                # it): consumers may have moved back meanwhile. Plan from a fresh one.
                log.warning("batch %d: waited %.1fs for the lease; planning from a fresh snapshot", batch_id, waited_s)
                drop(base)
                base = kept(read_snapshot(self.spark, self.config, packed=True))
            snapshot = with_external(self.spark, self.config, base)
            if snapshot is not base:  # external consumers' rows joined the unpacked groups: held once
                snapshot = joined = held(snapshot)
            # Only the first batch a process sees (or one it saw already) can be a replay.
            maybe_replay = self._last_batch is None or batch_id <= self._last_batch
            recorded = self.audit.recorded(batch_id) if maybe_replay else None
            self._last_batch = batch_id
            if recorded is not None and recorded.has_outcomes:
                log.info("batch %d: its outcomes are already in the audit; nothing to redo", batch_id)
                return self._done(BatchResult(batch_id))
            if recorded is not None and recorded.intents:
                result, plan = self._replay(snapshot, recorded.intents, generation)
            else:
                plan = self.planner.plan(snapshot, batch_id)
                if plan is None:
                    return self._done(BatchResult(batch_id))
                read_clock(self._clock)
                # One row per partition, kept as Arrow columns to the audit's Parquet (issue 12).
                plan_rows = with_producers(plan, collect_table(plan.rows), self.client)
                ctx = BatchContext(
                    self.run_id, self.query_id, batch_id, plan.planned_at, self.dry_run, self._fingerprint, lease_generation=generation
                )
                result = self.runner.run(plan_rows, ctx)
            if plan is not None:
                self._remember(snapshot, plan, batch_id)
        finally:
            if plan is not None:
                plan.release()
            drop(base)
            if joined is not None:
                drop(joined)
            activate(self.spark)  # not the streaming batch's cloned session (``session.activate``)
        return self._done(result)

    def _record_history(self, snapshot: DataFrame, batch_id: int) -> None:
        """Add the snapshot's high watermarks (its ``PARTITION_STATE`` rows) to the append
        history, when a time floor or partition retirement (how long a high watermark has been
        still) needs it.

        Stamped with the clock now, after the batch, not the snapshot's time (taken before the
        high watermarks were read): a row then claims only "every offset at or above it was
        appended after this time", which is true; the snapshot's earlier time would not be."""
        keep_ms = history_keep_ms(self.config)
        if keep_ms:
            self.history.update(partition_rows(snapshot), datetime.now(timezone.utc), keep_ms, batch_id)

    def _replay(self, snapshot: DataFrame, intents: Sequence[Row], generation: int | None) -> tuple[BatchResult, Plan | None]:
        """Execute a replayed batch's recorded intents, bounded by a fresh plan of ``snapshot``
        (``spark_purge.replay``); none when they are older than ``stream.max_snapshot_age``."""
        ctx = dataclasses.replace(replay_context(intents, self.run_id), lease_generation=generation)
        if is_stale(ctx.planned_at, self.clock(), self.max_snapshot_age_ms):
            log.warning(
                "batch %d: replayed intents planned at %s are older than stream.max_snapshot_age (%d ms): "
                "nothing is deleted, %d intent(s) recorded as skipped (stale_snapshot)",
                ctx.batch_id, ctx.planned_at.isoformat(), self.max_snapshot_age_ms, len(intents),
            )
            return self.runner.execute(stale_rows(intents), ctx), None
        plan = self.planner.plan(snapshot, ctx.batch_id)
        fresh = {} if plan is None else {(r["topic"], r["partition"]): r for r in collect_rows(plan.rows)}
        log.info("batch %d: replaying %d recorded intent(s), each bounded by a fresh snapshot", ctx.batch_id, len(intents))
        return self.runner.execute(bounded_rows(intents, fresh), ctx), plan

    def _remember(self, snapshot: DataFrame, plan: Plan, batch_id: int) -> None:
        """Every position seen, for stale and vanished groups in later batches (an append of the
        new or moved positions, from the plan's match of the snapshot with the store when it
        has one: nothing per commit reaches the driver; ``ProgressStore.record``). External consumers are configured,
        not remembered: left out."""
        if plan.positions is not None:
            # The match's held rows, cut from the store before it is written: nothing that reads
            # the store may be re-planned at the store's commit (``spark_purge.detach``). The
            # store keeps them: its next read answers with them while its table has not moved
            # otherwise.
            # The changed positions as the match's task wrote them (a file to commit as it is).
            log_file = plan.positions.log_file()
            after, holder = plan.positions.hand_over(plan.planned_at)
            try:
                plan.release()
            except BaseException:
                drop(holder)
                raise
            self.progress.record(after, batch_id, holder=holder, log_file=log_file)
        else:  # the store's first batch (Positions keeps external consumers' rows out of it)
            partitions, groups = split_snapshot(snapshot)
            self.progress.update(groups, plan.planned_at, batch_id, partitions)
        self._record_history(snapshot, batch_id)

    def _done(self, result: BatchResult) -> BatchResult:
        self.results.append(result)
        self.totals.add(result)
        if self.on_batch is not None:
            self.on_batch(result)
        return result


def kept(snapshot: DataFrame) -> DataFrame:
    """``snapshot`` cut from its source and held for the batch (``detach.held``; ``detach.drop``
    it after).

    A packed snapshot (``PACKED_SNAPSHOT``, the pipeline's own) is held as the source gives it,
    with no shuffle (issue 12, stop 88). Its rows are O(partitions) and its group rows sit in a
    few blobs, which every reader takes whole (the planner's first look, one aggregate; the store
    match's one task; ``policy.with_groups``). The held rows' lineage is cut once that first job
    has read them (``detach.held``), so later stages ship nothing of the source's input
    partitions. A shuffle would only write and read the blobs (incompressible LZ4) once more.

    A snapshot with its group rows nested (``SNAPSHOT``) is shuffled first. The data source's
    input partitions carry the snapshot's Arrow bytes (``source``), and a task carries its
    partition: every stage of the first job that reads the snapshot would ship them again (3.5 MB
    a task at 1k partitions x 1k groups, ten times that at 10k). One shuffle ships them once: the
    stages after it read through shuffle partitions, which carry nothing. It makes one piece per
    task slot (at most ``spark.sql.shuffle.partitions``), hashed by (topic, partition), and the
    held rows keep that partitioning: the plan's per-partition work (a partition's facts from the
    group rows in its row, ``policy.groups.with_group_status``, or joined to it when vanished
    groups' rows join them: ``group_status``) then needs no further shuffle of the group rows
    where Spark may co-partition on those two keys
    (``spark.sql.requireAllClusterKeysForCoPartition=false``, which ``session.get_spark`` sets
    for a local session)."""
    if PACKED_COLUMN in snapshot.columns:
        return held(snapshot)
    spark = snapshot.sparkSession
    # As many pieces as the cluster runs tasks at once (and no more than a shuffle makes): every
    # stage reading the snapshot runs one task a piece, and the snapshot is O(partitions) rows.
    ways = max(1, min(int(spark.conf.get("spark.sql.shuffle.partitions") or 2), spark.sparkContext.defaultParallelism))
    return held(snapshot.repartition(ways, "topic", "partition"))


def collect_table(df: DataFrame) -> pa.Table:
    """``df``'s rows on the driver as one Arrow table (no per-row pickling); for O(partitions)
    results such as a plan (no timestamp columns: Arrow's are zone-aware)."""
    return df.toArrow()


def collect_rows(df: DataFrame) -> list[Row]:
    """``collect_table``'s rows as ``Row``s."""
    return rows_of(collect_table(df))


def query_id_of(files: Files, checkpoint_location: str) -> str | None:
    """The streaming query's id from the checkpoint's metadata file (stable across restarts),
    read through ``files`` (Hadoop's FileSystem: any URI); None before the query first ran."""
    meta = join(checkpoint_location, "metadata")
    if not files.exists(meta):
        return None
    try:
        return str(json.loads(files.read_text(meta).splitlines()[0])["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise ConfigError(f"stream.checkpoint_location: {meta} is not a streaming query's metadata file") from None


def check_checkpoint(known: Sequence[str], location: str, query_id: str | None, registry_path: str) -> None:
    """Refuse a checkpoint removed or reset next to an audit that has another query's batches.

    ``known`` are the query ids registered for ``location``; ``query_id`` the checkpoint's own
    (None: no metadata yet). A new query there would get a new id and audit afresh, but the
    old query's unfinished batch and group memory would be gone without a trace: refuse, and
    let the operator restore the checkpoint or choose a new location.
    """
    if not known or (query_id is not None and query_id in known):
        return
    holds = "no streaming query (removed or reset?)" if query_id is None else f"query {query_id}"
    raise ConfigError(
        f"stream.checkpoint_location: {location} now holds {holds}, but {registry_path} records query "
        f"{known[-1]} at this location: the checkpoint was removed or reset. Restore it, or set "
        "stream.checkpoint_location to a new location (a new query, audited from its first batch)"
    )


def progress_location(checkpoint_location: str) -> str:
    """Where the group progress table lives: beside the stream's checkpoint (any URI)."""
    return join(checkpoint_location, "group_progress")


def progress_store(spark: SparkSession, checkpoint_location: str, app_id: str) -> ProgressStore:
    """The group progress store beside the checkpoint, at its fully qualified location (Delta
    refuses to create ``file:///x`` once it knows the table as ``file:/x``)."""
    location = HadoopFiles(spark).qualify(absolute_location(progress_location(checkpoint_location)))
    return ProgressStore(spark, location, app_id=app_id)


def dry_run_checkpoint(checkpoint_location: str) -> str:
    """A dry run's own checkpoint, inside the real one: it never shares the real run's query
    id, batches or group memory (a crashed dry run rerun for real starts clean)."""
    return join(checkpoint_location, "dry_run")


def history_location(checkpoint_location: str) -> str:
    """Where the append history table lives: beside the stream's checkpoint (any URI)."""
    return join(checkpoint_location, "append_history")


def history_store(spark: SparkSession, checkpoint_location: str) -> AppendHistory:
    """The append history beside the checkpoint, at its fully qualified location (as
    :func:`progress_store`)."""
    return AppendHistory(spark, HadoopFiles(spark).qualify(absolute_location(history_location(checkpoint_location))))


def broker_clock(config: PurgeConfig) -> BrokerClock | None:
    """The broker-clock probe of ``kafka.clock_probe_topic``, or None when it is not set."""
    topic = config.kafka.clock_probe_topic
    return BrokerClock(connection_settings(config), topic) if topic else None


def read_clock(clock: BrokerClock | None) -> ClockReading | None:
    """One reading (None: no probe, or it failed: logged, never fatal); warns on a skew > 1 s."""
    if clock is None:
        return None
    try:
        reading = clock.read()
    except KafkaError as exc:
        log.warning("broker clock not measured: %s", exc)
        return None
    line = describe_skew(reading)
    if line:
        log.warning("%s", line)
    return reading


def with_producers(plan: Plan, rows: pa.Table, client: Callable[[], PurgeClient]) -> pa.Table:
    """``rows`` (``plan.rows`` as ``toArrow`` gives them) with ``active_producers`` and the
    open-transaction note in ``detail`` (``policy.producers``): one DescribeProducers per leader,
    only when some partition has an open transaction. A failed read is logged; the plan stands
    as it is. A table that has the column already gets it replaced, where it is."""
    found = OpenTransactions({}, None)
    if plan.open_transactions:
        try:
            found = client().open_transactions(plan.open_transactions)
        except KafkaError as exc:
            log.warning("active producers not read for %d partition(s) with open transactions: %s", len(plan.open_transactions), exc)
    now_ms = int(plan.planned_at.timestamp() * 1000)
    active: list[int | None] = [None] * rows.num_rows
    # Only partitions with a DescribeProducers answer change; the others get a null count and
    # keep their detail (``annotate``'s answer for them), with nothing made per row (issue 12).
    if found.producers:
        keys = list(zip(rows.column("topic").to_pylist(), rows.column("partition").to_pylist()))
        read = [i for i, tp in enumerate(keys) if tp in found.producers]
        if read:
            detail = rows.column("detail").to_pylist()
            asked = [{"topic": keys[i][0], "partition": keys[i][1], "detail": detail[i]} for i in read]
            for i, values in zip(read, annotate(asked, plan.open_transactions, found, now_ms)):
                active[i], detail[i] = values["active_producers"], values["detail"]
            at = rows.column_names.index("detail")
            rows = rows.set_column(at, rows.schema.field(at), pa.array(detail, pa.string()))
    column = pa.array(active, pa.int32())
    if "active_producers" in rows.column_names:
        at = rows.column_names.index("active_producers")
        return rows.set_column(at, pa.field("active_producers", pa.int32()), column)
    return rows.append_column(pa.field("active_producers", pa.int32()), column)


def plan_snapshot(spark: SparkSession, config: PurgeConfig, client_factory: Callable[[], PurgeClient] | None = None) -> Plan | None:
    """Read one snapshot and plan it, changing nothing (``spark-purge plan``).

    Group progress and the append history come from the configured stream checkpoint, if any
    (so stale groups and time floors show as the running job sees them; without one, time
    floors have no history: ``no_history``, the log start). The Kafka client is opened only for
    ``@timestamp`` entries. The plan holds its snapshot and positions (``detach.held``): read its
    rows, then ``plan.release()`` them.
    """
    factory = client_factory or default_client_factory(config)
    opened: list[PurgeClient] = []

    def lookup(timestamps: Mapping[TopicPartitionKey, int]) -> Mapping[TopicPartitionKey, int]:
        if not opened:
            opened.append(factory())
        return opened[0].offsets_for_times(timestamps)

    progress: Callable[[], DataFrame | None] = lambda: None  # noqa: E731
    history: Callable[[], DataFrame | None] = lambda: None  # noqa: E731  no checkpoint: no history
    if config.stream is not None:
        checkpoint = config.stream.checkpoint_location
        progress = progress_store(spark, checkpoint, app_id="plan").read_if_exists
        history = history_store(spark, checkpoint).read_if_exists
    clock = broker_clock(config)
    retirements = RetirementRegistry.beside(spark, config.audit.path).current
    try:
        tiering = TieringTable.beside(spark, config.audit.path).in_transition
        planner = Planner(config, lookup, progress, history, retirements=retirements, tiering_transitions=tiering)
        snapshot = kept(read_snapshot(spark, config, packed=True))
        joined = with_external(spark, config, snapshot)
        kept_rows = (snapshot,) if joined is snapshot else (snapshot, held(joined))
        plan = planner.plan(kept_rows[-1])
        if plan is None:
            for rows in kept_rows:
                drop(rows)
            return None
        return dataclasses.replace(plan, clock=read_clock(clock), held=kept_rows)
    finally:
        for client in opened:
            client.close()
        if clock is not None:
            clock.close()


def check_offsets_retention(config: PurgeConfig) -> str | None:
    """Read the broker's ``offsets.retention.minutes`` once (per run) and log a warning when it
    is shorter than some rule's ``stale_after`` (``vanished.retention_warning``); returns the
    warning. Unknown (unreachable, no Cluster DescribeConfigs) is logged, never fatal."""
    from spark_purge.kafka import open_client

    try:
        with open_client(config) as client:
            retention_ms = client.offsets_retention_ms()
    except SparkPurgeError as exc:
        log.info("could not read offsets.retention.minutes (%s)", exc)
        return None
    warning = retention_warning(config, retention_ms)
    if warning:
        log.warning("%s", warning)
    return warning


# ---- streaming entry points -----------------------------------------------------------------


def default_client_factory(config: PurgeConfig) -> Callable[[], PurgeClient]:
    def make() -> PurgeClient:
        from spark_purge.kafka import open_client

        return open_client(config)

    return make


def start_stream(
    spark: SparkSession,
    config: PurgeConfig,
    *,
    available_now: bool = False,
    dry_run: bool | None = None,
    checkpoint_location: str | None = None,
    pipeline: PurgePipeline | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
) -> tuple[StreamingQuery, PurgePipeline]:
    """Start the purge stream: processingTime trigger (continuous) or AvailableNow (one-shot).

    A dry run checkpoints at ``dry_run_checkpoint(checkpoint)``; a given ``pipeline`` brings its
    own ``checkpoint_location``."""
    from spark_purge.source import register

    stream_cfg = config.stream
    checkpoint = checkpoint_location or (stream_cfg.checkpoint_location if stream_cfg else None)
    if not checkpoint:
        raise ConfigError("stream.checkpoint_location: expected a path for the streaming checkpoint, got nothing")
    interval_ms: int = stream_cfg.trigger_interval if stream_cfg else field_default(StreamConfig, "trigger_interval")
    if pipeline is None:
        dry = config.dry_run if dry_run is None else dry_run
        checkpoint = absolute_location(checkpoint)
        pipeline = PurgePipeline(
            spark,
            config,
            default_client_factory(config),
            checkpoint_location=dry_run_checkpoint(checkpoint) if dry else checkpoint,
            dry_run=dry,
            on_batch=on_batch,
        )
    checkpoint = pipeline.checkpoint_location
    pipeline.check_checkpoint()  # a reset checkpoint is refused before the query starts
    register(spark)
    # The snapshot's group rows packed (``spark_purge.snapshot_pack``): the batch holds a few
    # binary values where it held a nested row per commit (issue 12).
    options = {**source_options(config, poll_interval_ms=interval_ms), "view": "packed"}
    snapshots = spark.readStream.format(SOURCE_FORMAT).options(**options).load()
    run_batch = pipeline.process_batch

    def each_batch(snapshot: DataFrame, batch_id: int) -> None:
        try:
            run_batch(snapshot, batch_id)
        except Exception as exc:
            short = stopping_error(exc, spark, lambda: pipeline.query_id, batch_id)
            if short is exc:
                raise
            raise short from None

    writer = snapshots.writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
    if stream_cfg is not None:
        writer = writer.queryName(stream_cfg.query_name)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=f"{interval_ms} milliseconds")
    query = writer.start()
    if not available_now:  # between triggers (``stream.keep_warm``; a one-shot run has none)
        pipeline.keep_warm(stream_cfg.keep_warm if stream_cfg else field_default(StreamConfig, "keep_warm"), lambda: query.isActive)
    return query, pipeline


# How Spark tells a batch interrupted by ``query.stop()`` from a failed one: the Python error's
# text is matched with StreamExecution.PROXY_ERROR, "py4j.protocol.Py4JJavaError: An error
# occurred while calling((.|\r\n|\r|\n)*)(<one of these names>)". java.util.regex recurses once
# per character of the rest of the text, and the usual text (a Python traceback holding a Java
# stack trace) overflows the stream thread's stack: a StackOverflowError instead of a clean stop.
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException", "java.nio.channels.ClosedByInterruptException")
_PY4J_CALL_FAILED = "py4j.protocol.Py4JJavaError: An error occurred while calling"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY, set on the stream thread


class BatchInterrupted(SparkPurgeError):
    """A batch interrupted because its query is being stopped (``query.stop()``); its text is
    kept short, for Spark to read it as a stop (see ``stopping_error``)."""


def interruption_in(exc: BaseException) -> str | None:
    """The Java interruption (one of ``INTERRUPTIONS``) named in ``exc`` or its causes, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        found = next((name for name in INTERRUPTIONS if name in text), None)
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def stopping_error(exc: Exception, spark: SparkSession, query_id: Callable[[], str], batch_id: int) -> Exception:
    """What a foreachBatch failure is re-raised as: ``exc`` itself, unless the batch was
    interrupted while its query is stopping; then a short ``BatchInterrupted`` that Spark still
    reads as a stop, without the regex overflow above (the full error goes to the log)."""
    name = interruption_in(exc)
    if name is None:
        return exc
    try:
        # The stream thread's own query id (Spark's local property), else the checkpoint's: an
        # interruption may have come while the pipeline was reading it.
        query = spark.streams.get(spark.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY) or query_id())
        stopping = query is None or not query.isActive
    except Exception:  # no query id, or the session is going away: keep the whole error
        stopping = False
    if not stopping:
        return exc
    log.info("batch %d interrupted: the query is stopping (%s)", batch_id, name)
    log.debug("batch %d: the interrupted batch's error", batch_id, exc_info=exc)
    return BatchInterrupted(f"batch {batch_id} interrupted while its query stops: {_PY4J_CALL_FAILED} process_batch: {name}")


def run_continuous(
    spark: SparkSession,
    config: PurgeConfig,
    *,
    dry_run: bool | None = None,
    checkpoint_location: str | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
    initial_backoff_s: float = 1.0,
    max_backoff_s: float = 60.0,
    max_restarts: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PurgePipeline:
    """The continuous purge: restarts the query with exponential backoff while the cluster is
    unreachable (a retriable ``KafkaError``), reporting each retry; any other error ends it.

    Returns when the query is stopped (``query.stop()``, SIGTERM) or ``max_restarts`` is spent.
    A restart resumes from the checkpoint, so no batch is lost or audited twice.
    """
    backoff = initial_backoff_s
    restarts = 0
    while True:
        query, pipeline = start_stream(
            spark, config, dry_run=dry_run, checkpoint_location=checkpoint_location, on_batch=on_batch
        )
        try:
            query.awaitTermination()
            return pipeline
        except KeyboardInterrupt:
            query.stop()
            raise
        except Exception as exc:
            found = from_spark_exception(exc)
            if not (isinstance(found, KafkaError) and found.retriable):
                raise found from exc
            if max_restarts is not None and restarts >= max_restarts:
                raise found from exc
            if pipeline.totals.batches:  # it made progress since the last failure: start over gently
                backoff = initial_backoff_s
            restarts += 1
            log.warning("Kafka unreachable (%s); restarting the purge stream in %.0fs (retry %d)", found, backoff, restarts)
            sleep(backoff)
            backoff = min(max_backoff_s, backoff * 2)
        finally:
            pipeline.close()


__all__ = [
    "RECENT_RESULTS",
    "SOURCE_FORMAT",
    "BatchResult",
    "PurgeClient",
    "PurgePipeline",
    "RunTotals",
    "broker_clock",
    "check_checkpoint",
    "check_offsets_retention",
    "collect_rows",
    "collect_table",
    "default_client_factory",
    "dry_run_checkpoint",
    "history_location",
    "history_store",
    "plan_snapshot",
    "progress_location",
    "progress_store",
    "query_id_of",
    "read_clock",
    "read_snapshot",
    "run_continuous",
    "source_options",
    "start_stream",
    "with_external",
]
