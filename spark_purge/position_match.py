"""A snapshot's consumer positions matched with the remembered ones, both nested by partition,
columnar: Arrow batches in, Arrow batches out, with no Spark shuffle and no per-row Python
(issue 12).

``policy.positions.NestedPositions`` hands it, in one task, the snapshot's partition rows (their
group rows nested in ``groups``) and the progress store's (its positions nested in
``positions``), in the columns of ``NESTED_INPUT``. ``nested_match`` gives, in the rows of
``NESTED_OUTPUT``, what the flat Spark query (``policy.positions.Positions``) gives through
three readers of one match:

- the match: the snapshot's group rows with a position (>= 0) by key (group, topic, partition):
  over the rows that are not external consumers', the lowest offset, the greatest group type
  (strings by their UTF-8 bytes), whether every one surely has no members
  (``policy.groups.no_members``) and the latest snapshot time; whether an external consumer
  has a row there; beside each key, the store's position of the same key (>= 0), and each stored
  position no key matched on its own; each placed on the snapshot's row of its partition (its
  snapshot id, time and topic id), or not when the snapshot lacks the partition;
- ``staleness``: per group, a stale candidate when every Kafka position it has surely has no
  members and is one the store knows at that offset (on the same incarnation of the topic), no
  external consumer has its name, and every vanished one counts; its last progress the latest
  stored time among them; ``gone``: it has a vanished position;
- ``vanished``: the remembered positions the snapshot lacks on its partitions, not of an
  unreadable group, not seen on another incarnation of the topic;
- ``after`` at the snapshot's time: every key the store holds or the snapshot adds (Kafka
  positions only), with its values once the batch is recorded, and whether it ``changed``
  (new, moved, on another incarnation, or newly typed), nested by partition;
- asked (``FactsAsk``: each topic's rule as the planner resolved it), the consumer facts of each
  snapshot partition whose topic has a rule, its partition columns carried beside them: what
  ``policy.groups.with_group_status`` gives (``group_facts.carried_batch`` with the staleness
  above), in this task instead of a task of its own (issue 12). Only when no remembered
  position vanished (vanished groups' rows join the facts' own task then).

A key with a null part (none in practice: Kafka names every group and topic) is grouped with
nulls as a value and matches nothing, as Spark's aggregation and join do. The store holds a key
once (its reads and ``after`` make one row a key); a key twice is refused (``ValueError``).
A snapshot has one row a partition; were one repeated, its first row places the partition.

It runs in Spark's Python workers: like ``spark_purge.group_facts``, it imports PyArrow, NumPy and
the schemas' constants only. The work is integer codes (partitions, names, types, topic ids)
sorted and searched with NumPy; strings are taken once, for the output. It is done
``PARTITIONS_PER_CHUNK`` partitions at a time (a key is one partition's), each chunk's output
given in order as it is matched, the groups' verdicts combined over the chunks at the end: the
worker holds the input and a few chunks' arrays, not the arrays of all (``bench/diag/match_memory.py``).
The chunks are matched ``MATCH_THREADS`` at a time (``in_threads``), as are the facts' steps and
the two sides' packed rows: most of that work is NumPy's and Arrow's, which release Python's lock.
"""
from __future__ import annotations

import ctypes
import functools
import io
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_purge.group_facts import (
    _EXTERNAL,
    _VANISHED,
    PARTITIONS_PER_STEP,
    _as_list,
    _column,
    _filled,
    _micros,
    _plain,
    carried_batch,
)
from spark_purge.snapshot_pack import PACKED_COLUMN, ipc_bytes, read_streams, rows_with_groups

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
# id and group rows, nested in ``groups`` or packed: ``snapshot_pack``) or a store's partition row (``stored`` true: its keys and ``positions``),
# or a store's packed rows (``stored`` true, ``packed`` set: ``pack``).
NESTED_INPUT = (
    ("stored", pa.bool_()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("snapshot_id", pa.string()),
    ("snapshot_time", pa.timestamp("us", tz="UTC")),
    ("topic_id", pa.string()),
    ("groups", pa.list_(COMMIT)),
    ("positions", pa.list_(POSITION)),
    ("packed", pa.binary()),
    (PACKED_COLUMN, pa.binary()),
)
# The output, each row saying what it is in ``row_kind`` (``ROW_KINDS``; the driver selects rows
# by it, never by which columns are null): one ``partition`` row per partition the store holds
# after the batch (its keys, the snapshot's id and time of it, null when the snapshot lacks it,
# ``positions`` after the batch and how many of them ``changed``); one ``group`` row per group
# with a position (``group_id``, ``Positions.staleness``'s columns and ``gone``); one
# ``vanished`` row per remembered position the snapshot lacks (``Positions.vanished``'s keys,
# the partition's snapshot id and time, ``offset`` and ``group_type``; usually none); asked for
# (``nested_batches``' ``log_batch``), one last ``file`` row (``LogWriter.row``: ``log_file`` and
# ``log_rest``, the progress log's files, their row counts in ``changed`` and ``offset``). Asked
# to ``pack``, the partitions' rows come packed instead: one ``packed`` row per chunk of them
# (``packed``, and ``changed``, their changed count). Last, the rules' discovery pairs (``pair``
# rows: ``discovery``): a row per distinct (``topic``, ``group_id``, ``external``) of the
# snapshot's group rows and the vanished positions, and one per topic with no ``group_id``. A
# row's other columns are null. Asked for them (``FactsAsk``), after those, one ``fact`` row per
# snapshot partition whose topic has a rule: its keys here, its other carried columns and its
# facts in columns of their own (``FactsAsk.fields``) after these.
ROW_KIND = "row_kind"  # the ``NESTED_OUTPUT`` column that says what a row is (``ROW_KINDS``)
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
    ("log_file", pa.binary()),
    ("log_rest", pa.binary()),
    ("packed", pa.binary()),
    ("external", pa.bool_()),
    (ROW_KIND, pa.string()),
)
# The kinds of ``NESTED_OUTPUT`` rows (its ``row_kind``; what each sets: the comment above it).
ROW_PARTITION, ROW_GROUP, ROW_VANISHED, ROW_PAIR, ROW_FILE, ROW_PACKED = "partition", "group", "vanished", "pair", "file", "packed"
ROW_FACT = "fact"
ROW_KINDS = (ROW_PARTITION, ROW_GROUP, ROW_VANISHED, ROW_PAIR, ROW_FILE, ROW_PACKED, ROW_FACT)
_UTC_US = pa.timestamp("us", tz="UTC")
# The progress log's rows (``audit.PROGRESS_LOG``, in its order), and whether each column may
# hold a null: a batch's changed positions as the worker writes them (``nested_batches`` given a
# batch id) into one Parquet file, for the driver to commit (``ProgressStore.record``).
LOG_FIELDS = (
    ("group_id", pa.string(), False),
    ("topic", pa.string(), False),
    ("partition", pa.int32(), False),
    ("committed_offset", pa.int64(), False),
    ("last_progress_time", _UTC_US, False),
    ("group_type", pa.string(), True),
    ("topic_id", pa.string(), True),
    ("batch_id", pa.int64(), True),
)
# As Spark's Parquet writer writes them: every column optional.
LOG_SCHEMA = pa.schema([pa.field(n, k) for n, k, _ in LOG_FIELDS])
# The store's partition rows after a batch as the match packs them (``pack``): its keys, its
# positions and how many the batch changed (``policy.positions.NESTED_STORE`` in Arrow).
PACKED_SCHEMA = pa.schema([(n, k) for n, k in NESTED_OUTPUT if n in ("topic", "partition", "positions", "changed")])


def pack(partitions: pa.Table) -> bytes:
    """Store partition rows (``NESTED_OUTPUT``'s, or ``PACKED_SCHEMA``'s columns) as one Arrow
    IPC stream: a held store's rows between batches (issue 12). Held so, a batch's 500,000
    positions at 10k x 10k cross from the worker into Spark and back as a few binary values,
    copied whole, instead of as nested rows Spark converts to its own rows and back, field by
    field. LZ4-compressed (``snapshot_pack.ipc_bytes``): at 10k x 10k the match's input then
    carries 13 MB instead of 32 MB, and its job took 0.81-0.82 s against 0.87-0.89 s at best
    (``bench/diag/match_parts.py``, stop 83)."""
    return ipc_bytes(partitions.select(PACKED_SCHEMA.names).cast(PACKED_SCHEMA))


def unpack(blobs: Iterable[bytes | pa.Buffer | None]) -> pa.Table:
    """The partition rows ``pack`` made of each of ``blobs`` (None: none), one table
    (``PACKED_SCHEMA``)."""
    tables = read_streams(blobs)
    return pa.concat_tables(tables) if tables else PACKED_SCHEMA.empty_table()


def unpacked_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function that gives packed store rows (``packed``) back as partition
    rows (``PACKED_SCHEMA``): for what reads a held store row by row (a fallback, rare)."""
    for batch in batches:
        yield from unpack(_blobs(_column(batch, "packed"))).to_batches(max_chunksize=PARTITIONS_PER_BATCH)


def _blobs(values: pa.Array) -> list[pa.Buffer | None]:
    """A binary column's values as buffers, with no copy (None: a null)."""
    return [v.as_buffer() if v.is_valid else None for v in values]


@dataclass(frozen=True)
class FactsAsk:
    """What the match's task needs to give the consumer facts too (``policy.positions.NestedPositions.match``).

    ``rules``: a row per topic with a rule (``topic``, ``required``, ``ignore_stale``,
    ``stale_before``: the ``TOPIC_RULES`` columns the facts read); ``carry``: the snapshot columns
    each fact row carries (the input's snapshot rows have them); ``fields``: the columns the
    output has after ``NESTED_OUTPUT``'s (the carried ones it lacks, then ``STATUS_FIELDS``), null
    in every row but the fact rows."""

    rules: pa.Table
    carry: tuple[str, ...]
    fields: tuple[tuple[str, pa.DataType], ...]

    def widened(self, rows: pa.Table) -> pa.Table:
        """``NESTED_OUTPUT`` rows with ``fields`` after them, null."""
        n = rows.num_rows
        return pa.table({**{name: rows.column(name) for name, _ in NESTED_OUTPUT}, **{name: pa.nulls(n, kind) for name, kind in self.fields}})

    def rows(self, snap: pa.RecordBatch, verdicts: pa.Table) -> pa.Table:
        """The fact rows of the snapshot's partitions whose topic has a rule (in the snapshot's
        order), ``verdicts`` the groups' staleness (``ROW_GROUP`` rows)."""
        topics = self.rules.column("topic").combine_chunks()
        at = pc.index_in(_plain(_column(snap, "topic")), value_set=topics)
        valid = _valid(at)
        ruled = np.flatnonzero(valid)
        rule = at.filter(pa.array(valid))
        # Usually every partition's topic has a rule: its columns are then taken as they are.
        columns = {name: _pick(_column(snap, name), ruled) for name in self.carry}
        for name in ("required", "ignore_stale", "stale_before"):
            columns[name] = self.rules.column(name).combine_chunks().take(rule)
        columns["rows"] = _pick(_column(snap, "groups"), ruled)
        batch = pa.RecordBatch.from_pydict(columns)
        staleness = verdicts.select(["group_id", "stale_candidate", "last_progress"])
        steps = range(0, batch.num_rows, PARTITIONS_PER_STEP)
        pieces = list(in_threads(lambda start: carried_batch(batch.slice(start, PARTITIONS_PER_STEP), staleness, self.carry), steps, MATCH_THREADS))
        facts = pa.Table.from_batches(pieces) if pieces else None
        n = batch.num_rows
        rows = _output(ROW_FACT, n, **{name: columns[name] for name, _ in NESTED_OUTPUT if name in self.carry})
        for name, type_ in self.fields:
            rows = rows.append_column(name, pa.nulls(n, type_) if facts is None else facts.column(name).cast(type_))
        return rows


def nested_batches(
    unreadable: tuple[str, ...],
    chunk: int | None = None,
    log_batch: int | None = None,
    rewrite_above: int | None = None,
    packed: bool = False,
    facts: FactsAsk | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: every input batch read (the match needs both sides whole),
    ``nested_match`` of them ``chunk`` partitions at a time (default ``PARTITIONS_PER_CHUNK``),
    given in batches of at most ``PARTITIONS_PER_BATCH`` rows as each chunk is matched.

    ``log_batch``: also the changed positions as batch ``log_batch``'s progress log rows, in
    Parquet made chunk by chunk (``LogWriter``; ``rewrite_above``: with the unchanged ones when
    the changed ones are more), given last as one row of its own (``LogWriter.row``).
    ``packed``: the store's partitions after the batch are given packed, a row a chunk (``pack``).
    ``facts``: the consumer facts too, as ``fact`` rows (``FactsAsk``), when no remembered
    position vanished; every row then has ``facts.fields`` after ``NESTED_OUTPUT``'s."""
    size = PARTITIONS_PER_CHUNK if chunk is None else chunk

    def out(rows: pa.Table) -> Iterator[pa.RecordBatch]:
        yield from (rows if facts is None else facts.widened(rows)).to_batches(max_chunksize=PARTITIONS_PER_BATCH)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sides = _sides(batches)
        log = None if log_batch is None else LogWriter(log_batch, rewrite_above)
        if sides is None:
            if log is not None:
                yield from out(log.row())
            return
        if log is not None:
            log.expect(_positions_in(sides[0]))
        verdicts: list[pa.Table] = []
        for piece in _match(*sides, unreadable, size, log, packed, verdicts):
            yield from out(piece)
        if facts is not None and not pc.any(verdicts[0].column("gone")).as_py():
            yield from facts.rows(sides[0], verdicts[0]).to_batches(max_chunksize=PARTITIONS_PER_BATCH)
        del sides
        if log is not None:
            yield from out(log.row())
        pa.default_memory_pool().release_unused()
        _trim_malloc()

    return run


def _positions_in(snap: pa.RecordBatch) -> int:
    """The snapshot's group rows with a position (>= 0): as many as the batch may change, at most."""
    offsets = _as_list(_column(snap, "groups")).flatten().field("committed_offset")
    return int(pc.sum(pc.greater_equal(offsets, 0)).as_py() or 0)


class _RowsFile:
    """Progress log rows (``LOG_FIELDS`` without the batch id, piece by piece: ``add``), batch
    ``batch_id``'s, as one snappy Parquet file in memory, its columns ``LOG_SCHEMA``. A null in
    a column that may not hold one (none in practice) makes no file (``refused``): the rows are
    counted, and the driver writes them through Delta's writer, which refuses them itself."""

    def __init__(self, batch_id: int) -> None:
        self.batch_id = int(batch_id)
        self.rows = 0
        self.refused = False
        self._sink = io.BytesIO()
        self._writer: pq.ParquetWriter | None = None

    def add(self, rows: pa.Table) -> None:
        n = rows.num_rows
        self.rows += n
        if not n or self.refused:
            return
        if any(not nullable and rows.column(name).null_count for name, _, nullable in LOG_FIELDS if name != "batch_id"):
            self.refused = True
            return
        columns = [rows.column(name).cast(kind) for name, kind, _ in LOG_FIELDS if name != "batch_id"]
        table = pa.Table.from_arrays([*columns, pa.array(np.full(n, self.batch_id, np.int64))], schema=LOG_SCHEMA)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._sink, LOG_SCHEMA, compression="snappy", coerce_timestamps="us")
        self._writer.write_table(table)

    def body(self) -> bytes | None:
        """The file's bytes (None: no rows, or refused); the file is closed."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return None if self.refused or not self.rows else self._sink.getvalue()


class LogWriter:
    """Batch ``batch_id``'s changed positions as progress log rows in one Parquet file
    (``_RowsFile``), added chunk by chunk (``add``: ``NESTED_OUTPUT`` partition rows). Given
    ``rewrite_above`` (how many rows an append may add before the log is due a rewrite: the
    driver's count of it, ``ProgressStore.rewrite_above``), the unchanged positions too, in a
    second file, when the snapshot has more positions than that (``expect``, before the first
    chunk): given only if the changed ones are more, and some (then the driver rewrites the log
    from the two files), else dropped."""

    def __init__(self, batch_id: int, rewrite_above: int | None = None) -> None:
        self.changed = _RowsFile(batch_id)
        self.rest: _RowsFile | None = None
        self.rewrite_above = rewrite_above

    def expect(self, positions: int) -> None:
        if self.rewrite_above is not None and positions > max(self.rewrite_above, 0):
            self.rest = _RowsFile(self.changed.batch_id)

    def add(self, partitions: pa.Table) -> None:
        changed, unchanged = _log_rows(partitions, self.rest is not None)
        self.changed.add(changed)
        if self.rest is not None and unchanged is not None:
            self.rest.add(unchanged)

    def row(self) -> pa.Table:
        """The files as a ``NESTED_OUTPUT`` row, the only one with ``log_file`` set: the changed
        positions' bytes (empty: no file) and ``changed``, their count (counted even when no file
        is made); when the log is due a rewrite, ``log_rest``, the unchanged positions' bytes
        (empty: none), and ``offset``, their count (else both null)."""
        body = self.changed.body()
        rest: bytes | None = None
        rest_rows: int | None = None
        if self.rest is not None and self.rewrite_above is not None and self.changed.rows > max(self.rewrite_above, 0):
            rest_body = self.rest.body()
            if not self.rest.refused and not self.changed.refused:
                rest, rest_rows = rest_body or b"", self.rest.rows
        return _output(
            ROW_FILE,
            1,
            log_file=pa.array([body or b""], pa.binary()),
            changed=pa.array([self.changed.rows], pa.int64()),
            log_rest=pa.array([rest], pa.binary()),
            offset=pa.array([rest_rows], pa.int64()),
        )


def _sides(batches: Iterable[pa.RecordBatch]) -> tuple[pa.RecordBatch, pa.RecordBatch] | None:
    """The input's snapshot rows and store rows (``stored``), each side as one record batch; None
    when there is no input batch. A batch of one side only is kept as it is (no copy)."""
    parts: tuple[list[pa.RecordBatch], list[pa.RecordBatch]] = ([], [])
    schema = None
    for batch in batches:
        schema = batch.schema
        stored = _filled(_column(batch, "stored"), False)
        if stored.all() or not stored.any():
            parts[int(bool(stored.any()))].append(batch)
        else:
            parts[0].append(batch.filter(pa.array(~stored)))
            parts[1].append(batch.filter(pa.array(stored)))
    if schema is None:
        return None
    snap, store = (_one_batch(pa.Table.from_batches(side, schema=schema), NESTED_INPUT) for side in parts)
    # Each side's packed rows read beside the other's.
    readers: tuple[Callable[[], pa.RecordBatch], ...] = (lambda: _unpacked_snapshot(snap), lambda: _unpacked_store(store))
    unpacked_snap, unpacked_store = in_threads(_called, readers, MATCH_THREADS)
    return unpacked_snap, unpacked_store


def _called(read: Callable[[], pa.RecordBatch]) -> pa.RecordBatch:
    return read()


def _trim_malloc() -> None:
    """Give the C library's freed memory back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). NumPy's arrays come from ``malloc``, and each thread of ``in_threads`` frees into an
    arena of its own, which keeps what was freed: after a 10k x 10k match the worker held 10-25 MB
    more with two threads than with one, and ``malloc_trim`` gave that back (stop 87). The worker
    lives on between batches, beside the plan's jobs."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once (None: not this C library)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def _unpacked_snapshot(snap: pa.RecordBatch) -> pa.RecordBatch:
    """The snapshot's input rows with their ``groups`` read from the packed blobs on them
    (``snapshot_pack``), when they came packed; else as they are."""
    if snap.num_rows == 0 or snap.schema.get_field_index(PACKED_COLUMN) < 0 or not _valid(_column(snap, PACKED_COLUMN)).any():
        return snap
    return rows_with_groups(snap.remove_column(snap.schema.get_field_index("groups")))


def _unpacked_store(store: pa.RecordBatch) -> pa.RecordBatch:
    """The store's input rows with its packed rows (``packed`` set) as the partition rows they
    hold (``unpack``), after its other rows: one batch of ``NESTED_INPUT``'s columns."""
    if store.num_rows == 0 or store.schema.get_field_index("packed") < 0:
        return store
    is_packed = _valid(_column(store, "packed"))
    if not is_packed.any():
        return store
    rows = unpack(_blobs(_column(store, "packed").filter(pa.array(is_packed))))
    plain = store.filter(pa.array(~is_packed))
    n = rows.num_rows
    columns = {"stored": pa.array(np.ones(n, bool)), "topic": rows.column("topic"), "partition": rows.column("partition"), "positions": rows.column("positions")}
    unpacked = pa.table({name: columns[name].cast(kind) if name in columns else pa.nulls(n, kind) for name, kind in NESTED_INPUT})
    both = pa.concat_tables([pa.Table.from_batches([plain]).select(unpacked.schema.names).cast(unpacked.schema), unpacked])
    return _one_batch(both, NESTED_INPUT)


# Output rows a yielded batch holds at most (a partition's row carries all its positions).
PARTITIONS_PER_BATCH = 2_000
# Partitions matched at a time: the worker holds one chunk's intermediate arrays (issue 12). At
# 10k x 10k (500,000 positions a side; ``bench/diag/match_memory.py``): all at once 0.4-0.5 s and
# 353 MB of peak RSS above the input's; 2,000 at a time 0.22 s and 138 MB; 500 0.28 s and 48 MB.
PARTITIONS_PER_CHUNK = 500


# Threads a match task matches its chunks in (``in_threads``; also its facts' steps, and its two
# sides' packed rows): most of a chunk's work is NumPy's and Arrow's, which run without Python's
# lock, so two chunks at once use two cores. At 10k x 10k (stop 87, ``bench/diag/match_parts.py``,
# two runs of 8 rounds): the match's Python 0.46 -> 0.39-0.41 s, its job 0.72-0.75 -> 0.65-0.67 s
# (medians); the facts 0.145 -> 0.098 s; the worker's peak RSS about 35 MB more
# (``bench/diag/match_memory.py --threads 1,2``).
MATCH_THREADS = 2

_T = TypeVar("_T")
_R = TypeVar("_R")


def in_threads(work: Callable[[_T], _R], items: Iterable[_T], threads: int) -> Iterator[_R]:
    """``work`` of each of ``items``, given in the items' order, made ``threads`` at a time (1:
    in this thread, one after the other). While the caller uses a result, at most ``threads - 1``
    more are being made: memory holds ``threads`` results at once. An error is raised at its
    item's turn; items not started by then are not started (those running are waited for)."""
    if threads <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="position-match") as pool:
        pending: deque[Future[_R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(work, item))
                if len(pending) >= threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid(), dtype=bool)


def _extreme(values: np.ndarray, mask: np.ndarray, starts: np.ndarray, reduce: np.ufunc) -> tuple[np.ndarray, np.ndarray]:
    """Per run (beginning at ``starts``), ``reduce`` (``np.minimum`` / ``np.maximum``) of
    ``values`` where ``mask``, and whether the run has such a value."""
    info = np.iinfo(np.int64)
    fill = info.max if reduce is np.minimum else info.min
    found: np.ndarray = np.add.reduceat(mask.astype(np.int64), starts) > 0
    return reduce.reduceat(np.where(mask, values, fill), starts), found




def _one_batch(rows: pa.Table, fields: tuple[tuple[str, pa.DataType], ...]) -> pa.RecordBatch:
    """``rows`` as one record batch (an empty one of ``fields`` when there are none; a table of
    one batch as that batch, with no copy)."""
    if rows.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=pa.schema([pa.field(n, k) for n, k in fields]))
    batches = rows.to_batches()
    return batches[0] if len(batches) == 1 else rows.combine_chunks().to_batches()[0]


def _pick(values: pa.Array, rows: np.ndarray) -> pa.Array:
    """``values`` at ``rows`` (a copy), or ``values`` itself when ``rows`` is every row in order
    (the common case: every position >= 0)."""
    if len(rows) == len(values) and (len(rows) == 0 or bool(np.all(rows == np.arange(len(rows))))):
        return values
    return values.take(pa.array(rows, pa.int64()))


def _ints(values: pa.Array) -> np.ndarray:
    """An integer array as NumPy int64, its nulls as 0 (read with ``_valid``)."""
    return np.asarray(values.fill_null(0), dtype=np.int64)


def _codes_of(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return np.asarray(encoded.indices, dtype=np.int64), encoded.dictionary


def _output(row_kind: str, n: int, **columns: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``n`` ``NESTED_OUTPUT`` rows of kind ``row_kind`` (``ROW_KINDS``): ``columns`` given, the others null."""
    if row_kind not in ROW_KINDS:
        raise ValueError(f"position_match: unknown row kind {row_kind!r} (one of {', '.join(ROW_KINDS)})")
    columns[ROW_KIND] = pa.array([row_kind] * n, pa.string())
    return pa.table(
        {name: (columns[name].cast(kind) if name in columns else pa.nulls(n, kind)) for name, kind in NESTED_OUTPUT}
    )


__all__ = [
    "LOG_FIELDS",
    "LOG_SCHEMA",
    "NESTED_INPUT",
    "NESTED_OUTPUT",
    "PACKED_SCHEMA",
    "POSITION",
    "ROW_FACT",
    "ROW_FILE",
    "ROW_GROUP",
    "ROW_KIND",
    "ROW_KINDS",
    "ROW_PACKED",
    "ROW_PAIR",
    "ROW_PARTITION",
    "ROW_VANISHED",
    "STORED_FIELDS",
    "FactsAsk",
    "LogWriter",
    "discovery",
    "nested_batches",
    "nested_match",
    "pack",
    "unpack",
    "unpacked_batches",
]


def nested_match(rows: pa.Table, unreadable: tuple[str, ...] = (), chunk: int | None = None) -> pa.Table:
    """The match of the snapshot's and the store's nested rows (``NESTED_INPUT``) and what reads
    it (module docstring), ``NESTED_OUTPUT``: the store's partitions after the batch with the
    vanished positions, ``chunk`` partitions at a time (default ``PARTITIONS_PER_CHUNK``), then
    the groups' staleness."""
    sides = _sides(rows.to_batches())
    if sides is None:
        sides = (_one_batch(rows, NESTED_INPUT), _one_batch(rows, NESTED_INPUT))
    return pa.concat_tables(list(_match(*sides, unreadable, PARTITIONS_PER_CHUNK if chunk is None else chunk)))


def _match(
    snap: pa.RecordBatch,
    store: pa.RecordBatch,
    unreadable: tuple[str, ...],
    chunk: int,
    log: LogWriter | None = None,
    packed: bool = False,
    verdicts_out: list[pa.Table] | None = None,
) -> Iterator[pa.Table]:
    """``nested_match`` of the snapshot's rows and the store's rows (``_sides``), ``chunk``
    partitions at a time (a partition's keys are matched within it: only the worker's memory of
    one chunk at once is needed, and each chunk's output goes while the next is matched): each
    chunk's partitions after the batch and vanished positions, then the groups' staleness over
    all chunks (a group's verdict is an AND, a max and an OR: of its chunks' verdicts too).
    ``log``: each chunk's changed positions are added to it; ``packed``: each chunk's partitions
    are given as one packed row (``pack``); ``verdicts_out``: the groups' staleness rows are
    also appended to it."""
    if chunk < 1:
        raise ValueError(f"position match: chunk must be at least 1 partition, not {chunk}")
    n_snap = snap.num_rows
    part = _partition_codes(
        pa.concat_arrays([_plain(_column(snap, "topic")), _plain(_column(store, "topic"))]),
        pa.concat_arrays([_column(snap, "partition"), _column(store, "partition")]),
    )
    n_parts = int(part.max()) + 1 if len(part) else 0
    of = part // chunk

    def one(c: int) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table | None]:
        """Chunk ``c``'s match: its partitions (and packed, when asked), groups, vanished.
        Chunk c holds the partitions coded c * chunk .. (c + 1) * chunk - 1: its rows' codes
        less c * chunk are its own codes (the filter keeps the rows' order)."""
        if n_parts <= chunk:
            partitions, groups, vanished = _match_rows(snap, store, part, unreadable)
        else:
            partitions, groups, vanished = _match_rows(
                snap.filter(pa.array(of[:n_snap] == c)),
                store.filter(pa.array(of[n_snap:] == c)),
                np.concatenate([part[:n_snap][of[:n_snap] == c], part[n_snap:][of[n_snap:] == c]]) - c * chunk,
                unreadable,
            )
        given = None
        if packed and partitions.num_rows:
            changed = int(pc.sum(partitions.column("changed")).as_py() or 0)
            given = _output(ROW_PACKED, 1, packed=pa.array([pack(partitions)], pa.binary()), changed=pa.array([changed], pa.int64()))
        return partitions, groups, vanished, given

    verdicts = []
    gone = []
    for partitions, groups, vanished, given in in_threads(one, range(max(-(-n_parts // chunk), 1)), MATCH_THREADS):
        gone.append(vanished)
        if log is not None:
            log.add(partitions)
        yield pa.concat_tables([partitions if given is None else given, vanished])
        verdicts.append(groups)
    combined = _verdicts(verdicts)
    if verdicts_out is not None:
        verdicts_out.append(combined)
    yield combined
    yield discovery(snap, pa.concat_tables(gone) if gone else _output(ROW_VANISHED, 0))


def discovery(snap: pa.RecordBatch, vanished: pa.Table) -> pa.Table:
    """The rules' discovery pairs (``policy.plan._discovery_pairs``, the same rows as a set):
    each distinct (topic, group, external) of the snapshot's group rows (``groups``, every row
    whatever its offset: members without a position count), with the partition's topic, and of
    the ``vanished`` rows (``NESTED_OUTPUT``'s), plus each distinct topic of the snapshot's
    partitions with a null group and ``external`` false. ``external``: the group type is an
    external consumer's (false for a null type). A null topic or group is a value of its own,
    as in Spark's ``distinct``."""
    topics = _plain(_column(snap, "topic"))
    g_list = _as_list(_column(snap, "groups"))
    flat = g_list.flatten()
    g_topic = topics.take(pc.list_parent_indices(g_list))
    names = [pa.nulls(len(topics), pa.string()), _plain(flat.field("group_id")), _plain(vanished.column("group_id").combine_chunks())]
    types = [_plain(flat.field("group_type")), _plain(vanished.column("group_type").combine_chunks())]
    external = [pa.array(np.zeros(len(topics), bool)), *(pa.array(_filled(pc.is_in(t, value_set=_EXTERNAL), False)) for t in types)]
    rows = pa.table(
        {
            "topic": pa.concat_arrays([topics, g_topic, _plain(vanished.column("topic").combine_chunks())]),
            "group_id": pa.concat_arrays(names),
            "external": pa.concat_arrays(external),
        }
    )
    pairs = rows.group_by(["topic", "group_id", "external"], use_threads=False).aggregate([])
    return _output(ROW_PAIR, pairs.num_rows, topic=pairs.column("topic"), group_id=pairs.column("group_id"), external=pairs.column("external"))


def _log_rows(partitions: pa.Table, unchanged: bool = False) -> tuple[pa.Table, pa.Table | None]:
    """The positions of ``NESTED_OUTPUT`` partition rows that the batch ``changed``, flat, their
    partition's topic and partition beside each (``LOG_FIELDS``' columns but the batch id); and
    the others the same way (``unchanged``), else None."""
    names = [n for n, _, _ in LOG_FIELDS if n != "batch_id"]
    pieces: tuple[list[pa.Table], list[pa.Table]] = ([], [])
    for batch in partitions.to_batches():
        lists = _as_list(_column(batch, "positions"))
        flat = lists.flatten()
        parent = pc.list_parent_indices(lists)
        changed = _filled(flat.field("changed"), False)
        for side, keep in enumerate((changed, ~changed) if unchanged else (changed,)):
            mask = pa.array(keep)
            own = {n: pc.filter(flat.field(n), mask) for n in names if n not in ("topic", "partition")}
            at = pc.filter(parent, mask)
            own["topic"] = _column(batch, "topic").take(at)
            own["partition"] = _column(batch, "partition").take(at)
            pieces[side].append(pa.table({n: own[n] for n in names}))
    empty = pa.table({n: pa.array([], k) for n, k, _ in LOG_FIELDS if n != "batch_id"})
    changed_rows = pa.concat_tables(pieces[0]) if pieces[0] else empty
    return changed_rows, ((pa.concat_tables(pieces[1]) if pieces[1] else empty) if unchanged else None)


def _partition_codes(topics: pa.Array, partitions: pa.Array) -> np.ndarray:
    """Per row, its partition's code (0 .. distinct partitions - 1, in (topic code, partition)
    order): (``topics[i]``, ``partitions[i]``), a null part a value of its own."""
    t_code, _ = _codes_of(topics)
    p_null = ~_valid(partitions)
    p_val = _ints(partitions)
    low = int(p_val.min()) if len(p_val) else 0
    width = (int(p_val.max()) - low + 2) if len(p_val) else 1
    pair = t_code * width + np.where(p_null, 0, p_val - low + 1)
    if not len(pair):
        return np.zeros(0, np.int64)
    _, row_part = np.unique(pair, return_inverse=True)
    return np.asarray(row_part, dtype=np.int64).reshape(-1)


def _verdicts(parts: list[pa.Table]) -> pa.Table:
    """The groups' rows of ``NESTED_OUTPUT`` over chunks: per group (a null name one group, as
    in a chunk), stale when stale in every chunk, its latest progress, gone when gone in any."""
    if len(parts) == 1:
        return parts[0]
    rows = pa.concat_tables(parts).select(["group_id", "stale_candidate", "last_progress", "gone"])
    per = rows.group_by("group_id", use_threads=False).aggregate([("stale_candidate", "all"), ("last_progress", "max"), ("gone", "any")])
    return _output(
        ROW_GROUP,
        per.num_rows,
        group_id=per.column("group_id"),
        stale_candidate=per.column("stale_candidate_all"),
        last_progress=per.column("last_progress_max"),
        gone=per.column("gone_any"),
    )


def _match_rows(snap: pa.RecordBatch, store: pa.RecordBatch, row_part: np.ndarray, unreadable: tuple[str, ...]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The match of partitions' rows on both sides (``_match``), ``row_part`` the code of each
    row's partition (the snapshot's rows, then the store's: ``_partition_codes``, dense from 0):
    the partitions after the batch, the groups' staleness over them, the vanished positions
    (``NESTED_OUTPUT`` rows each)."""
    n_snap = snap.num_rows

    # (topic, partition) of every input row, a null part a value of its own.
    topic_rows = pa.concat_arrays([_plain(_column(snap, "topic")), _plain(_column(store, "topic"))])
    part_rows = pa.concat_arrays([_column(snap, "partition"), _column(store, "partition")])
    p_null = ~_valid(part_rows)
    n_parts = int(row_part.max()) + 1 if len(row_part) else 0
    # A partition's keys: its first input row's; and whether a part is null (it matches nothing).
    first_row = np.full(n_parts, len(row_part), dtype=np.int64)
    np.minimum.at(first_row, row_part, np.arange(len(row_part), dtype=np.int64))
    part_unmatchable = (~_valid(topic_rows) | p_null)[first_row] if n_parts else np.zeros(0, bool)
    # The snapshot's row of each partition (the first, when a snapshot repeats one), or -1.
    snap_row = np.full(n_parts, n_snap, dtype=np.int64)
    np.minimum.at(snap_row, row_part[:n_snap], np.arange(n_snap, dtype=np.int64))
    placed_part = (snap_row < n_snap) & ~part_unmatchable
    snap_row = np.where(placed_part, snap_row, 0)

    # The snapshot's group rows with a position (>= 0) and the store's positions (>= 0).
    g_list = _as_list(_column(snap, "groups"))
    g_flat = g_list.flatten()
    g_parent = np.asarray(pc.list_parent_indices(g_list), dtype=np.int64)
    g_keep = np.flatnonzero(_filled(pc.greater_equal(g_flat.field("committed_offset"), 0), False))
    g_part = row_part[:n_snap][g_parent[g_keep]]
    s_list = _as_list(_column(store, "positions"))
    s_flat = s_list.flatten()
    s_parent = np.asarray(pc.list_parent_indices(s_list), dtype=np.int64)
    s_keep = np.flatnonzero(_filled(pc.greater_equal(s_flat.field("committed_offset"), 0), False))
    s_part = row_part[n_snap:][s_parent[s_keep]]
    n_g, n_s = len(g_keep), len(s_keep)

    # Group names coded once over both sides; a key is then one integer.
    names_all = pa.concat_arrays([_pick(_plain(g_flat.field("group_id")), g_keep), _pick(_plain(s_flat.field("group_id")), s_keep)])
    name_code, names = _codes_of(names_all)
    name_null = ~_valid(names_all)
    n_names = max(len(names), 1)
    g_key = g_part * n_names + name_code[:n_g]
    s_key = s_part * n_names + name_code[n_g:]

    # The snapshot's rows by key (``Positions.match``'s aggregation): one run of equal keys each.
    g_order = np.argsort(g_key, kind="stable")
    g_sorted = g_key[g_order]
    starts = np.flatnonzero(np.concatenate([[True], g_sorted[1:] != g_sorted[:-1]])) if n_g else np.zeros(0, np.int64)
    n_k = len(starts)
    k_first = g_order[starts]  # a key's first row (its names)
    g_sorted_rows = g_keep[g_order]  # the kept group rows in key order
    g_type = _pick(_plain(g_flat.field("group_type")), g_sorted_rows)
    # Types coded over both sides; what depends on a type alone is computed once per distinct
    # type (a few) and looked up (the greatest by its UTF-8 bytes, as Spark's ``max``).
    s_type_all = _pick(_plain(s_flat.field("group_type")), s_keep)
    both_types = pa.concat_arrays([g_type, s_type_all])
    type_code, types = _codes_of(both_types)
    type_valid = _valid(both_types)
    external = _filled(pc.is_in(types, value_set=_EXTERNAL), False)[type_code[:n_g]] & type_valid[:n_g] if len(types) else np.zeros(n_g, bool)
    inside = ~external
    g_off = _ints(g_flat.field("committed_offset"))[g_sorted_rows]
    k_offset, k_has_offset = _extreme(g_off, inside, starts, np.minimum)
    order_t = np.asarray(pc.sort_indices(types), dtype=np.int64)
    rank_of = np.empty(len(order_t), dtype=np.int64)
    rank_of[order_t] = np.arange(len(order_t))
    g_rank = np.where(type_valid[:n_g], rank_of[type_code[:n_g]] if len(order_t) else 0, -1)
    top, k_has_type = _extreme(g_rank, inside & type_valid[:n_g], starts, np.maximum)
    k_type = np.where(k_has_type, order_t[np.where(k_has_type, top, 0)] if len(order_t) else 0, -1)  # a code in ``types``
    # ``policy.groups.no_members``, its string tests on the distinct states and types.
    state_code, states = _codes_of(_pick(_plain(g_flat.field("group_state")), g_sorted_rows))
    state_l = pc.utf8_lower(states)
    kind_l = pc.utf8_lower(types)

    def per_row(test: pa.Array, codes: np.ndarray) -> np.ndarray:
        """A test made on the distinct values, per row (a null value: false)."""
        return _filled(test, False)[codes] if len(test) else np.zeros(len(codes), bool)

    members = _pick(g_flat.field("member_count"), g_sorted_rows)
    g_kind = type_code[:n_g]
    classic = per_row(pc.equal(kind_l, "classic"), g_kind) & (per_row(pc.equal(state_l, "dead"), state_code) | _filled(pc.equal(members, 0), False))
    gone_state = per_row(pc.equal(state_l, "empty"), state_code) | per_row(pc.equal(state_l, _VANISHED), state_code) | classic
    no_members = gone_state & ~per_row(pc.is_in(kind_l, value_set=_EXTERNAL), g_kind)
    every, k_has_inside = _extreme(no_members.astype(np.int64), inside, starts, np.minimum)
    k_no_members = every.astype(bool) & k_has_inside
    x_present = np.maximum.reduceat(external, starts) if n_k else np.zeros(0, bool)
    # Every group row of a partition has its row's snapshot time.
    snap_time = _micros(_column(snap, "snapshot_time"))
    snap_time_valid = _valid(_column(snap, "snapshot_time"))
    g_time = snap_time[g_parent[g_keep]][g_order]
    k_time, k_has_time = _extreme(g_time, inside & snap_time_valid[g_parent[g_keep]][g_order], starts, np.maximum)
    k_key = g_sorted[starts] if n_k else np.zeros(0, np.int64)
    k_part = g_part[k_first]
    k_name = name_code[:n_g][k_first]
    k_matchable = ~part_unmatchable[k_part] & ~name_null[:n_g][k_first] if n_k else np.zeros(0, bool)

    # The store's positions beside each key (a store has one a key), or none.
    s_matchable = ~part_unmatchable[s_part] & ~name_null[n_g:] if n_s else np.zeros(0, bool)
    s_order = np.argsort(np.where(s_matchable, s_key, -1), kind="stable")
    s_sorted = np.where(s_matchable, s_key, -1)[s_order]
    if n_s > 1 and bool(np.any((s_sorted[1:] == s_sorted[:-1]) & (s_sorted[1:] >= 0))):
        raise ValueError("the progress store holds a (group, topic, partition) position twice")
    at = np.searchsorted(s_sorted, k_key) if n_s else np.zeros(n_k, np.int64)
    hit = (at < n_s) & k_matchable
    hit[hit] = s_sorted[at[hit]] == k_key[hit]
    k_store = np.where(hit, s_order[np.where(hit, at, 0)] if n_s else 0, -1)
    matched_s = np.zeros(n_s, bool)
    matched_s[k_store[hit]] = True
    alone = np.flatnonzero(~matched_s)

    # The match: the snapshot's keys, then the stored positions no key matched.
    n_m = n_k + len(alone)
    m_part = np.concatenate([k_part, s_part[alone]])
    m_name = np.concatenate([k_name, name_code[n_g:][alone]])
    m_name_row = np.concatenate([k_first, n_g + alone])  # a row of ``names_all`` with the key's name
    live = np.concatenate([np.ones(n_k, bool), np.zeros(len(alone), bool)])
    m_store = np.concatenate([k_store, alone])  # the stored position, -1: none
    has_s = m_store >= 0
    s_row = np.where(has_s, m_store, 0)
    pad = np.zeros(len(alone), np.int64)
    m_k_offset = np.concatenate([k_offset, pad])
    m_k_valid = np.concatenate([k_has_offset, pad.astype(bool)])
    m_k_type = np.concatenate([k_type, pad - 1])
    m_no_members = np.concatenate([k_no_members, pad.astype(bool)])
    m_x = np.concatenate([x_present, pad.astype(bool)])
    m_k_time = np.concatenate([k_time, pad])
    m_k_time_valid = np.concatenate([k_has_time, pad.astype(bool)])
    s_offset_all = _ints(s_flat.field("committed_offset"))[s_keep]
    s_time_col = _pick(s_flat.field("last_progress_time"), s_keep)
    s_time_all, s_time_valid_all = _micros(s_time_col), _valid(s_time_col)
    m_s_offset = np.where(has_s, s_offset_all[s_row] if n_s else 0, 0)
    m_s_time = np.where(has_s, s_time_all[s_row] if n_s else 0, 0)
    m_s_time_valid = has_s & (s_time_valid_all[s_row] if n_s else False)
    m_s_type = np.where(has_s & (type_valid[n_g:][s_row] if n_s else False), type_code[n_g:][s_row] if n_s else 0, -1)
    # Topic ids coded over the snapshot's partitions and the store's positions.
    tid_all = pa.concat_arrays([_plain(_column(snap, "topic_id")), _pick(_plain(s_flat.field("topic_id")), s_keep)])
    tid_code, tids = _codes_of(tid_all)
    tid_code = np.where(_valid(tid_all), tid_code, -1)
    m_placed = placed_part[m_part] if n_m else np.zeros(0, bool)
    m_snap_row = snap_row[m_part] if n_m else np.zeros(0, np.int64)
    m_p_tid = np.where(m_placed, tid_code[:n_snap][m_snap_row] if n_snap else -1, -1)
    m_s_tid = np.where(has_s, tid_code[n_snap:][s_row] if n_s else -1, -1)

    other = (m_p_tid >= 0) & (m_s_tid >= 0) & (m_p_tid != m_s_tid)
    gone = m_placed & ~live & has_s & ~other
    if unreadable:
        skip = _filled(pc.is_in(names_all, value_set=pa.array(sorted(set(unreadable)), pa.string())), False)
        gone &= ~name_null[m_name_row] & ~skip[m_name_row]

    # Staleness per group (``Positions._staleness``): its Kafka keys, external ones, gone ones.
    known = has_s & ~other & (m_s_offset == m_k_offset)
    sel_k, sel_x, sel_g = np.flatnonzero(m_k_valid), np.flatnonzero(m_x), np.flatnonzero(gone)
    v_name = np.concatenate([m_name[sel_k], m_name[sel_x], m_name[sel_g]])
    v_no_members = np.concatenate([m_no_members[sel_k], np.zeros(len(sel_x), bool), np.ones(len(sel_g), bool)])
    v_known = np.concatenate([known[sel_k], np.zeros(len(sel_x), bool), np.ones(len(sel_g), bool)])
    v_time = np.concatenate([m_s_time[sel_k], np.zeros(len(sel_x), np.int64), m_s_time[sel_g]])
    v_time_valid = np.concatenate([m_s_time_valid[sel_k], np.zeros(len(sel_x), bool), m_s_time_valid[sel_g]])
    v_gone = np.concatenate([np.zeros(len(sel_k) + len(sel_x), bool), np.ones(len(sel_g), bool)])
    v_order = np.argsort(v_name, kind="stable")
    v_sorted = v_name[v_order]
    v_starts = np.flatnonzero(np.concatenate([[True], v_sorted[1:] != v_sorted[:-1]])) if len(v_name) else np.zeros(0, np.int64)
    v_first_row = np.concatenate([m_name_row[sel_k], m_name_row[sel_x], m_name_row[sel_g]])[v_order][v_starts] if len(v_name) else np.zeros(0, np.int64)
    all_nm, _ = _extreme(v_no_members[v_order].astype(np.int64), np.ones(len(v_name), bool), v_starts, np.minimum)
    all_known, _ = _extreme(v_known[v_order].astype(np.int64), np.ones(len(v_name), bool), v_starts, np.minimum)
    latest, has_latest = _extreme(v_time[v_order], v_time_valid[v_order], v_starts, np.maximum)
    any_gone = np.maximum.reduceat(v_gone[v_order], v_starts) if len(v_name) else np.zeros(0, bool)
    groups = _output(
        ROW_GROUP,
        len(v_starts),
        group_id=names_all.take(pa.array(v_first_row, pa.int64())),
        stale_candidate=pa.array(all_nm.astype(bool) & all_known.astype(bool)),
        last_progress=pa.array(latest, _UTC_US, mask=~has_latest),
        gone=pa.array(any_gone.astype(bool)),
    )

    # The vanished positions (``Positions.vanished``), placed on the snapshot's partitions.
    def strings(codes: np.ndarray, values: pa.Array) -> pa.Array:
        """``values`` at ``codes`` (-1: null)."""
        if len(values) == 0:
            return pa.nulls(len(codes), pa.string())
        return values.take(pa.array(np.where(codes < 0, 0, codes), pa.int64(), mask=codes < 0)).cast(pa.string())

    p_rows = pa.array(first_row, pa.int64())
    part_topic = topic_rows.take(p_rows) if n_parts else pa.array([], pa.string())
    part_partition = part_rows.take(p_rows) if n_parts else pa.array([], pa.int32())
    part_snap_id = pc.if_else(pa.array(placed_part), _plain(_column(snap, "snapshot_id")).take(pa.array(snap_row, pa.int64())), pa.scalar(None, pa.string())) if n_snap and n_parts else pa.nulls(n_parts, pa.string())
    part_snap_time = pc.if_else(pa.array(placed_part), _column(snap, "snapshot_time").cast(_UTC_US).take(pa.array(snap_row, pa.int64())), pa.scalar(None, _UTC_US)) if n_snap and n_parts else pa.nulls(n_parts, _UTC_US)
    vg = pa.array(np.flatnonzero(gone), pa.int64())
    vanished = _output(
        ROW_VANISHED,
        len(vg),
        topic=part_topic.take(pa.array(m_part[np.flatnonzero(gone)], pa.int64())),
        partition=part_partition.take(pa.array(m_part[np.flatnonzero(gone)], pa.int64())),
        snapshot_id=part_snap_id.take(pa.array(m_part[np.flatnonzero(gone)], pa.int64())),
        snapshot_time=part_snap_time.take(pa.array(m_part[np.flatnonzero(gone)], pa.int64())),
        group_id=names_all.take(pa.array(m_name_row, pa.int64()).take(vg)),
        offset=pa.array(m_s_offset[np.flatnonzero(gone)], pa.int64()),
        group_type=strings(m_s_type[np.flatnonzero(gone)], types),
    )

    # The store after the batch (``Positions.after`` at the snapshot's time), nested by partition.
    recreated = other
    moved = ~has_s | (m_s_offset != m_k_offset) | recreated
    k_type_valid = m_k_type >= 0
    same_type = (~k_type_valid & (m_s_type < 0)) | (k_type_valid & (m_k_type == m_s_type))
    retyped = (k_type_valid & ~same_type) | ((m_p_tid >= 0) & (m_s_tid < 0))
    changed = m_k_valid & (moved | retyped)
    moved_now = changed & moved
    kept = np.flatnonzero(changed | has_s)
    kept = kept[np.argsort(m_part[kept], kind="stable")]  # by partition
    c, mn = changed[kept], moved_now[kept]
    out_type = np.where(mn, m_k_type[kept], np.where(c, np.where(m_k_type[kept] >= 0, m_k_type[kept], m_s_type[kept]), m_s_type[kept]))
    out_tid = np.where(c, np.where(m_p_tid[kept] >= 0, m_p_tid[kept], m_s_tid[kept]), m_s_tid[kept])
    out_time = np.where(mn, m_k_time[kept], m_s_time[kept])
    out_time_valid = np.where(mn, m_k_time_valid[kept], m_s_time_valid[kept])
    positions = pa.StructArray.from_arrays(
        [
            names_all.take(pa.array(m_name_row[kept], pa.int64())),
            pa.array(np.where(c, m_k_offset[kept], m_s_offset[kept]), pa.int64()),
            pa.array(out_time, _UTC_US, mask=~out_time_valid),
            strings(out_type, types),
            strings(out_tid, tids),
            pa.array(c),
        ],
        fields=list(POSITION),
    )
    counts = np.bincount(m_part[kept], minlength=n_parts) if n_parts else np.zeros(0, np.int64)
    with_rows = np.flatnonzero(counts)
    offsets = np.concatenate([[0], np.cumsum(counts[with_rows])]).astype(np.int32)
    n_changed = np.bincount(m_part[kept], weights=c, minlength=n_parts).astype(np.int64) if n_parts else np.zeros(0, np.int64)
    wr = pa.array(with_rows, pa.int64())
    partitions = _output(
        ROW_PARTITION,
        len(with_rows),
        topic=part_topic.take(wr),
        partition=part_partition.take(wr),
        snapshot_id=part_snap_id.take(wr),
        snapshot_time=part_snap_time.take(wr),
        positions=pa.ListArray.from_arrays(pa.array(offsets), positions),
        changed=pa.array(n_changed[with_rows], pa.int64()),
    )
    return partitions, groups, vanished
