"""The purge pipeline: snapshot -> plan -> intents -> DeleteRecords -> outcomes.

This module is the only place that wires I/O together. Per micro-batch (``foreachBatch``):

1. split the snapshot (``schemas.SNAPSHOT``) into partition state and group commits;
2. ``policy.compute_plan`` with ``now`` = the snapshot's own time, so a replayed batch plans
   exactly what it planned the first time (the source persists each batch's snapshot);
3. write the actionable rows to the Delta audit as **intents** — before any delete;
4. send DeleteRecords batched per leader, leaders in parallel (``kafka`` package);
5. write one **outcome** row per planned partition (exactly once per batch: Delta txn ids);
6. remember when each group's commit last moved (stale-group detection).

Streaming: :func:`start_stream` (processingTime trigger, or ``available_now`` for one-shot runs
under Airflow / Databricks Jobs). Both keep their state in the configured checkpoint.
"""
from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_purge.audit import AuditSink, ProgressStore, absolute_location
from spark_purge.config import PurgeConfig, config_fingerprint, connection_settings
from spark_purge.errors import ConfigError, KafkaError, from_spark_exception
from spark_purge.policy import split_snapshot, time_floor_requests, timestamp_lookups
from spark_purge.schemas import AUDIT, GROUP_PROGRESS

log = logging.getLogger(__name__)

SOURCE_FORMAT = "kafka_state"


class DeleteClient(Protocol):
    """What the pipeline needs from Kafka to act (see ``spark_purge.kafka``)."""

    def delete_records(self, cutoffs: Mapping[tuple[str, int], int], timeout_ms: int) -> Sequence[object]: ...

    def close(self) -> None: ...


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
    ref = datetime(2000, 1, 1, tzinfo=timezone.utc)
    floors = [
        {"topic_regex": r.topics, "min_retention_ms": int((ref - r.floor_time).total_seconds() * 1000)}
        for r in time_floor_requests(config, ref)
    ]
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


# ---- the batch ------------------------------------------------------------------------------


@dataclass
class BatchResult:
    batch_id: int
    planned: int = 0
    actionable: int = 0
    deleted: int = 0
    failed: int = 0
    records_deleted: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass
class PurgePipeline:
    """Runs one purge cycle per snapshot DataFrame; give ``process_batch`` to foreachBatch."""

    spark: SparkSession
    config: PurgeConfig
    client_factory: Callable[[], DeleteClient]
    checkpoint_location: str
    dry_run: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    on_batch: Callable[[BatchResult], None] | None = None
    # Test hook: called between steps ("intents_written", "deletes_sent") to simulate a crash.
    fault_hook: Callable[[str, int], None] | None = None
    results: list[BatchResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._fingerprint = config_fingerprint(self.config)
        self._client: DeleteClient | None = None
        self._query_id: str | None = None

    # The query id lives in the checkpoint's metadata file: stable across restarts, so it is
    # the key Delta uses to make each batch's audit commits exactly-once.
    @property
    def query_id(self) -> str:
        if self._query_id is None:
            meta = Path(self.checkpoint_location) / "metadata"
            try:
                self._query_id = str(json.loads(meta.read_text().splitlines()[0])["id"])
            except (OSError, ValueError, KeyError, IndexError):
                self._query_id = "batch-" + uuid.uuid5(uuid.NAMESPACE_URL, str(Path(self.checkpoint_location).resolve())).hex
        return self._query_id

    @property
    def audit(self) -> AuditSink:
        return AuditSink(self.spark, self.config.audit.path, app_id=self.query_id, table_name=self.config.audit.table_name)

    @property
    def progress(self) -> ProgressStore:
        return ProgressStore(self.spark, str(Path(self.checkpoint_location) / "group_progress"), app_id=self.query_id)

    def client(self) -> DeleteClient:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def plan(self, snapshot: DataFrame) -> tuple[DataFrame, datetime | None]:
        """The plan DataFrame for a snapshot, planned as of the snapshot's own time."""
        from spark_purge.policy import compute_plan, unreadable_groups_of

        first = snapshot.select("snapshot_time", "unreadable_groups").limit(1).collect()
        if not first:
            return self.spark.createDataFrame([], "snapshot_id string"), None
        now = _utc(first[0]["snapshot_time"])
        partitions, groups = split_snapshot(snapshot)
        plan = compute_plan(
            partitions,
            groups,
            self.config,
            now=now,
            progress=self.progress.read(),
            manual_offsets=self._manual_offsets(partitions),
            unreadable_groups=unreadable_groups_of(first[0]),  # unknown commits block, never vanish
        )
        return plan, now

    def _manual_offsets(self, partitions: DataFrame) -> DataFrame | None:
        """Answer the config's ``offset: '@timestamp'`` entries with ListOffsets by timestamp."""
        from spark_purge.policy import MANUAL_OFFSETS

        lookups = timestamp_lookups(self.config)
        if not lookups:
            return None
        topics = sorted({lookup.topic for lookup in lookups})
        wanted: dict[tuple[str, int], datetime] = {}
        for row in partitions.select("topic", "partition").where(F.col("topic").isin(topics)).collect():
            entry = self.config.manual_for(row["topic"], row["partition"])
            if entry is not None and entry.timestamp is not None:
                wanted[(row["topic"], row["partition"])] = entry.timestamp
        found = self.client().offsets_for_times(  # type: ignore[attr-defined]
            {tp: int(ts.timestamp() * 1000) for tp, ts in wanted.items()}
        )
        rows = [(t, p, ts, found.get((t, p))) for (t, p), ts in sorted(wanted.items())]
        return self.spark.createDataFrame(rows, MANUAL_OFFSETS)

    def process_batch(self, snapshot: DataFrame, batch_id: int) -> BatchResult:
        result = BatchResult(batch_id)
        snapshot = snapshot.persist()
        try:
            plan_df, now = self.plan(snapshot)
            if now is None:
                return self._done(result)
            plan_rows = plan_df.collect()  # one row per partition: small, and used twice below
            _partitions, groups = split_snapshot(snapshot)
            group_rows = groups.collect()
        finally:
            snapshot.unpersist()
        result.planned = len(plan_rows)
        audit = self.audit
        audit.ensure_table()
        planned_at = now
        actionable = [r for r in plan_rows if r["actionable"]]
        result.actionable = len(actionable)

        # 1. intents: persisted before anything is deleted.
        intents = [self._audit_row(r, batch_id, "intent", planned_at, None, status="planned") for r in actionable]
        audit.write(intents, "intent", batch_id)
        self._fault("intents_written", batch_id)

        # 2. deletes, batched per leader.
        outcomes: dict[tuple[str, int], object] = {}
        if actionable and not self.dry_run:
            cutoffs = {(r["topic"], r["partition"]): int(r["cutoff"]) for r in actionable}
            log.info("batch %d: DeleteRecords for %d partitions", batch_id, len(cutoffs))
            for outcome in self.client().delete_records(cutoffs, timeout_ms=self.config.kafka.delete_timeout):
                outcomes[(outcome.topic, outcome.partition)] = outcome  # type: ignore[attr-defined]
        self._fault("deletes_sent", batch_id)

        # 3. outcomes: one per planned partition, exactly once per batch.
        executed_at = datetime.now(timezone.utc)
        rows = []
        for r in plan_rows:
            key = (r["topic"], r["partition"])
            if not r["actionable"]:
                rows.append(self._audit_row(r, batch_id, "outcome", planned_at, executed_at, status="skipped"))
            elif self.dry_run:
                rows.append(self._audit_row(r, batch_id, "outcome", planned_at, executed_at, status="dry_run"))
            else:
                rows.append(self._outcome_row(r, batch_id, planned_at, executed_at, outcomes.get(key), result))
        audit.write(rows, "outcome", batch_id)

        # 4. group progress, for stale-group detection in later batches.
        self._update_progress(group_rows, now, batch_id)
        return self._done(result)

    # ---- helpers ----------------------------------------------------------------------------
    def _done(self, result: BatchResult) -> BatchResult:
        self.results.append(result)
        if self.on_batch is not None:
            self.on_batch(result)
        return result

    def _fault(self, step: str, batch_id: int) -> None:
        if self.fault_hook is not None:
            self.fault_hook(step, batch_id)

    def _audit_row(
        self,
        plan: Row,
        batch_id: int,
        record_type: str,
        planned_at: datetime,
        executed_at: datetime | None,
        status: str,
        low_watermark: int | None = None,
        records_deleted: int | None = None,
        error: str | None = None,
    ) -> Row:
        values = dict(
            run_id=self.run_id,
            query_id=self.query_id,
            batch_id=int(batch_id),
            record_type=record_type,
            planned_at=planned_at,
            executed_at=executed_at,
            snapshot_id=plan["snapshot_id"],
            topic=plan["topic"],
            partition=plan["partition"],
            leader=plan["leader"],
            prior_log_start_offset=plan["log_start_offset"],
            high_watermark=plan["high_watermark"],
            cutoff=plan["cutoff"],
            low_watermark=low_watermark,
            records_deleted=records_deleted if records_deleted is not None else (0 if record_type == "outcome" else None),
            binding_constraint=plan["binding_constraint"],
            blocking_group=plan["blocking_group"],
            stale_groups=list(plan["stale_groups"] or []),
            rule=plan["rule"],
            status=status,
            error=error,
            dry_run=self.dry_run,
            remote_storage_enable=plan["remote_storage_enable"],
            config_fingerprint=self._fingerprint,
            event_date=planned_at.strftime("%Y-%m-%d"),
        )
        return Row(**{f.name: values[f.name] for f in AUDIT.fields})

    def _outcome_row(
        self, plan: Row, batch_id: int, planned_at: datetime, executed_at: datetime, outcome: object | None, result: BatchResult
    ) -> Row:
        if outcome is None:  # the client returned nothing for it: never silently "deleted"
            result.failed += 1
            result.failures.append(f"{plan['topic']}-{plan['partition']}: no outcome")
            return self._audit_row(plan, batch_id, "outcome", planned_at, executed_at, status="failed", error="NO_OUTCOME")
        low = getattr(outcome, "low_watermark", None)
        error = getattr(outcome, "error", None)
        deleted = max(0, int(low) - int(plan["log_start_offset"])) if low is not None and low >= 0 else None
        if error:
            message = getattr(outcome, "error_message", None)
            text = f"{error}: {message}" if message else str(error)
            result.failed += 1
            result.failures.append(f"{plan['topic']}-{plan['partition']}: {text}")
            return self._audit_row(
                plan, batch_id, "outcome", planned_at, executed_at, status="failed",
                low_watermark=low if low is not None and low >= 0 else None, records_deleted=deleted, error=text,
            )
        result.deleted += 1
        result.records_deleted += deleted or 0
        return self._audit_row(
            plan, batch_id, "outcome", planned_at, executed_at, status="deleted", low_watermark=low, records_deleted=deleted
        )

    def _update_progress(self, group_rows: Iterable[Row], now: datetime, batch_id: int) -> None:
        current = self.spark.createDataFrame(
            [(g["group_id"], g["topic"], g["partition"], g["committed_offset"], now) for g in group_rows], GROUP_PROGRESS
        )
        store = self.progress
        store.update(current, store.read(), batch_id)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


# ---- streaming entry points -----------------------------------------------------------------


def default_client_factory(config: PurgeConfig) -> Callable[[], DeleteClient]:
    def make() -> DeleteClient:
        from spark_purge.kafka import open_client

        return open_client(config)  # type: ignore[return-value]

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
    interval_ms = stream_cfg.trigger_interval if stream_cfg else 60_000
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
    writer = snapshots.writeStream.foreachBatch(pipeline.process_batch).option("checkpointLocation", checkpoint)
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
            if pipeline.results:  # it made progress since the last failure: start over gently
                backoff = initial_backoff_s
            restarts += 1
            log.warning("Kafka unreachable (%s); restarting the purge stream in %.0fs (retry %d)", found, backoff, restarts)
            sleep(backoff)
            backoff = min(max_backoff_s, backoff * 2)
        finally:
            pipeline.close()
