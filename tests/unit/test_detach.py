"""``detach.detached`` (real Spark + Delta, local files): rows cut from the table they were
read from, so writing that table re-plans nothing, and the held rows freed afterwards."""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from spark_purge.detach import detached


def _planning_jobs_during(spark: SparkSession, write: object) -> int:
    """Spark jobs Delta runs to plan a query (``Filtering files for query``) while ``write()`` runs."""
    store = spark.sparkContext._jsc.sc().statusStore()
    before = {int(j.jobId()) for j in _jobs(store)}
    write()  # type: ignore[operator]
    return sum(
        1 for j in _jobs(store)
        if int(j.jobId()) not in before and j.description().isDefined() and "Filtering files for query" in j.description().get()
    )


def _jobs(store: object) -> list[object]:
    listed = store.jobsList(None)  # type: ignore[attr-defined]
    return [listed.apply(i) for i in range(listed.size())]


def _held(spark: SparkSession) -> int:
    return len(list(spark.sparkContext._jsc.sc().getRDDStorageInfo()))


def test_rows_written_back_from_a_detached_copy_re_plan_nothing_and_are_freed(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    spark.range(6).selectExpr("id", "cast(id % 3 as string) k").write.format("delta").save(path)
    held_before = _held(spark)

    def rows_from_table():  # type: ignore[no-untyped-def]
        return spark.read.format("delta").load(path).groupBy("k").count().persist()

    def append(df):  # type: ignore[no-untyped-def]
        return lambda: df.selectExpr("cast(count as long) id", "k").write.format("delta").mode("append").save(path)

    # The mechanism: a cached DataFrame that reads the table is re-planned at the table's commit.
    cached = rows_from_table()
    cached.count()
    assert _planning_jobs_during(spark, append(cached)) > 0
    cached.unpersist(True)

    # Detached: the same rows, written with nothing cached reading the table, and then freed.
    cached = rows_from_table()
    with detached(cached.where("count > 0")) as rows:
        cached.unpersist(True)
        assert sorted((r["k"], r["count"]) for r in rows.collect()) == [("0", 3), ("1", 3), ("2", 3)]  # 2 each, then the 3 rows appended above
        assert _planning_jobs_during(spark, append(rows)) == 0
        assert _held(spark) > held_before
    assert _held(spark) == held_before
