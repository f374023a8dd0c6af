"""A partition's consumer facts from its group rows, columnar: Arrow batches in, Arrow batches
out, with no Spark and no per-row Python (issue 12).

It runs in Spark's Python workers, so it imports PyArrow, NumPy and the schemas' constants only:
not the policy package (which imports PySpark's SQL functions, 0.2 s in each new worker).

``policy.groups.group_status`` hands each batch of partitions here through ``mapInArrow``: every
row carries its partition's keys, the rule's ``required`` groups, ``ignore_stale``,
``stale_before``, ``high_watermark`` and ``rows`` (the partition's ``GROUP_COMMIT`` rows, the
vanished ones among them). ``status_batch`` gives, per partition with at least one required
consumer, what Spark's explode-filter-aggregate of those rows gave (``STATUS_FIELDS``): the
same values, the same order in every list, the same minimum in every struct, by the same
ordering Spark uses (strings by their UTF-8 bytes, a null field before any value). Partitions
without any required consumer get no row, as an aggregation over no rows gives none.

The work is a few vectorized passes over the flattened rows (NumPy and PyArrow kernels): group
names coded as integers once per batch, membership tests as sorted-key lookups, the lists and
minimums as one stable sort each. The per-partition facts cross back to Spark as O(partitions)
rows; the O(commits) rows never leave Arrow.

Staleness (``positions.Positions.staleness``: per group ``stale_candidate`` and
``last_progress``) comes as one small Arrow table (O(groups)), looked up by group name.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES, VANISHED_STATE

KEY_FIELDS = ("snapshot_id", "topic", "partition")
# The per-partition facts, in ``group_status``'s column order (see its docstring).
MISSING_TYPED = pa.struct([("group_id", pa.string()), ("group_type", pa.string())])
GMIN = pa.struct(
    [("offset", pa.int64()), ("stale", pa.int32()), ("group_id", pa.string()), ("group_type", pa.string()), ("vanished", pa.bool_())]
)
BEYOND = pa.struct([("group_id", pa.string()), ("offset", pa.int64())])
DIVERGED = pa.struct([("group_id", pa.string()), ("offset", pa.int64()), ("epoch", pa.int32()), ("epoch_end", pa.int64())])
STATUS_FIELDS = (
    ("missing", pa.list_(pa.string())),
    ("missing_typed", pa.list_(MISSING_TYPED)),
    ("missing_external", pa.list_(pa.string())),
    ("stale", pa.list_(pa.string())),
    ("gmin", GMIN),
    ("n_commits", pa.int64()),
    ("beyond", BEYOND),
    ("diverged", DIVERGED),
)
_EXTERNAL = pa.array(list(EXTERNAL_CONSUMER_TYPES), pa.string())
_VANISHED = VANISHED_STATE.lower()


# Partitions a ``status_batch`` call takes at most. Spark hands over up to 10,000 rows a batch
# (``spark.sql.execution.arrow.maxRecordsPerBatch``): at 10k partitions x 10k groups that is
# 500,000 group rows, and the arrays made from them grew the worker by 125 MB in 0.35 s; in
# slices of 2,000 partitions (zero-copy), by 34 MB in 0.12 s (the same facts).
PARTITIONS_PER_STEP = 2_000


def status_batches(
    staleness: pa.Table | None, step: int = PARTITIONS_PER_STEP
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: ``status_batch`` of each input batch, ``step`` partitions at
    a time (results without a partition that has a required consumer are left out)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for start in range(0, batch.num_rows, step):
                out = status_batch(batch.slice(start, step), staleness)
                if out.num_rows:
                    yield out
        # The worker stays for the next batch: hand back the pages PyArrow's pool kept from
        # this one's rows (as the source's reads do, ``source_arrow.give_back_arrow_memory``).
        pa.default_memory_pool().release_unused()

    return run


def carried_batches(
    staleness: pa.Table | None, carry: tuple[str, ...], step: int = PARTITIONS_PER_STEP
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that gives every input row on: its ``carry`` columns as they
    came, then its facts (``carried_batch``), ``step`` partitions at a time."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for start in range(0, batch.num_rows, step):
                yield carried_batch(batch.slice(start, step), staleness, carry)
        pa.default_memory_pool().release_unused()  # as ``status_batches``

    return run


def carried_batch(batch: pa.RecordBatch, staleness: pa.Table | None, carry: tuple[str, ...]) -> pa.RecordBatch:
    """Every row of ``batch``: its ``carry`` columns, then ``STATUS_FIELDS``, the facts
    ``status_batch`` gives its partition, all null for a partition it gives no row (no
    required consumer): what a left join of the rows with ``status_batch``'s on the keys gives."""
    out_parents, facts = _facts(batch, staleness)
    at = np.full(batch.num_rows, -1, dtype=np.int64)
    at[out_parents] = np.arange(len(out_parents), dtype=np.int64)
    index = pa.array(at, type=pa.int64(), mask=at < 0)  # a null index takes a null
    columns = [_column(batch, name) for name in carry] + [fact.take(index) for fact in facts]
    return pa.RecordBatch.from_arrays(columns, names=[*carry, *(name for name, _ in STATUS_FIELDS)])


def status_batch(batch: pa.RecordBatch, staleness: pa.Table | None) -> pa.RecordBatch:
    """The facts of ``batch``'s partitions (module docstring); keys first, then ``STATUS_FIELDS``."""
    out_parents, facts = _facts(batch, staleness)
    take = pa.array(out_parents)
    keys = [_column(batch, k).take(take) for k in KEY_FIELDS]
    return pa.RecordBatch.from_arrays([*keys, *facts], names=[*KEY_FIELDS, *(name for name, _ in STATUS_FIELDS)])


def _facts(batch: pa.RecordBatch, staleness: pa.Table | None) -> tuple[np.ndarray, list[pa.Array]]:
    """The rows of ``batch`` with a required consumer (their indices, in batch order) and their
    facts, a column each of ``STATUS_FIELDS``."""
    rows_list = _as_list(_column(batch, "rows"))
    required = _as_list(_column(batch, "required"))
    flat = rows_list.flatten()
    parent_r = np.asarray(pc.list_parent_indices(rows_list), dtype=np.int64)
    gid_r = _plain(flat.field("group_id"))
    type_r = _plain(flat.field("group_type"))
    ext_r = _filled(pc.is_in(type_r, value_set=_EXTERNAL), False)
    parent_q = np.asarray(pc.list_parent_indices(required), dtype=np.int64)
    gid_q = _plain(required.flatten())

    # Names coded once: a (partition, group) pair is then one integer.
    codes, names = _codes(pa.concat_arrays([gid_r, gid_q]))
    width = max(len(names), 1)
    key_r = parent_r * width + codes[: len(gid_r)]
    key_q = parent_q * width + codes[len(gid_r):]
    # Required: the rule's groups, plus every external consumer with a row on the partition.
    needed = _distinct(np.concatenate([key_q, key_r[ext_r]]))
    keep = _isin(key_r, needed)
    absent = needed[~_isin(needed, _distinct(key_r))]  # required, without any row: missing there

    # The rows the facts are made of: the required consumers' own rows, then one without a
    # commit for each required consumer without any row.
    kept = np.flatnonzero(keep)
    take_kept = pa.array(kept)
    n_absent = len(absent)
    parent = np.concatenate([parent_r[kept], absent // width])
    group_id = pa.concat_arrays([gid_r.take(take_kept), names.take(pa.array(absent % width))])
    off_kept = flat.field("committed_offset").take(take_kept)
    offset = pa.concat_arrays([pc.if_else(pc.greater_equal(off_kept, 0), off_kept, pa.scalar(None, pa.int64())), pa.nulls(n_absent, pa.int64())])
    group_type = pa.concat_arrays([type_r.take(take_kept), pa.nulls(n_absent, pa.string())])
    state = _plain(flat.field("group_state").take(take_kept))
    vanished = np.concatenate([_filled(pc.equal(pc.utf8_lower(state), _VANISHED), False), np.zeros(n_absent, bool)])
    external = np.concatenate([ext_r[kept], np.zeros(n_absent, bool)])
    epoch = pa.concat_arrays([flat.field("committed_leader_epoch").take(take_kept), pa.nulls(n_absent, pa.int32())])
    epoch_end = pa.concat_arrays([flat.field("epoch_end_offset").take(take_kept), pa.nulls(n_absent, pa.int64())])

    is_stale = _stale(group_id, parent, batch, staleness)
    has_offset = np.asarray(offset.is_valid(), dtype=bool)
    off = np.asarray(offset.fill_null(0), dtype=np.int64)
    # counted = offset known and not (stale and ignore_stale); an unknown ignore_stale (SQL's
    # null) does not count a stale group.
    ignore = _filled(_column(batch, "ignore_stale"), True)[parent]
    counted = has_offset & ~(is_stale & ignore)

    # Output partitions: those with a row (the aggregation's groups), in batch order.
    out_parents = np.flatnonzero(np.bincount(parent, minlength=batch.num_rows))
    slot = np.searchsorted(out_parents, parent)
    n_out = len(out_parents)

    by_name = _sort(parent, [group_id, group_type])  # lists sorted by name (then type, nulls first)
    missing_rows = by_name[~has_offset[by_name]]
    missing = _lists(slot, missing_rows, group_id, n_out)
    typed = pa.StructArray.from_arrays([group_id, group_type], fields=list(MISSING_TYPED))
    missing_typed = _lists(slot, missing_rows, typed, n_out)
    missing_external = _lists(slot, missing_rows[external[missing_rows]], group_id, n_out)
    stale = _lists(slot, by_name[is_stale[by_name]], group_id, n_out)

    stale_int = pa.array(is_stale.astype(np.int32))
    vanished_arr = pa.array(vanished)
    gmin_values = pa.StructArray.from_arrays([offset, stale_int, group_id, group_type, vanished_arr], fields=list(GMIN))
    gmin = _first(slot, parent, counted, [pa.array(off), stale_int, group_id, group_type, vanished_arr], gmin_values, n_out)
    hw = np.asarray(_column(batch, "high_watermark").fill_null(np.iinfo(np.int64).max), dtype=np.int64)
    hw_known = np.asarray(_column(batch, "high_watermark").is_valid(), dtype=bool)
    beyond_mask = ~external & has_offset & hw_known[parent] & (off > hw[parent])
    beyond_values = pa.StructArray.from_arrays([group_id, offset], fields=list(BEYOND))
    beyond = _first(slot, parent, beyond_mask, [group_id, offset], beyond_values, n_out)
    end_known = np.asarray(epoch_end.is_valid(), dtype=bool)
    end = np.asarray(epoch_end.fill_null(0), dtype=np.int64)
    diverged_mask = has_offset & end_known & (end < off)
    diverged_values = pa.StructArray.from_arrays([group_id, offset, epoch, epoch_end], fields=list(DIVERGED))
    diverged = _first(slot, parent, diverged_mask, [group_id, offset, epoch, epoch_end], diverged_values, n_out)
    n_commits = pa.array(np.bincount(slot[has_offset], minlength=n_out).astype(np.int64))

    return out_parents, [missing, missing_typed, missing_external, stale, gmin, n_commits, beyond, diverged]


def _as_list(column: pa.Array) -> pa.ListArray:
    """A list column with its null lists as empty ones (a null list has no rows to count)."""
    if isinstance(column, pa.LargeListArray):
        column = column.cast(pa.list_(column.type.value_type))
    if column.null_count:
        column = pc.if_else(column.is_valid(), column, pa.scalar([], column.type))
    return column


def _plain(values: pa.Array) -> pa.Array:
    """A string array without dictionary or large-offset encoding."""
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_large_string(values.type):
        values = values.cast(pa.string())
    return values


def _codes(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Each value's integer code and the distinct values (``names.take(code)`` gives it back)."""
    encoded = pc.dictionary_encode(values)
    return np.asarray(encoded.indices, dtype=np.int64), encoded.dictionary


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted, each once (by sorting: NumPy's hashed ``unique`` is several times slower
    on these integer keys)."""
    ordered = np.sort(keys)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) else ordered


def _isin(keys: np.ndarray, wanted_sorted: np.ndarray) -> np.ndarray:
    """Whether each key is in ``wanted_sorted`` (sorted, distinct): a binary search each."""
    if len(wanted_sorted) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.searchsorted(wanted_sorted, keys)
    at[at == len(wanted_sorted)] = 0
    found: np.ndarray = wanted_sorted[at] == keys
    return found


def _filled(values: pa.Array | pa.ChunkedArray, default: bool) -> np.ndarray:
    """A boolean Arrow array as NumPy, its nulls as ``default``."""
    return np.asarray(values.fill_null(default), dtype=bool)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(batch.schema.get_field_index(name))


def _stale(group_id: pa.Array, parent: np.ndarray, batch: pa.RecordBatch, staleness: pa.Table | None) -> np.ndarray:
    """Per row: the group is a stale candidate whose last progress is before the partition's
    ``stale_before`` (any unknown: not stale)."""
    if staleness is None or staleness.num_rows == 0 or len(group_id) == 0:
        return np.zeros(len(group_id), dtype=bool)
    found = pc.index_in(group_id, value_set=_plain(staleness.column("group_id").combine_chunks()))
    known = np.asarray(found.is_valid(), dtype=bool)
    at = np.asarray(found.fill_null(0), dtype=np.int64)
    candidate = _filled(staleness.column("stale_candidate").combine_chunks(), False)[at]
    progress_col = staleness.column("last_progress").combine_chunks()
    progress_known = np.asarray(progress_col.is_valid(), dtype=bool)[at]
    progress = _micros(progress_col)[at]
    before_col = _column(batch, "stale_before")
    before_known = np.asarray(before_col.is_valid(), dtype=bool)[parent]
    before = _micros(before_col)[parent]
    stale: np.ndarray = known & candidate & progress_known & before_known & (progress < before)
    return stale


def _micros(values: pa.Array) -> np.ndarray:
    """Timestamps as microseconds since the epoch (UTC; nulls as 0)."""
    as_us = values.cast(pa.timestamp("us", tz=values.type.tz)) if values.type.unit != "us" else values
    return np.asarray(as_us.cast(pa.int64()).fill_null(0), dtype=np.int64)


def _sort(parent: np.ndarray, keys: list[pa.Array]) -> np.ndarray:
    """Row indices ordered by partition, then ``keys`` ascending, a null before any value."""
    if len(parent) == 0:
        return np.zeros(0, dtype=np.int64)
    columns = {"p": pa.array(parent), **{f"k{i}": k for i, k in enumerate(keys)}}
    table = pa.table(columns)
    order = pc.sort_indices(table, sort_keys=[(name, "ascending", "at_start") for name in columns])
    return np.asarray(order, dtype=np.int64)


def _lists(slot: np.ndarray, rows: np.ndarray, values: pa.Array, n_out: int) -> pa.ListArray:
    """One list per output partition of ``values`` at ``rows`` (already in the lists' order)."""
    counts = np.bincount(slot[rows], minlength=n_out) if len(rows) else np.zeros(n_out, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    # rows are ordered by partition first, so each partition's values are contiguous.
    return pa.ListArray.from_arrays(pa.array(offsets), values.take(pa.array(rows, pa.int64())))


def _first(slot: np.ndarray, parent: np.ndarray, mask: np.ndarray, keys: list[pa.Array], values: pa.StructArray, n_out: int) -> pa.Array:
    """Per output partition, the smallest of ``values`` among the rows in ``mask`` by ``keys``
    (Spark's struct ordering: field by field, a null field first); null where none is."""
    chosen = np.flatnonzero(mask)
    result = np.full(n_out, -1, dtype=np.int64)
    if len(chosen):
        sub_keys = [k.take(pa.array(chosen)) for k in keys]
        order = chosen[_sort(parent[chosen], sub_keys)]
        slots = slot[order]
        first = np.flatnonzero(np.concatenate([[True], slots[1:] != slots[:-1]]))
        result[slots[first]] = order[first]
    # A null index takes a null: the partitions without such a row.
    return values.take(pa.array(result, type=pa.int64(), mask=result < 0))


__all__ = ["STATUS_FIELDS", "carried_batch", "carried_batches", "status_batch", "status_batches"]
