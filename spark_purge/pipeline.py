"""The purge pipeline: snapshot -> plan -> intents -> DeleteRecords -> outcomes.

This module is the only place that wires I/O together. Per micro-batch (``foreachBatch``),
``PurgePipeline.process_batch``:

0. adds the configured external consumers (a Spark query's checkpoint position, static holds)
   to the snapshot as group rows (``external_snapshot``), read on the driver through Hadoop's
   FileSystem, fresh for every batch (a replayed batch sees the current positions);
1. plans the snapshot (``schemas.SNAPSHOT``) with a ``planner.Planner``, as of the snapshot's
   own time, so a replayed batch plans exactly what it planned the first time (the source
   persists each batch's snapshot);
2. runs the plan with a ``runner.BatchRunner``: intents to the Delta audit before any delete,
   DeleteRecords batched per leader, one outcome row per planned partition (exactly once);
3. remembers every group position it saw and when it last moved (``audit.ProgressStore``,
   a MERGE: stale-group detection, and vanished groups — a position Kafka forgot keeps holding,
   see ``spark_purge.vanished``);
4. when some rule has a ``min_retention``, records the partitions' high watermarks
   (``history.AppendHistory``), so later time floors hold records by append time; with
   ``kafka.clock_probe_topic`` set, measures the broker's clock (``kafka.clock``) and warns when
   it is more than a second off the driver's.

Streaming: :func:`start_stream` (processingTime trigger, or ``available_now`` for one-shot runs
under Airflow / Databricks Jobs). Both keep their state in the configured checkpoint.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from spark_purge.audit import AuditSink, BatchContext, ProgressStore, absolute_location
from spark_purge.config import PurgeConfig, StreamConfig, config_fingerprint, connection_settings, field_default
from spark_purge.errors import ConfigError, KafkaError, SparkPurgeError, from_spark_exception
from spark_purge.external_snapshot import with_external_consumers
from spark_purge.fs import Files, HadoopFiles
from spark_purge.history import AppendHistory
from spark_purge.kafka.clock import BrokerClock, ClockReading, describe_skew
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.planner import Plan, Planner
from spark_purge.policy import retention_floors, split_snapshot
from spark_purge.runner import BatchResult, BatchRunner, PurgeClient
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES
from spark_purge.vanished import retention_warning

log = logging.getLogger(__name__)

SOURCE_FORMAT = "kafka_state"


# ---- snapshot plumbing ----------------------------------------------------------------------


def source_options(config: PurgeConfig, snapshot_dir: str | None = None, poll_interval_ms: int | None = None) -> dict[str, str]:
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
    if snapshot_dir:
        opts["snapshot.dir"] = snapshot_dir
    if poll_interval_ms is not None:
        opts["poll.interval"] = f"{poll_interval_ms}ms"
    return opts


def read_snapshot(spark: SparkSession, config: PurgeConfig) -> DataFrame:
    """One batch snapshot (SNAPSHOT schema) of the cluster, cached so it is read once."""
    from spark_purge.source import register

    register(spark)
    return spark.read.format(SOURCE_FORMAT).options(**source_options(config)).option("view", "snapshot").load()


def with_external(spark: SparkSession, config: PurgeConfig, snapshot: DataFrame, files: Files | None = None) -> DataFrame:
    """The snapshot plus the config's ``external_consumers`` (see ``external_snapshot``), read
    through Hadoop's FileSystem of ``spark`` unless ``files`` is given."""
    if not config.external_consumers:
        return snapshot
    return with_external_consumers(snapshot, config.external_consumers, files or HadoopFiles(spark))


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
    results: deque[BatchResult] = field(default_factory=lambda: deque(maxlen=RECENT_RESULTS))
    totals: RunTotals = field(default_factory=RunTotals)

    def __post_init__(self) -> None:
        self._fingerprint = config_fingerprint(self.config)
        self._client: PurgeClient | None = None
        self._query_id: str | None = None
        self._clock: BrokerClock | None = broker_clock(self.config)

    # The query id lives in the checkpoint's metadata file: stable across restarts, so it is
    # the key Delta uses to make each batch's audit commits exactly-once.
    @property
    def query_id(self) -> str:
        if self._query_id is None:
            self._query_id = query_id_of(self.checkpoint_location)
        return self._query_id

    @property
    def audit(self) -> AuditSink:
        return AuditSink(self.spark, self.config.audit.path, app_id=self.query_id, table_name=self.config.audit.table_name)

    @property
    def progress(self) -> ProgressStore:
        return ProgressStore(self.spark, progress_location(self.checkpoint_location), app_id=self.query_id)

    @property
    def history(self) -> AppendHistory:
        return AppendHistory(self.spark, history_location(self.checkpoint_location))

    @property
    def planner(self) -> Planner:
        return Planner(
            self.config,
            lambda timestamps: self.client().offsets_for_times(timestamps),
            self.progress.read_if_exists,
            self.history.read_if_exists,
        )

    @property
    def runner(self) -> BatchRunner:
        return BatchRunner(self.audit, self.client, self.config.kafka.delete_timeout, fault_hook=self.fault_hook)

    def client(self) -> PurgeClient:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._clock is not None:
            self._clock.close()

    def process_batch(self, snapshot: DataFrame, batch_id: int) -> BatchResult:
        base = snapshot.persist()
        try:
            snapshot = with_external(self.spark, self.config, base)
            plan = self.planner.plan(snapshot)
            if plan is None:
                return self._done(BatchResult(batch_id))
            read_clock(self._clock)
            plan_rows = plan.rows.collect()  # one row per partition: small, and used twice
            ctx = BatchContext(self.run_id, self.query_id, batch_id, plan.planned_at, self.dry_run, self._fingerprint)
            result = self.runner.run(plan_rows, ctx)
            # Every position seen, for stale and vanished groups in later batches (a MERGE of the
            # snapshot's group rows, still cached: nothing per commit reaches the driver).
            # External consumers are configured, not remembered: leave them out.
            partitions, groups = split_snapshot(snapshot)
            kafka_groups = groups.where(~F.coalesce(F.col("group_type").isin(*EXTERNAL_CONSUMER_TYPES), F.lit(False)))
            self.progress.update(kafka_groups, plan.planned_at, batch_id, partitions)
            self._record_history(partitions, batch_id)
        finally:
            base.unpersist()
        return self._done(result)

    def _record_history(self, partitions: DataFrame, batch_id: int) -> None:
        """Add the snapshot's high watermarks to the append history, when a time floor needs it.

        Stamped with the clock now, after the batch, not the snapshot's time (taken before the
        high watermarks were read): a row then claims only "every offset at or above it was
        appended after this time", which is true; the snapshot's earlier time would not be."""
        keep_ms = max((f.min_retention_ms for f in retention_floors(self.config)), default=0)
        if keep_ms:
            self.history.update(partitions, datetime.now(timezone.utc), keep_ms, batch_id)

    def _done(self, result: BatchResult) -> BatchResult:
        self.results.append(result)
        self.totals.add(result)
        if self.on_batch is not None:
            self.on_batch(result)
        return result


def query_id_of(checkpoint_location: str) -> str:
    """The streaming query's id from the checkpoint's metadata file (stable across restarts);
    before the first run, a stable id derived from the location."""
    meta = Path(checkpoint_location) / "metadata"
    try:
        return str(json.loads(meta.read_text().splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError):
        return "batch-" + uuid.uuid5(uuid.NAMESPACE_URL, str(Path(checkpoint_location).resolve())).hex


def progress_location(checkpoint_location: str) -> str:
    """Where the group progress table lives: beside the stream's checkpoint."""
    return str(Path(checkpoint_location) / "group_progress")


def history_location(checkpoint_location: str) -> str:
    """Where the append history table lives: beside the stream's checkpoint."""
    return str(Path(checkpoint_location) / "append_history")


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


def plan_snapshot(spark: SparkSession, config: PurgeConfig, client_factory: Callable[[], PurgeClient] | None = None) -> Plan | None:
    """Read one snapshot and plan it, changing nothing (``spark-purge plan``).

    Group progress and the append history come from the configured stream checkpoint, if any
    (so stale groups and time floors show as the running job sees them; without one, time
    floors have no history: ``no_history``, the log start). The Kafka client is opened only for
    ``@timestamp`` entries.
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
        progress = ProgressStore(spark, progress_location(checkpoint), app_id="plan").read_if_exists
        history = AppendHistory(spark, history_location(checkpoint)).read_if_exists
    clock = broker_clock(config)
    try:
        plan = Planner(config, lookup, progress, history).plan(with_external(spark, config, read_snapshot(spark, config)))
        return None if plan is None else dataclasses.replace(plan, clock=read_clock(clock))
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
    """Start the purge stream: processingTime trigger (continuous) or AvailableNow (one-shot)."""
    from spark_purge.source import register

    stream_cfg = config.stream
    checkpoint = checkpoint_location or (stream_cfg.checkpoint_location if stream_cfg else None)
    if not checkpoint:
        raise ConfigError("stream.checkpoint_location: expected a path for the streaming checkpoint, got nothing")
    checkpoint = absolute_location(checkpoint)
    interval_ms: int = stream_cfg.trigger_interval if stream_cfg else field_default(StreamConfig, "trigger_interval")
    if pipeline is None:
        pipeline = PurgePipeline(
            spark,
            config,
            default_client_factory(config),
            checkpoint_location=checkpoint,
            dry_run=config.dry_run if dry_run is None else dry_run,
            on_batch=on_batch,
        )
    register(spark)
    snapshots = (
        spark.readStream.format(SOURCE_FORMAT)
        .options(**source_options(config, snapshot_dir=str(Path(checkpoint) / "snapshots"), poll_interval_ms=interval_ms))
        .load()
    )
    run_batch = pipeline.process_batch

    def each_batch(snapshot: DataFrame, batch_id: int) -> None:
        run_batch(snapshot, batch_id)

    writer = snapshots.writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
    if stream_cfg is not None:
        writer = writer.queryName(stream_cfg.query_name)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=f"{interval_ms} milliseconds")
    return writer.start(), pipeline


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
    "check_offsets_retention",
    "default_client_factory",
    "history_location",
    "plan_snapshot",
    "progress_location",
    "query_id_of",
    "read_clock",
    "read_snapshot",
    "run_continuous",
    "source_options",
    "start_stream",
    "with_external",
]
