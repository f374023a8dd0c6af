"""A snapshot's consumer positions matched with the remembered ones, columnar: Arrow batches in,
Arrow batches out, with no Spark shuffle and no per-row Python (issue 12).

``policy.positions.Positions.match`` hands it, in one task, the snapshot's positions (``stored``
false: one row per group row with a position >= 0) and the progress store's (``stored`` true:
one row per remembered key with an offset >= 0), in the columns of ``INPUT_FIELDS``.
``match_batches`` gives what Spark's aggregation of the snapshot's rows by key
(group, topic, partition) fully outer joined with the store's rows gave, row for row
(``MATCHED_FIELDS``, documented on ``Positions``):

- per key of the snapshot, over its rows that are not external consumers': the lowest offset
  (``k_offset``), the greatest group type (``k_type``, strings by their UTF-8 bytes), whether
  every such row surely has no members (``k_no_members``) and the latest snapshot time
  (``k_time``), each null where no such row (or no such value) is; ``x_present``: an external
  consumer has a row there; ``live`` true;
- beside each key, the store's row of the same key (``s_offset``, ``s_time``, ``s_type``,
  ``s_topic_id``), null where it has none; one output row per stored row of the key, as a join
  gives (the store has one a key);
- each stored row whose key the snapshot lacks on its own, ``live`` false.

A key with a null part (none in practice: Kafka names every group and topic) is grouped as
Spark groups it, with nulls as a value, and matches nothing, as a join on it matches nothing.

It runs in Spark's Python workers: like ``spark_purge.group_facts``, it imports PyArrow, NumPy and
the schemas' constants only.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_purge.group_facts import _EXTERNAL, _VANISHED, _as_list, _column, _distinct, _filled, _isin, _micros, _plain

# The input's columns: the key, the side, then the row's values. A snapshot row uses offset
# (its committed offset), type, time (its snapshot time), state and members; a stored row
# offset, type, time (its last progress time) and topic_id.
INPUT_FIELDS = (
    ("group_id", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("stored", pa.bool_()),
    ("offset", pa.int64()),
    ("type", pa.string()),
    ("time", pa.timestamp("us", tz="UTC")),
    ("state", pa.string()),
    ("members", pa.int32()),
    ("topic_id", pa.string()),
)
MATCHED_FIELDS = (
    ("group_id", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("k_offset", pa.int64()),
    ("k_type", pa.string()),
    ("k_no_members", pa.bool_()),
    ("x_present", pa.bool_()),
    ("k_time", pa.timestamp("us", tz="UTC")),
    ("live", pa.bool_()),
    ("s_offset", pa.int64()),
    ("s_time", pa.timestamp("us", tz="UTC")),
    ("s_type", pa.string()),
    ("s_topic_id", pa.string()),
)
# Rows a yielded output batch holds at most (Spark reads them back in batches of its own size).
ROWS_PER_BATCH = 100_000


def match_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: every input batch read (the match needs both sides whole),
    the match given in batches of at most ``ROWS_PER_BATCH`` rows."""
    read = list(batches)
    if not read:
        return
    out = match_table(pa.Table.from_batches(read))
    del read
    yield from out.to_batches(max_chunksize=ROWS_PER_BATCH)
    # The worker stays for the next batch: hand back the pages PyArrow's pool kept.
    pa.default_memory_pool().release_unused()


def match_table(rows: pa.Table) -> pa.Table:
    """The match of ``rows`` (``INPUT_FIELDS`` columns; module docstring), ``MATCHED_FIELDS``."""
    whole = pa.RecordBatch.from_arrays(
        [_plain(c) if _is_text(c.type) else c for c in (rows.column(name).combine_chunks() for name, _ in INPUT_FIELDS)],
        names=[name for name, _ in INPUT_FIELDS],
    )
    key, unmatchable = _keys(whole)
    stored = _filled(_column(whole, "stored"), False)

    # The snapshot's rows by key: one output key a run of equal keys, made of its rows.
    k_rows = np.flatnonzero(~stored)
    k_rows = k_rows[np.argsort(key[k_rows], kind="stable")]
    k_key = key[k_rows]
    starts = np.flatnonzero(np.concatenate([[True], k_key[1:] != k_key[:-1]])) if len(k_rows) else np.zeros(0, np.int64)
    first = k_rows[starts]  # a key's first row: its group id, topic and partition
    facts = _aggregate(whole, k_rows, starts)

    # The stored rows beside each key (one in a store; a join gives a row for each), or none.
    s_rows = np.flatnonzero(stored)
    # -1: matches no key (a key's null part has a code of its own, so only a stored row with a
    # null part could have matched a snapshot's key with one).
    s_key = np.where(unmatchable[s_rows], -1, key[s_rows])
    s_order = np.argsort(s_key, kind="stable")
    s_key, s_rows = s_key[s_order], s_rows[s_order]
    k_match = key[first]
    left = np.searchsorted(s_key, k_match, side="left")
    count = np.searchsorted(s_key, k_match, side="right") - left
    repeat = np.maximum(count, 1)
    of_key = np.repeat(np.arange(len(first)), repeat)  # each output row's key
    nth = np.arange(len(of_key)) - np.repeat(np.cumsum(repeat) - repeat, repeat)  # its stored row among the key's
    at = np.repeat(left, repeat) + nth
    beside = np.full(len(of_key), -1, dtype=np.int64)
    has_stored = np.repeat(count, repeat) > 0
    beside[has_stored] = s_rows[at[has_stored]]
    # The stored rows no key of the snapshot matched: each on its own.
    alone = s_rows[(s_key < 0) | ~_isin(s_key, _distinct(k_match))]

    n_alone = len(alone)
    key_take = pa.array(np.concatenate([first[of_key], alone]), pa.int64())
    stored_at = np.concatenate([beside, alone])
    stored_take = pa.array(stored_at, pa.int64(), mask=stored_at < 0)
    fact_take = pa.array(of_key, pa.int64())
    columns = {
        **{name: _column(whole, name).take(key_take) for name in ("group_id", "topic", "partition")},
        **{name: pa.concat_arrays([values.take(fact_take), pa.nulls(n_alone, values.type)]) for name, values in facts.items()},
        "live": pa.array(np.concatenate([np.ones(len(of_key), bool), np.zeros(n_alone, bool)])),
        "s_offset": _column(whole, "offset").take(stored_take),
        "s_time": _column(whole, "time").take(stored_take),
        "s_type": _column(whole, "type").take(stored_take),
        "s_topic_id": _column(whole, "topic_id").take(stored_take),
    }
    return pa.table({name: columns[name].cast(kind) for name, kind in MATCHED_FIELDS})


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind))


def _keys(whole: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """Each row's key (group id, topic, partition) as one integer, equal for equal keys, a null
    part as a value of its own; and whether a part is null."""
    null = np.zeros(whole.num_rows, dtype=bool)
    codes = []
    for name in ("group_id", "topic", "partition"):
        values = _column(whole, name)
        null |= ~np.asarray(values.is_valid(), dtype=bool)
        encoded = pc.dictionary_encode(values, null_encoding="encode")
        codes.append((np.asarray(encoded.indices, dtype=np.int64), max(len(encoded.dictionary), 1)))
    (group, _), (topic, topics), (partition, partitions) = codes
    pair = group * topics + topic  # below rows^2
    rank = np.searchsorted(_distinct(pair), pair)  # below rows
    return rank * partitions + partition, null


def _aggregate(whole: pa.RecordBatch, rows: np.ndarray, starts: np.ndarray) -> dict[str, pa.Array]:
    """Per run of ``rows`` (sorted by key; runs begin at ``starts``), the snapshot's facts:
    ``k_offset``, ``k_type``, ``k_no_members``, ``x_present``, ``k_time`` (module docstring)."""
    if len(rows) == 0:
        return {name: pa.array([], kind) for name, kind in MATCHED_FIELDS if name in _FACTS}
    take = pa.array(rows, pa.int64())
    kind = _column(whole, "type").take(take)
    external = _filled(pc.is_in(kind, value_set=_EXTERNAL), False)
    inside = ~external  # the rows the facts are made of
    offset = _column(whole, "offset").take(take)
    low, has_low = _extreme(np.asarray(offset.fill_null(0), dtype=np.int64), inside & _valid(offset), starts, np.minimum)

    # The greatest type by its bytes: the distinct types ranked (Arrow sorts strings by bytes).
    encoded = pc.dictionary_encode(kind)
    order = np.asarray(pc.sort_indices(encoded.dictionary), dtype=np.int64)
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    typed = _valid(encoded.indices)
    rank = np.where(typed, rank_of[np.asarray(encoded.indices.fill_null(0), dtype=np.int64)] if len(order) else 0, -1)
    top, has_top = _extreme(rank, inside & typed, starts, np.maximum)
    top_type = encoded.dictionary.take(pa.array(order[np.where(has_top, top, 0)] if len(order) else np.zeros(len(top), np.int64), pa.int64(), mask=~has_top))

    state = pc.utf8_lower(_column(whole, "state").take(take))
    kind_l = pc.utf8_lower(kind)
    members = _column(whole, "members").take(take)
    classic = _filled(pc.equal(kind_l, "classic"), False) & (_filled(pc.equal(state, "dead"), False) | _filled(pc.equal(members, 0), False))
    gone = _filled(pc.equal(state, "empty"), False) | _filled(pc.equal(state, _VANISHED), False) | classic
    no_members = gone & ~_filled(pc.is_in(kind_l, value_set=_EXTERNAL), False)
    every, has_inside = _extreme(no_members.astype(np.int64), inside, starts, np.minimum)

    time = _column(whole, "time").take(take)
    latest, has_time = _extreme(_micros(time), inside & _valid(time), starts, np.maximum)
    return {
        "k_offset": pa.array(low, pa.int64(), mask=~has_low),
        "k_type": top_type.cast(pa.string()),
        "k_no_members": pa.array(every.astype(bool), pa.bool_(), mask=~has_inside),
        "x_present": pa.array(np.maximum.reduceat(external, starts)),
        "k_time": pa.array(latest, pa.timestamp("us", tz="UTC"), mask=~has_time),
    }


_FACTS = ("k_offset", "k_type", "k_no_members", "x_present", "k_time")


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid(), dtype=bool)


def _extreme(values: np.ndarray, mask: np.ndarray, starts: np.ndarray, reduce: np.ufunc) -> tuple[np.ndarray, np.ndarray]:
    """Per run (beginning at ``starts``), ``reduce`` (``np.minimum`` / ``np.maximum``) of
    ``values`` where ``mask``, and whether the run has such a value."""
    info = np.iinfo(np.int64)
    fill = info.max if reduce is np.minimum else info.min
    found: np.ndarray = np.add.reduceat(mask.astype(np.int64), starts) > 0
    return reduce.reduceat(np.where(mask, values, fill), starts), found




# --- Both sides nested by partition (``policy.positions.NestedPositions``) -------------------
#
# Rows nested in their partition's row cross between Spark and Python workers far cheaper than
# the same rows flat (at 10k x 10k, the snapshot's 500,000 group rows nested in 10,000 partition
# rows reach a Python task in about 0.3 s; 1,000,000 flat rows took 1.7-2.0 s). So the store is
# held nested too, and the whole match, with what reads it (staleness, vanished positions, the
# store's rows after the batch), runs here in one task.

# A remembered position, as the nested store holds it (``PROGRESS_STORE`` without the
# partition's keys), and whether the batch ``changed`` it (it records the key: new, moved, or
# newly typed).
STORED_FIELDS = (
    ("group_id", pa.string()),
    ("committed_offset", pa.int64()),
    ("last_progress_time", pa.timestamp("us", tz="UTC")),
    ("group_type", pa.string()),
    ("topic_id", pa.string()),
)
POSITION = pa.struct([*STORED_FIELDS, ("changed", pa.bool_())])
# The snapshot's group row (``schemas.GROUP_COMMIT``), the fields the match reads.
COMMIT = pa.struct(
    [("group_id", pa.string()), ("group_state", pa.string()), ("group_type", pa.string()), ("member_count", pa.int32()), ("committed_offset", pa.int64())]
)
# The input: a snapshot partition's row (``stored`` false: its keys, snapshot id and time, topic
# id and group rows) or a store's partition row (``stored`` true: its keys and ``positions``).
NESTED_INPUT = (
    ("stored", pa.bool_()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("snapshot_id", pa.string()),
    ("snapshot_time", pa.timestamp("us", tz="UTC")),
    ("topic_id", pa.string()),
    ("groups", pa.list_(COMMIT)),
    ("positions", pa.list_(POSITION)),
)
# The output: one row per partition the store holds after the batch (``topic`` set, no
# ``group_id``: its keys, the snapshot's id and time of it, null when the snapshot lacks it,
# ``positions`` after the batch and how many of them ``changed``); one row per group with a
# position (``group_id`` set, no ``topic``: ``Positions.staleness``'s columns and ``gone``); one
# row per remembered position the snapshot lacks (both set: ``Positions.vanished``'s keys,
# ``offset`` and ``group_type``; usually none).
NESTED_OUTPUT = (
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("snapshot_id", pa.string()),
    ("snapshot_time", pa.timestamp("us", tz="UTC")),
    ("positions", pa.list_(POSITION)),
    ("changed", pa.int64()),
    ("group_id", pa.string()),
    ("stale_candidate", pa.bool_()),
    ("last_progress", pa.timestamp("us", tz="UTC")),
    ("gone", pa.bool_()),
    ("offset", pa.int64()),
    ("group_type", pa.string()),
)
_UTC_US = pa.timestamp("us", tz="UTC")


def nested_batches(unreadable: tuple[str, ...]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: every input batch read (the match needs both sides whole),
    ``nested_match`` of them given in batches of at most ``PARTITIONS_PER_BATCH`` rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = list(batches)
        if not read:
            return
        out = nested_match(pa.Table.from_batches(read), unreadable)
        del read
        yield from out.to_batches(max_chunksize=PARTITIONS_PER_BATCH)
        pa.default_memory_pool().release_unused()

    return run


# Output rows a yielded batch holds at most (a partition's row carries all its positions).
PARTITIONS_PER_BATCH = 2_000


def nested_match(rows: pa.Table, unreadable: tuple[str, ...] = ()) -> pa.Table:
    """The match of the snapshot's and the store's nested rows (``NESTED_INPUT``) and what reads
    it, ``NESTED_OUTPUT``: the same values ``Positions.match(partitions, groups, store)`` gives
    through ``staleness(unreadable)`` (with ``gone``: the group has a ``vanished`` row),
    ``vanished(unreadable)`` (the positions flagged ``vanished``) and ``after(at)`` (the
    positions; ``at`` the snapshot's time, read from each partition's row as ``after`` reads it
    from the rows). Keys on partitions the snapshot lacks keep a null topic id, as there."""
    whole = _one_batch(rows, NESTED_INPUT)
    stored = _filled(_column(whole, "stored"), False)
    snap = whole.filter(pa.array(~stored))
    store = whole.filter(pa.array(stored))
    # The snapshot's partitions: where each key is placed (``Positions.match``'s ``p_`` columns).
    places = pa.table(
        {
            "topic": _plain(_column(snap, "topic")),
            "partition": _column(snap, "partition"),
            "p_snapshot_id": _plain(_column(snap, "snapshot_id")),
            "p_snapshot_time": _column(snap, "snapshot_time").cast(_UTC_US),
            "p_topic_id": _plain(_column(snap, "topic_id")),
        }
    )
    matched = match_table(pa.concat_tables([_seen(snap), _remembered(store)]).cast(pa.schema([pa.field(n, k) for n, k in INPUT_FIELDS])))
    if matched.num_rows and places.num_rows:
        matched = matched.join(places, ["topic", "partition"], join_type="left outer")
    else:
        matched = pa.table({**{n: matched.column(n) for n in matched.column_names}, **{n: pa.nulls(matched.num_rows, places.schema.field(n).type) for n in places.column_names[2:]}})
    m = _one_batch(matched, tuple((f.name, f.type) for f in matched.schema))
    gone = _gone(m, unreadable)
    return pa.concat_tables([_partitions(m), _groups(m, gone), _vanished(m, gone)]).combine_chunks()


def _one_batch(rows: pa.Table, fields: tuple[tuple[str, pa.DataType], ...]) -> pa.RecordBatch:
    """``rows`` as one record batch (an empty one of ``fields`` when there are none)."""
    if rows.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=pa.schema([pa.field(n, k) for n, k in fields]))
    return rows.combine_chunks().to_batches()[0]


def _seen(snap: pa.RecordBatch) -> pa.Table:
    """The snapshot's group rows with a position (>= 0), in ``INPUT_FIELDS``."""
    groups = _as_list(_column(snap, "groups"))
    flat = groups.flatten()
    parent = np.asarray(pc.list_parent_indices(groups), dtype=np.int64)
    keep = np.flatnonzero(_filled(pc.greater_equal(flat.field("committed_offset"), 0), False))
    flat = flat.take(pa.array(keep, pa.int64()))
    of = pa.array(parent[keep], pa.int64())
    n = len(keep)
    return pa.table(
        {
            "group_id": _plain(flat.field("group_id")),
            "topic": _plain(_column(snap, "topic")).take(of),
            "partition": _column(snap, "partition").take(of),
            "stored": pa.array(np.zeros(n, bool)),
            "offset": flat.field("committed_offset").cast(pa.int64()),
            "type": _plain(flat.field("group_type")),
            "time": _column(snap, "snapshot_time").cast(_UTC_US).take(of),
            "state": _plain(flat.field("group_state")),
            "members": flat.field("member_count").cast(pa.int32()),
            "topic_id": pa.nulls(n, pa.string()),
        }
    )


def _remembered(store: pa.RecordBatch) -> pa.Table:
    """The store's positions (>= 0), in ``INPUT_FIELDS``."""
    positions = _as_list(_column(store, "positions"))
    flat = positions.flatten()
    parent = np.asarray(pc.list_parent_indices(positions), dtype=np.int64)
    keep = np.flatnonzero(_filled(pc.greater_equal(flat.field("committed_offset"), 0), False))
    flat = flat.take(pa.array(keep, pa.int64()))
    of = pa.array(parent[keep], pa.int64())
    n = len(keep)
    return pa.table(
        {
            "group_id": _plain(flat.field("group_id")),
            "topic": _plain(_column(store, "topic")).take(of),
            "partition": _column(store, "partition").take(of),
            "stored": pa.array(np.ones(n, bool)),
            "offset": flat.field("committed_offset").cast(pa.int64()),
            "type": _plain(flat.field("group_type")),
            "time": flat.field("last_progress_time").cast(_UTC_US),
            "state": pa.nulls(n, pa.string()),
            "members": pa.nulls(n, pa.int32()),
            "topic_id": _plain(flat.field("topic_id")),
        }
    )


def _ints(values: pa.Array) -> np.ndarray:
    """An integer array as NumPy int64, its nulls as 0 (read with ``_valid``)."""
    return np.asarray(values.fill_null(0), dtype=np.int64)


def _other_incarnation(m: pa.RecordBatch) -> np.ndarray:
    """Per matched key: the snapshot's topic id and the stored one both known and different."""
    seen, kept = _column(m, "p_topic_id"), _column(m, "s_topic_id")
    other: np.ndarray = _valid(seen) & _valid(kept) & _filled(pc.not_equal(seen, kept), False)
    return other


def _gone(m: pa.RecordBatch, unreadable: tuple[str, ...]) -> np.ndarray:
    """Per matched key: a remembered position the snapshot lacks, on one of its partitions, not
    of an unreadable group, not seen on another incarnation of the topic (``Positions._gone``)."""
    gone = _valid(_column(m, "p_snapshot_id")) & ~_filled(_column(m, "live"), False) & _valid(_column(m, "s_offset"))
    if unreadable:
        group = _column(m, "group_id")
        # SQL: a null group id is not "not in" the list either.
        gone &= _valid(group) & ~_filled(pc.is_in(group, value_set=pa.array(sorted(set(unreadable)), pa.string())), False)
    kept: np.ndarray = gone & ~_other_incarnation(m)
    return kept


def _vanished(m: pa.RecordBatch, gone: np.ndarray) -> pa.Table:
    """The remembered positions the snapshot lacks (``gone``), placed on its partitions."""
    take = pa.array(np.flatnonzero(gone), pa.int64())
    return _output(
        len(take),
        topic=_column(m, "topic").take(take),
        partition=_column(m, "partition").take(take),
        snapshot_id=_column(m, "p_snapshot_id").take(take),
        snapshot_time=_column(m, "p_snapshot_time").take(take),
        group_id=_column(m, "group_id").take(take),
        offset=_column(m, "s_offset").take(take),
        group_type=_column(m, "s_type").take(take),
    )


def _groups(m: pa.RecordBatch, gone: np.ndarray) -> pa.Table:
    """Per group: ``stale_candidate``, ``last_progress`` and ``gone`` (``Positions._staleness``)."""
    kafka = _valid(_column(m, "k_offset"))
    other = _other_incarnation(m)
    s_offset, k_offset = _column(m, "s_offset"), _column(m, "k_offset")
    known = _valid(s_offset) & ~other & (_ints(s_offset) == _ints(k_offset))
    external = _filled(_column(m, "x_present"), False)
    group, s_time = _column(m, "group_id"), _column(m, "s_time")
    k, x, g = (pa.array(np.flatnonzero(mask), pa.int64()) for mask in (kafka, external, gone))
    rows = pa.table(
        {
            "group_id": pa.concat_arrays([group.take(k), group.take(x), group.take(g)]),
            "no_members": pa.concat_arrays(
                [pa.array(_filled(_column(m, "k_no_members"), False)[kafka]), pa.array(np.zeros(len(x), bool)), pa.array(np.ones(len(g), bool))]
            ),
            "known": pa.array(np.concatenate([known[kafka], np.zeros(len(x), bool), np.ones(len(g), bool)])),
            "p_time": pa.concat_arrays([s_time.take(k), pa.nulls(len(x), s_time.type), s_time.take(g)]),
            "gone": pa.array(np.concatenate([np.zeros(len(k) + len(x), bool), np.ones(len(g), bool)])),
        }
    )
    verdict = rows.group_by("group_id", use_threads=False).aggregate(
        [("no_members", "all"), ("known", "all"), ("p_time", "max"), ("gone", "any")]
    )
    n = verdict.num_rows
    return _output(
        n,
        group_id=verdict.column("group_id"),
        stale_candidate=pc.and_(verdict.column("no_members_all"), verdict.column("known_all")),
        last_progress=verdict.column("p_time_max"),
        gone=verdict.column("gone_any"),
    )


def _partitions(m: pa.RecordBatch) -> pa.Table:
    """Per partition the store holds after the batch: its positions then (``Positions.after`` at
    the snapshot's time), each flagged ``changed``, and how many changed."""
    k_offset, s_offset = _column(m, "k_offset"), _column(m, "s_offset")
    seen = _valid(k_offset)
    recreated = _other_incarnation(m)
    moved = ~_valid(s_offset) | (_ints(s_offset) != _ints(k_offset)) | recreated
    k_type, s_type = _column(m, "k_type"), _column(m, "s_type")
    same_type = (~_valid(k_type) & ~_valid(s_type)) | _filled(pc.equal(k_type, s_type), False)
    p_topic_id, s_topic_id = _column(m, "p_topic_id"), _column(m, "s_topic_id")
    retyped = (_valid(k_type) & ~same_type) | (_valid(p_topic_id) & ~_valid(s_topic_id))
    changed = seen & (moved | retyped)
    moved_now = changed & moved
    rows = np.flatnonzero(changed | _valid(s_offset))

    def pick(when: np.ndarray, then: pa.Array, otherwise: pa.Array) -> pa.Array:
        return pc.if_else(pa.array(when[rows]), then.take(take), otherwise.take(take))

    take = pa.array(rows, pa.int64())
    positions = pa.StructArray.from_arrays(
        [
            _column(m, "group_id").take(take),
            pick(changed, k_offset, s_offset),
            pick(moved_now, _column(m, "k_time"), _column(m, "s_time")),
            pc.if_else(
                pa.array(moved_now[rows]),
                k_type.take(take),
                pc.if_else(pa.array(changed[rows]), pc.coalesce(k_type.take(take), s_type.take(take)), s_type.take(take)),
            ),
            pick(changed, pc.coalesce(p_topic_id, s_topic_id), s_topic_id),
            pa.array(changed[rows]),
        ],
        fields=list(POSITION),
    )
    # Nested by partition: the rows ordered by (topic, partition), one list a run.
    keys = pa.table({"topic": _column(m, "topic").take(take), "partition": _column(m, "partition").take(take)})
    order = pc.sort_indices(keys, sort_keys=[("topic", "ascending"), ("partition", "ascending")])
    keys, positions = keys.take(order), positions.take(order)
    topic = keys.column("topic").combine_chunks()
    partition = _ints(keys.column("partition").combine_chunks())
    n = len(partition)
    if n:
        codes, _ = _codes_of(topic)
        starts = np.flatnonzero(np.concatenate([[True], (codes[1:] != codes[:-1]) | (partition[1:] != partition[:-1])]))
    else:
        starts = np.zeros(0, np.int64)
    first = pa.array(np.asarray(order)[starts] if n else np.zeros(0, np.int64), pa.int64())
    placed = pa.array(rows, pa.int64()).take(first) if n else pa.array([], pa.int64())
    offsets = pa.array(np.concatenate([starts, [n]]).astype(np.int32))
    n_changed = np.add.reduceat(np.asarray(positions.field("changed"), dtype=np.int64), starts) if n else np.zeros(0, np.int64)
    return _output(
        len(starts),
        topic=topic.take(pa.array(starts, pa.int64())),
        partition=keys.column("partition").combine_chunks().take(pa.array(starts, pa.int64())),
        snapshot_id=_column(m, "p_snapshot_id").take(placed),
        snapshot_time=_column(m, "p_snapshot_time").take(placed),
        positions=pa.ListArray.from_arrays(offsets, positions),
        changed=pa.array(n_changed, pa.int64()),
    )


def _codes_of(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return np.asarray(encoded.indices, dtype=np.int64), encoded.dictionary


def _output(n: int, **columns: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``NESTED_OUTPUT`` rows: ``columns`` given, the others null."""
    return pa.table(
        {name: (columns[name].cast(kind) if name in columns else pa.nulls(n, kind)) for name, kind in NESTED_OUTPUT}
    )


__all__ = [
    "INPUT_FIELDS",
    "MATCHED_FIELDS",
    "NESTED_INPUT",
    "NESTED_OUTPUT",
    "POSITION",
    "STORED_FIELDS",
    "match_batches",
    "match_table",
    "nested_batches",
    "nested_match",
]
