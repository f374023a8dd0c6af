"""PySpark's Column functions and column lists with fewer Py4J round trips (``py4j_calls``):
the same JVM objects and query results, asked of the JVM once."""
from __future__ import annotations

import re
import threading
from contextlib import AbstractContextManager

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_purge import py4j_calls
from spark_purge.session import DATAFRAME_DEBUGGING, QUERY_CONTEXT


def sent_commands(spark: SparkSession) -> AbstractContextManager[list[str]]:
    """Every Py4J command this thread sends inside the block. Not Py4J's finalizer thread's: it
    frees the JVM objects Python dropped, at whatever time Python collects them. (Counted on
    all threads, a test below failed once, run after the session-settings tests, stop 62; it
    passed alone and in two reruns.)"""
    return py4j_calls.sent_commands(spark.sparkContext, threading.current_thread())


def test_get_spark_installs_it(spark: SparkSession) -> None:
    assert py4j_calls.installed()


def test_a_local_session_builds_columns_without_the_call_site_round_trips(spark: SparkSession) -> None:
    """The DataFrame debugging aids are off in the session ``get_spark`` built, so a Column
    function costs no round trips for the call site (with PySpark's on: about a dozen more per
    call, checked by hand: 19 for ``F.col``)."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.sparkContext.getConf().get(DATAFRAME_DEBUGGING) == "false"
    assert spark.conf.get(QUERY_CONTEXT) == "false"
    assert not is_debugging_enabled()
    with sent_commands(spark) as sent:
        F.col("x")
    assert sent and not any("PySparkCurrentOrigin" in c or "getActiveSession" in c for c in sent), sent


def test_a_column_function_is_one_round_trip_once_known(spark: SparkSession) -> None:
    F.col("warm"), F.lit(0)  # the lookups, once per gateway
    with sent_commands(spark) as sent:
        F.col("x")
        F.lit(3)
    assert [c.split("\n")[:3] for c in sent] == [
        ["c", "z:org.apache.spark.sql.functions", "col"],
        ["c", "z:org.apache.spark.sql.functions", "lit"],
    ]


def test_a_column_operator_is_one_round_trip_once_known(spark: SparkSession) -> None:
    """``~c`` and ``c ** x`` call a kept function: no lookup of ``functions`` (PySpark's asks the
    JVM to find a bare ``functions`` in each package it imported, every miss a failed class
    lookup); and they build what PySpark's build."""
    c, b = F.col("x"), F.col("b")
    ~b, c**2  # the lookups, once per gateway
    with sent_commands(spark) as sent:
        inverted = ~b
        powered = c**2
        reversed_pow = 2**c
    assert [line.split("\n")[:3] for line in sent] == [
        ["c", "z:org.apache.spark.sql.functions", "not"],
        ["c", "z:org.apache.spark.sql.functions", "lit"],
        ["c", "z:org.apache.spark.sql.functions", "pow"],
        ["c", "z:org.apache.spark.sql.functions", "lit"],
        ["c", "z:org.apache.spark.sql.functions", "pow"],
    ]
    rows = spark.createDataFrame([(3, True), (-1, None)], "x int, b boolean")
    df = rows.select(inverted.alias("i"), powered.alias("p"), reversed_pow.alias("r"))
    py4j_calls.uninstall()
    try:
        theirs = rows.select((~b).alias("i"), (c**2).alias("p"), (2**c).alias("r"))
    finally:
        py4j_calls.install()
    def analyzed(d: DataFrame) -> str:  # without the expression ids (each alias has a new one)
        return re.sub(r"#\d+", "", str(d._jdf.queryExecution().analyzed()))

    assert analyzed(df) == analyzed(theirs)
    assert [tuple(r) for r in df.collect()] == [(False, 9.0, 8.0), (None, 1.0, 0.5)]


def test_a_class_named_in_full_takes_no_package_walk(spark: SparkSession) -> None:
    """``jvm_class`` and ``static`` name a class without asking the JVM about its packages;
    ``jvm.java.util.ArrayList`` asks about ``java``, ``java.util`` and the class."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    py4j_calls.static(jvm, "scala.Option", "empty")  # the member, once per gateway
    with sent_commands(spark) as sent:
        made = py4j_calls.jvm_class(jvm, "java.util.ArrayList")()
        none = py4j_calls.static(jvm, "scala.Option", "empty")()
    assert [line.split("\n")[0] for line in sent] == ["i", "c"]  # a constructor, a call: no reflection ("r")
    made.add("a")
    assert made.size() == 1 and none.isEmpty()
    with sent_commands(spark) as walked:
        jvm.java.util.ArrayList()
    assert sum(line.startswith("r\n") for line in walked) >= 3


@pytest.mark.parametrize("n", [1, 2, 10, 11, 25, py4j_calls.LONGEST])
def test_java_list_holds_the_elements_in_order(spark: SparkSession, n: int) -> None:
    values = [f"v{i}" for i in range(n)]
    made = py4j_calls.java_list(spark.sparkContext, values)
    assert [made.get(i) for i in range(made.size())] == values


def test_java_list_takes_a_round_trip_per_ten_elements(spark: SparkSession) -> None:
    py4j_calls.java_list(spark.sparkContext, ["warm"])
    with sent_commands(spark) as sent:
        py4j_calls.java_list(spark.sparkContext, [f"v{i}" for i in range(25)])
    assert len(sent) == 3 + 1 + 2  # three pieces, the list they join into, two joins (Py4J's converter: 26)


@pytest.mark.parametrize("values", [[], ["a", None], [str(i) for i in range(py4j_calls.LONGEST + 1)]])
def test_java_list_leaves_to_py4j_what_it_does_not_take(spark: SparkSession, values: list[str | None]) -> None:
    assert py4j_calls.java_list(spark.sparkContext, values) == values


def test_queries_built_through_it_answer_as_before(spark: SparkSession) -> None:
    df = spark.range(4).select(*[(F.col("id") + i).alias(f"c{i}") for i in range(23)], F.lit(None).alias("n"))
    assert df.columns == [f"c{i}" for i in range(23)] + ["n"]
    assert [tuple(r) for r in df.collect()] == [tuple(i + j for j in range(23)) + (None,) for i in range(4)]
    grouped = spark.createDataFrame([("a", 1), ("a", 2), ("b", 5)], "k string, v int").groupBy("k").agg(F.sum("v").alias("s"))
    assert sorted(tuple(r) for r in grouped.collect()) == [("a", 3), ("b", 5)]
    assert spark.range(3).drop("id").columns == []


def test_uninstall_puts_pysparks_own_lookups_back(spark: SparkSession) -> None:
    py4j_calls.uninstall()
    try:
        assert not py4j_calls.installed()
        with sent_commands(spark) as sent:
            F.col("x")
        assert len(sent) == 3  # the class, the member, the call
    finally:
        py4j_calls.install()
    assert py4j_calls.installed()
