"""The ``kafka_state`` snapshot as Arrow: record batches of a view's schema and the input
partitions (``SnapshotChunk``) that carry them from the read-planning worker to ``read()``.

A snapshot crosses into Spark as Arrow, column by column: ``read()`` yields record batches
(PySpark 4's Python data sources take ``pyarrow.RecordBatch``), and the input partitions carry
LZ4-compressed Arrow IPC bytes. Nothing is built or pickled one Python tuple per commit.

A module of its own so that ``source`` imports no PyArrow (nor NumPy) until a reader plans or
reads: Spark's data-source creation and lookup workers, which only need the options and the
schema, stay about 45 MB smaller.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Optional

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema

from spark_purge import schemas
from spark_purge._gc import gc_paused
from spark_purge.kafka.model import GROUP_FIELDS, ClusterSnapshot, CommitColumns, GroupCommit
from spark_purge.snapshot_pack import ipc_bytes, pack, partition_index
from spark_purge.source import VIEWS

_ARROW_SCHEMAS: dict[str, pa.Schema] = {}


def arrow_schema(view: str) -> pa.Schema:
    """The Arrow schema PySpark expects for the view (``to_arrow_schema``, UTC, as its reader)."""
    if view not in _ARROW_SCHEMAS:
        _ARROW_SCHEMAS[view] = to_arrow_schema(VIEWS[view], timezone="UTC")
    return _ARROW_SCHEMAS[view]


def _micros(ms: Optional[int]) -> Optional[int]:
    return None if ms is None else ms * 1000


def _attribute_columns(items: Sequence[Any], names: Iterable[str]) -> dict[str, list[Any]]:
    """One column per schema field name: that attribute of every item (the model's fields are
    named as the schema's, so a column added to both needs no line here)."""
    return {name: list(map(attrgetter(name), items)) for name in names}


def _commit_fields(commits: Sequence[GroupCommit], names: Iterable[str]) -> dict[str, Any]:
    """Those fields of the commits as columns: as they are when the client returned them column
    by column (its group fields one value a run, ``_PerRun``; its integers Arrow arrays made
    from theirs), else read off each commit (lists). ``_arrow`` makes any of them Arrow."""
    if not isinstance(commits, CommitColumns):
        return _attribute_columns(commits, names)
    out: dict[str, Any] = {}
    runs = commits.group_runs()
    at: Optional[pa.Array] = None  # each commit's run
    for name in names:
        held = commits.array(name)
        if name in GROUP_FIELDS and runs is not None:
            if at is None:
                at = pa.array(np.repeat(np.arange(len(runs)), [n for _, n in runs]))
            out[name] = _PerRun(pa.array([getattr(info, name) for info, _ in runs]), at)  # typed by ``_arrow``
        elif held is not None:
            values: np.ndarray[Any, np.dtype[np.signedinteger[Any]]] = np.frombuffer(held, dtype=np.int64 if held.itemsize == 8 else np.int32)
            out[name] = pa.array(values, mask=values < 0) if name == "committed_leader_epoch" else pa.array(values)
        else:
            out[name] = commits.column(name)
    return out


@dataclass(frozen=True)
class _PerRun:
    """A group field: one value a run (``values``) and each commit's run (``at``)."""

    values: pa.Array
    at: pa.Array


def _arrow(column: Any, type: pa.DataType, order: Optional[pa.Array] = None) -> pa.Array:
    """A column (a list, an Arrow array or ``_PerRun``) as an Arrow array of ``type``; with
    ``order``, its rows in that order (a group field's taken once, from its few values)."""
    if isinstance(column, _PerRun):
        values = column.values if column.values.type == type else column.values.cast(type)
        return values.take(column.at if order is None else column.at.take(order))
    array = column if isinstance(column, pa.Array) else pa.array(column, type=type)
    array = array if array.type == type else array.cast(type)
    return array if order is None else array.take(order)


def _commit_columns(commits: Sequence[GroupCommit], with_partition: bool) -> dict[str, list[Any]]:
    """The commits' fields as columns (``GROUP_COMMIT`` names; topic/partition when asked)."""
    return _commit_fields(commits, schemas.GROUP_COMMIT.fieldNames() + (["topic", "partition"] if with_partition else []))


def _struct(columns: Mapping[str, Any], element: pa.Field, order: Optional[pa.Array] = None) -> pa.StructArray:
    """The columns as one struct array; with ``order``, their rows in that order (taken column
    by column: a whole struct array taken would be built twice over)."""
    fields = list(element.type)
    arrays = []
    for f in fields:
        arrays.append(_arrow(columns[f.name], f.type, order))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _list(offsets: Sequence[int] | np.ndarray, values: pa.Array, field: pa.Field) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, type=field.type)


# PARTITION_STATE columns not read straight off a PartitionState attribute of the same name.
_DERIVED_PARTITION_COLUMNS = ("snapshot_id", "snapshot_time", "replicas", "isr", "time_floor_time")


def _partition_columns(snapshot: ClusterSnapshot) -> dict[str, Any]:
    parts = snapshot.partitions
    n = len(parts)
    columns: dict[str, Any] = _attribute_columns(
        parts, [f for f in schemas.PARTITION_STATE.fieldNames() if f not in _DERIVED_PARTITION_COLUMNS]
    )
    columns.update(
        snapshot_id=[snapshot.snapshot_id] * n,
        snapshot_time=[snapshot.snapshot_time_ms * 1000] * n,
        replicas=[list(p.replicas) for p in parts],
        isr=[list(p.isr) for p in parts],
        time_floor_time=[_micros(p.time_floor_time_ms) for p in parts],
    )
    return columns


def _nested_groups(snapshot: ClusterSnapshot, field: pa.Field) -> pa.ListArray:
    """``SNAPSHOT.groups``: each partition's commits (snapshot order kept), as one list column;
    commits on partitions the snapshot left out are dropped."""
    parts = snapshot.partitions
    n = len(parts)
    columns = _commit_columns(snapshot.commits, with_partition=True)
    # Each commit's partition, by its index in the snapshot's (n: left out).
    own = pa.table({"topic": pa.array([p.topic for p in parts], pa.string()), "partition": pa.array([p.partition for p in parts], pa.int32())})
    commits = pa.table({"topic": _arrow(columns["topic"], pa.string()), "partition": _arrow(columns["partition"], pa.int32())})
    owners = np.asarray(partition_index(commits, own).fill_null(n), np.int64)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(owners, minlength=n + 1)[:n], out=offsets[1:])
    # A stable sort by owning partition (the left-out commits last, and cut off).
    order = pa.array(np.argsort(owners, kind="stable")[: offsets[-1]])
    values = _struct(columns, field.type.value_field, order)  # the element's fields: topic and partition left out
    return _list(offsets, values, field)


def _unreadable(snapshot: ClusterSnapshot, field: pa.Field) -> pa.ListArray:
    """``SNAPSHOT.unreadable_groups``: the same list on every row."""
    errors = sorted(snapshot.unreadable_group_errors().items())
    n, k = len(snapshot.partitions), len(errors)
    columns = {"group_id": [g for g, _ in errors] * n, "error": [e for _, e in errors] * n}
    return _list([i * k for i in range(n + 1)], _struct(columns, field.type.value_field), field)


def snapshot_batch(snapshot: ClusterSnapshot, view: str) -> pa.RecordBatch:
    """The whole snapshot as one Arrow record batch of the view's schema, built column-wise."""
    schema = arrow_schema(view)
    if view == "groups":
        columns: dict[str, Any] = _commit_columns(snapshot.commits, with_partition=True)
        columns["snapshot_id"] = [snapshot.snapshot_id] * len(snapshot.commits)
        columns["snapshot_time"] = [snapshot.snapshot_time_ms * 1000] * len(snapshot.commits)
    else:
        columns = _partition_columns(snapshot)
        if view == "packed":  # the snapshot view's rows, their groups packed (``snapshot_pack``)
            return pack(snapshot_batch(snapshot, "snapshot"), schema)
        if view == "snapshot":
            columns["groups"] = _nested_groups(snapshot, schema.field("groups"))
            columns["unreadable_groups"] = _unreadable(snapshot, schema.field("unreadable_groups"))
    arrays = [_arrow(columns[f.name], f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# The input partitions' bytes are LZ4-compressed (``snapshot_pack.ipc_bytes``). A commit's group
# fields repeat in every commit of the group: compressed, the 10k x 10k benchmark's input
# partitions are 6.5 MB instead of 36 MB, in the read-planning worker, in the driver's JVM
# (which keeps them with the plan) and on their way to the reading task. Writing them
# LZ4-compressed took less time there than writing them plain (0.2-0.5 s against 0.35-1.3 s for
# ``plan_chunks``); ``read()`` decompresses as it reads.


@dataclass(frozen=True)
class SnapshotChunk(InputPartition):
    """One Spark input partition: ``rows`` rows of one snapshot as Arrow IPC stream bytes
    (picklable, compact; empty for an empty snapshot)."""

    snapshot_id: str
    index: int
    rows: int
    payload: bytes = field(repr=False)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The chunk's record batches (what ``read()`` yields)."""
        if self.payload:
            yield from pa.ipc.open_stream(self.payload)
            give_back_arrow_memory()


def give_back_arrow_memory() -> None:
    """Hand the pages PyArrow's allocator keeps after a snapshot was planned or read back to the
    system. Its pool (mimalloc in PyArrow's wheels) keeps freed pages for reuse, and Spark keeps
    a worker alive between cycles: at 10k x 10k the read-planning worker held 310 MB idle where
    it needs 193 MB (``bench/diag/snapshot_memory.py``)."""
    pa.default_memory_pool().release_unused()


def plan_chunks(snapshot: ClusterSnapshot, view: str, rows_per_partition: int) -> list[SnapshotChunk]:
    with gc_paused():  # column lists of O(commits) objects (``spark_purge._gc``)
        batch = snapshot_batch(snapshot, view)
    if batch.num_rows == 0:
        return [SnapshotChunk(snapshot.snapshot_id, 0, 0, b"")]
    return [
        SnapshotChunk(snapshot.snapshot_id, i, part.num_rows, ipc_bytes(part))
        for i, part in enumerate(batch.slice(start, rows_per_partition) for start in range(0, batch.num_rows, rows_per_partition))
    ]




__all__ = ["SnapshotChunk", "arrow_schema", "give_back_arrow_memory", "plan_chunks", "snapshot_batch"]
