"""Py4J round trips of one direct Delta write, counted on the driver's thread.

    ./dev.sh py bench/diag/count_append.py
    PYTHONPATH=<another checkout> ./dev.sh py bench/diag/count_append.py   # that checkout's code

On a local session and a two-column Delta table in a temporary folder: 12 direct appends of 100
rows the driver holds (``txn_append.append`` with ``DriverRows``: the driver writes the Parquet
file, Delta's transaction commits it), then 6 rewrites (``txn_append.rewrite``). Prints how the
appends went (``COUNTS``, ``DRIVER_FILES``) and the Py4J commands each append and rewrite sent,
the first ones left out (lookups made once a process)."""
from __future__ import annotations

import statistics
import tempfile
import threading

from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_purge import py4j_calls, txn_append
from spark_purge.deltalog import latest_snapshot
from spark_purge.session import get_spark


def main() -> None:
    spark = get_spark("count-append", master="local[1]")
    schema = StructType([StructField("id", LongType()), StructField("name", StringType())])
    path = tempfile.mkdtemp() + "/t"
    spark.createDataFrame([(0, "a")], schema).write.format("delta").save(path)
    appends, rewrites = [], []
    # Not Py4J's finalizer thread's commands (freeing objects at random times).
    with py4j_calls.sent_commands(spark.sparkContext, threading.main_thread()) as sent:
        for v in range(1, 13):
            sent.clear()
            txn_append.append(spark, path, txn_append.DriverRows([(v, "x")] * 100, schema), "app", v)
            appends.append(len(sent))
        for v in range(6):
            version = int(latest_snapshot(spark, path).version())
            df = spark.createDataFrame([(v, "r")], schema)
            sent.clear()
            txn_append.rewrite(spark, path, df, version)
            rewrites.append(len(sent))
    print(txn_append.COUNTS, txn_append.DRIVER_FILES)
    print("append commands, last 10:", appends[2:], "median", statistics.median(appends[2:]))
    print("rewrite commands, last 4:", rewrites[2:], "median", statistics.median(rewrites[2:]))
    spark.stop()


if __name__ == "__main__":
    main()
