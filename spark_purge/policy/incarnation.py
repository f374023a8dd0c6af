"""Which append-history rows speak for a partition: those seen on its current topic incarnation.

A topic deleted and recreated under the same name gets a new topic id, and its offsets name
other records. An ``APPEND_HISTORY`` row ("every offset at or above h was appended after t")
seen on the old incarnation proves nothing about the new one: refilled past h between two
batches, the new topic's fresh records would look old enough to cut under ``min_retention``,
and a retiring partition's high watermark would look still since the old topic's time.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def same_incarnation(history: DataFrame, partitions: DataFrame) -> DataFrame:
    """The ``APPEND_HISTORY`` rows seen on each partition's current topic incarnation, with
    ``partitions``' other columns beside them: a row's ``topic_id`` equals the partition's
    (``partitions`` has ``topic``, ``partition`` and ``topic_id``; null equals null only, so a row
    written before ids were kept, or without one, proves nothing about a topic whose id is known).
    """
    ids = partitions.withColumnRenamed("topic_id", "p_topic_id")
    same = F.col("topic_id").eqNullSafe(F.col("p_topic_id"))
    return history.join(ids, ["topic", "partition"]).where(same).drop("p_topic_id")


__all__ = ["same_incarnation"]
