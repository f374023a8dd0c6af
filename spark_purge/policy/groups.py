"""Consumer-group facts per selected partition: which required groups lack a commit, which are
stale, and the lowest commit that counts (see the policy package docstring for staleness)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_purge.policy.reuse import reused
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES, VANISHED_STATE


def no_members(state: Column, kind: Column, members: Column) -> Column:
    """True only when the group surely has no members (KIP-848 'Dead' alone does not count; a
    vanished group — one Kafka forgot — has none). External consumers never go stale."""
    state_l, kind_l = F.lower(state), F.lower(kind)
    classic_empty = (kind_l == "classic") & ((state_l == "dead") | (members == 0))
    gone = (state_l == "empty") | (state_l == VANISHED_STATE.lower()) | classic_empty
    return F.coalesce(gone & ~F.coalesce(kind_l.isin(*EXTERNAL_CONSUMER_TYPES), F.lit(False)), F.lit(False))


def group_status(selected: DataFrame, groups: DataFrame, staleness: DataFrame | None) -> DataFrame:
    """Per selected partition: missing groups, stale groups, the lowest counted commit.

    ``selected`` has the partition keys, ``high_watermark`` plus ``TOPIC_RULES`` columns. Output columns:
    ``missing`` (and ``missing_typed``: structs group_id, group_type), ``missing_external``, ``stale``,
    ``gmin`` (struct offset, stale, group_id, group_type, vanished),
    ``n_commits``, and the lineage faults of required commits (null: none), lowest group first:
    ``beyond`` (struct group_id, offset: a Kafka group's commit above the high watermark) and
    ``diverged`` (struct group_id, offset, epoch, epoch_end: the log's end offset of the commit's
    leader epoch is below the commit, KIP-320). ``staleness``: per group ``stale_candidate`` and
    ``last_progress`` (``positions.Positions.staleness``; None: no progress known, nobody is
    stale). A row with ``committed_offset`` -1 (members hold the partition, no position)
    is no commit: the group is missing there.
    """
    # Every group row, its offset null when it is no commit (-1): a missing group keeps its type.
    commits = groups.select(
        "snapshot_id", "topic", "partition", "group_id",
        F.when(F.col("committed_offset") >= 0, F.col("committed_offset")).alias("committed_offset"), "group_type",
        F.coalesce(F.lower(F.col("group_state")) == VANISHED_STATE.lower(), F.lit(False)).alias("vanished"),
        "committed_leader_epoch", "epoch_end_offset",
    )
    keys = ["snapshot_id", "topic", "partition"]
    listed = selected.select(
        *keys, "ignore_stale", "stale_before", "high_watermark", F.explode("required").alias("group_id"), F.lit(False).alias("external")
    )
    # External consumers are required on exactly the partitions they have a row on (a static hold
    # on partition 0 says nothing of partition 1), whatever the rule lists or discovers.
    outside = (
        groups.where(F.col("group_type").isin(*EXTERNAL_CONSUMER_TYPES))
        .select(*keys, "group_id")
        .join(selected.select(*keys, "ignore_stale", "stale_before", "high_watermark"), keys)
        .select(*keys, "ignore_stale", "stale_before", "high_watermark", "group_id", F.lit(True).alias("external"))
    )
    required = listed.unionByName(outside).dropDuplicates([*keys, "group_id"])
    rows = required.join(commits, [*keys, "group_id"], "left")
    if staleness is None:
        is_stale = F.lit(False)  # unknown progress: nobody is stale
    else:
        # One row per group: broadcast, so the O(commits) rows are not shuffled by group.
        rows = rows.join(F.broadcast(staleness), "group_id", "left")
        is_stale = F.coalesce(
            F.col("stale_candidate") & (F.col("last_progress") < F.col("stale_before")), F.lit(False)
        )
    rows = rows.withColumn("is_stale", is_stale)
    return rows.groupBy("snapshot_id", "topic", "partition").agg(*_status_aggregates())


@reused
def _status_aggregates() -> list[Column]:
    """``group_status``'s per-partition aggregates over its rows (``is_stale`` set)."""
    counted = F.col("committed_offset").isNotNull() & ~(F.col("is_stale") & F.col("ignore_stale"))
    return [
        F.array_sort(F.collect_list(F.when(F.col("committed_offset").isNull(), F.col("group_id")))).alias("missing"),
        # The same, with each group's type (null: no row at all), in the same order.
        F.array_sort(
            F.collect_list(
                F.when(
                    F.col("committed_offset").isNull(),
                    F.struct(F.col("group_id").alias("group_id"), F.col("group_type").alias("group_type")),
                )
            )
        ).alias("missing_typed"),
        # An external consumer without a position on a partition it reads blocks it, whatever
        # on_missing_commit says (it was configured because it needs the topic).
        F.array_sort(
            F.collect_list(F.when(F.col("committed_offset").isNull() & F.col("external"), F.col("group_id")))
        ).alias("missing_external"),
        F.array_sort(F.collect_list(F.when(F.col("is_stale"), F.col("group_id")))).alias("stale"),
        F.min(
            F.when(
                counted,
                F.struct(
                    F.col("committed_offset").alias("offset"),
                    F.col("is_stale").cast("int").alias("stale"),
                    F.col("group_id").alias("group_id"),
                    F.col("group_type").alias("group_type"),
                    F.col("vanished").alias("vanished"),
                ),
            )
        ).alias("gmin"),
        F.count("committed_offset").alias("n_commits"),
        # A Kafka commit is read before the high watermark (``kafka.snapshot``), so above it means
        # the log lost the history the group read (topic recreated, unclean truncation). External
        # positions are read after the snapshot, so a busy one may legitimately be ahead of it.
        F.min(
            F.when(
                ~F.col("external") & (F.col("committed_offset") > F.col("high_watermark")),
                F.struct(F.col("group_id").alias("group_id"), F.col("committed_offset").alias("offset")),
            )
        ).alias("beyond"),
        F.min(
            F.when(
                F.col("epoch_end_offset") < F.col("committed_offset"),
                F.struct(
                    F.col("group_id").alias("group_id"),
                    F.col("committed_offset").alias("offset"),
                    F.col("committed_leader_epoch").alias("epoch"),
                    F.col("epoch_end_offset").alias("epoch_end"),
                ),
            )
        ).alias("diverged"),
    ]
