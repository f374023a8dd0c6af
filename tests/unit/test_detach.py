"""``detach`` (real Spark + Delta, local files): rows cut from the table they were read from, so
writing that table re-plans nothing; rows held for several jobs without Spark's cache; and the
held rows freed afterwards."""
from __future__ import annotations

import re
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

import spark_purge
from spark_purge.detach import cut, detached, drop, held


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


def _held(spark: SparkSession) -> set[int]:
    """The ids of the RDDs whose blocks Spark holds now (other tests' may come and go: Spark's
    cleaner frees an RDD's blocks once nothing references it)."""
    return {int(info.id()) for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


def _comes_to_be_held(spark: SparkSession, df: DataFrame, timeout_s: float = 60.0) -> bool:
    """Whether Spark comes to hold ``df``'s blocks: ``_held`` reads Spark's status store, which
    hears of stored blocks through its listener bus, after the job that stored them (under load,
    a moment later: a check right after the job failed in a loaded run, stop 81)."""
    deadline = time.monotonic() + timeout_s
    while _rdd_id(df) not in _held(spark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _rdd_id(df: DataFrame) -> int:
    """The id of the RDD a held (or detached) DataFrame reads."""
    return int(df._jdf.queryExecution().analyzed().rdd().id())


def test_rows_written_back_from_a_detached_copy_re_plan_nothing_and_are_freed(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    spark.range(6).selectExpr("id", "cast(id % 3 as string) k").write.format("delta").save(path)

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
        assert _comes_to_be_held(spark, rows)
    assert _rdd_id(rows) not in _held(spark)


def test_held_rows_are_computed_once_keep_their_partitioning_bypass_sparks_cache_and_are_freed(spark: SparkSession) -> None:
    rows = held(spark.range(1000).selectExpr("id", "id % 7 k").repartition(2, "k"))
    assert _rdd_id(rows) not in _held(spark)  # nothing computed yet: the first job that reads them does
    assert rows.count() == 1000
    assert _comes_to_be_held(spark, rows)
    # Not Spark's cache (CachedRDDBuilder, InMemoryRelation): see detach's docstring.
    assert "InMemoryRelation" not in rows.groupBy("k").count()._jdf.queryExecution().optimizedPlan().toString()
    jobs = spark.sparkContext._jsc.sc().statusStore()
    counted = {int(j.jobId()) for j in _jobs(jobs)}
    per_key = rows.groupBy("k").count()
    assert "Exchange" not in per_key._jdf.queryExecution().executedPlan().toString()  # still hashed by k
    assert sorted(r["count"] for r in per_key.collect()) == [142, 143, 143, 143, 143, 143, 143]
    # The aggregate read the held blocks: its one job has one stage, with no shuffle of the
    # repartition behind it (not even a skipped one: the lineage is cut).
    new = [j for j in _jobs(jobs) if int(j.jobId()) not in counted]
    assert len(new) == 1
    assert new[0].stageIds().size() == 1 and new[0].numSkippedStages() == 0  # type: ignore[attr-defined]
    drop(rows)
    assert _rdd_id(rows) not in _held(spark)
    drop(rows)  # twice: a no-op


def test_rows_cut_serialized_are_held_as_bytes_and_read_back_the_same(spark: SparkSession) -> None:
    df = spark.range(1000).selectExpr("id", "cast(id * 7 as string) s")
    as_bytes, as_rows = cut(df, serialized=True), cut(df)
    try:
        for rows, deserialized in ((as_bytes, False), (as_rows, True)):
            level = rows._jdf.queryExecution().analyzed().rdd().getStorageLevel()
            assert (level.useMemory(), level.useDisk(), level.deserialized()) == (True, True, deserialized)
            assert _comes_to_be_held(spark, rows)  # computed now (eager)
        assert sorted(map(tuple, as_bytes.collect())) == sorted(map(tuple, as_rows.collect())) == [(i, str(i * 7)) for i in range(1000)]
    finally:
        drop(as_bytes)
        drop(as_rows)
    assert _rdd_id(as_bytes) not in _held(spark)


def test_the_package_never_uses_sparks_cache() -> None:
    """Spark 4.2.0's cache can kill the executor's heartbeat thread (``spark_purge.detach``):
    rows a batch reads twice are ``held``."""
    root = Path(spark_purge.__file__).parent
    calls = re.compile(r"\.(persist|cache)\(|\bcacheTable\(|CACHE TABLE", re.IGNORECASE)
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if calls.search(line)]
    assert found == []
