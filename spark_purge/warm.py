"""Write the local driver JVM's class archive now, rather than at the end of the first session
that finds none (``spark_purge.class_archive``): ``./dev.sh setup`` runs it once, so the demo's
and the test sessions' JVMs start from the archive on a fresh machine too.

    python -m spark_purge.warm [--if-needed]   # prints what it did (--if-needed: only when it
                                               # writes one); exit status 1 when it failed

Nothing is done when archives are turned off (``SPARK_PURGE_CLASS_ARCHIVE=off``), when the
launcher's ``java`` cannot write one, when this installation's archive is in place already, or
when another process is writing it. Otherwise a local session (the settings ``session.get_spark``
gives every local session, so the same archive key) runs a short workload of the kinds of work a
purge gives the JVM, no Kafka needed: queries with joins, aggregates, arrays and a window, Arrow
both ways, Delta writes (a txn-id append, a MERGE) and reads, a Python data source read as a
batch and as a stream (``foreachBatch``, ``availableNow``). The JVM writes the classes it loaded
when the session ends (about 10-15 s here); classes a later session needs beyond them are read
from the jars as before.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from spark_purge import class_archive

log = logging.getLogger(__name__)

OFF = "off"
UNSUPPORTED = "unsupported"
IN_PLACE = "in place"
WRITTEN = "written"
ELSEWHERE = "being written by another process"
NOT_WRITTEN = "not written"


def archive_status(environ: Mapping[str, str] = os.environ) -> tuple[str, Path | None]:
    """Where this installation's archive stands before any session starts: ``OFF``,
    ``UNSUPPORTED`` or ``IN_PLACE`` (with its path), else ``NOT_WRITTEN`` (with where it goes)."""
    from spark_purge.session import archive_classpath, java_accepts, launcher_java, local_fs

    folder = class_archive.archive_folder(environ)
    if folder is None:
        return OFF, None
    java = launcher_java(environ)
    if java is None or not java_accepts(class_archive.PROBE, environ):
        return UNSUPPORTED, None
    # The class path a local session's driver gets (``session.get_spark``): the local file system's jar too.
    key = class_archive.archive_key(java, archive_classpath(local_fs({}, environ)))
    final = class_archive.final_path(folder, key)
    if folder.is_dir() and class_archive.promote(folder, key):
        return IN_PLACE, final
    return NOT_WRITTEN, final


def workload(spark: Any, folder: Path) -> None:
    """Short work of the kinds a purge gives the JVM (module docstring), in ``folder``."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    commits = spark.range(4000).select(
        F.concat(F.lit("topic-"), (F.col("id") % 20).cast("string")).alias("topic"),
        (F.col("id") % 7).cast("int").alias("partition"),
        F.concat(F.lit("group-"), (F.col("id") % 31).cast("string")).alias("group_id"),
        (F.col("id") * 3).alias("offset"),
        F.current_timestamp().alias("at"),
    )
    topics = commits.select("topic").distinct().withColumn("rule", F.struct(F.lit(1).alias("min_step"), F.lit("0s").alias("ttl")))
    per_partition = (
        commits.join(F.broadcast(topics), "topic")
        .groupBy("topic", "partition")
        .agg(
            F.min("offset").alias("cutoff"),
            F.max_by("group_id", "offset").alias("binding"),
            F.sort_array(F.collect_set("group_id")).alias("groups"),
            F.count(F.lit(1)).alias("n"),
            F.first("rule").alias("rule"),
        )
    )
    ranked = per_partition.withColumn("rank", F.row_number().over(Window.partitionBy("topic").orderBy(F.desc("cutoff"))))
    shuffled = ranked.join(commits.groupBy("topic").agg(F.max("offset").alias("hw")), "topic", "left")
    exploded = shuffled.select("topic", "partition", F.explode("groups").alias("group_id"), "cutoff", "hw")
    exploded.where(F.col("cutoff") <= F.col("hw")).orderBy("topic", "partition").limit(10).collect()
    plan = shuffled.toArrow()
    spark.createDataFrame(plan.to_pandas()).count()

    audit = str(folder / "audit")
    rows = shuffled.select("topic", "partition", "cutoff", F.current_timestamp().alias("planned_at"))
    rows.write.format("delta").save(audit)
    for version in (1, 2):
        rows.write.format("delta").mode("append").option("txnAppId", "warm").option("txnVersion", version).save(audit)
    table = DeltaTable.forPath(spark, audit)
    (
        table.alias("a")
        .merge(rows.where("partition < 3").alias("b"), "a.topic = b.topic AND a.partition = b.partition")
        .whenMatchedUpdate(set={"cutoff": "b.cutoff + 1"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    spark.read.format("delta").load(audit).where("partition = 1").groupBy("topic").count().collect()
    table.history(1).collect()

    _register_source(spark)
    spark.read.format(SOURCE).load().groupBy("topic").agg(F.sum("offset")).collect()
    seen: list[int] = []

    def each(batch: Any, batch_id: int) -> None:
        batch.join(per_partition, ["topic", "partition"], "left").write.format("delta").mode("append").option(
            "txnAppId", "warm-stream"
        ).option("txnVersion", batch_id).save(str(folder / "stream"))
        seen.append(batch_id)

    query = (
        spark.readStream.format(SOURCE)
        .load()
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    if not seen:
        raise RuntimeError("the warm-up's streaming query ran no batch")


SOURCE = "spark_purge_warm"


def _register_source(spark: Any) -> None:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    def batches() -> Iterator[pa.RecordBatch]:
        rows = range(200)
        yield pa.RecordBatch.from_pydict(
            {
                "topic": pa.array([f"topic-{i % 20}" for i in rows], pa.string()),
                "partition": pa.array([i % 7 for i in rows], pa.int32()),
                "offset": pa.array(list(rows), pa.int64()),
            }
        )

    class Reader(DataSourceReader):
        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            return batches()

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        """One batch: offset 0, then 1."""

        def initialOffset(self) -> dict[str, int]:
            return {"seq": 0}

        def prepareForTriggerAvailableNow(self) -> None:
            pass  # the one batch is all there is

        def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, int]:
            return {"seq": 1}

        def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
            return [InputPartition(0)] if int(end["seq"]) > int(start["seq"]) else []

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            return batches()

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return SOURCE

        def schema(self) -> str:
            return "topic string, partition int, offset long"

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return StreamReader()

    spark.dataSource.register(Source)


def prepare(environ: Mapping[str, str] = os.environ, announce: Callable[[Path], None] = lambda final: None) -> tuple[str, Path | None]:
    """Write this installation's archive unless there is nothing to do (module docstring);
    the status it ends in and the archive's path. ``announce`` is told before a session starts."""
    status, final = archive_status(environ)
    if status != NOT_WRITTEN:
        return status, final
    assert final is not None
    announce(final)
    from spark_purge.session import get_spark

    spark = get_spark("spark-purge-warm")
    if not class_archive.writing():
        spark.stop()
        return (IN_PLACE, final) if final.exists() else (ELSEWHERE, final)
    # A workload that fails still leaves a valid archive (of the classes loaded so far): the
    # exit handler writes it; the error is reported (``main``).
    with tempfile.TemporaryDirectory(prefix="spark-purge-warm-") as folder:
        workload(spark, Path(folder))
    class_archive.finish_pending()
    return (WRITTEN, final) if final.exists() else (NOT_WRITTEN, final)


def main(argv: Sequence[str] | None = None) -> int:
    """``--if-needed``: say nothing unless an archive is written (``./dev.sh setup``)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = list(argv or [])
    quiet = args == ["--if-needed"]
    if args and not quiet:
        print(f"unknown arguments {args!r}; usage: python -m spark_purge.warm [--if-needed]", file=sys.stderr)
        return 2
    began = time.monotonic()
    try:
        status, final = prepare(announce=lambda final: print(f"writing the driver JVM's class archive (once): {final}", file=sys.stderr))
    except Exception as exc:  # an optimisation only: sessions start without the archive, or with a partial one
        log.warning("the driver JVM class archive's warm-up failed (%s: %s); sessions write or use one as before", type(exc).__name__, exc)
        return 1
    if not quiet or status in (WRITTEN, NOT_WRITTEN):
        where = f": {final}" if final is not None else ""
        print(f"driver JVM class archive {status}{where} ({time.monotonic() - began:.1f} s)", file=sys.stderr if quiet else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
