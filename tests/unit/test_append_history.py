"""The append history store (real Delta, local files): one row per partition whose high
watermark moved, harmless to re-run, and pruned down to what a floor can still need."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.history import PRUNE_INTERVAL_MS, AppendHistory

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
HOUR_MS = 3_600_000


def partitions(spark: SparkSession, at: datetime, hws: dict[int, int], topic_id: str | None = None) -> Any:
    """PARTITION_STATE rows of topic ``t`` (incarnation ``topic_id``) with these high watermarks."""
    rows = [("s", at, "t", p, 1, [1], [1], 0, hw, hw, False, "delete", None, None, None, None, topic_id, None, None, None) for p, hw in hws.items()]
    return spark.createDataFrame(rows, schemas.PARTITION_STATE)


def content(store: AppendHistory) -> list[tuple[int, timedelta, int]]:
    """(partition, snapshot time - T0, high watermark), sorted."""
    rows = store.read().collect()
    return sorted((r["partition"], r["snapshot_time"].replace(tzinfo=timezone.utc) - T0, r["high_watermark"]) for r in rows)


def test_rows_only_where_the_high_watermark_moved_and_old_rows_pruned(spark: SparkSession, tmp_path: Path) -> None:
    store = AppendHistory(spark, str(tmp_path / "append_history"))
    assert store.read_if_exists() is None

    store.update(partitions(spark, T0, {0: 10, 1: 5}), T0, HOUR_MS, 0)
    store.update(partitions(spark, T0, {0: 10, 1: 5}), T0, HOUR_MS, 0)  # a replayed batch: no change
    t1 = T0 + timedelta(minutes=30)
    store.update(partitions(spark, t1, {0: 10, 1: 8}), t1, HOUR_MS, 1)  # only partition 1 moved
    assert content(store) == [(0, timedelta(0), 10), (1, timedelta(0), 5), (1, timedelta(minutes=30), 8)]

    # 2h in: the newest row at or before now - 1h (30 min) is kept, anything older goes.
    t2 = T0 + timedelta(hours=2)
    store.update(partitions(spark, t2, {0: 10, 1: 9}), t2, HOUR_MS, 2)
    assert content(store) == [(0, timedelta(0), 10), (1, timedelta(minutes=30), 8), (1, timedelta(hours=2), 9)]


def test_a_process_prunes_at_most_once_per_interval_of_batch_time(spark: SparkSession, tmp_path: Path) -> None:
    """Pruning is tidying: within ``PRUNE_INTERVAL_MS`` of this process's last prune, rows a
    floor no longer needs stay (harmless: a floor reads the newest row at or before its time);
    the first batch after the interval prunes them."""
    assert PRUNE_INTERVAL_MS == 60_000  # whatever the floor: a 3 s one pruned every batch under 10 s
    store = AppendHistory(spark, str(tmp_path / "append_history"))
    hour = timedelta(hours=1)
    store.record(spark.createDataFrame([("t", 0, T0 - hour - timedelta(seconds=10), 5, None), ("t", 0, T0 - hour + timedelta(seconds=20), 7, None)], schemas.APPEND_HISTORY), -1)
    store.update(partitions(spark, T0, {0: 7}), T0, HOUR_MS, 0)  # the process's first batch prunes: nothing stale yet
    assert [hw for _, _, hw in content(store)] == [5, 7]
    # 30 s on, the row of 5 is stale (the row of 7 is at or before now - 1h), but the last prune was 30 s ago.
    store.update(partitions(spark, T0, {0: 7}), T0 + timedelta(seconds=30), HOUR_MS, 1)
    assert [hw for _, _, hw in content(store)] == [5, 7]
    store.update(partitions(spark, T0, {0: 8}), T0 + timedelta(seconds=61), HOUR_MS, 2)  # a minute on: pruned
    assert content(store) == [(0, -hour + timedelta(seconds=20), 7), (0, timedelta(seconds=61), 8)]


def test_a_new_incarnation_of_the_topic_gets_its_own_rows(spark: SparkSession, tmp_path: Path) -> None:
    store = AppendHistory(spark, str(tmp_path / "append_history"))
    store.update(partitions(spark, T0, {0: 10}, topic_id="id-1"), T0, HOUR_MS, 0)
    t1 = T0 + timedelta(minutes=1)
    store.update(partitions(spark, t1, {0: 10}, topic_id="id-1"), t1, HOUR_MS, 1)  # unchanged: no row
    # Deleted, recreated and refilled to the same high watermark: the same offsets, other records.
    t2 = T0 + timedelta(minutes=2)
    store.update(partitions(spark, t2, {0: 10}, topic_id="id-2"), t2, HOUR_MS, 2)
    rows = sorted((r["snapshot_time"].replace(tzinfo=timezone.utc) - T0, r["high_watermark"], r["topic_id"]) for r in store.read().collect())
    assert rows == [(timedelta(0), 10, "id-1"), (timedelta(minutes=2), 10, "id-2")]


def test_a_table_written_before_topic_ids_gains_the_column(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "append_history")
    old = spark.createDataFrame([("t", 0, T0, 5)], "topic string, partition int, snapshot_time timestamp, high_watermark long")
    old.write.format("delta").save(path)
    store = AppendHistory(spark, path)
    assert [(r["high_watermark"], r["topic_id"]) for r in store.read().collect()] == [(5, None)]  # read as it is
    t1 = T0 + timedelta(minutes=1)
    store.update(partitions(spark, t1, {0: 5}, topic_id="id-1"), t1, HOUR_MS, 1)  # a row now names the incarnation
    got = sorted((r["high_watermark"], r["topic_id"] or "") for r in store.read().collect())
    assert got == [(5, ""), (5, "id-1")]
    assert "topic_id" in spark.read.format("delta").load(path).columns


def test_a_partition_gone_from_the_snapshot_is_pruned_too(spark: SparkSession, tmp_path: Path) -> None:
    """The prune reads the stored rows of every partition, not only the snapshot's: one whose
    topic went keeps only the row a floor at ``now - keep`` reads (and nothing is appended
    for it)."""
    store = AppendHistory(spark, str(tmp_path / "append_history"))
    hour = timedelta(hours=1)
    store.record(
        spark.createDataFrame(
            [("t", 2, T0 - 3 * hour, 4, None), ("t", 2, T0 - 2 * hour, 6, None), ("t", 2, T0 - 30 * timedelta(minutes=1), 9, None)],
            schemas.APPEND_HISTORY,
        ),
        -1,
    )
    store.update(partitions(spark, T0, {0: 7}), T0, HOUR_MS, 0)
    assert content(store) == [(0, timedelta(0), 7), (2, -2 * hour, 6), (2, -timedelta(minutes=30), 9)]
