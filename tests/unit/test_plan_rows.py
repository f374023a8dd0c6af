"""``delta_files.rows_of``: a plan's Arrow table as the driver's ``Row``s (``collect_rows``)."""
from __future__ import annotations

import pickle

import pyarrow as pa
from pyspark.sql import Row

from spark_purge.delta_files import rows_of


def test_rows_are_the_tables_rows_by_name_and_by_position() -> None:
    table = pa.table({"topic": ["a", "b"], "partition": pa.array([0, 7], pa.int32()), "stale": [["g"], None], "cut": [None, 5]})
    rows = rows_of(table)
    assert rows == [Row(**r) for r in table.to_pylist()]
    assert [r.asDict() for r in rows] == table.to_pylist()
    assert (rows[1]["partition"], rows[1].cut, rows[0].stale, rows[1][2]) == (7, 5, ["g"], None)
    assert pickle.loads(pickle.dumps(rows[1])).asDict() == rows[1].asDict()  # as Spark ships a Row
    assert rows_of(table.slice(0, 0)) == []
