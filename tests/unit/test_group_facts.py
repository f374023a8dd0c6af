"""``spark_purge.group_facts`` (no JVM): the columnar per-partition consumer facts against a plain
Python reference written from the aggregation they replace (explode a partition's group rows,
keep its required consumers', add a row without a commit for each required one without any,
aggregate back), over random batches (hypothesis) and a few cases spelt out."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_purge.group_facts import KEY_FIELDS, STATUS_FIELDS, carried_batches, status_batch, status_batches
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
ROW = pa.struct(
    [
        ("group_id", pa.string()),
        ("group_state", pa.string()),
        ("group_type", pa.string()),
        ("member_count", pa.int32()),
        ("committed_offset", pa.int64()),
        ("commit_metadata", pa.string()),
        ("committed_leader_epoch", pa.int32()),
        ("epoch_end_offset", pa.int64()),
    ]
)
TS = pa.timestamp("us", tz="UTC")
# Names whose byte order and code-point order agree but differ from case-folded order.
NAMES = ("g0", "g1", "G2", "gé", "ext-a", "ext-b", "z")
TYPES = ("classic", "consumer", "share", "streams", None, *EXTERNAL_CONSUMER_TYPES)
STATES = ("Stable", "Empty", "Vanished", "VANISHED", "Dead", None)


def _batch(parts: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "snapshot_id": pa.array(["snap"] * len(parts), pa.string()),
            "topic": pa.array([p["topic"] for p in parts], pa.string()),
            "partition": pa.array([p["partition"] for p in parts], pa.int32()),
            "ignore_stale": pa.array([p["ignore_stale"] for p in parts], pa.bool_()),
            "stale_before": pa.array([p["stale_before"] for p in parts], TS),
            "high_watermark": pa.array([p["high_watermark"] for p in parts], pa.int64()),
            "required": pa.array([p["required"] for p in parts], pa.list_(pa.string())),
            "rows": pa.array([p["rows"] for p in parts], pa.list_(ROW)),
        }
    )


def _staleness(stale: dict[str, tuple[bool | None, datetime | None]]) -> pa.Table:
    names = sorted(stale)
    return pa.table(
        {
            "group_id": pa.array(names, pa.string()),
            "stale_candidate": pa.array([stale[n][0] for n in names], pa.bool_()),
            "last_progress": pa.array([stale[n][1] for n in names], TS),
        }
    )


def _null_first(value: Any) -> tuple[int, Any]:
    """Spark's ascending order of a struct field: null before any value."""
    return (0, 0) if value is None else (1, value)


def reference(part: dict[str, Any], stale: dict[str, tuple[bool | None, datetime | None]]) -> dict[str, Any] | None:
    """What the explode-filter-aggregate gave for one partition (None: no row)."""
    rows = part["rows"] or []
    external = [g["group_id"] for g in rows if g["group_type"] in EXTERNAL_CONSUMER_TYPES]
    needed = set(part["required"] or []) | set(external)
    names = {g["group_id"] for g in rows}
    entries = []
    for g in [g for g in rows if g["group_id"] in needed] + [{"group_id": n} for n in needed - names]:
        offset = g.get("committed_offset")
        candidate, progress = stale.get(g["group_id"], (None, None))
        entries.append(
            {
                "group_id": g["group_id"],
                "offset": offset if offset is not None and offset >= 0 else None,
                "type": g.get("group_type"),
                "vanished": (g.get("group_state") or "").lower() == "vanished",
                "epoch": g.get("committed_leader_epoch"),
                "epoch_end": g.get("epoch_end_offset"),
                "external": g.get("group_type") in EXTERNAL_CONSUMER_TYPES,
                "stale": bool(candidate) and progress is not None and progress < part["stale_before"],
            }
        )
    if not entries:
        return None
    missing = [e for e in entries if e["offset"] is None]
    counted = [e for e in entries if e["offset"] is not None and not (e["stale"] and part["ignore_stale"])]
    gmin = min(counted, key=lambda e: (e["offset"], int(e["stale"]), e["group_id"], _null_first(e["type"]), e["vanished"]), default=None)
    beyond = [e for e in entries if not e["external"] and e["offset"] is not None and e["offset"] > part["high_watermark"]]
    diverged = [e for e in entries if e["offset"] is not None and e["epoch_end"] is not None and e["epoch_end"] < e["offset"]]
    first_beyond = min(beyond, key=lambda e: (e["group_id"], e["offset"]), default=None)
    first_diverged = min(diverged, key=lambda e: (e["group_id"], e["offset"], _null_first(e["epoch"]), e["epoch_end"]), default=None)
    return {
        "snapshot_id": "snap",
        "topic": part["topic"],
        "partition": part["partition"],
        "missing": sorted(e["group_id"] for e in missing),
        "missing_typed": [
            {"group_id": g, "group_type": t}
            for g, t in sorted(((e["group_id"], e["type"]) for e in missing), key=lambda gt: (gt[0], _null_first(gt[1])))
        ],
        "missing_external": sorted(e["group_id"] for e in missing if e["external"]),
        "stale": sorted(e["group_id"] for e in entries if e["stale"]),
        "gmin": None
        if gmin is None
        else {"offset": gmin["offset"], "stale": int(gmin["stale"]), "group_id": gmin["group_id"], "group_type": gmin["type"], "vanished": gmin["vanished"]},
        "n_commits": sum(e["offset"] is not None for e in entries),
        "beyond": None if first_beyond is None else {"group_id": first_beyond["group_id"], "offset": first_beyond["offset"]},
        "diverged": None
        if first_diverged is None
        else {
            "group_id": first_diverged["group_id"],
            "offset": first_diverged["offset"],
            "epoch": first_diverged["epoch"],
            "epoch_end": first_diverged["epoch_end"],
        },
    }


def _rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    return draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "group_id": st.sampled_from(NAMES),
                    "group_state": st.sampled_from(STATES),
                    "group_type": st.sampled_from(TYPES),
                    "member_count": st.sampled_from([0, 1, None]),
                    "committed_offset": st.integers(-1, 12),
                    "commit_metadata": st.none(),
                    "committed_leader_epoch": st.none() | st.integers(0, 3),
                    "epoch_end_offset": st.none() | st.integers(-1, 12),
                }
            ),
            max_size=6,
        )
    )


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, tuple[bool | None, datetime | None]]]:
    parts = [
        {
            "topic": draw(st.sampled_from(["t0", "t1"])),
            "partition": i,
            "ignore_stale": draw(st.booleans()),
            "stale_before": NOW - timedelta(days=draw(st.integers(0, 3))),
            "high_watermark": draw(st.integers(0, 12)),
            "required": draw(st.lists(st.sampled_from(NAMES), max_size=4)),
            "rows": _rows(draw),
        }
        for i in range(draw(st.integers(0, 6)))
    ]
    stale = draw(
        st.dictionaries(
            st.sampled_from(NAMES),
            st.tuples(
                st.sampled_from([True, True, False, None]),
                st.sampled_from([None, *(NOW - timedelta(days=d) for d in (0, 2, 4, 5, 6))]),
            ),
            min_size=2,
        )
    )
    return parts, stale


def _as_dicts(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return batch.to_pylist()


@settings(max_examples=500, deadline=None)
@given(batches())
def test_the_columnar_facts_are_the_aggregations(case: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    parts, stale = case
    staleness = _staleness(stale) if stale else None
    got = _as_dicts(status_batch(_batch(parts), staleness))
    want = [r for r in (reference(p, stale) for p in parts) if r is not None]
    assert got == want


def test_output_columns_are_the_keys_then_the_facts() -> None:
    out = status_batch(_batch([_part(required=["g0"])]), None)
    assert out.schema.names == ["snapshot_id", "topic", "partition", *(n for n, _ in STATUS_FIELDS)]
    assert [out.schema.field(n).type for n, _ in STATUS_FIELDS] == [t for _, t in STATUS_FIELDS]


def _part(**values: Any) -> dict[str, Any]:
    part = {"topic": "t0", "partition": 0, "ignore_stale": False, "stale_before": NOW, "high_watermark": 10, "required": [], "rows": []}
    part.update(values)
    return part


def _row(group_id: str, offset: int, **values: Any) -> dict[str, Any]:
    row = {"group_id": group_id, "group_state": "Stable", "group_type": "classic", "member_count": 1, "committed_offset": offset}
    row.update({"commit_metadata": None, "committed_leader_epoch": None, "epoch_end_offset": None}, **values)
    return row


def test_a_partition_nobody_requires_has_no_row_and_empty_batches_yield_nothing() -> None:
    # Discovery's required groups are those with rows; "other" has a row but is not required.
    parts = [_part(partition=0, rows=[_row("other", 3)]), _part(partition=1, required=["g0"], rows=[_row("g0", 4)])]
    out = status_batch(_batch(parts), None).to_pylist()
    assert [r["partition"] for r in out] == [1]
    assert out[0]["gmin"] == {"offset": 4, "stale": 0, "group_id": "g0", "group_type": "classic", "vanished": False}
    assert list(status_batches(None)(iter([_batch([parts[0]]), _batch([])]))) == []


def test_a_required_group_without_a_row_is_missing_and_a_minus_one_is_no_commit() -> None:
    out = status_batch(_batch([_part(required=["g1", "g0", "g1"], rows=[_row("g0", -1)])]), None).to_pylist()[0]
    assert out["missing"] == ["g0", "g1"]
    assert out["missing_typed"] == [{"group_id": "g0", "group_type": "classic"}, {"group_id": "g1", "group_type": None}]
    assert out["n_commits"] == 0 and out["gmin"] is None


def test_a_stale_group_counts_unless_the_rule_ignores_stale_ones() -> None:
    rows = [_row("idle", 2, group_state="Empty"), _row("live", 7)]
    staleness = _staleness({"idle": (True, NOW - timedelta(days=9)), "live": (False, NOW)})
    held, ignored = status_batch(
        _batch([_part(partition=0, required=["idle", "live"], rows=rows), _part(partition=1, required=["idle", "live"], rows=rows, ignore_stale=True)]),
        staleness,
    ).to_pylist()
    assert held["stale"] == ["idle"] and held["gmin"]["group_id"] == "idle" and held["gmin"]["stale"] == 1
    assert ignored["gmin"] == {"offset": 7, "stale": 0, "group_id": "live", "group_type": "classic", "vanished": False}


def test_lineage_faults_name_the_lowest_group() -> None:
    rows = [_row("b", 15), _row("a", 12), _row("x", 20, group_type="static_hold"), _row("c", 5, committed_leader_epoch=2, epoch_end_offset=4)]
    out = status_batch(_batch([_part(required=["a", "b", "c"], rows=rows)]), None).to_pylist()[0]
    assert out["beyond"] == {"group_id": "a", "offset": 12}  # an external position may be ahead: not beyond
    assert out["diverged"] == {"group_id": "c", "offset": 5, "epoch": 2, "epoch_end": 4}


@settings(max_examples=100, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3), st.integers(1, 4))
def test_batches_taken_a_few_partitions_at_a_time_give_the_same_facts(
    cases: list[tuple[list[dict[str, Any]], dict[str, Any]]], step: int
) -> None:
    # One staleness table for the task; several input batches, each sliced ``step`` partitions a step.
    stale = cases[0][1]
    staleness = _staleness(stale) if stale else None
    got = [row for out in status_batches(staleness, step)(iter([_batch(parts) for parts, _ in cases])) for row in out.to_pylist()]
    want = [r for parts, _ in cases for r in (reference(p, stale) for p in parts) if r is not None]
    assert got == want


# What ``carried_batches`` gives on: the input's columns but the group rows (``policy.groups.with_group_status``).
CARRY = ("snapshot_id", "topic", "partition", "ignore_stale", "stale_before", "high_watermark", "required")


@settings(max_examples=200, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3), st.integers(1, 4))
def test_every_row_goes_through_with_its_own_facts_or_none(cases: list[tuple[list[dict[str, Any]], dict[str, Any]]], step: int) -> None:
    # The left join of the rows with their facts, row by row: a partition without a required
    # consumer comes through with every fact null.
    stale = cases[0][1]
    staleness = _staleness(stale) if stale else None
    outs = list(carried_batches(staleness, CARRY, step)(iter([_batch(parts) for parts, _ in cases])))
    got = [row for out in outs for row in out.to_pylist()]
    inputs = [row for parts, _ in cases for row in _batch(parts).to_pylist()]
    facts = [reference(p, stale) for parts, _ in cases for p in parts]
    want = [
        {**{k: row[k] for k in CARRY}, **{name: None if fact is None else fact[name] for name, _ in STATUS_FIELDS}}
        for row, fact in zip(inputs, facts)
    ]
    assert got == want
    for out in outs:
        assert out.schema.names == [*CARRY, *(n for n, _ in STATUS_FIELDS)]
        assert [out.schema.field(n).type for n, _ in STATUS_FIELDS] == [t for _, t in STATUS_FIELDS]
    assert set(KEY_FIELDS) <= set(CARRY)
