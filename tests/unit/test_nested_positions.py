"""``NestedPositions`` (issue 12): the snapshot's positions matched with the progress store, both
nested by partition, in one Arrow task (``spark_purge.position_match``), against the flat
Spark query it replaces (``Positions``: the snapshot's rows grouped by key, fully outer joined
with the store, placed on the snapshot's partitions) as the oracle: each group's staleness,
the vanished positions and the store's rows after the batch, over random snapshots and stores
(hypothesis) and a case spelt out. The store's nested form round-trips (``nest_store``,
``flat_store``)."""
from __future__ import annotations

import io
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_purge import schemas
from spark_purge.audit import PROGRESS_LOG
from spark_purge.config import from_dict
from spark_purge.detach import drop
from spark_purge.policy import split_snapshot
from spark_purge.policy.groups import STATUS, with_group_status
from spark_purge.policy.plan import _discovery_pairs, _every_group_row, rules_of_pairs, with_topic_rules
from spark_purge.policy.positions import (
    CHANGED,
    NESTED_STORE,
    PACKED_KEY,
    NestedPositions,
    Positions,
    flat_store,
    nest_store,
)
from spark_purge.position_match import NESTED_INPUT, NESTED_OUTPUT, ROW_KINDS, LogWriter, _RowsFile, nested_match
from tests.unit.packing import packed_frame

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
NAMES = ("g0", "g1", "G2", "gé", "z")
TYPES = ("classic", "Classic", "consumer", "share", None, *schemas.EXTERNAL_CONSUMER_TYPES)
STATES = ("Stable", "Empty", "Vanished", "Dead", "dead", None)
PARTITIONS = (("a", 0), ("a", 1), ("b", 0), ("b", 2))
TOPIC_IDS = ("id-1", "id-2", None)


def snapshot_row(topic: str, partition: int, topic_id: str | None, groups: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    return ("snap", NOW, topic, partition, 1, [1], [1], 0, 100, 100, False, "delete", None, None, None, None, topic_id, None, None, None, groups, [])


group_rows = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from(STATES),
    st.sampled_from(TYPES),
    st.one_of(st.none(), st.integers(0, 2)),
    st.integers(-1, 4),  # -1: a member holds the partition without a position
    st.none(),
    st.none(),
    st.none(),
)
partition_rows = st.tuples(st.sampled_from(PARTITIONS), st.sampled_from(TOPIC_IDS), st.lists(group_rows, max_size=6))
store_rows = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from((*PARTITIONS, ("c", 5))),  # ("c", 5): a partition the snapshot never has
    st.integers(0, 4),
    st.integers(0, 3).map(lambda h: NOW - timedelta(hours=h)),
    st.sampled_from(TYPES[:5]),
    st.sampled_from(TOPIC_IDS),
)


def frames(spark: SparkSession, snapshot: list[Any], store: list[Any]) -> tuple[DataFrame, DataFrame]:
    snap = spark.createDataFrame([snapshot_row(t, p, tid, groups) for (t, p), tid, groups in snapshot], schemas.SNAPSHOT)
    kept = spark.createDataFrame([(g, t, p, o, ts, kind, tid) for g, (t, p), o, ts, kind, tid in store], schemas.PROGRESS_STORE)
    return snap, kept


def _rows(df: DataFrame | pa.Table) -> Counter[tuple[Any, ...]]:
    rows = df.to_pylist() if isinstance(df, pa.Table) else [r.asDict(recursive=True) for r in df.collect()]
    return Counter(_plain(r) for r in rows)


def _plain(value: Any) -> Any:
    """Timestamps as UTC instants (Spark's rows carry naive local times, Arrow's aware ones);
    lists and structs as tuples, a struct's fields by name (hashable, to count rows)."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


# Rules for the consumer facts the match's task is asked for: groups discovered on every topic,
# stale groups ignored on the "a" topics and blocking on the others, with two stale_after.
FACTS_CONFIG = from_dict(
    {
        "kafka": {"bootstrap_servers": ["k:9092"]},
        "audit": {"path": "a"},
        "defaults": {"min_retention": "0s", "min_step": 1, "stale_after": "1h"},
        "rules": [
            {"name": "a", "topics": r"(.*\.)?a", "on_stale_group": "ignore", "stale_after": "90m"},
            {"name": "rest", "topics": r"(.*\.)?[bc]"},
        ],
    }
)


def check_facts(nested: NestedPositions, snap: DataFrame, staleness: pa.Table, gone: bool, rules: list[Any]) -> None:
    """The facts the match's task made (asked with ``rules``) are the rows the facts' own task
    (``with_group_status``) gives for those rules and the match's staleness; none when a
    remembered position vanished."""
    made = nested.facts()
    if gone:
        assert made is None
        assert nested.out.where(F.col("row_kind") == "fact").count() == 0
        return
    assert made is not None and list(made.rules) == rules
    base = with_topic_rules(snap.select(*schemas.PARTITION_STATE.fieldNames(), "groups"), rules)
    expected = with_group_status(base, staleness).select(*made.rows.columns)
    assert made.rows.columns == [*schemas.PARTITION_STATE.fieldNames(), *STATUS.fieldNames()]
    assert _rows(made.rows) == _rows(expected)


def check(
    spark: SparkSession,
    snapshot: list[Any],
    store: list[Any],
    unreadable: tuple[str, ...],
    chunk: int | None = None,
    rewrite_above: int | None = -1,
    packed: bool = False,
) -> NestedPositions:
    """The nested match against the flat one; ``chunk``: partitions the task matches at a time
    (a group's verdict then combines several chunks'); ``rewrite_above``: the log's room before
    a rewrite (-1: always due, so the task also writes the unchanged positions); ``packed``: the
    match reads the snapshot's group rows packed (``snapshot_pack``, as the pipeline reads them).
    The match is asked for the consumer facts too, with the rules of the snapshot's own discovery
    pairs."""
    snap, kept = frames(spark, snapshot, store)
    partitions, groups = split_snapshot(snap)
    flat = Positions.match(partitions, groups, kept, keep=False)
    own_pairs = _discovery_pairs(snap.select(*schemas.PARTITION_STATE.fieldNames(), "groups"), _every_group_row(snap, None))
    rules = rules_of_pairs(own_pairs, FACTS_CONFIG, NOW, {g: "unreadable" for g in unreadable})
    given = packed_frame(snap) if packed else snap
    nested = NestedPositions.match(given, nest_store(kept), unreadable, at=NOW, chunk=chunk, log_batch=7, rewrite_above=rewrite_above, facts=rules)
    try:
        staleness, gone = nested.staleness_table()
        if rules:
            check_facts(nested, snap, staleness, gone, rules)
        else:
            assert nested.facts() is None
        expected_staleness = flat._staleness(unreadable).collect()
        assert _rows(staleness) == Counter(tuple(sorted((k, _plain(v)) for k, v in r.asDict().items() if k != "gone")) for r in expected_staleness)
        assert gone == any(r["gone"] for r in expected_staleness)
        check_row_kinds(nested.out)
        assert _rows(nested.vanished()) == _rows(flat.vanished(unreadable))
        # The rules' discovery pairs, read in the same job: the rows the planner's own query gives.
        expected_pairs = _discovery_pairs(snap.select(*schemas.PARTITION_STATE.fieldNames(), "groups"), _every_group_row(snap, flat.vanished(unreadable)))
        pairs = nested.discovery()
        assert pairs is not None and pairs.num_rows == expected_pairs.num_rows
        assert _rows(pairs) == _rows(expected_pairs)
        after = flat.after(NOW)
        assert _rows(flat_store(nested.after(NOW))) == _rows(after.drop(CHANGED))
        assert _rows(flat_store(nested.after(NOW), changed_only=True)) == _rows(after.where(CHANGED).drop(CHANGED))
        counts = {(r["topic"], r["partition"]): r["changed"] for r in nested.after(NOW).collect()}
        expected = Counter((r["topic"], r["partition"]) for r in after.where(CHANGED).collect())
        assert {k: v for k, v in counts.items() if v} == dict(expected)
        # The changed positions as the task wrote them, for the progress log: the same rows.
        log = nested.log_file()  # read with the staleness, in its job
        nested._log_rows = None
        assert nested.log_file() == log  # read from the held rows, a job of its own
        assert log is not None and log.batch_id == 7 and log.rows == sum(expected.values())
        due = rewrite_above is not None and log.rows > max(rewrite_above, 0)
        for body, rows, expected_rows in ((log.body, log.rows, after.where(CHANGED)), (log.rest, log.rest_rows, after.where(~F.col(CHANGED)))):
            if body is log.rest and not due:
                assert (log.rest, log.rest_rows) == (None, None)
                continue
            assert rows == expected_rows.count()
            if not rows:
                assert not body
                continue
            assert body is not None
            written = pq.read_table(io.BytesIO(body))
            assert written.schema.names == list(PROGRESS_LOG.fieldNames())
            assert set(written.column("batch_id").to_pylist()) == {7}
            assert _rows(written.drop_columns(["batch_id"])) == _rows(expected_rows.drop(CHANGED))
        # The store after the batch, held packed (``hand_over``), is the next match's store as it
        # is: that match reads it as it reads the same rows nested from a table.
        packed, holder = nested.hand_over(NOW)
        assert PACKED_KEY in packed.columns and _rows(flat_store(packed)) == _rows(after.drop(CHANGED))
        try:
            check_next(spark, snap, packed, unreadable, chunk)
        finally:
            drop(holder)
    finally:
        nested.release()
    return nested


# The columns each kind of the match's rows may set (``position_match.ROW_KINDS``); the others
# are null. The driver reads rows by kind, so a kind's rows must not carry another kind's facts.
KIND_COLUMNS = {
    "partition": {"topic", "partition", "snapshot_id", "snapshot_time", "positions", "changed"},
    "group": {"group_id", "stale_candidate", "last_progress", "gone"},
    "vanished": {"topic", "partition", "snapshot_id", "snapshot_time", "group_id", "offset", "group_type"},
    "pair": {"topic", "group_id", "external"},
    "file": {"log_file", "changed", "log_rest", "offset"},
    "packed": {"packed", "changed"},
    # The snapshot partition's columns, then its consumer facts (``position_match.FactsAsk``).
    "fact": {"topic", "partition", "snapshot_id", "snapshot_time"}
    | ({*schemas.PARTITION_STATE.fieldNames()} - {n for n, _ in NESTED_OUTPUT})
    | set(STATUS.fieldNames()),
}


def check_row_kinds(out: DataFrame) -> None:
    """Every row of a match has a kind, and sets only that kind's columns."""
    assert set(KIND_COLUMNS) == set(ROW_KINDS)
    rows = out.toArrow().to_pylist()
    assert rows and {r["row_kind"] for r in rows} <= set(ROW_KINDS)
    for r in rows:
        stray = {k for k, v in r.items() if v is not None and k != "row_kind" and k not in KIND_COLUMNS[r["row_kind"]]}
        assert not stray, (r["row_kind"], stray)


def check_next(spark: SparkSession, snap: DataFrame, packed: DataFrame, unreadable: tuple[str, ...], chunk: int | None) -> None:
    """A match of ``snap`` with a packed store (``packed``) gives what one with the same rows
    read flat and nested again gives."""
    later = NOW + timedelta(minutes=1)
    moved = snap.withColumn("snapshot_time", F.lit(later).cast("timestamp"))
    kept = spark.createDataFrame(flat_store(packed).collect(), schemas.PROGRESS_STORE)
    ways = [NestedPositions.match(moved, store, unreadable, at=later, chunk=chunk) for store in (packed, nest_store(kept))]
    try:
        (first, first_gone), (second, second_gone) = (way.staleness_table() for way in ways)
        assert (_rows(first), first_gone) == (_rows(second), second_gone)
        assert _rows(ways[0].vanished()) == _rows(ways[1].vanished())
        assert _rows(flat_store(ways[0].after(later))) == _rows(flat_store(ways[1].after(later)))
    finally:
        for way in ways:
            way.release()


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Any], list[Any], set[str]]:
    """A snapshot, a store and the unreadable groups. Most stored positions echo the snapshot's
    (the same key, the offset as seen or one behind, a random type, topic id and time), so
    known and stale positions are common; the others are drawn apart."""
    snapshot = draw(st.lists(partition_rows, max_size=4, unique_by=lambda r: r[0]))
    store = {}
    for (t, p), _, groups in snapshot:
        for g in groups:
            if g[4] >= 0 and draw(st.booleans()):
                store[(g[0], (t, p))] = (g[0], (t, p), g[4] - draw(st.integers(0, 1)) if g[4] else 0, *draw(store_rows)[3:])
    for row in draw(st.lists(store_rows, max_size=6)):
        store.setdefault((row[0], row[1]), row)
    return snapshot, list(store.values()), draw(st.sets(st.sampled_from(NAMES), max_size=2))


def merged(drawn: list[tuple[list[Any], list[Any], set[str]]]) -> tuple[list[Any], list[Any], tuple[str, ...]]:
    """Several cases as one: case *i*'s topics and groups renamed ``<i>.<name>``, so no case sees
    another's rows and one Spark run checks them all (a run is seconds; a case's rows, none)."""
    snapshot, store, unreadable = [], [], set()
    for i, (snap, kept, skip) in enumerate(drawn):
        snapshot += [((f"{i}.{t}", p), tid, [(f"{i}.{g[0]}", *g[1:]) for g in groups]) for (t, p), tid, groups in snap]
        store += [(f"{i}.{g}", (f"{i}.{t}", p), *rest) for g, (t, p), *rest in kept]
        unreadable |= {f"{i}.{g}" for g in skip}
    return snapshot, store, tuple(sorted(unreadable))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(cases(), min_size=20, max_size=40), st.sampled_from((1, 3, None)), st.sampled_from((-1, 0, 10, None)), st.booleans())
def test_the_nested_match_gives_what_the_flat_one_gives(
    spark: SparkSession, drawn: list[tuple[list[Any], list[Any], set[str]]], chunk: int | None, rewrite_above: int | None, packed: bool
) -> None:
    check(spark, *merged(drawn), chunk=chunk, rewrite_above=rewrite_above, packed=packed)


def without_vanished(snapshot: list[Any], store: list[Any]) -> list[Any]:
    """``store`` less every position the snapshot lacks on a partition it has: a store whose
    match has nothing vanished (a steady purge's usual case), so the task makes the facts."""
    parts = {tp for tp, _, _ in snapshot}
    seen = {(g[0], tp) for tp, _, groups in snapshot for g in groups if g[4] >= 0}
    return [row for row in store if row[1] not in parts or (row[0], row[1]) in seen]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(cases(), min_size=20, max_size=40), st.sampled_from((1, 3, None)), st.booleans())
def test_the_match_makes_the_facts_the_facts_task_makes(
    spark: SparkSession, drawn: list[tuple[list[Any], list[Any], set[str]]], chunk: int | None, packed: bool
) -> None:
    """Asked with the rules (``NestedPositions.match``'s ``facts``), the match's task gives each
    ruled partition's consumer facts: the rows ``with_group_status`` gives from the same rules and
    the match's staleness (``check_facts``). With nothing vanished, as in a steady purge."""
    snapshot, store, unreadable = merged(drawn)
    snap, kept = frames(spark, snapshot, without_vanished(snapshot, store))
    pairs = _discovery_pairs(snap.select(*schemas.PARTITION_STATE.fieldNames(), "groups"), _every_group_row(snap, None))
    rules = rules_of_pairs(pairs, FACTS_CONFIG, NOW, {g: "unreadable" for g in unreadable})
    assume(rules)  # a snapshot with a partition (every topic has a rule)
    nested = NestedPositions.match(packed_frame(snap) if packed else snap, nest_store(kept), unreadable, at=NOW, chunk=chunk, facts=rules)
    try:
        staleness, gone = nested.staleness_table()
        assert not gone
        check_facts(nested, snap, staleness, gone, rules)
    finally:
        nested.release()


def test_the_nested_match_spelt_out(spark: SparkSession) -> None:
    ext = schemas.EXTERNAL_CONSUMER_TYPES[0]
    snapshot = [
        (("a", 0), "id-1", [("moved", "Stable", "classic", 1, 7, None, None, None), ("idle", "Empty", "classic", 0, 3, None, None, None), ("x", None, ext, None, 2, None, None, None)]),
        (("b", 0), "id-2", [("new", "Stable", "consumer", 1, 1, None, None, None), ("reborn", "Empty", "classic", 0, 9, None, None, None)]),
    ]
    store = [
        ("moved", ("a", 0), 5, NOW - timedelta(hours=1), "classic", "id-1"),
        ("idle", ("a", 0), 3, NOW - timedelta(hours=2), "classic", "id-1"),
        ("lost", ("a", 0), 4, NOW - timedelta(hours=3), "classic", "id-1"),  # vanished
        ("ghost", ("a", 0), 4, NOW - timedelta(hours=3), "classic", "id-1"),  # unreadable: not vanished
        ("old", ("b", 0), 9, NOW - timedelta(hours=3), "classic", "id-1"),  # another incarnation: not vanished
        ("reborn", ("b", 0), 9, NOW - timedelta(hours=3), "classic", "id-1"),  # the same offset on another incarnation: new
        ("far", ("c", 5), 2, NOW - timedelta(hours=4), "classic", None),  # a partition the snapshot lacks: kept as is
    ]
    check(spark, snapshot, store, ("ghost",))
    check(spark, snapshot, store, ("ghost",), chunk=1)  # each partition a chunk of its own
    snap, kept = frames(spark, snapshot, store)
    nested = NestedPositions.match(snap, nest_store(kept), ("ghost",), at=NOW)
    try:
        staleness, gone = nested.staleness_table()
        assert gone
        verdict = {r["group_id"]: (r["stale_candidate"], _plain(r["last_progress"])) for r in staleness.to_pylist()}
        assert verdict == {
            "moved": (False, NOW - timedelta(hours=1)),
            "idle": (True, NOW - timedelta(hours=2)),  # no members, at the offset the store knows
            "x": (False, None),
            "new": (False, None),
            "reborn": (False, NOW - timedelta(hours=3)),  # offset 9 of another incarnation is not the one known
            "lost": (True, NOW - timedelta(hours=3)),
        }
        assert [(r["group_id"], r["committed_offset"], r["group_state"]) for r in nested.vanished().collect()] == [("lost", 4, "Vanished")]
        after = {(r["group_id"], r["topic"]): (r["committed_offset"], _plain(r["last_progress_time"])) for r in flat_store(nested.after(NOW)).collect()}
        assert after[("moved", "a")] == (7, NOW)
        assert after[("idle", "a")] == (3, NOW - timedelta(hours=2))
        assert after[("far", "c")] == (2, NOW - timedelta(hours=4))
        assert ("x", "a") not in after  # external consumers are configured, never remembered
        # moved now: the two positions the snapshot moved or added; the other incarnation's stays
        assert {k: v for k, v in after.items() if v[1] == NOW} == {("moved", "a"): (7, NOW), ("new", "b"): (1, NOW), ("reborn", "b"): (9, NOW)}
        assert after[("old", "b")] == (9, NOW - timedelta(hours=3))
        with pytest.raises(ValueError, match="not"):
            nested.after(NOW + timedelta(seconds=1))
    finally:
        nested.release()


def test_the_store_nests_and_flattens_back(spark: SparkSession) -> None:
    store = [
        ("g0", ("a", 0), 1, NOW, "classic", "id-1"),
        ("g1", ("a", 0), 2, NOW, None, None),
        ("g0", ("b", 2), 3, NOW - timedelta(hours=1), "consumer", "id-2"),
    ]
    _, kept = frames(spark, [], store)
    nested = nest_store(kept)
    assert nested.schema.simpleString() == NESTED_STORE.simpleString()
    assert _rows(flat_store(nested)) == _rows(kept)
    assert flat_store(nested, changed_only=True).count() == 0


def test_no_rows_in_gives_no_rows_out() -> None:
    empty = pa.Table.from_pylist([], schema=pa.schema([pa.field(n, k) for n, k in NESTED_INPUT]))
    assert nested_match(empty).num_rows == 0
    with pytest.raises(ValueError, match="chunk must be at least 1 partition, not 0"):
        nested_match(empty, chunk=0)


def test_the_log_file_is_not_made_for_a_null_where_the_log_keeps_none() -> None:
    """A changed position without a group name (none in practice) makes no file: its rows are
    counted, and the store writes them through Delta's writer, which refuses them itself."""
    def rows(names: list[str | None]) -> pa.Table:
        n = len(names)
        return pa.table({
            "group_id": pa.array(names, pa.string()), "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()),
            "committed_offset": pa.array(range(n), pa.int64()), "last_progress_time": pa.array([NOW] * n, pa.timestamp("us", tz="UTC")),
            "group_type": pa.array([None] * n, pa.string()), "topic_id": pa.array(["id-1"] * n),
        })

    fine = _RowsFile(3)
    fine.add(rows(["a", "b"]))
    fine.add(rows([]))
    fine.add(rows(["c"]))
    body = fine.body()
    assert fine.rows == 3 and body is not None
    assert pq.read_table(io.BytesIO(body)).column("group_id").to_pylist() == ["a", "b", "c"]
    refused = _RowsFile(3)
    refused.add(rows(["a"]))
    refused.add(rows([None, "b"]))
    assert refused.rows == 3 and refused.refused and refused.body() is None
    assert _RowsFile(3).body() is None  # no rows: no file
    empty = LogWriter(3, rewrite_above=5).row().to_pylist()[0]
    assert (empty["log_file"], empty["changed"], empty["log_rest"], empty["offset"]) == (b"", 0, None, None)
