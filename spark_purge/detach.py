"""A DataFrame's rows cut from their lineage and held by Spark, then dropped: never Spark's cache.

Spark re-plans every cached DataFrame that reads a table as soon as that table is written
(``CacheManager`` refreshes them by path). A Delta table then computes its new version's
snapshot for the plan at once: about four Spark jobs on every commit, for a cache that is about
to be dropped anyway. So rows computed from a table that are then written back to it (the group
progress store's changed keys) are cut from their lineage first (``localCheckpoint``), the
caches that read the table are released, and the write runs from the cut rows.

Rows a batch reads several times (its snapshot, its positions matched with the store) are held
the same way (``held``, freed by ``drop``), not with ``DataFrame.persist``: Spark 4.2.0's cache
(``CachedRDDBuilder``) gives every task that builds it a ``PartitionKeyedAccumulator`` whose map
is still null while the task deserializes it, and the executor's heartbeat thread, which asks
every registered accumulator ``isZero``, can catch it then. The NullPointerException kills that
thread for good ("Uncaught exception in thread executor-heartbeater"): the executor never sends
another heartbeat, and the driver drops it as lost once ``spark.network.timeout`` passes. A
continuous purge builds its caches every batch, so it would hit that race sooner or later.
``bench/heartbeat_race.py`` shows it.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import StorageLevel
from pyspark.sql import DataFrame


@contextmanager
def detached(df: DataFrame) -> Iterator[DataFrame]:
    """``df``'s rows, computed now and held by Spark (memory, then disk) with no lineage to the
    tables they came from; the held blocks are freed when the block ends."""
    rows = cut(df)
    try:
        yield rows
    finally:
        drop(rows)


def cut(df: DataFrame, serialized: bool = False) -> DataFrame:
    """``df``'s rows, computed now and held (memory, then disk) with no lineage to the tables
    they came from, until ``drop``: ``detached`` for rows whose owner outlives a block.

    ``serialized``: held as bytes rather than as row objects (PySpark's ``MEMORY_AND_DISK``,
    which is not deserialized), for rows a process keeps from one batch to the next and reads
    once in it (the group progress store's rows): at 10k x 10k, 500,000 rows took 265 MB of the
    driver's heap as objects."""
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK if serialized else None)


def held(df: DataFrame) -> DataFrame:
    """``df``'s rows, computed by the first Spark job that reads them and held (memory, then
    disk) for the jobs after it, until ``drop``. The rows keep ``df``'s partitioning (a later
    join or aggregate on its keys needs no shuffle), and their lineage is cut: a lost executor
    fails the job that needed its rows rather than computing them again."""
    return df.localCheckpoint(eager=False)


def drop(df: DataFrame) -> None:
    """Free the rows ``held`` (or ``detached``) keeps for ``df``; a no-op when they were never
    computed, or already freed."""
    # The checkpoint is a LogicalRDD over the held RDD: unpersisting that RDD frees its blocks
    # now (left alone, they wait for the JVM's garbage collector).
    df._jdf.queryExecution().analyzed().rdd().unpersist(True)


__all__ = ["cut", "detached", "drop", "held"]
