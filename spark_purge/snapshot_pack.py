"""A snapshot's group rows packed as Arrow IPC in a few binary values (issue 12).

The ``kafka_state`` source's ``packed`` view (``schemas.PACKED_SNAPSHOT``) is its ``snapshot``
view with the nested ``groups`` column replaced by ``packed_groups``: null on most rows; on the
first row of each run of ``PACKED_ROWS`` rows, those rows' ``topic``, ``partition`` and ``groups``
as one LZ4-compressed Arrow IPC stream. Spark then carries a few binary values where it carried a
nested row per commit: the pipeline's held snapshot is converted from Arrow, shuffled and held
without 500,000 commit rows at 10k x 10k, and the store match's task (``position_match``) reads
them straight from the bytes (docs/performance.md, "Stop 82").

Every row's groups are in exactly one blob, on some row of the same snapshot: a reader needs the
whole snapshot in one task (the store match's is; ``unpacked_batches`` is such a task for any
other reader, ``policy.inputs.with_groups``).

Imports PyArrow and the schemas only: it runs in the read-planning worker and in Spark's Python
workers.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

PACKED_COLUMN = "packed_groups"
# Snapshot rows whose group rows one blob holds: a blob is read whole, so it stays a few MB.
PACKED_ROWS = 2_000
# LZ4-compressed: a blob crosses from the read-planning worker to the reading task, into Spark's
# rows, through the shuffle into the held snapshot and on to the store match's task as 6 MB
# instead of 30 MB at 10k x 10k. The held snapshot's first use took 0.12 s instead of 0.40-0.48 s
# (docs/performance.md, "Stop 82"), for 0.08 s more to decode in the match's task.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
_KEYS = ("topic", "partition")


@cache
def _snapshot_schema() -> pa.Schema:
    """``schemas.SNAPSHOT`` as Arrow (the source's ``snapshot`` view)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_purge.schemas import SNAPSHOT

    return to_arrow_schema(SNAPSHOT, timezone="UTC")


def ipc_bytes(rows: pa.RecordBatch | pa.Table) -> bytes:
    """``rows`` as one LZ4-compressed Arrow IPC stream (a blob here; the source's input partitions
    and the store's packed rows too: ``source_arrow.plan_chunks``, ``position_match.pack``)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema, options=_IPC_OPTIONS) as writer:
        writer.write(rows)  # a batch or a table
    return bytes(sink.getvalue().to_pybytes())


def read_streams(blobs: Iterable[bytes | pa.Buffer | None]) -> list[pa.Table]:
    """Each Arrow IPC stream of ``blobs`` read whole (None: none); the store's packed rows are
    read so too (``position_match.unpack``)."""
    return [pa.ipc.open_stream(blob).read_all() for blob in blobs if blob is not None]


def pack(batch: pa.RecordBatch, packed_schema: pa.Schema, rows: int = PACKED_ROWS) -> pa.RecordBatch:
    """``batch`` (the ``snapshot`` view's rows) in ``packed_schema``'s columns: its ``groups``
    packed into ``packed_groups``, a blob on the first row of each run of ``rows`` rows."""
    keyed = batch.select([*_KEYS, "groups"])
    blobs: list[bytes | None] = [None] * batch.num_rows
    for start in range(0, batch.num_rows, rows):
        blobs[start] = ipc_bytes(keyed.slice(start, rows))
    columns = {name: batch.column(name) for name in batch.schema.names if name != "groups"}
    columns[PACKED_COLUMN] = pa.array(blobs, pa.binary())
    return pa.RecordBatch.from_arrays([columns[f.name] for f in packed_schema], schema=packed_schema)


def partition_index(rows: pa.RecordBatch | pa.Table, of: pa.RecordBatch | pa.Table) -> pa.Array:
    """Each row's index among ``of``'s rows by (topic, partition), ``pc.index_in``'s way (the first
    such row; null: none), to match rows of two sides by partition. The key is an integer: the
    topic's index among ``of``'s topics, and the partition."""
    # One string type on both sides, whichever Spark gave (``useLargeVarTypes``) or the blob holds.
    topics = _whole(pc.unique(pc.cast(of.column("topic"), pa.large_string())))

    def key(side: pa.RecordBatch | pa.Table) -> pa.Array:
        topic = pc.index_in(pc.cast(side.column("topic"), pa.large_string()), value_set=topics).cast(pa.int64())
        partition = pc.add(pc.cast(side.column("partition"), pa.int64()), 1 << 31)  # an int32 made non-negative
        return _whole(pc.add(pc.multiply(topic, 1 << 32), partition))  # null where the topic is none of ``of``'s

    return pc.index_in(key(rows), value_set=key(of))


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def rows_with_groups(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch``'s rows (``PACKED_SNAPSHOT``'s columns: a whole snapshot, any order) in the order
    of its blobs' rows, its ``packed_groups`` column made ``groups`` (``SNAPSHOT``'s type, in
    place): the blobs' lists as decoded, not copied again; the rows' scalar columns are what is
    reordered. ``ValueError`` when the rows and the blobs' rows are not the same partitions (the
    snapshot's rows were split between tasks, or a row came from elsewhere)."""
    at_column = batch.schema.get_field_index(PACKED_COLUMN)
    values = batch.column(at_column)
    tables = read_streams(v.as_buffer() if v.is_valid else None for v in values)
    groups_type = _snapshot_schema().field("groups").type
    rest = batch.remove_column(at_column)
    if not tables:
        if batch.num_rows:
            raise ValueError(f"a packed snapshot's {batch.num_rows} row(s) came without their {PACKED_COLUMN}")
        return rest.add_column(at_column, pa.field("groups", groups_type), pa.array([], groups_type))
    packed = pa.concat_tables(tables).combine_chunks()
    at = partition_index(packed, rest)
    if packed.num_rows != rest.num_rows or at.null_count:
        raise ValueError(
            f"a packed snapshot's {rest.num_rows} row(s) are not the {packed.num_rows} its {PACKED_COLUMN} hold "
            "(a snapshot's rows are read whole, in one task)"
        )
    groups = packed.column("groups").chunk(0) if packed.num_rows else pa.array([], groups_type)
    return rest.take(at).add_column(at_column, pa.field("groups", groups.type), groups)


def unpacked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch``'s rows (``PACKED_SNAPSHOT``: a whole snapshot) as the ``snapshot`` view's
    (``SNAPSHOT``), their groups read from the blobs (``rows_with_groups``)."""
    schema = _snapshot_schema()
    rows = rows_with_groups(batch)
    return pa.RecordBatch.from_arrays([rows.column(f.name).cast(f.type) for f in schema], schema=schema)


def unpacked_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function that gives a packed snapshot's rows as ``SNAPSHOT`` rows: its
    one task reads every row first (a row's groups may be in another row's blob)."""
    read = list(batches)
    if not read:
        return
    table = pa.Table.from_batches(read).combine_chunks()
    if table.num_rows == 0:
        return
    yield from pa.Table.from_batches([unpacked(table.to_batches()[0])]).to_batches(max_chunksize=PACKED_ROWS)


__all__ = ["PACKED_COLUMN", "PACKED_ROWS", "ipc_bytes", "pack", "partition_index", "read_streams", "rows_with_groups", "unpacked", "unpacked_batches"]
