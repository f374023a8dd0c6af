"""``spark_purge.position_match`` (no JVM): the columnar match of a snapshot's positions with the
progress store's against a plain Python reference written from the Spark query it replaces (the
snapshot's rows grouped by key and aggregated, fully outer joined with the store's rows on the
key), over random inputs (hypothesis) and a few cases spelt out."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_purge.position_match import INPUT_FIELDS, MATCHED_FIELDS, match_batches, match_table
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
NAMES = ("g0", "g1", "G2", "gé", "z")
TOPICS = ("a", "b")
TYPES = ("classic", "Classic", "consumer", "share", "streams", None, *EXTERNAL_CONSUMER_TYPES, EXTERNAL_CONSUMER_TYPES[0].upper())
STATES = ("Stable", "Empty", "Vanished", "VANISHED", "Dead", "dead", None)
KEY = ("group_id", "topic", "partition")
FACTS = ("k_offset", "k_type", "k_no_members", "x_present", "k_time")


def _input(seen: list[dict[str, Any]], stored: list[dict[str, Any]]) -> pa.Table:
    rows = [{**r, "stored": False} for r in seen] + [{**r, "stored": True} for r in stored]
    return pa.table({name: pa.array([r.get(name) for r in rows], kind) for name, kind in INPUT_FIELDS})


def _no_members(row: dict[str, Any]) -> bool:
    """``policy.groups.no_members`` for one row, as SQL evaluates it (a null compares false)."""
    state = None if row["state"] is None else row["state"].lower()
    kind = None if row["type"] is None else row["type"].lower()
    classic_empty = kind == "classic" and (state == "dead" or row["members"] == 0)
    gone = state == "empty" or state == "vanished" or classic_empty
    return gone and kind not in EXTERNAL_CONSUMER_TYPES


def reference(seen: list[dict[str, Any]], stored: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """What Spark's group-by-key aggregation fully outer joined with the store gave, as a multiset of rows."""
    keys: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in seen:
        keys.setdefault(tuple(row[k] for k in KEY), []).append(row)
    out: Counter[tuple[Any, ...]] = Counter()
    used: set[int] = set()
    for key, rows in keys.items():
        inside = [r for r in rows if r["type"] not in EXTERNAL_CONSUMER_TYPES]
        offsets = [r["offset"] for r in inside if r["offset"] is not None]
        types = [r["type"] for r in inside if r["type"] is not None]
        times = [r["time"] for r in inside if r["time"] is not None]
        facts = (
            min(offsets) if offsets else None,
            max(types, key=lambda t: t.encode()) if types else None,
            all(_no_members(r) for r in inside) if inside else None,
            any(r["type"] in EXTERNAL_CONSUMER_TYPES for r in rows),
            max(times) if times else None,
        )
        # A join matches no key with a null part.
        hits = [i for i, s in enumerate(stored) if None not in key and tuple(s[k] for k in KEY) == key]
        used.update(hits)
        for i in hits or [None]:
            s = stored[i] if i is not None else {}
            out[(*key, *facts, True, s.get("offset"), s.get("time"), s.get("type"), s.get("topic_id"))] += 1
    for i, s in enumerate(stored):
        if i not in used:
            out[(*(s[k] for k in KEY), None, None, None, None, None, False, s["offset"], s["time"], s["type"], s["topic_id"])] += 1
    return out


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    assert table.schema == pa.schema([pa.field(n, k) for n, k in MATCHED_FIELDS])
    return Counter(tuple(row[n] for n, _ in MATCHED_FIELDS) for row in table.to_pylist())


times = st.one_of(st.none(), st.integers(0, 5).map(lambda m: NOW + timedelta(minutes=m)))
seen_rows = st.fixed_dictionaries(
    {
        "group_id": st.sampled_from(NAMES),
        "topic": st.sampled_from(TOPICS),
        "partition": st.integers(0, 2),
        "offset": st.integers(0, 4),
        "type": st.sampled_from(TYPES),
        "time": times,
        "state": st.sampled_from(STATES),
        "members": st.one_of(st.none(), st.integers(0, 2)),
    }
)
stored_rows = st.fixed_dictionaries(
    {
        "group_id": st.sampled_from(NAMES),
        "topic": st.sampled_from(TOPICS),
        "partition": st.integers(0, 2),
        "offset": st.integers(0, 4),
        "type": st.sampled_from(TYPES),
        "time": times,
        "topic_id": st.sampled_from(("id-1", "id-2", None)),
    }
)


@settings(max_examples=400, deadline=None)
@given(st.lists(seen_rows, max_size=25), st.lists(stored_rows, max_size=15, unique_by=lambda r: (r["group_id"], r["topic"], r["partition"])))
def test_the_match_is_the_aggregation_joined_with_the_store(seen: list[dict[str, Any]], stored: list[dict[str, Any]]) -> None:
    assert _rows(match_table(_input(seen, stored))) == reference(seen, stored)


@settings(max_examples=100, deadline=None)
@given(st.lists(seen_rows, max_size=12), st.lists(stored_rows, max_size=12))
def test_a_key_stored_twice_gives_a_row_for_each_as_a_join_does(seen: list[dict[str, Any]], stored: list[dict[str, Any]]) -> None:
    assert _rows(match_table(_input(seen, stored))) == reference(seen, stored)


def test_a_key_with_a_null_part_is_grouped_and_matches_nothing() -> None:
    seen = [
        {"group_id": None, "topic": "a", "partition": 0, "offset": 3, "type": "classic", "time": NOW, "state": "Empty", "members": 0},
        {"group_id": None, "topic": "a", "partition": 0, "offset": 1, "type": "classic", "time": NOW, "state": "Stable", "members": 1},
    ]
    stored = [{"group_id": None, "topic": "a", "partition": 0, "offset": 1, "type": "classic", "time": NOW, "topic_id": None}]
    got = _rows(match_table(_input(seen, stored)))
    assert got == reference(seen, stored)
    assert sum(got.values()) == 2  # one key of the snapshot, one stored row on its own


def test_the_facts_spelt_out() -> None:
    ext = EXTERNAL_CONSUMER_TYPES[0]
    seen = [
        {"group_id": "g", "topic": "a", "partition": 0, "offset": 7, "type": "classic", "time": NOW, "state": "Empty", "members": 0},
        {"group_id": "g", "topic": "a", "partition": 0, "offset": 5, "type": "consumer", "time": NOW + timedelta(seconds=1), "state": "Empty", "members": 0},
        {"group_id": "g", "topic": "a", "partition": 0, "offset": 1, "type": ext, "time": NOW + timedelta(seconds=9), "state": None, "members": None},
        {"group_id": "x", "topic": "a", "partition": 0, "offset": 2, "type": ext, "time": NOW, "state": None, "members": None},
    ]
    stored = [
        {"group_id": "g", "topic": "a", "partition": 0, "offset": 5, "type": "classic", "time": NOW - timedelta(hours=1), "topic_id": "id-1"},
        {"group_id": "old", "topic": "b", "partition": 3, "offset": 9, "type": "classic", "time": NOW - timedelta(hours=2), "topic_id": None},
    ]
    got = {row["group_id"]: row for row in match_table(_input(seen, stored)).to_pylist()}
    assert got["g"] == {
        "group_id": "g", "topic": "a", "partition": 0,
        # the external row counts for x_present only
        "k_offset": 5, "k_type": "consumer", "k_no_members": True, "x_present": True, "k_time": NOW + timedelta(seconds=1),
        "live": True, "s_offset": 5, "s_time": NOW - timedelta(hours=1), "s_type": "classic", "s_topic_id": "id-1",
    }  # fmt: skip
    assert (got["x"]["k_offset"], got["x"]["k_type"], got["x"]["k_no_members"], got["x"]["x_present"], got["x"]["s_offset"]) == (None, None, None, True, None)
    assert (got["old"]["live"], got["old"]["k_offset"], got["old"]["x_present"], got["old"]["s_offset"]) == (False, None, None, 9)


def test_batches_in_and_out() -> None:
    seen = [
        {"group_id": f"g{i}", "topic": "a", "partition": i % 7, "offset": i, "type": "classic", "time": NOW, "state": "Stable", "members": 1}
        for i in range(250)
    ]
    stored = [{"group_id": f"g{i}", "topic": "a", "partition": i % 7, "offset": i, "type": "classic", "time": NOW, "topic_id": None} for i in range(0, 300, 2)]
    table = _input(seen, stored)
    batches = table.to_batches(max_chunksize=60)
    assert len(batches) > 1
    out = list(match_batches(iter(batches)))
    assert _rows(pa.Table.from_batches(out)) == reference(seen, stored)
    assert list(match_batches(iter([]))) == []
    assert match_table(_input([], [])).num_rows == 0
