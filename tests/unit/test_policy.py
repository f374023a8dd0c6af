"""compute_plan: every constraint and every binding_constraint value, manual mode, staleness."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row, SparkSession

from spark_purge import policy, schemas
from spark_purge.config import PurgeConfig, from_dict
from spark_purge.errors import ConfigError

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
SNAP = "snap-1"
ORDERS = {"name": "orders", "topics": r"orders", "required_groups": ["billing", "analytics"]}
CLICKS = {"name": "clicks", "topics": r"clicks\..*"}  # discovered groups


def config(*rules: dict[str, Any], **extra: Any) -> PurgeConfig:
    # Discovering rules must state min_retention (the loader's rule); these tests mean 0s.
    extra.setdefault("defaults", {"min_retention": "0s"})
    return from_dict({"kafka": {"bootstrap_servers": ["k:9092"]}, "audit": {"path": "a"}, "rules": list(rules), **extra})


def part(
    topic: str,
    partition: int = 0,
    log_start: int = 0,
    hw: int = 1000,
    last_stable: int | None = None,  # last stable offset (default: the high watermark)
    internal: bool = False,
    cleanup: str | None = "delete",
    floor_time: datetime | None = None,
    floor_offset: int | None = None,
    leader: int | None = 1,
    remote: bool | None = None,
    topic_id: str | None = None,
    local_start: int | None = None,  # tiered storage: the local log start offset
    tiered: int | None = None,  # and the latest tiered offset
) -> tuple[Any, ...]:
    return (SNAP, NOW, topic, partition, leader, [1, 2], [1, 2], log_start, hw, hw if last_stable is None else last_stable, internal, cleanup, None, remote, floor_time, floor_offset, topic_id, None, local_start, tiered)


def grp(
    group: str, topic: str, partition: int, offset: int, state: str | None = "Stable", kind: str = "classic", members: int | None = 1,
    epoch: int | None = None, epoch_end: int | None = None,
) -> tuple[Any, ...]:
    return (SNAP, NOW, group, state, kind, members, topic, partition, offset, None, epoch, epoch_end)


def prog(group: str, topic: str, partition: int, offset: int, age: timedelta) -> tuple[Any, ...]:
    return (group, topic, partition, offset, NOW - age)


def run(
    spark: SparkSession,
    cfg: PurgeConfig,
    parts: list[tuple[Any, ...]],
    groups: list[tuple[Any, ...]],
    progress: list[tuple[Any, ...]] | None = None,
    manual_offsets: list[tuple[Any, ...]] | None = None,
    unreadable: dict[str, str] | None = None,
    retirement: policy.RetirementInput | None = None,
    history: list[tuple[Any, ...]] | None = None,
    tiering: frozenset[str] = frozenset(),
) -> DataFrame:
    # As the planner plans: each partition's group rows nested in its snapshot row, the
    # vanished ones (the planner's, from the progress store) beside them.
    own = spark.createDataFrame([g for g in groups if g[3] != "Vanished"], schemas.GROUP_OFFSETS)
    vanished = [g for g in groups if g[3] == "Vanished"]
    return policy.compute_plan(
        policy.nest_snapshot(spark.createDataFrame(parts, schemas.PARTITION_STATE), own),
        spark.createDataFrame(vanished, schemas.GROUP_OFFSETS) if vanished else None,
        cfg,
        NOW,
        # (group, topic, partition, offset, time), or the store's own rows with (type, topic id)
        progress=None if progress is None else spark.createDataFrame(
            progress, schemas.PROGRESS_STORE if progress and len(progress[0]) == 7 else schemas.GROUP_PROGRESS
        ),
        manual_offsets=None if manual_offsets is None else spark.createDataFrame(manual_offsets, schemas.MANUAL_OFFSETS),
        unreadable_groups=unreadable,
        append_history=None if history is None else spark.createDataFrame(history, schemas.APPEND_HISTORY),
        retirement=retirement,
        tiering_transitions=tiering,
    )


def retirement_state(spark: SparkSession, *rows: tuple[str, int, int, int | None]) -> policy.RetirementInput:
    """(topic, partition, status, reclaimed_to) rows as the registry's current state; delay 1 min."""
    state = spark.createDataFrame(
        list(rows), "topic string, partition int, status int, reclaimed_to long"
    )
    return policy.RetirementInput(state, 60_000)


def rows(plan: DataFrame) -> dict[tuple[str, int], Row]:
    return {(r.topic, r.partition): r for r in plan.collect()}


def brief(row: Row) -> tuple[Any, ...]:
    return (row.binding_constraint, row.cutoff, row.records_to_delete, row.actionable, row.blocking_group)


def both_groups(topic: str, partition: int, billing: int, analytics: int) -> list[tuple[Any, ...]]:
    return [grp("billing", topic, partition, billing), grp("analytics", topic, partition, analytics)]


def test_group_binding_exact_plan_row(spark: SparkSession) -> None:
    plan = run(spark, config(ORDERS), [part("orders", log_start=100, hw=500, remote=True, topic_id="id-o")], both_groups("orders", 0, 300, 120))
    expected = spark.createDataFrame(
        [(SNAP, "orders", 0, "id-o", 1, 100, 500, 120, 20, "group", "analytics", "classic", "orders", [], True, True, "group analytics at 120 holds back 380 records", None,
          None, None, None)],
        schemas.PLAN,
    )
    assert plan.schema == schemas.PLAN
    assert_df_equality(plan, expected)


def test_every_binding_constraint_value_is_reachable(spark: SparkSession) -> None:
    old = timedelta(days=30)
    cfg = config(
        {"name": "orders", "topics": r"orders\..*", "required_groups": ["billing"], "min_step": 10},
        {"name": "aged", "topics": "aged", "required_groups": ["billing"], "min_retention": "1h"},
        {"name": "all", "topics": r"(__.*|secret|compact|manual|stale|gone|ext)"},
        {"name": "blind", "topics": "blind", "required_groups": ["billing", "ghost"]},
        protected_topics=["secret"],
        group_exclude=["ghost"],  # so only the rule that lists it is blinded
        manual=[{"topic": "manual", "partition": 0, "offset": 50}, {"topic": "orders.hw", "offset": 900, "force": True}],
    )
    floor_ok = NOW - timedelta(hours=2)
    parts = [
        part("orders.group", log_start=0, hw=500),
        part("orders.hw", log_start=0, hw=500),
        part("orders.beyond", log_start=0, hw=500),
        part("orders.diverged", log_start=0, hw=500),
        part("orders.txn", log_start=0, hw=500, last_stable=200),
        part("orders.missing", log_start=0, hw=500),
        part("orders.step", log_start=0, hw=500),
        part("orders.moving", log_start=0, hw=500),
        part("orders.none", log_start=300, hw=500),
        part("aged", log_start=0, hw=500, floor_time=floor_ok, floor_offset=150),
        part("__consumer_offsets", hw=500, internal=True),
        part("secret", hw=500),
        part("compact", hw=500, cleanup="compact"),
        part("manual", hw=500),
        part("stale", log_start=0, hw=500),
        part("blind", log_start=0, hw=500),
        part("gone", log_start=0, hw=500),
        part("ext", log_start=0, hw=500),
        part("orders.retiring", log_start=0, hw=500),
        part("orders.retired", log_start=300, hw=500),
    ]
    groups = [
        grp("billing", "orders.group", 0, 250),
        grp("billing", "orders.hw", 0, 500),  # a forced manual cut above the high watermark (config)
        grp("billing", "orders.beyond", 0, 900),  # above the high watermark: another incarnation's commit
        # committed in leader epoch 4 at 300, but the log's epoch 4 ends at 250 (truncated)
        grp("billing", "orders.diverged", 0, 300, epoch=4, epoch_end=250),
        grp("billing", "orders.txn", 0, 500),
        grp("billing", "orders.step", 0, 5),
        grp("billing", "orders.moving", 0, 400),
        grp("billing", "orders.none", 0, 300),
        grp("billing", "aged", 0, 400),
        grp("billing", "manual", 0, 400),
        grp("g", "__consumer_offsets", 0, 400),
        grp("g", "secret", 0, 400),
        grp("g", "compact", 0, 400),
        grp("old", "stale", 0, 90, state="Empty", members=0),
        grp("billing", "blind", 0, 400),
        # Kafka forgot this group; the purge remembers where it was
        grp("vg", "gone", 0, 60, state="Vanished", members=0),
        # a Spark query reading "ext", its position from its checkpoint
        grp("etl-query", "ext", 0, 70, state=None, kind="spark_checkpoint", members=None),
        grp("billing", "orders.retiring", 0, 120),  # ReadOnly, not drained
        grp("billing", "orders.retired", 0, 300),  # None, reclaimed at 300, written to since
    ]
    progress = [prog("old", "stale", 0, 90, old)]
    retiring = retirement_state(spark, ("orders.retiring", 0, schemas.READ_ONLY, None), ("orders.retired", 0, schemas.RETIRED, 300))
    plan = run(spark, cfg, parts, groups, progress, unreadable={"ghost": "GROUP_AUTHORIZATION_FAILED"}, retirement=retiring,
               tiering=frozenset({"orders.moving"}))
    got = {t: brief(r) for (t, _), r in rows(plan).items()}
    assert got == {
        "orders.group": ("group", 250, 250, True, "billing"),
        "orders.hw": ("high_watermark", 500, 500, True, None),
        "orders.beyond": ("commit_beyond_end", None, 0, False, "billing"),
        "orders.diverged": ("commit_diverged", None, 0, False, "billing"),
        "orders.txn": ("last_stable_offset", 200, 200, True, None),
        "orders.missing": ("missing_commit", None, 0, False, "billing"),
        "orders.step": ("below_min_step", 5, 0, False, "billing"),
        "orders.moving": ("tiering_transition", None, 0, False, None),
        "orders.none": ("group", 300, 0, False, "billing"),
        "aged": ("time_floor", 150, 150, True, None),
        "__consumer_offsets": ("internal", None, 0, False, None),
        "secret": ("protected", None, 0, False, None),
        "compact": ("compacted", None, 0, False, None),
        "manual": ("manual", 50, 50, True, None),
        "stale": ("stale_group", 90, 90, True, "old"),
        "blind": ("group_unreadable", None, 0, False, "ghost"),
        "gone": ("vanished_group", 60, 60, True, "vg"),
        "ext": ("external", 70, 70, True, "etl-query"),
        "orders.retiring": ("retiring", 120, 120, True, "billing"),
        "orders.retired": ("writes_to_retired_partition", 300, 0, False, "billing"),
    }
    assert {b for b, *_ in got.values()} == set(schemas.BINDING_CONSTRAINTS)


def test_last_stable_offset_binds_only_below_high_watermark(spark: SparkSession) -> None:
    cfg = config(ORDERS)
    parts = [part("orders", 0, hw=500, last_stable=450), part("orders", 1, hw=500, last_stable=500)]
    groups = both_groups("orders", 0, 500, 500) + both_groups("orders", 1, 500, 500)
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)]) == ("last_stable_offset", 450, 450, True, None)
    assert got[("orders", 0)].detail == "open transaction: last stable offset 450 holds back 50 records"
    # No open transaction: last stable offset == high watermark, and the consumers at it hold
    # nothing back: the high watermark binds.
    assert brief(got[("orders", 1)]) == ("high_watermark", 500, 500, True, None)
    assert got[("orders", 1)].detail == "high watermark 500: nothing held back (the high watermark)"


def test_ties_prefer_high_watermark_then_group_then_time_floor(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "min_retention": "1h"})
    ft = NOW - timedelta(hours=1)
    parts = [
        part("orders", 0, hw=500, floor_time=ft, floor_offset=300),  # group == floor
        part("orders", 1, hw=500, last_stable=400, floor_time=ft, floor_offset=400),  # floor == last stable offset
        part("orders", 2, hw=500, floor_time=ft, floor_offset=500),  # group == floor == hw
    ]
    groups = both_groups("orders", 0, 300, 500) + both_groups("orders", 1, 500, 500) + both_groups("orders", 2, 500, 500)
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)])[:2] == ("group", 300)
    assert brief(got[("orders", 1)])[:2] == ("time_floor", 400)
    assert brief(got[("orders", 2)]) == ("high_watermark", 500, 500, True, None)  # nothing held back


def test_time_floor_bounds_and_blocks_when_unknown(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "min_retention": "1h"})
    needed = NOW - timedelta(hours=1)
    parts = [
        part("orders", 0, log_start=10, hw=500, floor_time=needed - timedelta(minutes=5), floor_offset=200),
        part("orders", 1, log_start=10, hw=500),  # floor never looked up
        part("orders", 2, log_start=10, hw=500, floor_time=needed + timedelta(minutes=5), floor_offset=450),  # too recent
    ]
    groups = [g for p in range(3) for g in both_groups("orders", p, 400, 400)]
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)]) == ("time_floor", 200, 190, True, None)
    assert got[("orders", 0)].detail.startswith("time floor (records since 2024-05-01 11:00:00) at 200 holds back 300")
    assert brief(got[("orders", 1)]) == ("time_floor", None, 0, False, None)
    assert got[("orders", 1)].detail == "time floor unknown (needed for 2024-05-01 11:00:00): not purged"
    assert brief(got[("orders", 2)]) == ("time_floor", None, 0, False, None)
    assert "looked up for 2024-05-01 11:05:00, need 2024-05-01 11:00:00 or earlier" in got[("orders", 2)].detail


def test_zero_min_retention_needs_no_floor(spark: SparkSession) -> None:
    got = rows(run(spark, config(ORDERS), [part("orders", hw=500)], both_groups("orders", 0, 400, 450)))
    assert brief(got[("orders", 0)]) == ("group", 400, 400, True, "billing")


def _executed(plan: DataFrame) -> str:
    return str(plan._jdf.queryExecution().executedPlan().toString())


def test_the_append_history_is_read_only_where_a_rule_has_a_time_floor(spark: SparkSession) -> None:
    # A history row that would lower a time floor to 100, had any rule one.
    history = [("orders", 0, NOW - timedelta(hours=2), 100, None)]
    parts = [part("orders", 0, hw=500, floor_time=NOW - timedelta(hours=2), floor_offset=450)]
    groups = both_groups("orders", 0, 400, 450)
    without_floor = run(spark, config(ORDERS), parts, groups, history=history)
    assert_df_equality(without_floor, run(spark, config(ORDERS), parts, groups), ignore_row_order=True)
    # No rule needs a floor: the history is not joined at all (nor its aggregate computed).
    assert "h_later_min" not in _executed(without_floor)
    assert _executed(without_floor).count("MapInArrow") == 1
    # A rule with one: the history binds, and its keys come from the rows before the consumer
    # facts, so the facts' task runs once in the plan, not once more for the keys.
    with_floor = run(spark, config({**ORDERS, "min_retention": "1h"}), parts, groups, history=history)
    got = rows(with_floor)[("orders", 0)]
    assert (got.binding_constraint, got.cutoff, got.time_floor_source) == ("time_floor", 100, "append_history")
    assert "h_later_min" in _executed(with_floor)
    assert _executed(with_floor).count("MapInArrow") == 1


def test_missing_commit_blocks_or_is_ignored(spark: SparkSession) -> None:
    parts = [part("orders", 0, hw=500), part("orders", 1, hw=500)]
    groups = [grp("billing", "orders", 0, 300), grp("billing", "orders", 1, 300), grp("analytics", "orders", 1, -1, kind="streams")]
    blocked = rows(run(spark, config(ORDERS), parts, groups))
    for p in (0, 1):  # a -1 commit is no commit
        assert brief(blocked[("orders", p)]) == ("missing_commit", None, 0, False, "analytics")
        assert blocked[("orders", p)].detail == "required group analytics has no commit on this partition"
    # The missing group's type where a row says it (members hold the partition), none where not.
    assert [blocked[("orders", p)].blocking_group_type for p in (0, 1)] == [None, "streams"]
    ignored = rows(run(spark, config({**ORDERS, "on_missing_commit": "ignore"}), parts, groups))
    assert brief(ignored[("orders", 0)]) == ("group", 300, 300, True, "billing")


def test_no_commit_at_all_always_blocks(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "on_missing_commit": "ignore"}, CLICKS)
    got = rows(run(spark, cfg, [part("orders", hw=500), part("clicks.web", hw=500)], []))
    assert brief(got[("orders", 0)]) == ("missing_commit", None, 0, False, "analytics")
    assert brief(got[("clicks.web", 0)]) == ("missing_commit", None, 0, False, None)
    assert got[("clicks.web", 0)].detail.startswith("no consumer group has committed on this topic")


def test_discovered_groups_and_exclusions(spark: SparkSession) -> None:
    cfg = config({**CLICKS, "exclude_groups": ["adhoc-.*"]}, group_exclude=[r"console-consumer-\d+"])
    parts = [part("clicks.web", 0, hw=500), part("clicks.web", 1, hw=500)]
    groups = [
        grp("etl", "clicks.web", 0, 400),
        grp("adhoc-jane", "clicks.web", 0, 10),  # excluded by the rule
        grp("console-consumer-42", "clicks.web", 0, 20),  # excluded config-wide
        grp("etl", "clicks.web", 1, 450),
        grp("ml", "clicks.web", 0, 350),  # discovered on the topic, so required on partition 1 too
    ]
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("clicks.web", 0)]) == ("group", 350, 350, True, "ml")
    assert brief(got[("clicks.web", 1)]) == ("missing_commit", None, 0, False, "ml")


def test_stale_group_blocks_by_default_and_can_be_ignored(spark: SparkSession) -> None:
    parts = [part("orders", 0, hw=500)]
    groups = [grp("billing", "orders", 0, 400), grp("analytics", "orders", 0, 100, state="Empty", members=0)]
    progress = [prog("analytics", "orders", 0, 100, timedelta(days=10)), prog("billing", "orders", 0, 400, timedelta(days=10))]
    blocked = rows(run(spark, config(ORDERS), parts, groups, progress))[("orders", 0)]
    assert brief(blocked) == ("stale_group", 100, 100, True, "analytics")
    assert blocked.stale_groups == ["analytics"]
    assert "stale group analytics (no members, no progress for over 1w) at 100" in blocked.detail
    ignored = rows(run(spark, config({**ORDERS, "on_stale_group": "ignore"}), parts, groups, progress))[("orders", 0)]
    assert brief(ignored) == ("group", 400, 400, True, "billing")
    assert ignored.stale_groups == ["analytics"]  # named either way
    assert ignored.detail.endswith("; ignoring stale group(s) analytics")


def test_a_position_on_a_recreated_topic_is_new_progress_whatever_its_number(spark: SparkSession) -> None:
    """analytics (no members) sits at 100 on orders, recreated since the store saw it at 100 on
    the old topic ten days ago: the same number on another topic id is not the known position,
    so it is not stale and is not ignored."""
    parts = [part("orders", 0, hw=500, topic_id="id-new")]
    groups = [grp("billing", "orders", 0, 400), grp("analytics", "orders", 0, 100, state="Empty", members=0)]
    cfg = config({**ORDERS, "on_stale_group": "ignore"})
    old = [("analytics", "orders", 0, 100, NOW - timedelta(days=10), "classic", "id-old")]
    got = rows(run(spark, cfg, parts, groups, old))[("orders", 0)]
    assert (got.stale_groups, got.cutoff, got.blocking_group) == ([], 100, "analytics"), got
    same = [("analytics", "orders", 0, 100, NOW - timedelta(days=10), "classic", "id-new")]
    got = rows(run(spark, cfg, parts, groups, same))[("orders", 0)]
    assert (got.stale_groups, got.cutoff) == (["analytics"], 400), got  # the same incarnation: stale, ignored


def test_stale_group_at_log_start_stays_named(spark: SparkSession) -> None:
    parts = [part("orders", 0, log_start=100, hw=500)]
    groups = [grp("billing", "orders", 0, 400), grp("analytics", "orders", 0, 100, state="Dead", members=0)]
    progress = [prog("analytics", "orders", 0, 100, timedelta(days=10))]
    got = rows(run(spark, config(ORDERS), parts, groups, progress))[("orders", 0)]
    assert brief(got) == ("stale_group", 100, 0, False, "analytics")
    assert got.detail.endswith("set on_stale_group: ignore to skip it")


STALENESS_CASES = [
    # (state, group_type, member_count, progress age or None, progress offset, expected stale)
    ("Empty", "classic", 0, timedelta(days=10), 100, True),
    ("Dead", "classic", 0, timedelta(days=10), 100, True),
    ("Dead", "consumer", 0, timedelta(days=10), 100, False),  # KIP-848 group seen via the classic API
    ("Dead", "unknown", 0, timedelta(days=10), 100, False),
    ("Empty", "consumer", 0, timedelta(days=10), 100, True),  # a truly empty KIP-848 group
    ("Stable", "consumer", 0, timedelta(days=10), 100, False),  # a KIP-848 member count of 0 proves nothing
    ("Empty", "classic", 0, timedelta(days=1), 100, False),  # progressed recently
    ("Empty", "classic", 0, timedelta(days=10), 90, False),  # commit moved since the progress row
    ("Empty", "classic", 0, None, None, False),  # progress unknown
]


def test_staleness_rules(spark: SparkSession) -> None:
    # One topic per case (one Spark run): billing is active everywhere, case group `s<i>` lags at 100.
    cfg = config({"name": "cases", "topics": r"case\d+", "on_stale_group": "ignore", "stale_after": "7d"})
    parts, groups, progress = [], [], []
    for i, (state, kind, members, age, offset, _) in enumerate(STALENESS_CASES):
        topic = f"case{i}"
        parts.append(part(topic, hw=500))
        groups += [grp("billing", topic, 0, 400), grp(f"s{i}", topic, 0, 100, state=state, kind=kind, members=members)]
        if age is not None:
            progress.append(prog(f"s{i}", topic, 0, offset, age))
    got = rows(run(spark, cfg, parts, groups, progress))
    for i, case in enumerate(STALENESS_CASES):
        row = got[(f"case{i}", 0)]
        if case[-1]:
            assert (row.stale_groups, row.cutoff, row.binding_constraint) == ([f"s{i}"], 400, "group"), case
        else:
            assert (row.stale_groups, row.cutoff, row.blocking_group) == ([], 100, f"s{i}"), case


def test_staleness_needs_progress_table(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "on_stale_group": "ignore"})
    groups = [grp("billing", "orders", 0, 400), grp("analytics", "orders", 0, 100, state="Empty", members=0)]
    got = rows(run(spark, cfg, [part("orders", hw=500)], groups, None))[("orders", 0)]
    assert (got.stale_groups, got.cutoff) == ([], 100)


def test_group_progress_anywhere_means_not_stale(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "on_stale_group": "ignore"})
    parts = [part("orders", 0, hw=500), part("orders", 1, hw=500)]
    groups = both_groups("orders", 0, 400, 100) + both_groups("orders", 1, 400, 300)
    groups = [g if g[2] != "analytics" else g[:3] + ("Empty", "classic", 0) + g[6:] for g in groups]
    progress = [prog("analytics", "orders", 0, 100, timedelta(days=10)), prog("analytics", "orders", 1, 300, timedelta(hours=1))]
    got = rows(run(spark, cfg, parts, groups, progress))
    assert got[("orders", 0)].stale_groups == [] and got[("orders", 0)].cutoff == 100


def test_below_min_step_and_a_group_at_the_log_start(spark: SparkSession) -> None:
    cfg = config({**ORDERS, "min_step": 100})
    parts = [part("orders", 0, log_start=100, hw=500), part("orders", 1, log_start=100, hw=500), part("orders", 2, log_start=100, hw=500), part("orders", 3, log_start=100, hw=500)]
    groups = both_groups("orders", 0, 150, 400) + both_groups("orders", 1, 100, 400) + both_groups("orders", 2, 60, 400) + both_groups("orders", 3, 200, 400)
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)]) == ("below_min_step", 150, 0, False, "billing")
    assert got[("orders", 0)].detail == "group billing at 150: only 50 records deletable, min_step 100"
    # A group at (or below) the log start binds as itself and holds back every record.
    assert brief(got[("orders", 1)]) == ("group", 100, 0, False, "billing")
    assert brief(got[("orders", 2)]) == ("group", 60, 0, False, "billing")
    assert got[("orders", 2)].detail == "group billing at 60, log start 100: holds back 400 records"
    assert brief(got[("orders", 3)]) == ("group", 200, 100, True, "billing")  # exactly min_step acts


def test_internal_protected_compacted_and_unselected(spark: SparkSession) -> None:
    cfg = config({"name": "all", "topics": r"(?!ignored).*"}, protected_topics=[r"pay\..*"])
    parts = [
        part("__transaction_state", hw=500),  # internal by name even if the flag is false
        part("sys", hw=500, internal=True),
        part("pay.cards", hw=500),
        part("logs", hw=500, cleanup="compact"),
        part("mixed", hw=500, cleanup="compact, delete"),
        part("unknown_policy", hw=500, cleanup=None),
        part("ignored", hw=500),
    ]
    groups = [grp("g", t, 0, 400) for t in ("__transaction_state", "sys", "pay.cards", "logs", "mixed", "unknown_policy", "ignored")]
    got = {t: r for (t, _), r in rows(run(spark, cfg, parts, groups)).items()}
    assert "ignored" not in got  # no rule: not in the plan at all
    assert brief(got["__transaction_state"]) == ("internal", None, 0, False, None)
    assert brief(got["sys"]) == ("internal", None, 0, False, None)
    assert brief(got["pay.cards"]) == ("protected", None, 0, False, None)
    assert brief(got["logs"]) == ("compacted", None, 0, False, None)
    assert got["logs"].detail == "cleanup.policy=compact lacks delete: the broker refuses DeleteRecords"
    assert brief(got["mixed"]) == ("group", 400, 400, True, "g")
    assert brief(got["unknown_policy"]) == ("group", 400, 400, True, "g")


def test_ambiguous_rules_fail_at_plan_time(spark: SparkSession) -> None:
    cfg = config({"name": "a", "topics": r"demo\..*"}, {"name": "b", "topics": r".*\.orders"})
    ok = rows(run(spark, cfg, [part("demo.clicks")], [grp("g", "demo.clicks", 0, 5)]))
    assert ok[("demo.clicks", 0)].rule == "a"
    with pytest.raises(ConfigError, match=r"topic 'demo\.orders' matches rules\[0\] \('a'.*rules\[1\] \('b'"):
        run(spark, cfg, [part("demo.clicks"), part("demo.orders")], [])


def test_manual_offsets_are_bounded_by_safety(spark: SparkSession) -> None:
    manual = [
        {"topic": "orders", "partition": 0, "offset": 200},  # below safe cutoff: manual binds
        {"topic": "orders", "partition": 1, "offset": 450},  # above: the group binds
        {"topic": "orders", "partition": 2, "offset": "end"},  # high watermark, still bounded
        {"topic": "orders", "partition": "all", "offset": 50},  # partitions without their own entry
    ]
    cfg = config({**ORDERS, "min_step": 1000}, manual=manual)
    parts = [part("orders", p, log_start=10, hw=500) for p in range(5)]
    groups = [g for p in range(5) for g in both_groups("orders", p, 300, 400)]
    groups = [g for g in groups if not (g[6] == "orders" and g[7] == 4 and g[2] == "analytics")]
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)]) == ("manual", 200, 190, True, None)  # min_step does not apply
    assert got[("orders", 0)].detail == "manual cutoff 200 (offset 200) holds back 300 records"
    assert brief(got[("orders", 1)]) == ("group", 300, 290, True, "billing")
    assert brief(got[("orders", 2)]) == ("group", 300, 290, True, "billing")
    assert brief(got[("orders", 3)]) == ("manual", 50, 40, True, None)
    assert brief(got[("orders", 4)]) == ("missing_commit", None, 0, False, "analytics")


def test_forced_manual_skips_checks_but_not_hw_or_protection(spark: SparkSession) -> None:
    manual = [
        {"topic": "orders", "partition": 0, "offset": 450, "force": True},
        {"topic": "orders", "partition": 1, "offset": 9000, "force": True},
        {"topic": "orders", "partition": 2, "offset": "end", "force": True},
        {"topic": "orders", "partition": 3, "offset": 9000, "force": True},
        {"topic": "pay", "offset": "end", "force": True},
        {"topic": "__consumer_offsets", "offset": "end", "force": True},
    ]
    cfg = config({**ORDERS, "min_retention": "1h"}, {"name": "all", "topics": "(pay|__.*)"}, protected_topics=["pay"], manual=manual)
    parts = [part("orders", p, log_start=10, hw=500, last_stable=480) for p in range(3)] + [
        part("orders", 3, log_start=10, hw=500),  # no open transaction
        part("pay", hw=500),
        part("__consumer_offsets", hw=500, internal=True),
    ]
    groups = [grp("billing", "orders", 0, 100)]  # analytics missing, floor unknown: forced anyway
    got = rows(run(spark, cfg, parts, groups))
    assert brief(got[("orders", 0)]) == ("manual", 450, 440, True, None)
    assert got[("orders", 0)].detail.startswith("forced manual cutoff 450 (offset 450)")
    # Forced or not, a cut never passes an open transaction's first record (issue 11, item 6)...
    assert brief(got[("orders", 1)]) == ("last_stable_offset", 480, 470, True, None)
    assert got[("orders", 1)].detail == (
        "forced manual cutoff offset 9000 bounded by an open transaction: last stable offset 480 holds back 20 records"
    )
    assert brief(got[("orders", 2)]) == ("last_stable_offset", 480, 470, True, None)
    # ... nor the high watermark.
    assert brief(got[("orders", 3)]) == ("high_watermark", 500, 490, True, None)
    assert got[("orders", 3)].detail.startswith("forced manual cutoff offset 9000 bounded by the high watermark 500")
    assert brief(got[("pay", 0)]) == ("protected", None, 0, False, None)
    assert brief(got[("__consumer_offsets", 0)]) == ("internal", None, 0, False, None)


def test_manual_timestamp_uses_looked_up_offsets(spark: SparkSession) -> None:
    ts = datetime(2024, 4, 30, tzinfo=timezone.utc)
    cfg = config(ORDERS, manual=[{"topic": "orders", "offset": "@2024-04-30T00:00:00Z"}])
    lookups = policy.timestamp_lookups(cfg)
    assert lookups == [policy.TimestampLookup("orders", None, ts)]
    parts = [part("orders", 0, hw=500), part("orders", 1, hw=500)]
    groups = both_groups("orders", 0, 400, 400) + both_groups("orders", 1, 400, 400)
    got = rows(run(spark, cfg, parts, groups, manual_offsets=[("orders", 0, ts, 120)]))
    assert brief(got[("orders", 0)]) == ("manual", 120, 120, True, None)
    assert got[("orders", 0)].detail.startswith("manual cutoff 120 (@2024-04-30T00:00:00Z)")
    assert brief(got[("orders", 1)]) == ("manual", None, 0, False, None)  # no answer: blocked
    assert got[("orders", 1)].detail == "manual @2024-04-30T00:00:00Z: no offset known for that time"


def test_manual_only_topic_is_planned_with_defaults(spark: SparkSession) -> None:
    cfg = config(ORDERS, manual=[{"topic": "scratch", "offset": "end"}])
    got = rows(run(spark, cfg, [part("scratch", hw=500), part("other", hw=500)], [grp("g", "scratch", 0, 400)]))
    assert set(got) == {("scratch", 0)}
    assert got[("scratch", 0)].rule == "manual"
    assert brief(got[("scratch", 0)]) == ("group", 400, 400, True, "g")


def test_snapshot_ids_must_match(spark: SparkSession) -> None:
    other = [(("other-snap",) + g[1:]) for g in both_groups("orders", 0, 400, 400)]
    got = rows(run(spark, config(ORDERS), [part("orders", hw=500)], other))
    assert got[("orders", 0)].binding_constraint == "missing_commit"  # commits from another snapshot never count


def test_time_floor_requests_and_lookup_helpers() -> None:
    cfg = config(
        {**ORDERS, "min_retention": "6h"},
        {**CLICKS, "min_retention": "0s"},
        defaults={"min_retention": "1h"},
        manual=[{"topic": "scratch", "offset": 5}, {"topic": "orders", "partition": 1, "offset": "@1714521600000"}],
    )
    reqs = policy.time_floor_requests(cfg, NOW)
    assert reqs == [
        policy.TimeFloorRequest("orders", "orders", NOW - timedelta(hours=6)),
        policy.TimeFloorRequest("manual", "scratch", NOW - timedelta(hours=1)),
    ]
    assert policy.retention_floors(cfg) == [
        policy.RetentionFloor("orders", "orders", 6 * 3_600_000),
        policy.RetentionFloor("manual", "scratch", 3_600_000),
    ]
    # The floor each planned topic needs, as compute_plan resolves it (None: no floor).
    floors = {r.topic: r.floor_time for r in policy.resolve_topics(["orders", "clicks.web", "scratch", "unmatched"], {}, cfg, NOW)}
    assert floors == {"orders": NOW - timedelta(hours=6), "clicks.web": None, "scratch": NOW - timedelta(hours=1)}
    assert policy.timestamp_lookups(cfg) == [policy.TimestampLookup("orders", 1, datetime(2024, 5, 1, tzinfo=timezone.utc))]
    # The append history keeps the longest floor, or retirement's delay when longer; nothing
    # without either (then it is neither written nor read).
    assert policy.history_keep_ms(cfg) == 6 * 3_600_000
    assert policy.history_keep_ms(config(ORDERS)) == 0
    assert policy.history_keep_ms(config(ORDERS, retirement={"enable": True, "delay": "10h"})) == 10 * 3_600_000
    assert policy.history_keep_ms(config({**ORDERS, "min_retention": "12h"}, retirement={"enable": True, "delay": "10h"})) == 12 * 3_600_000


def test_split_snapshot_feeds_compute_plan(spark: SparkSession) -> None:
    p = part("orders", hw=500)
    nested = [p + ([("billing", "Stable", "classic", 1, 300, None, None, None), ("analytics", "Stable", "classic", 1, 200, None, None, None)], [])]
    snapshot = spark.createDataFrame(nested, schemas.SNAPSHOT)
    assert policy.unreadable_groups_of(snapshot.first()) == {}
    parts, groups = policy.split_snapshot(snapshot)
    assert parts.schema == schemas.PARTITION_STATE and groups.schema == schemas.GROUP_OFFSETS
    got = rows(policy.compute_plan(parts, groups, config(ORDERS), NOW))
    assert brief(got[("orders", 0)]) == ("group", 200, 200, True, "analytics")


def test_unreadable_listed_group_blocks_even_when_missing_commits_are_ignored(spark: SparkSession) -> None:
    cfg = config(
        {**ORDERS, "on_missing_commit": "ignore"},
        {"name": "audit", "topics": "audit", "required_groups": ["billing"]},
        manual=[{"topic": "audit", "offset": 10}],
    )
    parts = [part("orders", hw=500), part("audit", hw=500)]
    groups = [grp("billing", "orders", 0, 300), grp("billing", "audit", 0, 300)]

    got = rows(run(spark, cfg, parts, groups, unreadable={"analytics": "COORDINATOR_NOT_AVAILABLE"}))

    orders = got[("orders", 0)]
    assert brief(orders) == ("group_unreadable", None, 0, False, "analytics")
    assert "analytics (COORDINATOR_NOT_AVAILABLE)" in orders.detail and "could not be read" in orders.detail
    # A rule that does not list the unreadable group is planned as usual.
    assert brief(got[("audit", 0)]) == ("manual", 10, 10, True, None)


def test_unreadable_group_blocks_every_discovered_topic_unless_excluded(spark: SparkSession) -> None:
    parts = [part("clicks.web", hw=500), part("clicks.app", hw=500), part("orders", hw=500)]
    groups = [grp("web", "clicks.web", 0, 200), grp("web", "clicks.app", 0, 250), *both_groups("orders", 0, 400, 300)]

    # Its commits are unknown, so it may have some on any discovered topic: those are blocked.
    blind = rows(run(spark, config(CLICKS, ORDERS), parts, groups, unreadable={"adhoc-1": "GROUP_AUTHORIZATION_FAILED"}))
    assert {t: brief(r) for (t, _), r in blind.items()} == {
        "clicks.web": ("group_unreadable", None, 0, False, "adhoc-1"),
        "clicks.app": ("group_unreadable", None, 0, False, "adhoc-1"),
        "orders": ("group", 300, 300, True, "analytics"),  # listed groups only: unaffected
    }

    # Excluded from discovery (per rule or globally): it could never be required, so no block.
    for cfg in (config({**CLICKS, "exclude_groups": ["adhoc-.*"]}, ORDERS), config(CLICKS, ORDERS, group_exclude=["adhoc-.*"])):
        seen = rows(run(spark, cfg, parts, groups, unreadable={"adhoc-1": "GROUP_AUTHORIZATION_FAILED"}))
        assert brief(seen[("clicks.web", 0)]) == ("group", 200, 200, True, "web")
        assert brief(seen[("clicks.app", 0)]) == ("group", 250, 250, True, "web")


def test_forced_manual_entry_is_not_blocked_by_an_unreadable_group(spark: SparkSession) -> None:
    cfg = config(ORDERS, manual=[{"topic": "orders", "offset": 120, "force": True}])
    got = rows(run(spark, cfg, [part("orders", hw=500)], both_groups("orders", 0, 400, 300), unreadable={"billing": "X"}))
    assert brief(got[("orders", 0)]) == ("manual", 120, 120, True, None)


def test_unreadable_groups_of_reads_the_snapshot_column(spark: SparkSession) -> None:
    nested = [part("orders", p) + ([], [("ghost", "GROUP_AUTHORIZATION_FAILED"), ("lost", "COORDINATOR_NOT_AVAILABLE")]) for p in range(2)]
    snapshot = spark.createDataFrame(nested, schemas.SNAPSHOT)
    assert policy.unreadable_groups_of(snapshot.first()) == {"ghost": "GROUP_AUTHORIZATION_FAILED", "lost": "COORDINATOR_NOT_AVAILABLE"}


def test_commits_of_another_history_block_the_partition(spark: SparkSession) -> None:
    """Issue 11: a commit above the high watermark, or one whose leader epoch the log ends below
    it (KIP-320), says nothing about this log: the partition is blocked and the detail says why."""
    parts = [part("orders", p, log_start=0, hw=100) for p in range(4)]
    groups = [
        grp("billing", "orders", 0, 150), grp("analytics", "orders", 0, 50),
        grp("billing", "orders", 1, 80, epoch=2, epoch_end=60), grp("analytics", "orders", 1, 50),
        # epoch checked and consistent (its end is above the commit); no epoch: nothing to check
        grp("billing", "orders", 2, 80, epoch=2, epoch_end=90), grp("analytics", "orders", 2, 50),
        # an external consumer's position is read after the snapshot: ahead of it is no fault
        grp("billing", "orders", 3, 60), grp("analytics", "orders", 3, 60),
        grp("etl-query", "orders", 3, 150, state=None, kind="spark_checkpoint", members=None),
    ]
    got = rows(run(spark, config(ORDERS), parts, groups))
    assert brief(got[("orders", 0)]) == ("commit_beyond_end", None, 0, False, "billing")
    assert got[("orders", 0)].detail == (
        "group billing committed 150, beyond the high watermark 100: it read another incarnation of the topic "
        "(deleted and recreated) or a truncated log, so nothing is known to be consumed: not purged"
    )
    assert brief(got[("orders", 1)]) == ("commit_diverged", None, 0, False, "billing")
    assert got[("orders", 1)].detail == (
        "group billing committed 80 in leader epoch 2, but the log ends that epoch at 60: its history diverged "
        "from the log (KIP-320 truncation): not purged"
    )
    assert brief(got[("orders", 2)]) == ("group", 50, 50, True, "analytics")
    assert brief(got[("orders", 3)]) == ("group", 60, 60, True, "analytics")
    # A forced manual cut is the operator's call: lineage checks are group checks, skipped too.
    forced = config(ORDERS, manual=[{"topic": "orders", "partition": 0, "offset": 40, "force": True}])
    assert brief(rows(run(spark, forced, parts[:1], groups[:2]))[("orders", 0)]) == ("manual", 40, 40, True, None)


def test_tiered_cut_says_whether_it_reaches_remote_storage(spark: SparkSession) -> None:
    cfg = config(ORDERS, manual=[{"topic": "orders", "partition": 3, "offset": "end", "force": True}])
    parts = [
        # offsets 0..299 only remote, remote storage holds up to 299: a cut to 200 removes remote data
        part("orders", 0, log_start=0, hw=500, remote=True, local_start=300, tiered=299),
        part("orders", 1, log_start=0, hw=500, remote=True, local_start=0, tiered=-1),  # nothing copied yet
        part("orders", 2, log_start=0, hw=500, remote=True, local_start=0),  # latest tiered unknown
        part("orders", 3, log_start=0, hw=500, remote=True, local_start=0, tiered=100),  # a forced cut, but DISABLING
        part("plain", 0, log_start=0, hw=500),  # no tiered storage
    ]
    groups = [grp(g, "orders", p, offset) for g, offset in (("billing", 200), ("analytics", 250)) for p in range(4)]
    cfg2 = config(ORDERS, {"name": "plain", "topics": "plain", "required_groups": ["billing"]})
    got = rows(run(spark, cfg, parts[:4], groups))
    assert [(got[("orders", p)].cuts_remote, got[("orders", p)].local_log_start_offset) for p in range(4)] == [
        (True, 300), (False, 0), (None, 0), (True, 0)
    ]
    assert got[("orders", 0)].detail == "group billing at 200 holds back 300 records; reaches remote storage (offsets below 300 are remote only)"
    plain = rows(run(spark, cfg2, parts[4:], [grp("billing", "plain", 0, 200)]))[("plain", 0)]
    assert (plain.cutoff, plain.cuts_remote, plain.local_log_start_offset) == (200, False, None)
    moving = rows(run(spark, cfg, parts[:4], groups, tiering=frozenset({"orders"})))
    assert {(r.binding_constraint, r.cutoff, r.actionable, r.cuts_remote) for r in moving.values()} == {("tiering_transition", None, False, False)}
    assert moving[("orders", 3)].detail == (
        "tiered storage is being disabled on this topic (DISABLING, see spark-purge tiering status): not purged until DISABLED"
    )


def test_topic_rules_reach_each_row_exactly(spark: SparkSession) -> None:
    """``with_topic_rules`` carries the rules as one folded constant, looked up by topic: every
    value arrives as given (timestamps to the microsecond, names with quotes and non-ASCII), a
    topic without a rule is left out, and no Spark job broadcasts a rules table."""
    from spark_purge.policy.inputs import TopicRuleRow
    from spark_purge.policy.plan import with_topic_rules

    stale = datetime(2024, 5, 1, 11, 59, 58, 123456, tzinfo=timezone.utc)
    odd = 'züge."quoted"\\x'
    rules = [
        TopicRuleRow(odd, "r1", True, ['g"1', "gé"], True, False, stale, "2s", 7, None, ["u"], "u (UNKNOWN)"),
        TopicRuleRow("plain", "r2", False, [], False, True, datetime(1970, 1, 1, tzinfo=timezone.utc), "0s", 1, stale, [], None),
    ]
    parts = spark.createDataFrame([(odd, 0), ("plain", 3), ("other", 1)], "topic string, partition int")
    got = {r["topic"]: r.asDict() for r in with_topic_rules(parts, rules).collect()}
    assert set(got) == {odd, "plain"}
    assert got[odd] == {
        "topic": odd, "partition": 0, "rule": "r1", "protected": True, "required": ['g"1', "gé"], "block_missing": True,
        "ignore_stale": False, "stale_before": _naive_local(stale), "stale_after": "2s",
        "min_step": 7, "floor_time": None, "unreadable": ["u"], "unreadable_note": "u (UNKNOWN)",
    }
    assert got["plain"]["floor_time"] == _naive_local(stale)
    assert got["plain"]["stale_before"] == _naive_local(datetime(1970, 1, 1, tzinfo=timezone.utc))
    assert with_topic_rules(parts, []).count() == 0
    plan = with_topic_rules(parts, rules)._jdf.queryExecution().executedPlan().toString()
    assert "Broadcast" not in plan and "Join" not in plan, plan


def _naive_local(moment: datetime) -> datetime:
    """``moment`` as PySpark's collect gives a timestamp: naive, in Python's local time."""
    return moment.astimezone().replace(tzinfo=None)
