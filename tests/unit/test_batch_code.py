"""A batch's own values reach Spark as data, not as constants written into its queries (issue 12).

Spark inlines a long or timestamp constant into the Java code it generates for a query, so a
query that carries the batch's time or id as a constant is new code at every batch: compiled
anew (twice) and run by the JVM's interpreter before its JIT catches up. The progress store's
rows after a batch (``Positions.after``, the batch's time) and their batch id
(``audit.stamped``) carry them as data instead: a later batch's query compiles nothing.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.audit import stamped
from spark_purge.policy.positions import CHANGED, Positions

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def compiled(spark: SparkSession) -> int:
    """Classes Spark's code generation has compiled in this JVM so far (cache hits not counted)."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def groups_at(spark: SparkSession, at: datetime, offset: int) -> Any:
    """A snapshot's GROUP_OFFSETS rows seen at ``at``: group a at ``offset`` on t-0, b at 5 on t-1."""
    rows = [("s", at, "a", "Empty", "classic", 0, "t", 0, offset, None, None, None), ("s", at, "b", "Empty", "consumer", 0, "t", 1, 5, None, None, None)]
    return spark.createDataFrame(rows, schemas.GROUP_OFFSETS)


def stored(spark: SparkSession) -> Any:
    """The store before the batches: a at 10 and b at 5, both last moved at T0."""
    return spark.createDataFrame([("a", "t", 0, 10, T0, "classic", None), ("b", "t", 1, 5, T0, "consumer", None)], schemas.PROGRESS_STORE)


def after_rows(positions: Positions, now: datetime) -> dict[str, tuple[int, datetime, bool]]:
    return {
        r["group_id"]: (r["committed_offset"], r["last_progress_time"].astimezone(timezone.utc), r[CHANGED])
        for r in positions.after(now).collect()
    }


def test_the_rows_after_a_batch_take_its_time_from_the_snapshot_and_compile_once(spark: SparkSession) -> None:
    store = stored(spark)
    seen: list[dict[str, tuple[int, datetime, bool]]] = []
    new_code: list[int] = []
    for batch in range(3):
        at = T0 + timedelta(minutes=5 * (batch + 1))
        before = compiled(spark)
        seen.append(after_rows(Positions.match(None, groups_at(spark, at, 11 + batch), store, keep=False, at=at), at))
        new_code.append(compiled(spark) - before)
    # a moved at each batch's own time; b unchanged keeps the store's time
    for batch, rows in enumerate(seen):
        assert rows == {"a": (11 + batch, T0 + timedelta(minutes=5 * (batch + 1)), True), "b": (5, T0, False)}
    assert new_code[0] > 0, "the first batch compiles its query's code (else this test measures nothing)"
    assert new_code[1:] == [0, 0], f"later batches compiled new code: {new_code}"


def test_the_time_from_the_rows_is_the_time_a_constant_gives(spark: SparkSession) -> None:
    at = T0 + timedelta(minutes=7)
    groups = groups_at(spark, at, 12)
    from_rows = after_rows(Positions.match(None, groups, stored(spark), keep=False, at=at), at)
    as_constant = after_rows(Positions.match(None, groups, stored(spark), keep=False), at)
    assert from_rows == as_constant == {"a": (12, at, True), "b": (5, T0, False)}
    # A time that is not the snapshot's (a caller's own ``now``) is written as given.
    later = at + timedelta(minutes=1)
    assert after_rows(Positions.match(None, groups, stored(spark), keep=False, at=at), later)["a"] == (12, later, True)
    # and, as a constant, is new code for every new time: what taking it from the rows spares
    before = compiled(spark)
    assert after_rows(Positions.match(None, groups, stored(spark), keep=False), later + timedelta(minutes=1))["a"][1] == later + timedelta(minutes=1)
    assert compiled(spark) > before


def test_a_batch_id_is_stamped_as_data_and_compiles_once(spark: SparkSession) -> None:
    rows = spark.createDataFrame([("a", 1), ("b", 2)], "group_id string, n int").localCheckpoint()
    new_code: list[int] = []
    for batch_id in (7, 8, 2**40):
        before = compiled(spark)
        got = sorted((r["group_id"], r["n"], r["batch_id"]) for r in stamped(rows.where("n > 0"), batch_id).collect())
        new_code.append(compiled(spark) - before)
        assert got == [("a", 1, batch_id), ("b", 2, batch_id)]
    assert stamped(rows, 1).schema["batch_id"].dataType.simpleString() == "bigint"
    assert new_code[0] > 0, "the first batch compiles its query's code (else this test measures nothing)"
    assert new_code[1:] == [0, 0], f"later batches compiled new code: {new_code}"
