"""The planner on one fixed snapshot: the exact plan rows, and the one Kafka lookup it makes."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.config import from_dict
from spark_purge.detach import drop
from spark_purge.planner import LastPairs, Planner

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
FLOOR = NOW - timedelta(hours=1)  # orders' min_retention: 1h
SNAP = "snap-7"
CONFIG = from_dict(
    {
        "kafka": {"bootstrap_servers": ["k:9092"]},
        "audit": {"path": "a"},
        "rules": [
            {"name": "orders", "topics": "orders", "required_groups": ["billing", "analytics"], "min_retention": "1h"},
            {"name": "clicks", "topics": "clicks", "min_step": 100, "min_retention": "0s"},  # groups discovered
            {"name": "pay", "topics": "pay", "min_retention": "0s"},
        ],
        "protected_topics": ["pay"],
        "manual": [{"topic": "orders", "partition": 1, "offset": "@2024-05-01T10:00:00Z"}],
    }
)


def commit(group: str, offset: int) -> tuple[Any, ...]:
    return (group, "Stable", "classic", 1, offset, None, None, None)


def snapshot_row(
    topic: str, partition: int, log_start: int, hw: int, last_stable: int, groups: list[tuple[Any, ...]],
    floor_offset: int | None = None,
) -> tuple[Any, ...]:
    floor_time = FLOOR if floor_offset is not None else None
    return (SNAP, NOW, topic, partition, 1, [1], [1], log_start, hw, last_stable, False, "delete", None, None,
            floor_time, floor_offset, f"id-{topic}", None, None, None, groups, [])


SNAPSHOT = [
    snapshot_row("orders", 0, 100, 500, 500, [commit("billing", 300), commit("analytics", 420)], floor_offset=450),
    snapshot_row("orders", 1, 0, 500, 480, [commit("billing", 450), commit("analytics", 460)], floor_offset=400),
    snapshot_row("clicks", 0, 0, 1000, 1000, [commit("etl", 50)]),
    snapshot_row("clicks", 1, 0, 1000, 1000, []),
    snapshot_row("pay", 0, 0, 700, 700, [commit("ledger", 700)]),
    snapshot_row("other", 0, 0, 900, 900, [commit("etl", 900)]),  # no rule: not planned
]

EXPECTED = [
    ("clicks", 0, 1, 0, 1000, 50, 0, "below_min_step", "etl", "classic", "clicks", [], False, None,
     "group etl at 50: only 50 records deletable, min_step 100", None, None, None, False),
    ("clicks", 1, 1, 0, 1000, None, 0, "missing_commit", "etl", None, "clicks", [], False, None,
     "required group etl has no commit on this partition", None, None, None, False),
    ("orders", 0, 1, 100, 500, 300, 200, "group", "billing", "classic", "orders", [], True, None,
     "group billing at 300 holds back 200 records", "timestamp_index", None, None, False),
    ("orders", 1, 1, 0, 500, 120, 120, "manual", None, None, "orders", [], True, None,
     "manual cutoff 120 (@2024-05-01T10:00:00Z) holds back 380 records", "timestamp_index", None, None, False),
    ("pay", 0, 1, 0, 700, None, 0, "protected", None, None, "pay", [], False, None,
     "topic matches protected_topics: never purged", None, None, None, False),
]


def test_one_snapshot_gives_exactly_these_plan_rows(spark: SparkSession) -> None:
    asked: list[dict[tuple[str, int], int]] = []

    def lookup(timestamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        asked.append(dict(timestamps))
        return {("orders", 1): 120}

    plan = Planner(CONFIG, lookup).plan(spark.createDataFrame(SNAPSHOT, schemas.SNAPSHOT))

    assert plan is not None and plan.planned_at == NOW  # planned as of the snapshot's own time
    # the snapshot's topic id travels into the plan (the batch re-checks it before deleting)
    expected = spark.createDataFrame([(SNAP, row[0], row[1], f"id-{row[0]}", *row[2:]) for row in EXPECTED], schemas.PLAN)
    assert_df_equality(plan.rows.orderBy("topic", "partition"), expected)
    # One ListOffsets-by-timestamp question, for the one partition with an @timestamp entry.
    assert asked == [{("orders", 1): int(datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc).timestamp() * 1000)}]
    # The one partition with an open transaction (last stable offset 480, below 500), by its LSO;
    # "other" (no rule) would count too, had it one.
    assert plan.open_transactions == {("orders", 1): 480}


def test_no_timestamp_entries_no_lookup_and_empty_snapshot_no_plan(spark: SparkSession) -> None:
    def lookup(timestamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        raise AssertionError(f"no lookup expected, got {timestamps}")

    import dataclasses

    planner = Planner(dataclasses.replace(CONFIG, manual=()), lookup)
    plan = planner.plan(spark.createDataFrame(SNAPSHOT, schemas.SNAPSHOT))
    assert plan is not None
    orders_1 = plan.rows.where("topic = 'orders' AND partition = 1").first()
    assert orders_1 is not None and (orders_1.binding_constraint, orders_1.cutoff) == ("time_floor", 400)
    assert planner.plan(spark.createDataFrame([], schemas.SNAPSHOT)) is None


def history_row(partition: int, age: timedelta, hw: int, topic_id: str | None = "id-orders") -> tuple[Any, ...]:
    """An ``APPEND_HISTORY`` row of ``orders``: high watermark ``hw`` seen ``age`` before NOW, on
    the topic's current incarnation (``topic_id``: another one's, or None for a row without one)."""
    return ("orders", partition, NOW - age, hw, topic_id)


def floors(spark: SparkSession, history: list[tuple[Any, ...]] | None) -> dict[int, tuple[Any, ...]]:
    """orders' (binding, cutoff, time_floor_source) per partition, planned with ``history``
    (None: the table does not exist yet). orders-0: timestamp floor 450, groups at 300/420;
    orders-1: timestamp floor 400, groups at 450/460, last stable 480."""
    import dataclasses

    def read() -> Any:
        return None if history is None else spark.createDataFrame(history, schemas.APPEND_HISTORY)

    no_lookup = dataclasses.replace(CONFIG, manual=())
    plan = Planner(no_lookup, lambda ts: {}, append_history=read).plan(spark.createDataFrame(SNAPSHOT, schemas.SNAPSHOT))
    assert plan is not None
    rows = plan.rows.where("topic = 'orders'").collect()
    return {r.partition: (r.binding_constraint, r.cutoff, r.time_floor_source) for r in rows}


def test_the_append_history_is_read_only_when_something_needs_it(spark: SparkSession) -> None:
    # A rule with a min_retention (CONFIG's orders) reads it once a plan; with none, and
    # retirement off, nothing would: the planner does not read it at all.
    import dataclasses

    reads: list[int] = []

    def read() -> Any:
        reads.append(1)
        return spark.createDataFrame([history_row(1, timedelta(hours=2), 300)], schemas.APPEND_HISTORY)

    snapshot = spark.createDataFrame(SNAPSHOT, schemas.SNAPSHOT)
    no_lookup = dataclasses.replace(CONFIG, manual=())
    assert Planner(no_lookup, lambda ts: {}, append_history=read).plan(snapshot) is not None
    assert reads == [1]
    no_floor = dataclasses.replace(
        no_lookup, rules=tuple(dataclasses.replace(r, min_retention=0) for r in no_lookup.rules),
        defaults=dataclasses.replace(no_lookup.defaults, min_retention=0),
    )
    plan = Planner(no_floor, lambda ts: {}, append_history=read).plan(snapshot)
    assert plan is not None and reads == [1]
    assert {r.time_floor_source for r in plan.rows.collect()} == {None}


def test_append_history_lowers_the_time_floor_to_the_newest_old_enough_high_watermark(spark: SparkSession) -> None:
    got = floors(spark, [
        history_row(1, timedelta(hours=3), 200),
        history_row(1, timedelta(hours=1, minutes=5), 350),  # the newest at or before FLOOR
        history_row(1, timedelta(minutes=30), 450),  # too recent
        history_row(0, timedelta(hours=2), 480),  # above the timestamp floor: that one binds
    ])
    assert got[1] == ("time_floor", 350, "append_history")
    assert got[0] == ("group", 300, "timestamp_index")


def test_no_history_old_enough_means_the_log_start(spark: SparkSession) -> None:
    # No table yet, or only rows newer than now - min_retention: nothing older is proven.
    for history in (None, [history_row(1, timedelta(minutes=59), 100), history_row(0, timedelta(seconds=1), 500)]):
        got = floors(spark, history)
        assert got[1] == ("time_floor", 0, "no_history"), history  # log start 0: kept by name
        assert got[0] == ("time_floor", 100, "no_history"), history  # floor = log start 100 < group 300


def test_a_lower_high_watermark_since_voids_the_history(spark: SparkSession) -> None:
    # The high watermark went down after the old row (topic recreated, unclean election): the
    # old offsets name other records now, so they prove nothing.
    got = floors(spark, [history_row(1, timedelta(hours=2), 300), history_row(1, timedelta(minutes=10), 40)])
    assert got[1] == ("time_floor", 0, "no_history")
    current_below = floors(spark, [history_row(1, timedelta(hours=2), 600)])  # current high watermark is 500
    assert current_below[1] == ("time_floor", 0, "no_history")


def test_history_of_another_incarnation_of_the_topic_proves_nothing(spark: SparkSession) -> None:
    # orders was recreated under the same name since these rows, and refilled past them (today's
    # high watermark 500 is above both): its offsets name other records, appended who knows when.
    old_topic = [history_row(1, timedelta(hours=2), 300, topic_id="id-orders-before"), history_row(0, timedelta(hours=2), 200, topic_id="id-orders-before")]
    got = floors(spark, old_topic)
    assert got[1] == ("time_floor", 0, "no_history")
    assert got[0] == ("time_floor", 100, "no_history")
    # A row written before rows named their incarnation proves nothing about a topic whose id is known.
    assert floors(spark, [history_row(1, timedelta(hours=2), 300, topic_id=None)])[1] == ("time_floor", 0, "no_history")
    # The current incarnation's own rows count, whatever the old one's say.
    mixed = floors(spark, [*old_topic, history_row(1, timedelta(hours=1, minutes=30), 350)])
    assert mixed[1] == ("time_floor", 350, "append_history")


# ---- one snapshot with remembered progress: stale, vanished, member-held and lineage cases ----

OLD = NOW - timedelta(hours=3)  # older than stale_after (1h)
PROGRESS_CONFIG = from_dict(
    {
        "kafka": {"bootstrap_servers": ["k:9092"]},
        "audit": {"path": "a"},
        "defaults": {"min_retention": "0s", "min_step": 1, "stale_after": "1h"},
        "rules": [
            {"name": "logs", "topics": "logs", "on_stale_group": "ignore"},  # groups discovered
            {"name": "jobs", "topics": "jobs"},  # on_stale_group: block
        ],
    }
)


def group(group_id: str, state: str, members: int, offset: int, epoch: int | None = None, epoch_end: int | None = None) -> tuple[Any, ...]:
    return (group_id, state, "classic", members, offset, None, epoch, epoch_end)


PROGRESS_SNAPSHOT = [
    # idle (no members, no progress for 3h: stale, ignored) is lowest; an open transaction binds.
    snapshot_row("logs", 0, 0, 100, 40, [group("idle", "Empty", 0, 10), group("live", "Stable", 1, 60)]),
    # live's members hold partition 1 without a commit (-1): missing, and the rule blocks on it.
    snapshot_row("logs", 1, 0, 100, 100, [group("idle", "Empty", 0, 20), group("live", "Stable", 1, -1)]),
    # a commit above the high watermark: another incarnation of the topic.
    snapshot_row("logs", 2, 0, 100, 100, [group("idle", "Empty", 0, 30), group("live", "Stable", 1, 150)]),
    # jobs: idle is stale but the rule blocks on stale groups; gone (vanished on partition 1) is
    # required on the whole topic like any group with a row on it: no row here, missing.
    snapshot_row("jobs", 0, 5, 100, 40, [group("idle", "Empty", 0, 70), group("live", "Stable", 1, 90)]),
    # gone is no longer in the snapshot: its remembered position (25, seen 10 minutes ago) holds.
    snapshot_row("jobs", 1, 0, 100, 100, [group("idle", "Empty", 0, 80), group("live", "Stable", 1, 90)]),
    # live's commit in leader epoch 3, which the log ends at 50: diverged (KIP-320).
    snapshot_row("jobs", 2, 0, 100, 100, [group("idle", "Empty", 0, 80), group("live", "Stable", 1, 60, 3, 50)]),
]
PROGRESS_ROWS = [
    *[("idle", t, p, o, OLD, "classic", "id-" + t) for t, p, o in (("logs", 0, 10), ("logs", 1, 20), ("logs", 2, 30), ("jobs", 0, 70), ("jobs", 1, 80), ("jobs", 2, 80))],
    ("gone", "jobs", 1, 25, NOW - timedelta(minutes=10), "classic", "id-jobs"),
    ("live", "logs", 0, 50, NOW, "classic", "id-logs"),  # moved since: progress, not stale
]
PROGRESS_EXPECTED = [
    ("jobs", 0, 1, 5, 100, None, 0, "missing_commit", "gone", None, "jobs", ["idle"], False, None,
     "required group gone has no commit on this partition", None, None, None, False),
    ("jobs", 1, 1, 0, 100, 25, 25, "vanished_group", "gone", "classic", "jobs", ["idle"], True, None,
     "vanished group gone (Kafka no longer has its offsets; last position seen) at 25 holds back 75 records", None, None, None, False),
    ("jobs", 2, 1, 0, 100, None, 0, "commit_diverged", "live", None, "jobs", ["idle"], False, None,
     "group live committed 60 in leader epoch 3, but the log ends that epoch at 50: its history diverged "
     "from the log (KIP-320 truncation): not purged", None, None, None, False),
    ("logs", 0, 1, 0, 100, 40, 40, "last_stable_offset", None, None, "logs", ["idle"], True, None,
     "open transaction: last stable offset 40 holds back 60 records; ignoring stale group(s) idle", None, None, None, False),
    ("logs", 1, 1, 0, 100, None, 0, "missing_commit", "live", "classic", "logs", ["idle"], False, None,
     "required group live has no commit on this partition", None, None, None, False),
    ("logs", 2, 1, 0, 100, None, 0, "commit_beyond_end", "live", None, "logs", ["idle"], False, None,
     "group live committed 150, beyond the high watermark 100: it read another incarnation of the topic "
     "(deleted and recreated) or a truncated log, so nothing is known to be consumed: not purged", None, None, None, False),
]


def test_one_snapshot_with_progress_gives_exactly_these_plan_rows(spark: SparkSession) -> None:
    progress = spark.createDataFrame(PROGRESS_ROWS, schemas.PROGRESS_STORE)
    expected = spark.createDataFrame(
        [(SNAP, row[0], row[1], f"id-{row[0]}", *row[2:]) for row in PROGRESS_EXPECTED], schemas.PLAN
    )
    # Planned twice with the pairs kept between: the second match is asked for the facts too,
    # but a position vanished (gone's), so the plan takes the facts' own task: the same rows.
    pairs = LastPairs()
    for _ in range(2):
        plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs).plan(spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT))
        assert plan is not None and plan.planned_at == NOW
        assert_df_equality(plan.rows.orderBy("topic", "partition"), expected)
        assert plan.positions is not None and plan.positions.facts() is None
        plan.release()
    assert pairs.pairs is not None


def test_the_facts_from_the_match_give_the_plan_the_facts_task_gives(spark: SparkSession) -> None:
    """Issue 12: with the last batch's pairs kept (``LastPairs``) and nothing vanished, the store
    match's task makes the consumer facts and the plan runs no facts' task of its own
    (``mapInArrow``): the same plan rows as the first batch's, planned with the facts' own task."""
    progress = spark.createDataFrame([r for r in PROGRESS_ROWS if r[0] != "gone"], schemas.PROGRESS_STORE)
    pairs = LastPairs()
    planned = []
    for batch in range(3):
        plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs).plan(spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT))
        assert plan is not None and plan.positions is not None
        made = plan.positions.facts()
        assert (made is not None) == (batch > 0)  # the first batch has no pairs kept
        maps = _arrow_maps(plan.rows._jdf.queryExecution().executedPlan())
        assert len(maps) == (0 if batch else 1)
        # ``PLAN``'s columns and types; from the match's rows every column may be null.
        assert [(f.name, f.dataType) for f in plan.rows.schema] == [(f.name, f.dataType) for f in schemas.PLAN]
        planned.append(sorted(tuple(r) for r in plan.rows.collect()))
        plan.release()
    assert planned[0] == planned[1] == planned[2]
    # What binds, as the exact test above says, but on jobs 0 and 1, where gone no longer vanished:
    # the open transaction binds 0, and the stale group idle holds 1 (the rule blocks on stale groups).
    why = {(r[1], r[2]): r[9] for r in planned[0]}
    changed = {("jobs", 0): "last_stable_offset", ("jobs", 1): "stale_group"}
    assert why == {(t, p): row[5] for t, p, *row in PROGRESS_EXPECTED} | changed
    # A change of the pairs (a new group on logs) makes the guess wrong: the plan takes the
    # facts' own task, and its rules require the new group.
    grown = [*PROGRESS_SNAPSHOT[:2], snapshot_row("logs", 2, 0, 100, 100, [group("idle", "Empty", 0, 30), group("new", "Stable", 1, 5)]), *PROGRESS_SNAPSHOT[3:]]
    plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs).plan(spark.createDataFrame(grown, schemas.SNAPSHOT))
    assert plan is not None and plan.positions is not None and plan.positions.facts() is not None
    assert len(_arrow_maps(plan.rows._jdf.queryExecution().executedPlan())) == 1
    rows = {(r["topic"], r["partition"]): r for r in plan.rows.collect()}
    assert rows[("logs", 1)]["binding_constraint"] == "missing_commit"
    assert rows[("logs", 1)]["blocking_group"] in ("live", "new")
    plan.release()


def test_a_packed_snapshot_is_unpacked_only_when_its_group_rows_are_read(spark: SparkSession, monkeypatch: Any) -> None:
    """Issue 12: the pipeline's snapshot comes packed (``PACKED_SNAPSHOT``). When the store
    match's task made the facts, the plan never reads the group rows, so it makes no DataFrame to
    unpack them (``policy.with_groups``); when the pairs changed, it unpacks them for the facts'
    own task. Either way the rows are the nested snapshot's."""
    from spark_purge.policy import plan as plan_module
    from tests.unit.packing import packed_frame

    unpacked: list[int] = []
    real = plan_module.with_groups

    def counted(snapshot: Any) -> Any:
        unpacked.append(1)
        return real(snapshot)

    monkeypatch.setattr(plan_module, "with_groups", counted)
    progress = spark.createDataFrame([r for r in PROGRESS_ROWS if r[0] != "gone"], schemas.PROGRESS_STORE)
    nested = spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT)
    packed = packed_frame(nested)
    pairs = LastPairs()
    for batch in range(3):
        unpacked.clear()
        plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs).plan(packed)
        assert plan is not None and plan.positions is not None
        assert (plan.positions.facts() is not None) == (batch > 0)
        # The first batch has no pairs kept: its facts' own task reads the group rows, unpacked.
        assert len(unpacked) == (0 if batch else 1)
        got = sorted(tuple(r) for r in plan.rows.collect())
        plan.release()
        same = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress).plan(nested)
        assert same is not None
        assert got == sorted(tuple(r) for r in same.rows.collect())
        same.release()
    # New pairs (a new group on logs): the match's facts are not taken; the snapshot is unpacked.
    grown = [*PROGRESS_SNAPSHOT[:2], snapshot_row("logs", 2, 0, 100, 100, [group("idle", "Empty", 0, 30), group("new", "Stable", 1, 5)]), *PROGRESS_SNAPSHOT[3:]]
    unpacked.clear()
    plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs).plan(packed_frame(spark.createDataFrame(grown, schemas.SNAPSHOT)))
    assert plan is not None
    rows = {(r["topic"], r["partition"]): r for r in plan.rows.collect()}
    assert len(unpacked) == 1 and rows[("logs", 1)]["binding_constraint"] == "missing_commit"
    plan.release()


def _node_names(node: Any) -> list[str]:
    """Every node name of a physical plan (a cached relation's own plan is not among them)."""
    children = node.children()
    return [node.nodeName()] + [n for i in range(children.length()) for n in _node_names(children.apply(i))]


def _shuffles_below(node: Any) -> list[str]:
    """The shuffles (``Exchange``) in ``node``'s subtree, broadcasts' own subtrees left out (a
    broadcast of a few vanished rows goes to every task; the partition rows stay put)."""
    name = node.nodeName()
    if name == "BroadcastExchange":
        return []
    found = [node.simpleString(200)] if name == "Exchange" else []
    children = node.children()
    for i in range(children.length()):
        found += _shuffles_below(children.apply(i))
    return found


def _arrow_maps(node: Any) -> list[Any]:
    """The plan's ``mapInArrow`` nodes (``spark_purge.group_facts``)."""
    children = node.children()
    below = [m for i in range(children.length()) for m in _arrow_maps(children.apply(i))]
    return ([node] if "MapInArrow" in node.nodeName() else []) + below


def test_the_plan_never_shuffles_a_group_row(spark: SparkSession) -> None:
    """Issue 12: each partition's group rows stay in its snapshot row and are reduced to its facts
    there, columnar (``spark_purge.group_facts``, one ``mapInArrow``): the plan's query makes no row
    per commit (no ``Generate``), and hashed in two pieces by (topic, partition), as the pipeline
    keeps a batch's snapshot, no shuffle feeds the facts' computation. Matched with a store, so
    vanished groups and staleness are in it."""
    from spark_purge.pipeline import kept

    progress = spark.createDataFrame(PROGRESS_ROWS, schemas.PROGRESS_STORE)
    pieces = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        snapshot = kept(spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT))
        plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress).plan(snapshot)
        assert plan is not None
        physical = plan.rows._jdf.queryExecution().executedPlan()
        assert "Generate" not in _node_names(physical), physical.toString()
        maps = _arrow_maps(physical)
        assert len(maps) == 1, physical.toString()
        assert _shuffles_below(maps[0]) == [], physical.toString()
        assert plan.rows.count() == len(PROGRESS_EXPECTED)
        plan.release()
        drop(snapshot)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", pieces or "1")
