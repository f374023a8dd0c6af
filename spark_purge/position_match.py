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

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_purge.group_facts import _EXTERNAL, _VANISHED, _column, _distinct, _filled, _isin, _micros, _plain

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


__all__ = ["INPUT_FIELDS", "MATCHED_FIELDS", "match_batches", "match_table"]
