"""The append history: per partition, (snapshot time, high watermark) pairs kept in the checkpoint.

Why: the timestamp index (ListOffsets by timestamp) answers in *record* time, which for a
``CreateTime`` topic is whatever the producer wrote. A record appended a second ago carrying a
two-day-old CreateTime looks two days old to it. The high watermark a snapshot saw at time s is
proof that every offset at or above it was appended after s, whatever its timestamp. So the
policy takes the smaller of the timestamp lookup and the high watermark of the newest snapshot
at or before ``now - min_retention`` (``policy.with_append_floor``); without such a snapshot
nothing older can be proven, and the floor is the log start: **a fresh job deletes nothing
under a time floor until it has run for ``min_retention``.**

Storage: a Delta table (``schemas.APPEND_HISTORY``) beside the group-progress store. Each batch
appends one row per partition whose high watermark or topic id differs from its newest stored
row (an unchanged high watermark adds nothing: the older row answers every later floor time the
same), so re-running a batch with the same high watermarks changes nothing. Each row names the
topic incarnation it was seen on (``topic_id``): the policy counts only a partition's rows of
its current incarnation (``policy.incarnation``), so a topic recreated and refilled past an old
row between two batches proves nothing until its own rows are ``min_retention`` old (rows from
before ids were kept have none, and prove nothing about a topic whose id is known). Those rows (at most one
per partition) come to the driver as Arrow and go back as one blind append: one query finds
them, one write adds them, and nothing is committed when none moved. Rows no floor can need any
more are pruned by a MERGE: per partition, every row older than the newest one at or before
``now - keep_ms`` (``keep_ms``: the largest ``min_retention``). Pruning is only tidying (a floor
reads the newest row at or before its time; older rows never change an answer), so a process
prunes at most once per ``PRUNE_INTERVAL_MS`` (1 min) of batch time: the table then holds at
most about a minute more rows than a floor needs. A prune is a MERGE, several Spark jobs and a
Delta commit (about a second here): pruning a 3 s floor every second made the history cost as
much as the rest of a small batch, and it once pruned every 10 s, which for a small floor and
batches 10 s or more apart was every batch (the invariant checker's: 16 Spark jobs a batch).

    history = AppendHistory(spark, "/ckpt/append_history")
    history.update(partitions, snapshot_time, keep_ms=3_600_000, batch_id=7)
    history.read_if_exists()   # APPEND_HISTORY rows, or None before the first batch
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, TimestampType

from spark_purge._time import as_utc
from spark_purge.audit import CheckpointTable, retry_conflicts
from spark_purge.deltalog import with_own_properties
from spark_purge.errors import AuditError
from spark_purge.schemas import APPEND_HISTORY
from spark_purge.txn_append import driver_rows

# The rows a prune keeps from, per partition (its MERGE's source, made on the driver).
PRUNE_FROM = StructType([APPEND_HISTORY["topic"], APPEND_HISTORY["partition"], StructField("keep_from", TimestampType(), False)])

HISTORY_KEY = ("topic", "partition")
_ADDED = ("topic_id",)  # string columns added after the table's first version (rows before: null)
_READY: set[str] = set()  # paths whose table this process already created
_PRUNED: dict[str, datetime] = {}  # path -> batch time of this process's last prune there
PRUNE_INTERVAL_MS = 60_000  # batch time a process lets pass between two prunes of the history


@dataclass(frozen=True)
class AppendHistory(CheckpointTable):
    """The append-history Delta table at ``path`` (see the module docstring)."""

    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def read(self) -> DataFrame:
        """Every stored row (``APPEND_HISTORY``; empty before the first batch)."""
        df = self._stored()
        if df is None:
            return self.spark.createDataFrame([], APPEND_HISTORY)
        return self._with_strings(df, _ADDED).select(*APPEND_HISTORY.fieldNames())

    def read_if_exists(self) -> DataFrame | None:
        return self.read() if self.exists() else None

    def ensure_table(self) -> None:
        from delta.tables import DeltaTable

        if self.path in _READY and self.exists():
            return
        try:
            with_own_properties(DeltaTable.createIfNotExists(self.spark)).location(self.path).addColumns(APPEND_HISTORY).execute()
            self._add_strings(_ADDED)
            _READY.add(self.path)
        except Exception as exc:
            raise AuditError(f"cannot create the append history table at {self.path}: {exc}") from exc

    def record(self, rows: DataFrame, batch_id: int) -> None:
        """MERGE ``APPEND_HISTORY`` rows in as they are (no dedup, no pruning): the store's own
        API for seeding history, e.g. in tests or after restoring a checkpoint."""
        self.ensure_table()
        self._merge(rows.select(*APPEND_HISTORY.fieldNames()), batch_id)

    def update(self, partitions: DataFrame, now: datetime, keep_ms: int, batch_id: int) -> None:
        """Add a snapshot's high watermarks (``PARTITION_STATE`` rows) as of ``now`` where they
        moved, then prune what no floor within ``keep_ms`` of ``now`` can need (when this
        process has not pruned within ``PRUNE_INTERVAL_MS`` of ``now``).

        ``now`` must be no earlier than the moment the high watermarks were read (the pipeline
        passes the clock after the batch): a row claims every offset at or above its high
        watermark was appended after its time."""
        self.ensure_table()
        now = as_utc(now)
        oldest_needed = now - timedelta(milliseconds=keep_ms)
        last = _PRUNED.get(self.path)
        prune = last is None or now < last or now - last >= timedelta(milliseconds=PRUNE_INTERVAL_MS)
        seen = partitions.groupBy(*HISTORY_KEY).agg(F.min("high_watermark").alias("high_watermark"), F.max("topic_id").alias("topic_id"))
        # One read of the table answers both questions: where the high watermark moved (against
        # each partition's newest row), and where rows older than the one a floor at
        # ``oldest_needed`` reads are left to prune (a partition gone from the snapshot too).
        stored = self.read().groupBy(*HISTORY_KEY).agg(
            F.max_by(F.struct("high_watermark", "topic_id"), "snapshot_time").alias("t"),
            F.min("snapshot_time").alias("oldest"),
            F.max(F.when(F.col("snapshot_time") <= F.lit(oldest_needed).cast("timestamp"), F.col("snapshot_time"))).alias("keep_from"),
        )
        moved = F.col("high_watermark").isNotNull() & (
            F.col("t").isNull()
            | (F.col("t.high_watermark") != F.col("high_watermark"))
            # A new incarnation of the topic gets a row even at the old one's high watermark.
            | ~F.col("t.topic_id").eqNullSafe(F.col("topic_id"))
        )
        stale = F.coalesce(F.col("oldest") < F.col("keep_from"), F.lit(False)) & F.lit(prune)
        found = (
            seen.join(stored, list(HISTORY_KEY), "full_outer")
            .select(
                *HISTORY_KEY,
                F.lit(now).cast("timestamp").alias("snapshot_time"),
                "high_watermark",
                "topic_id",
                "keep_from",
                moved.alias("moved"),
                stale.alias("stale"),
            )
            .where(F.col("moved") | F.col("stale"))
            .toArrow()  # at most one row per partition
        )
        appended = found.filter(found["moved"]).select(list(APPEND_HISTORY.fieldNames()))
        if appended.num_rows:
            rows = driver_rows(self.spark, appended, APPEND_HISTORY)
            self._retry(
                f"append history append for batch {batch_id}",
                lambda: rows.write.format("delta").mode("append").save(self.path),
            )
        if prune:
            keep_from = found.filter(found["stale"]).select(list(HISTORY_KEY) + ["keep_from"])
            if keep_from.num_rows:
                self._delete_before(self.spark.createDataFrame(keep_from, PRUNE_FROM), batch_id)
            _PRUNED[self.path] = now

    def _delete_before(self, keep_from: DataFrame, batch_id: int) -> None:
        """One MERGE deleting each partition's rows older than its ``keep_from`` (a row that
        exists, which no prune deletes)."""
        from delta.tables import DeltaTable

        on = " AND ".join(f"t.{k} = s.{k}" for k in HISTORY_KEY)
        self._retry(
            f"append history prune for batch {batch_id}",
            lambda: DeltaTable.forPath(self.spark, self.path)
            .alias("t")
            .merge(keep_from.alias("s"), on)
            .whenMatchedDelete(condition="t.snapshot_time < s.keep_from")
            .execute(),
        )

    def _merge(self, rows: DataFrame, batch_id: int) -> None:
        from delta.tables import DeltaTable

        on = " AND ".join(f"t.{k} = s.{k}" for k in (*HISTORY_KEY, "snapshot_time"))
        self._retry(
            f"append history merge for batch {batch_id}",
            lambda: DeltaTable.forPath(self.spark, self.path).alias("t").merge(rows.alias("s"), on).whenNotMatchedInsertAll().execute(),
        )

    def _retry(self, what: str, action: Callable[[], object]) -> None:
        retry_conflicts(f"{what} on {self.path}", action, self.sleep)


__all__ = ["HISTORY_KEY", "PRUNE_INTERVAL_MS", "AppendHistory"]
