"""The Parquet files and Delta statistics the driver makes for rows it holds
(``spark_purge.delta_files``): pure logic, no JVM. That Delta reads them back as its own writer's
is checked on real Delta in ``tests/integration/test_txn_append.py``."""
from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_purge.delta_files import Unsupported, arrow_table, data_files, stats

SCHEMA = StructType(
    [
        StructField("name", StringType(), False),
        StructField("n", LongType(), True),
        StructField("p", IntegerType(), False),
        StructField("at", TimestampType(), True),
        StructField("ok", BooleanType(), False),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("day", StringType(), False),
    ]
)
AT = datetime(2026, 11, 29, 4, 32, 16, 384999, tzinfo=timezone.utc)


def row(name: str = "a", n: int | None = 1, p: int = 0, at: datetime | None = AT, ok: bool = True, tags: list[str] | None = None, day: str = "2026-11-29") -> Row:
    return Row(name=name, n=n, p=p, at=at, ok=ok, tags=tags if tags is not None else [], day=day)


def test_rows_are_read_as_spark_reads_them_a_dict_by_name_a_tuple_by_position() -> None:
    a_row = row(name="b", n=None, p=3, ok=False, tags=["x"])
    by_position = ("c", 7, 4, AT, True, [], "2026-11-30")
    as_dict = {"day": "2026-11-29", "tags": ["y", "z"], "ok": True, "at": None, "p": 5, "n": 1, "name": "d"}  # not the columns' order
    table = arrow_table([a_row, by_position, as_dict], SCHEMA)
    assert table.column("name").to_pylist() == ["b", "c", "d"]
    assert table.column("n").to_pylist() == [None, 7, 1]
    assert table.column("tags").to_pylist() == [["x"], [], ["y", "z"]]
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("p").type == pa.int32() and not table.schema.field("p").nullable


def test_a_timestamp_without_a_zone_is_local_time_as_in_spark() -> None:
    naive = datetime(2026, 11, 29, 4, 0, 0)
    table = arrow_table([row(at=naive)], SCHEMA)
    assert table.column("at").to_pylist()[0] == naive.astimezone(timezone.utc)


def test_an_arrow_table_is_taken_by_name_and_cast_to_the_columns() -> None:
    """A table as ``toArrow`` or ``audit.intent_table`` gives it: columns in any order, looser
    types and nullability, an extra column left out; a missing column is named."""
    given = pa.table(
        {
            "day": ["2026-11-29"], "extra": [1.5], "tags": pa.array([["x"]], pa.list_(pa.string())), "ok": [True],
            "at": pa.array([AT], pa.timestamp("us", tz="UTC")), "p": pa.array([3], pa.int64()), "n": [None], "name": ["b"],
        }
    )
    table = arrow_table(given, SCHEMA)
    assert table.column_names == SCHEMA.names and table.to_pylist() == arrow_table([row(name="b", n=None, p=3, tags=["x"])], SCHEMA).to_pylist()
    assert table.schema.field("p").type == pa.int32() and not table.schema.field("p").nullable
    with pytest.raises(Unsupported, match="without the column\\(s\\) 'name', 'ok'"):
        arrow_table(given.drop_columns(["name", "ok"]), SCHEMA)
    with pytest.raises(Unsupported, match="does not cast"):
        arrow_table(given.set_column(given.column_names.index("p"), "p", pa.array(["three"])), SCHEMA)


@pytest.mark.parametrize(
    ("rows", "schema", "says"),
    [
        ([row(n="seven")], SCHEMA, "column 'n'"),  # type: ignore[arg-type]
        ([row(n=True)], SCHEMA, "a boolean for a bigint"),
        ([("a", 1)], SCHEMA, "2 values for 7 columns"),
        ([Row(x=1.5)], StructType([StructField("x", DoubleType())]), "type double"),
    ],
)
def test_values_or_types_it_does_not_write_are_unsupported(rows: list[object], schema: StructType, says: str) -> None:
    with pytest.raises(Unsupported, match=says):
        arrow_table(rows, schema)


def test_a_null_delta_would_refuse_is_unsupported_so_that_delta_refuses_it() -> None:
    with pytest.raises(Unsupported, match="'name' may not be null"):
        data_files(arrow_table([row(name=None)], SCHEMA), SCHEMA, ["day"])  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match="'tags': its arrays may not hold a null"):
        data_files(arrow_table([row(tags=["x", None])], SCHEMA), SCHEMA, ["day"])  # type: ignore[list-item]


def test_one_file_per_partition_value_without_the_partition_column() -> None:
    rows = [row(name="a", day="2026-11-29"), row(name="b", day="2026-11-30"), row(name="c", day="2026-11-29")]
    files = data_files(arrow_table(rows, SCHEMA), SCHEMA, ["day"])
    assert [(f.partition_values, f.path.split("/")[0]) for f in files] == [
        ({"day": "2026-11-29"}, "day=2026-11-29"),
        ({"day": "2026-11-30"}, "day=2026-11-30"),
    ]
    assert all(f.path.endswith(".c000.snappy.parquet") for f in files) and len({f.path for f in files}) == 2
    first = pq.read_table(io.BytesIO(files[0].body))
    assert first.column_names == ["name", "n", "p", "at", "ok", "tags"]
    assert first.column("name").to_pylist() == ["a", "c"]
    assert json.loads(files[1].stats)["numRecords"] == 1
    add = json.loads(files[0].add_action(1234))["add"]
    assert add == {"path": files[0].path, "partitionValues": {"day": "2026-11-29"}, "size": len(files[0].body), "modificationTime": 1234,
                   "dataChange": True, "stats": files[0].stats}
    assert data_files(arrow_table([], SCHEMA), SCHEMA, ["day"]) == []


@pytest.mark.parametrize("value", ["2026/11/29", "a=b", "x y", "%41"])
def test_a_partition_value_a_path_would_escape_is_unsupported(value: str) -> None:
    with pytest.raises(Unsupported, match="needs escaping"):
        data_files(arrow_table([row(day=value)], SCHEMA), SCHEMA, ["day"])


def test_statistics_as_delta_writes_them() -> None:
    long_name = "g" * 40
    rows = [
        row(name="b", n=None, p=9, at=AT, ok=True, tags=["x"]),
        row(name="a", n=None, p=-2, at=AT + timedelta(microseconds=1), ok=False),
        row(name=long_name, n=None, p=3, at=AT - timedelta(seconds=1, microseconds=500)),
    ]
    table = arrow_table(rows, SCHEMA).drop(["day"])
    got = json.loads(stats(table, SCHEMA.fields[:6]))
    assert got["numRecords"] == 3
    assert got["nullCount"] == {"name": 0, "n": 3, "p": 0, "at": 0, "ok": 0, "tags": 0}
    # Timestamps cut to milliseconds; a string's minimum cut to 32 characters, its maximum left
    # out when longer; no minimum or maximum for an all-null column, a boolean or an array.
    assert got["minValues"] == {"name": "a", "p": -2, "at": "2026-11-29T04:32:15.384Z"}
    assert got["maxValues"] == {"p": 9, "at": "2026-11-29T04:32:16.385Z"}
    short = json.loads(stats(arrow_table([row(name="zz"), row(name=long_name)], SCHEMA).drop(["day"]), SCHEMA.fields[:1]))
    assert short["minValues"] == {"name": "g" * 32} and short["maxValues"] == {"name": "zz"}


def test_statistics_cover_only_the_indexed_columns() -> None:
    files = data_files(arrow_table([row()], SCHEMA), SCHEMA, ["day"], indexed_columns=2)
    assert set(json.loads(files[0].stats)["nullCount"]) == {"name", "n"}
    every = data_files(arrow_table([row()], SCHEMA), SCHEMA, ["day"], indexed_columns=-1)
    assert set(json.loads(every[0].stats)["nullCount"]) == {"name", "n", "p", "at", "ok", "tags"}
