"""Rows the driver holds, made into the Parquet files and statistics of a Delta commit by the
driver itself: no Spark job.

A batch's audit rows (intents, outcomes), a lease row, a retirement: O(partitions) rows at most,
on the driver already. Through Delta's writer each write was a ``createDataFrame`` of Python
rows and a Spark job running Parquet's writer in one task (about 0.1 s and 0.1-0.25 s of a
0.3-0.4 s audit write at 1k partitions here; the first such job of a process compiles its code
cold). ``txn_append`` writes the bytes made here into the table's directory through Hadoop's
FileSystem and commits them as Delta ``add`` actions in the same transaction it makes its other
commits in.

What is made here is what Delta's writer makes, for the tables this package creates:
- one file per partition value, at ``<column>=<value>/part-00000-<uuid>.c000.snappy.parquet``,
  the partition columns left out of the file;
- the file's statistics as Delta writes them (``numRecords``; ``nullCount`` of the first
  ``delta.dataSkippingNumIndexedCols`` columns, 32 unless set; ``minValues`` / ``maxValues`` of
  those that are numbers, strings or timestamps, leaving out a column whose values are all
  null), so that data skipping and Delta's answers from statistics (``COUNT(*)``, ``MIN``/``MAX``
  of a number) are what they were. Timestamps are cut to milliseconds as Delta cuts them; a
  string's minimum is its first 32 characters, and its maximum is left out when longer (Delta
  writes a longer one cut and marked; leaving it out only stops skipping on it).

``Unsupported`` says why some rows or a table cannot be written this way (a type not listed in
``ARROW_TYPES``, a partition value that needs escaping in a path, a null in a column that may
not hold one, statistics columns chosen by name): the caller then writes through Delta's writer,
which also raises Delta's own errors for bad rows.
"""
from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# The Spark types these files may hold, as Arrow writes them for Spark to read back the same
# (a timestamp: microseconds since the epoch, UTC, as Spark's TimestampType is).
ARROW_TYPES: Mapping[type[DataType], pa.DataType] = {
    StringType: pa.string(),
    LongType: pa.int64(),
    IntegerType: pa.int32(),
    BooleanType: pa.bool_(),
    TimestampType: pa.timestamp("us", tz="UTC"),
}
# Delta's defaults for statistics: the first 32 columns, strings cut to 32 characters.
INDEXED_COLUMNS = 32
STRING_PREFIX = 32
_SAFE_PARTITION_VALUE = re.compile(r"[A-Za-z0-9_.-]+")


class Unsupported(ValueError):
    """These rows or this table cannot be written by the driver (the reason): write them
    through Delta's writer."""


@dataclass(frozen=True)
class DataFile:
    """One Parquet file of a commit: its path relative to the table, the partition values its
    path names, its bytes and its Delta statistics (JSON)."""

    path: str
    partition_values: Mapping[str, str]
    body: bytes
    stats: str

    def add_action(self, modification_time_ms: int) -> str:
        """The file as Delta's ``add`` action, one JSON line of a commit."""
        return json.dumps(
            {
                "add": {
                    "path": self.path,
                    "partitionValues": dict(self.partition_values),
                    "size": len(self.body),
                    "modificationTime": modification_time_ms,
                    "dataChange": True,
                    "stats": self.stats,
                }
            }
        )


def arrow_type(field: StructField) -> pa.DataType:
    """``field``'s Arrow type (``Unsupported`` when not one of ``ARROW_TYPES`` or an array of one)."""
    dt = field.dataType
    if isinstance(dt, ArrayType):
        element = ARROW_TYPES.get(type(dt.elementType))
        if element is None:
            raise Unsupported(f"column {field.name!r}: arrays of {dt.elementType.simpleString()}")
        return pa.list_(pa.field("element", element, nullable=dt.containsNull))
    found = ARROW_TYPES.get(type(dt))
    if found is None:
        raise Unsupported(f"column {field.name!r}: type {dt.simpleString()}")
    return found


def arrow_schema(schema: StructType) -> pa.Schema:
    """``schema`` as the Arrow schema the driver writes it with (``ARROW_TYPES``)."""
    return pa.schema([pa.field(f.name, arrow_type(f), nullable=f.nullable) for f in schema.fields])


def arrow_table(rows: Iterable[Any] | pa.Table, schema: StructType) -> pa.Table:
    """``rows`` as an Arrow table of ``schema``, read as Spark's ``createDataFrame(rows, schema)``
    reads them: a dict by name, a tuple (a ``Row`` too) or a list by position; a timestamp
    without a zone in local time. An Arrow table is taken by column name and cast to
    ``schema``'s types. ``Unsupported`` when a value does not fit its type (Spark's writer then
    refuses it with its own error)."""
    names = schema.names
    if isinstance(rows, pa.Table):
        missing = [n for n in names if n not in rows.column_names]
        if missing:
            raise Unsupported(f"an Arrow table without the column(s) {', '.join(map(repr, missing))}")
        try:
            return rows.select(names).cast(arrow_schema(schema))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise Unsupported(f"an Arrow table that does not cast to the table's columns: {exc}") from exc
    by_position = []
    for row in rows:
        if isinstance(row, dict):
            by_position.append(tuple(row.get(n) for n in names))
        elif isinstance(row, (tuple, list)) and len(row) == len(names):
            by_position.append(tuple(row))
        else:
            raise Unsupported(f"a row of {len(row) if isinstance(row, (tuple, list)) else type(row).__name__} values for {len(names)} columns")
    target = arrow_schema(schema)
    # Column by column: the rows transposed at once (a list per column built row by row cost
    # as much as the rest of the audit's rows at 10k partitions, issue 12).
    by_column = list(zip(*by_position)) if by_position else [()] * len(names)
    columns = []
    for i, field in enumerate(schema.fields):
        values: Any = by_column[i]
        if isinstance(field.dataType, TimestampType):
            values = [utc(v) for v in values]
        elif isinstance(field.dataType, (LongType, IntegerType)) and bool in set(map(type, values)):
            raise Unsupported(f"column {field.name!r}: a boolean for a {field.dataType.simpleString()}")  # Arrow would take it as 0 / 1
        try:
            columns.append(pa.array(values, type=target.field(i).type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
            raise Unsupported(f"column {field.name!r}: {exc}") from exc
    return pa.Table.from_arrays(columns, schema=target)


def utc(value: Any) -> Any:
    """A datetime in UTC, as Spark reads it: one without a zone in local time
    (``TimestampType.toInternal``); anything else as it is."""
    return value.astimezone(timezone.utc) if isinstance(value, datetime) else value


def rows_of(table: pa.Table) -> list[Row]:
    """``table``'s rows as ``Row``s of its columns, in its order (``arrow_table``'s way back):
    made by a ``Row`` factory from the columns transposed, at a third of the cost of
    ``Row(**dict)`` per row from ``to_pylist`` (10k plan rows a batch at 10k partitions, issue 12)."""
    make = Row(*table.column_names)
    return [make(*values) for values in zip(*(column.to_pylist() for column in table.columns))]


def check_nulls(table: pa.Table, schema: StructType) -> None:
    """``Unsupported`` when a column (or an array's elements) that may not be null holds a null:
    Delta's writer refuses those rows with its own error, which the caller should raise."""
    for field in schema.fields:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise Unsupported(f"column {field.name!r} may not be null and holds {column.null_count} null(s)")
        if isinstance(field.dataType, ArrayType) and not field.dataType.containsNull:
            elements = pc.list_flatten(column)
            if elements.null_count:
                raise Unsupported(f"column {field.name!r}: its arrays may not hold a null and hold {elements.null_count}")


def data_files(
    table: pa.Table, schema: StructType, partition_columns: Sequence[str], indexed_columns: int = INDEXED_COLUMNS
) -> list[DataFile]:
    """The files (one per distinct partition value, none for no rows) and their statistics for
    ``table``'s rows in a Delta table of ``schema`` partitioned by ``partition_columns``; the
    statistics cover the first ``indexed_columns`` data columns (-1: all)."""
    check_nulls(table, schema)
    for name in partition_columns:
        field = schema[name]
        if not isinstance(field.dataType, StringType):
            raise Unsupported(f"partition column {name!r} is {field.dataType.simpleString()}, not a string")
    data_fields = [f for f in schema.fields if f.name not in partition_columns]
    indexed = data_fields if indexed_columns < 0 else data_fields[:indexed_columns]
    files = []
    for values, rows in _by_partition(table, partition_columns):
        for name, value in values.items():
            if value is None or not _SAFE_PARTITION_VALUE.fullmatch(value):
                raise Unsupported(f"partition column {name!r}: value {value!r} (null, or needs escaping in a path)")
        data = rows.select([f.name for f in data_fields])
        body = io.BytesIO()
        pq.write_table(data, body, compression="snappy", coerce_timestamps="us")
        directory = "".join(f"{name}={values[name]}/" for name in partition_columns)
        files.append(DataFile(f"{directory}part-00000-{uuid.uuid4()}.c000.snappy.parquet", values, body.getvalue(), stats(data, indexed)))
    return files


def _by_partition(table: pa.Table, partition_columns: Sequence[str]) -> list[tuple[dict[str, Any], pa.Table]]:
    if table.num_rows == 0:
        return []
    if not partition_columns:
        return [({}, table)]
    keys = list(zip(*(table.column(name).to_pylist() for name in partition_columns)))
    found: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(keys):
        found.setdefault(key, []).append(i)
    return [(dict(zip(partition_columns, key)), table.take(pa.array(at, type=pa.int64()))) for key, at in found.items()]


def stats(data: pa.Table, indexed: Sequence[StructField]) -> str:
    """Delta's statistics of one file's ``data`` for its ``indexed`` columns (module docstring)."""
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in indexed:
        column = data.column(field.name)
        nulls[field.name] = column.null_count
        if column.null_count == len(column) or isinstance(field.dataType, (BooleanType, ArrayType)):
            continue
        low, high = (v.as_py() for v in pc.min_max(column).values())
        if isinstance(field.dataType, TimestampType):
            lows[field.name], highs[field.name] = _millis(low), _millis(high)
        elif isinstance(field.dataType, StringType):
            lows[field.name] = low[:STRING_PREFIX]
            if len(high) <= STRING_PREFIX:
                highs[field.name] = high
        else:
            lows[field.name], highs[field.name] = low, high
    return json.dumps({"numRecords": data.num_rows, "minValues": lows, "maxValues": highs, "nullCount": nulls}, separators=(",", ":"))


def _millis(value: datetime) -> str:
    """A timestamp as Delta's statistics write it: UTC, cut to milliseconds."""
    at = value.astimezone(timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


__all__ = ["ARROW_TYPES", "INDEXED_COLUMNS", "STRING_PREFIX", "DataFile", "Unsupported", "arrow_schema", "arrow_table", "check_nulls", "data_files", "rows_of", "stats", "utc"]
