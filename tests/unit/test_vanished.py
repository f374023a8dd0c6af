"""Vanished groups: remembered positions the snapshot no longer shows become ``Vanished`` group
rows before planning (``spark_purge.vanished``), and the planner hands them to the policy."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.config import PurgeConfig, from_dict
from spark_purge.kafka.model import ClusterSnapshot, PartitionState
from spark_purge.planner import Planner
from spark_purge.vanished import VANISHED, retention_warning, vanished_rows, with_vanished_groups

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
SNAP = "snap-v"


def config(stale_after: str = "30d", on_stale_group: str = "block", **rule: Any) -> PurgeConfig:
    return from_dict(
        {
            "kafka": {"bootstrap_servers": ["k:9092"]},
            "audit": {"path": "a"},
            "defaults": {"min_retention": "0s", "min_step": 1},
            "rules": [{"name": "r", "topics": "orders", "stale_after": stale_after, "on_stale_group": on_stale_group, **rule}],
        }
    )


def snapshot_row(partition: int, groups: list[tuple[Any, ...]], hw: int = 200) -> tuple[Any, ...]:
    return (SNAP, NOW, "orders", partition, 1, [1], [1], 0, hw, hw, False, "delete", None, None, None, None, None, None, None, None, groups, [])


def live(group: str, offset: int, state: str = "Stable", members: int = 1) -> tuple[Any, ...]:
    return (group, state, "classic", members, offset, None, None, None)


def progress(spark: SparkSession, rows: list[tuple[Any, ...]]) -> Any:
    """PROGRESS_STORE rows: (group, topic, partition, offset, last progress, group_type[, topic_id])."""
    return spark.createDataFrame([r + (None,) * (7 - len(r)) for r in rows], schemas.PROGRESS_STORE)


def plan(spark: SparkSession, cfg: PurgeConfig, snapshot: list[tuple[Any, ...]], store: Any) -> dict[int, Any]:
    def lookup(_: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        raise AssertionError("no @timestamp entries")

    got = Planner(cfg, lookup, lambda: store).plan(spark.createDataFrame(snapshot, schemas.SNAPSHOT))
    assert got is not None
    return {r["partition"]: r for r in got.rows.collect()}


def test_vanished_rows_are_remembered_positions_missing_from_the_snapshot(spark: SparkSession) -> None:
    snapshot = spark.createDataFrame(
        [snapshot_row(0, [live("fast", 100), ("held", "Stable", "consumer", 2, -1, None, None, None)]), snapshot_row(1, [live("fast", 100)])],
        schemas.SNAPSHOT,
    )
    from spark_purge.policy import split_snapshot

    partitions, groups = split_snapshot(snapshot)
    store = progress(
        spark,
        [
            ("fast", "orders", 0, 90, NOW, "classic"),  # live now at 100: not vanished
            ("gone", "orders", 0, 30, NOW - timedelta(days=1), "consumer"),  # vanished
            ("gone", "orders", 9, 30, NOW, "consumer"),  # partition not in the snapshot: no row
            ("held", "orders", 0, 40, NOW, "consumer"),  # only a -1 row now: that is no position
            ("lost", "orders", 1, 7, NOW, None),
            ("ghost", "orders", 1, 5, NOW, "classic"),  # unreadable: unknown is not vanished
        ],
    )

    got = vanished_rows(partitions, groups, store, unreadable=["ghost"]).drop("snapshot_time").collect()

    assert sorted(tuple(r) for r in got) == [
        (SNAP, "gone", VANISHED, "consumer", 0, "orders", 0, 30, None, None, None),
        (SNAP, "held", VANISHED, "consumer", 0, "orders", 0, 40, None, None, None),
        (SNAP, "lost", VANISHED, None, 0, "orders", 1, 7, None, None, None),
    ]
    typed = [(f.name, f.dataType) for f in vanished_rows(partitions, groups, store).schema.fields]
    assert typed == [(f.name, f.dataType) for f in schemas.GROUP_OFFSETS.fields]
    # No store: nothing added. A store from before group_type existed still works.
    assert with_vanished_groups(partitions, groups, None) is groups
    old = store.drop("group_type", "topic_id")
    assert {r["group_id"] for r in vanished_rows(partitions, groups, old).collect()} == {"gone", "held", "lost", "ghost"}


def test_the_gone_flag_says_whether_vanished_has_rows_and_the_plan_is_the_same_either_way(spark: SparkSession) -> None:
    """``Positions.staleness_table``'s gone flag answers what ``vanished`` would hold; the planner
    joins vanished rows only when there are some, and a store without gone positions plans as
    one that has none to add."""
    from spark_purge.policy import split_snapshot
    from spark_purge.policy.positions import Positions

    snapshot = spark.createDataFrame([snapshot_row(0, [live("fast", 100)]), snapshot_row(1, [live("fast", 120)])], schemas.SNAPSHOT)
    partitions, groups = split_snapshot(snapshot)
    steady = progress(spark, [("fast", "orders", 0, 90, NOW, "classic"), ("fast", "orders", 1, 120, NOW, "classic")])
    gone = progress(spark, [("fast", "orders", 0, 90, NOW, "classic"), ("slow", "orders", 1, 30, NOW, "classic")])
    for store, expected in ((steady, False), (gone, True)):
        positions = Positions.match(partitions, groups, store, at=NOW)
        try:
            assert positions.staleness_table()[1] is expected
            assert (positions.vanished().count() > 0) is expected
            assert not positions.staleness_table(["slow"])[1]  # unreadable: unknown is not vanished
        finally:
            positions.release()
    cfg = config(on_missing_commit="ignore")
    rows = [snapshot_row(0, [live("fast", 100)]), snapshot_row(1, [live("fast", 120)])]
    assert {p: (r["cutoff"], r["blocking_group"]) for p, r in plan(spark, cfg, rows, steady).items()} == {0: (100, "fast"), 1: (120, "fast")}
    assert {p: (r["cutoff"], r["blocking_group"]) for p, r in plan(spark, cfg, rows, gone).items()} == {0: (100, "fast"), 1: (30, "slow")}


def test_a_position_seen_on_another_incarnation_of_the_topic_holds_nothing(spark: SparkSession) -> None:
    """A topic deleted and recreated under the same name: the old incarnation's remembered
    positions do not vanish-hold the new one (its records are unread); unknown ids still hold."""
    snapshot = [
        (SNAP, NOW, "orders", p, 1, [1], [1], 0, 100, 100, False, "delete", None, None, None, None, "id-new", None, None, None, [live("fast", 90)], [])
        for p in range(3)
    ]
    store = progress(
        spark,
        [
            ("fast", "orders", p, 90, NOW, "classic", "id-new") for p in range(3)
        ] + [
            ("old", "orders", 0, 60, NOW, "classic", "id-old"),  # seen on the deleted topic: holds nothing
            ("same", "orders", 1, 50, NOW, "classic", "id-new"),  # seen on this one: holds
            ("legacy", "orders", 2, 40, NOW, "classic", None),  # remembered before ids were stored: holds
        ],
    )
    # (discovery is per topic: each remembered group is missing on the other partitions; ignore that)
    got = {p: (r["cutoff"], r["blocking_group"]) for p, r in plan(spark, config(on_missing_commit="ignore"), snapshot, store).items()}
    assert got == {0: (90, "fast"), 1: (50, "same"), 2: (40, "legacy")}


def test_a_vanished_group_holds_the_cutoff_at_its_last_position(spark: SparkSession) -> None:
    snapshot = [snapshot_row(0, [live("fast", 100)])]
    store = progress(spark, [("fast", "orders", 0, 100, NOW, "classic"), ("gone", "orders", 0, 30, NOW - timedelta(days=2), "classic")])

    row = plan(spark, config(), snapshot, store)[0]

    # Without the store the plan would cut at 100 (fast); the remembered position holds it at 30.
    assert (row["cutoff"], row["blocking_group"], row["records_to_delete"]) == (30, "gone", 30)
    without = plan(spark, config(), snapshot, None)[0]
    assert (without["cutoff"], without["blocking_group"]) == (100, "fast")


def test_vanished_group_binds_as_vanished_group(spark: SparkSession) -> None:
    snapshot = [snapshot_row(0, [live("fast", 100)])]
    store = progress(spark, [("fast", "orders", 0, 100, NOW, "classic"), ("gone", "orders", 0, 30, NOW - timedelta(days=2), "consumer")])
    row = plan(spark, config(), snapshot, store)[0]
    assert (row["binding_constraint"], row["cutoff"], row["blocking_group"]) == ("vanished_group", 30, "gone")


def test_stale_vanished_group_is_released_with_ignore_and_blocks_with_block(spark: SparkSession) -> None:
    snapshot = [snapshot_row(0, [live("fast", 100)])]
    long_ago = NOW - timedelta(hours=2)
    store = progress(spark, [("fast", "orders", 0, 100, NOW, "classic"), ("gone", "orders", 0, 30, long_ago, "classic")])

    released = plan(spark, config("1h", "ignore"), snapshot, store)[0]
    assert (released["cutoff"], released["blocking_group"], released["actionable"]) == (100, "fast", True)
    assert released["stale_groups"] == ["gone"]

    held = plan(spark, config("1h", "block"), snapshot, store)[0]
    assert (held["cutoff"], held["binding_constraint"], held["blocking_group"]) == (30, "stale_group", "gone")

    # Progress within stale_after: not stale, ignore or not.
    fresh = plan(spark, config("3h", "ignore"), snapshot, store)[0]
    assert (fresh["cutoff"], fresh["blocking_group"]) == (30, "gone")


def test_listed_required_group_that_vanished_still_holds(spark: SparkSession) -> None:
    snapshot = [snapshot_row(0, [live("fast", 100)])]
    store = progress(spark, [("gone", "orders", 0, 30, NOW, "classic")])
    row = plan(spark, config(required_groups=["fast", "gone"]), snapshot, store)[0]
    assert (row["cutoff"], row["blocking_group"]) == (30, "gone")


def test_retention_warning_names_the_rules_whose_stale_after_is_longer() -> None:
    cfg = config("7d")
    assert retention_warning(cfg, None) is None
    assert retention_warning(cfg, 7 * 86_400_000) is None  # equal: Kafka does not forget first
    text = retention_warning(cfg, 60_000)
    assert text is not None
    assert "offsets.retention.minutes (1m)" in text and "stale_after (1w at most)" in text and "rule(s) r" in text
    assert "by memory" in text and "vanished_group" in text and "forget-group" in text


def test_snapshot_json_carries_offsets_retention_and_reads_old_files() -> None:
    part = PartitionState("orders", 0, 1, (1,), (1,), 0, 10, 10, False, "delete", None, None)
    snap = ClusterSnapshot("s", 1, (part,), (), offsets_retention_ms=60_000)
    assert ClusterSnapshot.from_json(snap.to_json()) == snap
    import json

    old = json.loads(snap.to_json())
    del old["offsets_retention_ms"]  # a snapshot file written before the field existed
    assert ClusterSnapshot.from_json(json.dumps(old)).offsets_retention_ms is None
