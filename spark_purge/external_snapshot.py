"""External consumers in the snapshot: the configured ``external_consumers`` as group rows.

Kafka knows nothing of a Spark Structured Streaming query's position (it lives in the query's
checkpoint) or of a Flink job's (its state), so the snapshot the source reads never has them.
Before each batch is planned, the driver reads them (``spark_purge.external``, through Hadoop's
FileSystem) and adds them to the snapshot as ``GROUP_OFFSETS``-shaped rows, one per snapshot
partition of the topics each consumer covers:

- ``spark_checkpoint``: ``committed_offset`` = the query's position on that partition, or -1
  ("needs this partition, no position": a missing commit) where the checkpoint has none (a
  partition added after the query started);
- ``static_hold``: the configured offset on each held partition (the lowest, if two holds of
  one consumer name the same partition).

``group_id`` is the configured name, ``group_type`` the kind; ``group_state`` and
``member_count`` are null. A checkpoint that cannot be read (``CheckpointError``, or any storage error) puts the
consumer in the snapshot's ``unreadable_groups`` with error ``CHECKPOINT_UNREADABLE: <path>:
<reason>`` *and* gives it -1 rows on its topics' partitions, so the policy knows which topics it
blocks. Everything here is O(partitions): built in Python, joined onto the snapshot as a small
broadcast DataFrame.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from spark_purge.config import ExternalConsumer
from spark_purge.errors import CheckpointError
from spark_purge.external import read_checkpoint_position
from spark_purge.fs import Files
from spark_purge.schemas import GROUP_COMMIT, SNAPSHOT, UNREADABLE_GROUP

CHECKPOINT_UNREADABLE = "CHECKPOINT_UNREADABLE"
NO_POSITION = -1  # the consumer needs the partition but has no position on it

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ExternalPosition:
    """One external consumer's position on one partition (a ``GROUP_OFFSETS`` row's essentials)."""

    group_id: str
    group_type: str
    topic: str
    partition: int
    committed_offset: int
    commit_metadata: str | None = None


@dataclass(frozen=True)
class ExternalPositions:
    """Every configured external consumer's rows for a snapshot, and those that were unreadable
    (name -> error, as ``UNREADABLE_GROUP.error``)."""

    rows: tuple[ExternalPosition, ...]
    unreadable: Mapping[str, str]


def external_positions(
    consumers: Sequence[ExternalConsumer], partitions: Iterable[TopicPartition], files: Files
) -> ExternalPositions:
    """The external consumers' rows for the snapshot ``partitions`` (pure apart from ``files``).

    A checkpoint is read only when the consumer covers some snapshot partition.
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    rows: list[ExternalPosition] = []
    unreadable: dict[str, str] = {}
    for consumer in consumers:
        topics = sorted(t for t in by_topic if consumer.covers(t))
        if not topics:
            continue
        if consumer.spark_checkpoint is not None:
            location = consumer.spark_checkpoint
            try:
                position = read_checkpoint_position(files, location)
                offsets, note = dict(position.offsets), f"checkpoint {location} batch {position.batch_id}"
            except CheckpointError as err:
                unreadable[consumer.name] = f"{CHECKPOINT_UNREADABLE}: {err}"
                offsets, note = {}, None
            except Exception as err:  # storage errors (access denied, no FileSystem for a scheme)
                reason = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
                unreadable[consumer.name] = f"{CHECKPOINT_UNREADABLE}: {location}: {reason}"
                offsets, note = {}, None
            for topic in topics:
                for p in sorted(by_topic[topic]):
                    rows.append(
                        ExternalPosition(consumer.name, consumer.kind, topic, p, offsets.get((topic, p), NO_POSITION), note)
                    )
        else:
            for topic in topics:
                for p in sorted(by_topic[topic]):
                    held = [h.offset for h in consumer.hold if h.holds(topic, p)]
                    if held:
                        rows.append(ExternalPosition(consumer.name, consumer.kind, topic, p, min(held), "static hold"))
    return ExternalPositions(tuple(rows), unreadable)


_EXTRA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("_external", ArrayType(GROUP_COMMIT, False), False),
    ]
)


def with_external_consumers(snapshot: DataFrame, consumers: Sequence[ExternalConsumer], files: Files) -> DataFrame:
    """``snapshot`` (``SNAPSHOT`` rows) with the external consumers' rows added to each
    partition's ``groups`` and the unreadable ones to ``unreadable_groups``. The same DataFrame
    when no consumer is configured or none covers a snapshot partition."""
    if not consumers:
        return snapshot
    parts = [(r["topic"], r["partition"]) for r in snapshot.select("topic", "partition").collect()]
    found = external_positions(consumers, parts, files)
    if not found.rows and not found.unreadable:
        return snapshot
    per_partition: dict[TopicPartition, list[tuple[object, ...]]] = {}
    for row in found.rows:
        per_partition.setdefault((row.topic, row.partition), []).append(
            (row.group_id, None, row.group_type, None, row.committed_offset, row.commit_metadata, None, None)
        )
    spark = snapshot.sparkSession
    extra = spark.createDataFrame([(t, p, commits) for (t, p), commits in sorted(per_partition.items())], _EXTRA)
    joined = snapshot.join(F.broadcast(extra), ["topic", "partition"], "left")
    groups = F.concat(F.col("groups"), F.coalesce(F.col("_external"), F.array().cast(ArrayType(GROUP_COMMIT, False))))
    unreadable = F.col("unreadable_groups")
    if found.unreadable:
        added = [
            F.struct(F.lit(name).alias("group_id"), F.lit(error).alias("error"))
            for name, error in sorted(found.unreadable.items())
        ]
        unreadable = F.concat(unreadable, F.array(*added).cast(ArrayType(UNREADABLE_GROUP, False)))
    columns = {"groups": groups.alias("groups"), "unreadable_groups": unreadable.alias("unreadable_groups")}
    return joined.select(*[columns.get(name, F.col(name)) for name in SNAPSHOT.fieldNames()])


__all__ = [
    "CHECKPOINT_UNREADABLE",
    "NO_POSITION",
    "ExternalPosition",
    "ExternalPositions",
    "external_positions",
    "with_external_consumers",
]
