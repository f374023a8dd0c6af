"""A DataFrame's rows cut from their lineage for one use, then dropped.

Spark re-plans every cached DataFrame that reads a table as soon as that table is written
(``CacheManager`` refreshes them by path). A Delta table then computes its new version's
snapshot for the plan at once: about four Spark jobs on every commit, for a cache that is about
to be dropped anyway. So rows computed from a table that are then written back to it (the group
progress store's changed keys) are cut from their lineage first (``localCheckpoint``), the
caches that read the table are released, and the write runs from the cut rows.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame


@contextmanager
def detached(df: DataFrame) -> Iterator[DataFrame]:
    """``df``'s rows, computed now and held by Spark (memory, then disk) with no lineage to the
    tables they came from; the held blocks are freed when the block ends."""
    cut = df.localCheckpoint(eager=True)
    try:
        yield cut
    finally:
        # The checkpoint is a LogicalRDD over the held RDD: unpersisting that RDD frees its
        # blocks now (left alone, they wait for the JVM's garbage collector).
        cut._jdf.queryExecution().analyzed().rdd().unpersist(True)


__all__ = ["detached"]
