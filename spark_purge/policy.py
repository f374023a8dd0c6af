"""The purge policy: which offsets are safe to delete, as pure ``DataFrame -> DataFrame`` logic.

No Kafka, no Delta, no clock: ``now`` is passed in. The main entry point is ``compute_plan``;
its output has exactly the schema ``schemas.PLAN``, one row per partition selected by a rule.

cutoff(p) = min(consumed(p), time floor(p), high watermark, last stable offset), where
consumed(p) is the lowest commit over the topic's required groups.

Inputs the data source must provide (the pipeline asks for them up front):

- ``time_floor_requests(config, now)``: per rule with ``min_retention``, the topic regex and the
  floor time ``now - min_retention``. The snapshot's ``time_floor_time``/``time_floor_offset``
  answer it (offset of the first record at/after the floor time; the high watermark when every
  record is older). A partition whose floor is needed but null, or was looked up for a *later*
  time than required, is not purged (binding ``time_floor``).
- ``timestamp_lookups(config)``: the ``@timestamp`` manual entries as (topic, partition or None
  for every partition, timestamp). The pipeline answers them with ListOffsets by timestamp and
  passes a ``manual_offsets`` DataFrame of schema ``MANUAL_OFFSETS`` (topic, partition,
  timestamp, offset: first record at/after timestamp, the high watermark if none). A missing
  answer blocks that partition (binding ``manual``, not actionable).

Decisions (binding_constraint, first match wins):

1. ``internal`` (internal flag or a ``__`` name), ``protected``, ``compacted`` (cleanup.policy
   set and lacking ``delete``; unknown policy proceeds, the broker would refuse anyway): no cutoff,
   even for forced manual entries.
2. ``manual`` when a manual ``@timestamp`` entry has no looked-up offset.
3. ``group_unreadable``: the snapshot could not read the commits of a group the topic may need
   (a listed required group; with discovery, any group not excluded, since its commits — on
   any topic — are unknown). Whatever ``on_missing_commit`` says: unknown is not "none".
   ``missing_commit``: a required group has no commit on the partition and the rule blocks on
   that, or *no* required group has a commit at all (always blocks, whatever the rule says).
4. ``time_floor``: the rule needs a floor and the snapshot has none usable ("floor unknown").
5. Otherwise the bound itself. Ties prefer ``group``/``stale_group``, then ``time_floor``, then
   ``high_watermark``, then ``last_stable_offset`` (so LSO binds only while a transaction keeps it
   below the high watermark). Among groups: lowest offset, an active group before a stale one,
   then group id. A manual offset binds (``manual``) when it is <= the safe cutoff.
   Then: cutoff <= log start -> ``nothing_to_do`` (but a binding ``stale_group`` keeps its name);
   cutoff - log start < min_step -> ``below_min_step`` (manual entries skip min_step);
   else actionable.

Stale groups: no members (state ``Empty``; or a *classic* group that is ``Dead`` or has 0 members
— KIP-848 ``consumer`` groups show as Dead with no members to the classic API, so that alone never
counts) AND known progress on every partition it commits to (``progress`` row whose offset equals
the current commit) whose latest ``last_progress_time`` is older than the rule's ``stale_after``.
Unknown progress means not stale. A stale group with ``on_stale_group: block`` still holds the
cutoff at its commit (binding ``stale_group``); with ``ignore`` it is left out of the minimum.
Either way it is listed in ``stale_groups``.

Manual entries: cutoff = min(manual, safe cutoff); with ``force``, min(manual, high watermark)
and no group, floor or LSO checks (still never on internal, protected or compacted topics).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_purge._time import as_utc, format_duration
from spark_purge.config import END, PurgeConfig, TopicRule
from spark_purge.schemas import GROUP_OFFSETS, PARTITION_STATE, PLAN

# Answers to timestamp_lookups(config): first offset at/after `timestamp` (high watermark if none).
MANUAL_OFFSETS = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("offset", LongType(), True),
    ]
)

# One row per selected topic: the rule's parameters, resolved on the driver with Python regexes.
TOPIC_RULES = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("rule", StringType(), True),
        StructField("protected", BooleanType(), False),
        StructField("required", ArrayType(StringType(), False), False),
        StructField("block_missing", BooleanType(), False),
        StructField("ignore_stale", BooleanType(), False),
        StructField("stale_before", TimestampType(), False),
        StructField("stale_after", StringType(), False),
        StructField("min_step", LongType(), False),
        StructField("floor_time", TimestampType(), True),  # null: the rule needs no time floor
        # Unreadable groups this topic may need: listed ones, or (discovery) any not excluded.
        StructField("unreadable", ArrayType(StringType(), False), False),
        StructField("unreadable_note", StringType(), True),  # "g (ERROR), ..." for the detail
    ]
)

_MANUAL_RULES = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("m_partition", IntegerType(), True),  # null: every partition
        StructField("m_offset", LongType(), True),  # END (-1) means the high watermark
        StructField("m_timestamp", TimestampType(), True),
        StructField("m_force", BooleanType(), False),
    ]
)


@dataclass(frozen=True)
class TimeFloorRequest:
    """Ask the source for the offset of the first record at/after ``floor_time`` on these topics."""

    rule: str
    topics: str  # regex, full match (Python syntax; the source matches topic names in Python)
    floor_time: datetime


@dataclass(frozen=True)
class TimestampLookup:
    """Ask the source for the first offset at/after ``timestamp`` (``partition`` None: all)."""

    topic: str
    partition: int | None
    timestamp: datetime


def time_floor_requests(config: PurgeConfig, now: datetime) -> list[TimeFloorRequest]:
    """The time floors the snapshot must carry: one per rule with a ``min_retention``."""
    now = as_utc(now)
    requests = [
        TimeFloorRequest(rule.name, rule.topics, now - timedelta(milliseconds=rule.min_retention))
        for rule in config.rules
        if rule.min_retention > 0
    ]
    if config.defaults.min_retention > 0:
        floor = now - timedelta(milliseconds=config.defaults.min_retention)
        # Manual-only topics get a synthetic rule from the defaults, so they need a floor too.
        for topic in sorted({e.topic for e in config.manual}):
            if not config.matching_rules(topic):
                requests.append(TimeFloorRequest("manual", re.escape(topic), floor))
    return requests


def time_floor_for(config: PurgeConfig, topic: str, now: datetime) -> datetime | None:
    """The floor time for one topic, or None when its rule needs none (or no rule selects it)."""
    rule = config.rule_for(topic)
    if rule is None or rule.min_retention == 0:
        return None
    return as_utc(now) - timedelta(milliseconds=rule.min_retention)


def timestamp_lookups(config: PurgeConfig) -> list[TimestampLookup]:
    """The ``@timestamp`` manual entries the source must resolve into ``MANUAL_OFFSETS`` rows."""
    return [
        TimestampLookup(e.topic, e.partition, e.timestamp) for e in config.manual if e.timestamp is not None
    ]


def unreadable_groups_of(snapshot_row: Row) -> dict[str, str]:
    """group -> error for the groups a snapshot could not read, from any one of its ``SNAPSHOT``
    rows (every row of a snapshot carries the same list)."""
    return {g["group_id"]: g["error"] for g in snapshot_row["unreadable_groups"]}


def split_snapshot(snapshot: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``SNAPSHOT`` rows -> (``PARTITION_STATE``, ``GROUP_OFFSETS``) DataFrames."""
    partitions = snapshot.select(*PARTITION_STATE.fieldNames())
    exploded = snapshot.select("snapshot_id", "snapshot_time", "topic", "partition", F.explode("groups").alias("g"))
    groups = exploded.select(
        *[
            F.col(f"g.{name}").alias(name) if name not in ("snapshot_id", "snapshot_time", "topic", "partition") else F.col(name)
            for name in GROUP_OFFSETS.fieldNames()
        ]
    )
    return partitions, groups


def resolve_topics(
    topics: Iterable[str],
    discovered: Mapping[str, Iterable[str]],
    config: PurgeConfig,
    now: datetime,
    unreadable: Mapping[str, str] | None = None,
) -> list[tuple]:
    """``TOPIC_RULES`` rows for the topics a rule selects (pure Python, Python regex semantics).

    ``discovered`` maps a topic to the groups with commits on it; ``unreadable`` maps groups whose
    commits the snapshot could not read to the error. Raises ``ConfigError`` when a topic matches
    more than one rule.
    """
    now = as_utc(now)
    unreadable = unreadable or {}
    rows = []
    for topic in sorted(set(topics)):
        rule = config.rule_for(topic)
        if rule is None:
            continue
        blind = unreadable_required(rule, unreadable, config)
        rows.append(
            (
                topic,
                rule.name,
                config.is_protected(topic),
                list(required_groups(rule, discovered.get(topic, ()), config)),
                rule.on_missing_commit == "block",
                rule.on_stale_group == "ignore",
                now - timedelta(milliseconds=rule.stale_after),
                format_duration(rule.stale_after),
                rule.min_step,
                now - timedelta(milliseconds=rule.min_retention) if rule.min_retention > 0 else None,
                list(blind),
                ", ".join(f"{g} ({unreadable[g]})" for g in blind) or None,
            )
        )
    return rows


def unreadable_required(rule: TopicRule, unreadable: Iterable[str], config: PurgeConfig) -> tuple[str, ...]:
    """The unreadable groups a rule's topic may need: listed required groups among them; with
    discovery every one not excluded — its commits are unknown, so it may have some on the topic."""
    found = set(unreadable)
    if rule.required_groups is not None:
        return tuple(g for g in rule.required_groups if g in found)
    return tuple(sorted(g for g in found if not config.group_excluded(rule, g)))


def required_groups(rule: TopicRule, discovered: Iterable[str], config: PurgeConfig) -> tuple[str, ...]:
    """Listed groups as given; otherwise discovered groups minus the exclusion regexes, sorted."""
    if rule.required_groups is not None:
        return rule.required_groups
    return tuple(sorted({g for g in discovered if not config.group_excluded(rule, g)}))


def _no_members(state: Column, kind: Column, members: Column) -> Column:
    """True only when the group surely has no members (KIP-848 'Dead' alone does not count)."""
    state_l, kind_l = F.lower(state), F.lower(kind)
    classic_empty = (kind_l == "classic") & ((state_l == "dead") | (members == 0))
    return F.coalesce((state_l == "empty") | classic_empty, F.lit(False))


def group_staleness(groups: DataFrame, progress: DataFrame | None) -> DataFrame:
    """Per group: ``stale_candidate`` (no members, progress known everywhere) and ``last_progress``.

    A candidate is stale for a rule once ``last_progress`` is older than the rule's stale_after.
    """
    commits = groups.where(F.col("committed_offset") >= 0)
    if progress is None:
        return commits.groupBy("group_id").agg(
            F.lit(False).alias("stale_candidate"), F.lit(None).cast(TimestampType()).alias("last_progress")
        )
    # GROUP_PROGRESS has one row per key; duplicates could only make a group look less stale.
    latest = progress.select(
        "group_id", "topic", "partition", F.col("committed_offset").alias("p_offset"), F.col("last_progress_time").alias("p_time")
    )
    joined = commits.join(latest, ["group_id", "topic", "partition"], "left")
    known = F.coalesce(F.col("p_offset") == F.col("committed_offset"), F.lit(False))
    return joined.groupBy("group_id").agg(
        (
            F.bool_and(_no_members(F.col("group_state"), F.col("group_type"), F.col("member_count")))
            & F.bool_and(known)
        ).alias("stale_candidate"),
        F.max("p_time").alias("last_progress"),
    )


def group_status(selected: DataFrame, groups: DataFrame, progress: DataFrame | None) -> DataFrame:
    """Per selected partition: missing groups, stale groups, the lowest counted commit.

    ``selected`` has the partition keys plus ``TOPIC_RULES`` columns. Output columns:
    ``missing``, ``stale``, ``gmin`` (struct offset, stale, group_id), ``n_commits``.
    """
    commits = groups.where(F.col("committed_offset") >= 0).select(
        "snapshot_id", "topic", "partition", "group_id", "committed_offset"
    )
    required = selected.select(
        "snapshot_id", "topic", "partition", "ignore_stale", "stale_before", F.explode("required").alias("group_id")
    )
    rows = required.join(commits, ["snapshot_id", "topic", "partition", "group_id"], "left")
    if progress is None:
        is_stale = F.lit(False)  # unknown progress: nobody is stale
    else:
        rows = rows.join(group_staleness(groups, progress), "group_id", "left")
        is_stale = F.coalesce(
            F.col("stale_candidate") & (F.col("last_progress") < F.col("stale_before")), F.lit(False)
        )
    rows = rows.withColumn("is_stale", is_stale)
    counted = F.col("committed_offset").isNotNull() & ~(F.col("is_stale") & F.col("ignore_stale"))
    return rows.groupBy("snapshot_id", "topic", "partition").agg(
        F.array_sort(F.collect_list(F.when(F.col("committed_offset").isNull(), F.col("group_id")))).alias("missing"),
        F.array_sort(F.collect_list(F.when(F.col("is_stale"), F.col("group_id")))).alias("stale"),
        F.min(
            F.when(
                counted,
                F.struct(
                    F.col("committed_offset").alias("offset"),
                    F.col("is_stale").cast("int").alias("stale"),
                    F.col("group_id").alias("group_id"),
                ),
            )
        ).alias("gmin"),
        F.count("committed_offset").alias("n_commits"),
    )


def _manual_table(spark: SparkSession, config: PurgeConfig) -> DataFrame:
    rows = [(e.topic, e.partition, e.offset, e.timestamp, e.force) for e in config.manual]
    return spark.createDataFrame(rows, _MANUAL_RULES)


def _with_manual(df: DataFrame, config: PurgeConfig, manual_offsets: DataFrame | None) -> DataFrame:
    """Adds ``m_target`` (null: no entry), ``m_force``, ``m_kind``, ``m_unknown``."""
    if not config.manual:
        return df.select(
            "*",
            F.lit(None).cast(LongType()).alias("m_target"),
            F.lit(False).alias("m_force"),
            F.lit(None).cast(StringType()).alias("m_kind"),
            F.lit(False).alias("m_unknown"),
        )
    table = _manual_table(df.sparkSession, config)
    specific = table.where(F.col("m_partition").isNotNull()).select(
        "topic", F.col("m_partition").alias("partition"), *[F.col(c).alias(f"s_{c}") for c in ("m_offset", "m_timestamp", "m_force")]
    )
    generic = table.where(F.col("m_partition").isNull()).select(
        "topic", *[F.col(c).alias(f"a_{c}") for c in ("m_offset", "m_timestamp", "m_force")]
    )
    df = df.join(specific, ["topic", "partition"], "left").join(generic, "topic", "left")
    has_specific = F.col("s_m_force").isNotNull()
    pick = lambda c: F.when(has_specific, F.col(f"s_{c}")).otherwise(F.col(f"a_{c}"))  # noqa: E731
    df = df.select("*", pick("m_offset").alias("m_offset"), pick("m_timestamp").alias("m_timestamp"), pick("m_force").alias("m_force_raw"))
    if manual_offsets is not None:
        answers = manual_offsets.groupBy("topic", "partition", F.col("timestamp").alias("m_timestamp")).agg(
            F.min("offset").alias("m_ts_offset")  # several answers: the lowest is the safe one
        )
        df = df.join(answers, ["topic", "partition", "m_timestamp"], "left")
    else:
        df = df.withColumn("m_ts_offset", F.lit(None).cast(LongType()))
    has_entry = F.col("m_force_raw").isNotNull()
    target = (
        F.when(F.col("m_offset") == END, F.col("high_watermark"))
        .when(F.col("m_offset").isNotNull(), F.col("m_offset"))
        .otherwise(F.col("m_ts_offset"))
    )
    kind = (
        F.when(~has_entry, F.lit(None))
        .when(F.col("m_offset") == END, F.lit("end"))
        .when(F.col("m_offset").isNotNull(), F.format_string("offset %d", F.col("m_offset")))
        .otherwise(F.concat(F.lit("@"), F.date_format("m_timestamp", "yyyy-MM-dd'T'HH:mm:ss'Z'")))
    )
    drop = [c for c in df.columns if c.startswith(("s_m_", "a_m_"))] + ["m_offset", "m_timestamp", "m_ts_offset", "m_force_raw"]
    return df.select(
        "*",
        F.when(has_entry, target).alias("m_target"),
        F.coalesce(F.col("m_force_raw"), F.lit(False)).alias("m_force"),
        kind.alias("m_kind"),
        (has_entry & target.isNull()).alias("m_unknown"),
    ).drop(*drop)


def _widen(df: DataFrame, schema: StructType) -> DataFrame:
    """Select ``schema``'s columns in order, cast, and make nullable what the schema allows null."""
    cols = []
    for f in schema.fields:
        col = F.col(f.name).cast(f.dataType)
        if f.nullable and not df.schema[f.name].nullable:
            # A CASE with a NULL branch is nullable; the analyzer folds a constant condition.
            col = F.when(col.isNull(), F.lit(None)).otherwise(col)
        cols.append(col.alias(f.name))
    return df.select(*cols)


def compute_plan(
    partitions: DataFrame,
    groups: DataFrame,
    config: PurgeConfig,
    now: datetime,
    progress: DataFrame | None = None,
    manual_offsets: DataFrame | None = None,
    unreadable_groups: Mapping[str, str] | None = None,
) -> DataFrame:
    """The purge plan (schema ``PLAN``) for a snapshot: see the module docstring for the rules.

    ``partitions``: ``PARTITION_STATE``; ``groups``: ``GROUP_OFFSETS`` (a committed_offset < 0
    means no commit); ``progress``: ``GROUP_PROGRESS`` or None (then no group is stale);
    ``manual_offsets``: ``MANUAL_OFFSETS`` answering ``timestamp_lookups(config)``;
    ``unreadable_groups``: group -> error for groups whose commits the snapshot could not read
    (``unreadable_groups_of(row)``).

    Collects the distinct topics and their committing groups to the driver (small) to resolve
    rules with Python regexes; raises ``ConfigError`` when a topic matches two rules.
    """
    spark = partitions.sparkSession
    now = as_utc(now)
    # One small driver round trip: every topic, and every group committing on it.
    pairs = (
        partitions.select("topic", F.lit(None).cast(StringType()).alias("group_id"))
        .unionByName(groups.where(F.col("committed_offset") >= 0).select("topic", "group_id"))
        .distinct()
        .collect()
    )
    topics = {row.topic for row in pairs if row.group_id is None}
    discovered: dict[str, list[str]] = {}
    for row in pairs:
        if row.group_id is not None:
            discovered.setdefault(row.topic, []).append(row.group_id)
    selected_topics = [t for t in topics if config.rule_for(t) is not None]
    topic_rules = spark.createDataFrame(
        resolve_topics(selected_topics, discovered, config, now, unreadable_groups), TOPIC_RULES
    )

    base = partitions.join(F.broadcast(topic_rules), "topic", "inner")
    status = group_status(base, groups, progress)
    df = base.join(status, ["snapshot_id", "topic", "partition"], "left")
    df = _with_manual(df, config, manual_offsets)

    lso, hw, lst = F.col("log_start_offset"), F.col("high_watermark"), F.col("last_stable_offset")
    needs_floor = F.col("floor_time").isNotNull()
    floor_ok = (
        F.col("time_floor_offset").isNotNull()
        & F.col("time_floor_time").isNotNull()
        & (F.col("time_floor_time") <= F.col("floor_time"))
    )
    group_bound = F.col("gmin.offset")
    floor_bound = F.when(needs_floor, F.col("time_floor_offset"))
    safe = F.least(group_bound, floor_bound, hw, lst)
    safe_binding = (
        F.when(group_bound == safe, F.when(F.col("gmin.stale") == 1, F.lit("stale_group")).otherwise(F.lit("group")))
        .when(floor_bound == safe, F.lit("time_floor"))
        .when(hw == safe, F.lit("high_watermark"))
        .otherwise(F.lit("last_stable_offset"))
    )
    manual = F.col("m_target").isNotNull()
    forced = manual & F.col("m_force")
    cutoff = (
        F.when(forced, F.least(F.col("m_target"), hw))
        .when(manual, F.least(F.col("m_target"), safe))
        .otherwise(safe)
    )
    bound = (
        F.when(forced, F.when(F.col("m_target") <= hw, F.lit("manual")).otherwise(F.lit("high_watermark")))
        .when(manual & (F.col("m_target") <= safe), F.lit("manual"))
        .otherwise(safe_binding)
    )
    df = df.select("*", cutoff.alias("c_cutoff"), bound.alias("c_bound"))

    missing = F.coalesce(F.col("missing"), F.array().cast("array<string>"))
    n_commits = F.coalesce(F.col("n_commits"), F.lit(0))
    is_internal = F.col("internal") | F.col("topic").startswith("__")
    policies = F.split(F.regexp_replace(F.lower(F.col("cleanup_policy")), r"\s", ""), ",")
    is_compacted = F.col("cleanup_policy").isNotNull() & ~F.array_contains(policies, "delete")
    blocked_missing = ~forced & (((F.size(missing) > 0) & F.col("block_missing")) | (n_commits == 0))
    blocked_unreadable = ~forced & (F.size("unreadable") > 0)
    floor_unknown = ~forced & needs_floor & ~floor_ok
    step = F.col("c_cutoff") - lso
    c_bound = F.col("c_bound")

    blockers = [
        (is_internal, "internal"),
        (F.col("protected"), "protected"),
        (is_compacted, "compacted"),
        (F.col("m_unknown"), "manual"),
        (blocked_unreadable, "group_unreadable"),
        (blocked_missing, "missing_commit"),
        (floor_unknown, "time_floor"),
    ]
    blocked = F.lit(False)
    for condition, _ in blockers:
        blocked = blocked | condition
    binding = F.when(blockers[0][0], F.lit(blockers[0][1]))
    for condition, name in blockers[1:]:
        binding = binding.when(condition, F.lit(name))
    binding = (
        binding.when((step <= 0) & (c_bound == "stale_group"), F.lit("stale_group"))
        .when(step <= 0, F.lit("nothing_to_do"))
        .when(~manual & (step < F.col("min_step")), F.lit("below_min_step"))
        .otherwise(c_bound)
    )
    df = df.select("*", blocked.alias("blocked"), binding.alias("binding_constraint"))
    actionable = ~F.col("blocked") & ~F.col("binding_constraint").isin("nothing_to_do", "below_min_step") & (step > 0)
    df = df.select("*", F.coalesce(actionable, F.lit(False)).alias("actionable"))

    first_missing = F.try_element_at(missing, F.lit(1))  # ANSI mode: element_at on [] raises
    blocking_group = (
        F.when(F.col("binding_constraint") == "missing_commit", first_missing)
        .when(F.col("binding_constraint") == "group_unreadable", F.try_element_at(F.col("unreadable"), F.lit(1)))
        .when(~F.col("blocked") & c_bound.isin("group", "stale_group"), F.col("gmin.group_id"))
    )
    held = hw - F.col("c_cutoff")
    why_bound = (
        F.when(c_bound == "group", F.format_string("group %s at %d", F.col("gmin.group_id"), F.col("c_cutoff")))
        .when(
            c_bound == "stale_group",
            F.format_string(
                "stale group %s (no members, no progress for over %s) at %d", F.col("gmin.group_id"), F.col("stale_after"), F.col("c_cutoff")
            ),
        )
        .when(
            c_bound == "time_floor",
            F.format_string("time floor (records since %s) at %d", F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss"), F.col("c_cutoff")),
        )
        .when(c_bound == "last_stable_offset", F.format_string("open transaction: last stable offset %d", F.col("c_cutoff")))
        .when(c_bound == "high_watermark", F.format_string("high watermark %d", F.col("c_cutoff")))
        .when(
            c_bound == "manual",
            F.format_string("%smanual cutoff %d (%s)", F.when(forced, F.lit("forced ")).otherwise(F.lit("")), F.col("c_cutoff"), F.col("m_kind")),
        )
    )
    stale = F.coalesce(F.col("stale"), F.array().cast("array<string>"))
    ignored_note = F.when(
        (F.size(stale) > 0) & F.col("ignore_stale") & ~F.col("blocked"),
        F.concat(F.lit("; ignoring stale group(s) "), F.array_join(stale, ", ")),
    ).otherwise(F.lit(""))
    bc = F.col("binding_constraint")
    detail = (
        F.when(bc == "internal", F.lit("internal topic: never purged"))
        .when(bc == "protected", F.lit("topic matches protected_topics: never purged"))
        .when(
            bc == "compacted",
            F.format_string("cleanup.policy=%s lacks delete: the broker refuses DeleteRecords", F.col("cleanup_policy")),
        )
        .when((bc == "manual") & F.col("blocked"), F.format_string("manual %s: no offset known for that time", F.col("m_kind")))
        .when(
            bc == "group_unreadable",
            F.format_string(
                "commits of %s could not be read, so what they consumed is unknown: not purged "
                "(grant Describe on the group, wait for its coordinator, or exclude it)",
                F.col("unreadable_note"),
            ),
        )
        .when(
            (bc == "missing_commit") & (n_commits == 0) & (F.size(missing) == 0),
            F.lit("no consumer group has committed on this topic: nothing is known to be consumed"),
        )
        .when(
            bc == "missing_commit",
            F.format_string("required group %s has no commit on this partition", F.array_join(missing, ", ")),
        )
        .when(
            (bc == "time_floor") & F.col("blocked"),
            F.when(
                F.col("time_floor_offset").isNull(),
                F.format_string("time floor unknown (needed for %s): not purged", F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss")),
            ).otherwise(
                F.format_string(
                    "time floor unknown: looked up for %s, need %s or earlier",
                    F.date_format("time_floor_time", "yyyy-MM-dd HH:mm:ss"),
                    F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss"),
                )
            ),
        )
        .when(
            bc == "nothing_to_do",
            F.format_string("nothing to delete: %s, log start %d", why_bound, lso),
        )
        .when(
            bc == "stale_group",
            F.format_string("%s, log start %d: set on_stale_group: ignore to skip it", why_bound, lso),
        )
        .when(
            bc == "below_min_step",
            F.format_string("%s: only %d records deletable, min_step %d", why_bound, step, F.col("min_step")),
        )
        .otherwise(F.format_string("%s holds back %d records", why_bound, held))
    )
    records = F.when(F.col("actionable"), F.greatest(step, F.lit(0))).otherwise(F.lit(0))
    out = df.select(
        "snapshot_id",
        "topic",
        "partition",
        "leader",
        "log_start_offset",
        "high_watermark",
        F.when(~F.col("blocked"), F.col("c_cutoff")).alias("cutoff"),
        F.coalesce(records, F.lit(0)).cast(LongType()).alias("records_to_delete"),
        "binding_constraint",
        blocking_group.alias("blocking_group"),
        "rule",
        F.array_compact(stale).alias("stale_groups"),
        "actionable",
        "remote_storage_enable",
        F.concat(detail, ignored_note).alias("detail"),
    )
    return _widen(out, PLAN)


__all__ = [
    "MANUAL_OFFSETS",
    "TOPIC_RULES",
    "TimeFloorRequest",
    "TimestampLookup",
    "compute_plan",
    "group_staleness",
    "group_status",
    "required_groups",
    "resolve_topics",
    "split_snapshot",
    "time_floor_for",
    "time_floor_requests",
    "timestamp_lookups",
    "unreadable_groups_of",
    "unreadable_required",
]
