"""Consumer-group facts per selected partition: which required groups lack a commit, which are
stale, and the lowest commit that counts (see the policy package docstring for staleness)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, StructType

from spark_purge.policy.reuse import reused
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES, GROUP_COMMIT, VANISHED_STATE


def no_members(state: Column, kind: Column, members: Column) -> Column:
    """True only when the group surely has no members (KIP-848 'Dead' alone does not count; a
    vanished group — one Kafka forgot — has none). External consumers never go stale."""
    state_l, kind_l = F.lower(state), F.lower(kind)
    classic_empty = (kind_l == "classic") & ((state_l == "dead") | (members == 0))
    gone = (state_l == "empty") | (state_l == VANISHED_STATE.lower()) | classic_empty
    return F.coalesce(gone & ~F.coalesce(kind_l.isin(*EXTERNAL_CONSUMER_TYPES), F.lit(False)), F.lit(False))


KEYS = ["snapshot_id", "topic", "partition"]
# GROUP_COMMIT with every field nullable: rows nested here (from columns whose nullability
# differs) are cast to it.
NESTED_ROWS = ArrayType(StructType([StructField(f.name, f.dataType, True) for f in GROUP_COMMIT.fields]), True)


def nested_groups(groups: DataFrame) -> DataFrame:
    """``GROUP_OFFSETS`` rows nested by partition: ``KEYS`` and ``groups`` (``GROUP_COMMIT``
    structs, as a ``SNAPSHOT`` row carries them); one shuffle of the rows."""
    entry = F.struct(*[F.col(f.name) for f in GROUP_COMMIT.fields])
    return groups.groupBy(*KEYS).agg(F.collect_list(entry).cast(NESTED_ROWS).alias("groups"))


def group_status(selected: DataFrame, groups: DataFrame | None, staleness: DataFrame | None) -> DataFrame:
    """Per selected partition: missing groups, stale groups, the lowest counted commit.

    ``selected`` has the partition keys, ``high_watermark`` plus ``TOPIC_RULES`` columns and,
    when it has one, the partition's own group rows nested in ``groups`` (``GROUP_COMMIT``, as
    a ``SNAPSHOT`` row carries them). ``groups``: further ``GROUP_OFFSETS`` rows (None: none;
    every row when ``selected`` has no ``groups`` column, and vanished groups' rows beside a
    snapshot's own), nested by partition and joined on.

    Output columns:
    ``missing`` (and ``missing_typed``: structs group_id, group_type), ``missing_external``, ``stale``,
    ``gmin`` (struct offset, stale, group_id, group_type, vanished),
    ``n_commits``, and the lineage faults of required commits (null: none), lowest group first:
    ``beyond`` (struct group_id, offset: a Kafka group's commit above the high watermark) and
    ``diverged`` (struct group_id, offset, epoch, epoch_end: the log's end offset of the commit's
    leader epoch is below the commit, KIP-320). ``staleness``: per group ``stale_candidate`` and
    ``last_progress`` (``positions.Positions.staleness``; None: no progress known, nobody is
    stale). A row with ``committed_offset`` -1 (members hold the partition, no position)
    is no commit: the group is missing there.

    The partition's required consumers are the rule's ``required`` groups plus every external
    consumer with a row on it (a static hold on partition 0 says nothing of partition 1). Each
    row of a required consumer counts once (a group with none counts as one row without a
    commit: missing). The rows never leave their partition's row: they are exploded from it and
    aggregated back, with no join on a group (issue 12; the snapshot is hashed by topic and
    partition, ``pipeline.kept``, so the aggregation needs no shuffle of them).
    """
    columns = [*KEYS, "ignore_stale", "stale_before", "high_watermark"]
    own = "groups" in selected.columns
    parts = selected.select(*columns, "required", *(["groups"] if own else []))
    if groups is not None:
        more = nested_groups(groups).withColumnRenamed("groups", "more")
        # Beside a snapshot's own rows only vanished groups' (few): broadcast, the partitions'
        # rows stay where they are.
        parts = parts.join(F.broadcast(more) if own else more, KEYS, "left")
        rows = F.coalesce(F.col("more"), F.array().cast(NESTED_ROWS))
        if own:  # (concat takes the two element types as one: they differ in nullability only)
            rows = F.concat(F.col("groups"), rows)
    elif own:
        rows = F.col("groups")
    else:
        raise ValueError("group_status needs group rows: a groups column in selected, or a groups DataFrame")
    parts = parts.select(*columns, "required", rows.alias("rows"))
    parts = parts.select(*columns, "rows", *_needed_columns())
    parts = parts.select(*columns, "needed", *_rows_and_unneeded())
    rows_df = parts.select(*columns, "needed", "unneeded", F.explode("rows").alias("g"))
    rows_df = rows_df.where(_is_needed()).select(*columns, *_row_columns())
    if staleness is None:
        is_stale = F.lit(False)  # unknown progress: nobody is stale
    else:
        # One row per group: broadcast, so the O(commits) rows are not shuffled by group.
        rows_df = rows_df.join(F.broadcast(staleness), "group_id", "left")
        is_stale = F.coalesce(
            F.col("stale_candidate") & (F.col("last_progress") < F.col("stale_before")), F.lit(False)
        )
    return rows_df.withColumn("is_stale", is_stale).groupBy(*KEYS).agg(*_status_aggregates())


@reused
def _needed_columns() -> list[Column]:
    """A partition's group names with a row (``names``) and its required consumers
    (``needed``: the rule's plus the external consumers with a row in ``rows``)."""
    rows = F.col("rows")
    # ``rows.group_id`` (an array of the structs' field) is generated code; a ``transform``
    # lambda is interpreted, and in Spark 4.2 an interpreted read of an array element or a
    # struct field looks the session's settings up each time (stop 62's profile).
    external = F.filter(rows, lambda g: is_external(g["group_type"])).getField("group_id")
    return [rows.getField("group_id").alias("names"), F.array_union(F.col("required"), external).alias("needed")]


@reused
def _rows_and_unneeded() -> list[Column]:
    """``rows`` plus one row without a commit for each required consumer without any row (the
    group is missing there), and the groups with a row that are not required (``unneeded``:
    excluded or not listed); both sets by hashing (``array_except``)."""
    names, needed = F.col("names"), F.col("needed")
    absent = F.transform(F.array_except(needed, names), _no_row)
    return [F.concat(F.col("rows"), absent).alias("rows"), F.array_except(names, needed).alias("unneeded")]


def _no_row(group_id: Column) -> Column:
    """A ``GROUP_COMMIT`` for a group without a row: its id, everything else null."""
    return F.struct(*[group_id.alias(f.name) if f.name == "group_id" else F.lit(None).cast(f.dataType).alias(f.name) for f in GROUP_COMMIT.fields])


@reused
def _is_needed() -> Column:
    """Whether an exploded row's group (``g``) is required: looked up in the shorter of
    ``unneeded`` and ``needed`` (a linear search; with discovery and no exclusion ``unneeded``
    is empty, with listed groups ``needed`` is the short list)."""
    group_id, unneeded, needed = F.col("g.group_id"), F.col("unneeded"), F.col("needed")
    return (
        F.when(F.size(unneeded) == 0, F.lit(True))
        .when(F.size(unneeded) < F.size(needed), ~F.array_contains(unneeded, group_id))
        .otherwise(F.array_contains(needed, group_id))
    )


def is_external(group_type: Column) -> Column:
    """Whether a row's ``group_type`` is an external consumer's (false for a null type)."""
    return F.coalesce(group_type.isin(*EXTERNAL_CONSUMER_TYPES), F.lit(False))


@reused
def _row_columns() -> list[Column]:
    """A required consumer's row (``g``): its commit (null: none, -1, or no row at all), type,
    vanished and external flags and lineage facts."""
    g = F.col("g")
    return [
        g["group_id"].alias("group_id"),
        F.when(g["committed_offset"] >= 0, g["committed_offset"]).alias("committed_offset"),
        g["group_type"].alias("group_type"),
        F.coalesce(F.lower(g["group_state"]) == VANISHED_STATE.lower(), F.lit(False)).alias("vanished"),
        g["committed_leader_epoch"].alias("committed_leader_epoch"),
        g["epoch_end_offset"].alias("epoch_end_offset"),
        is_external(g["group_type"]).alias("external"),
    ]


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
