"""``compute_plan``: bounds -> binding constraint -> explanation, each a ``DataFrame -> DataFrame``
step over the selected partitions joined with their rule, group facts and manual entry."""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType, TimestampType

from spark_purge._time import as_utc
from spark_purge.config import END, PurgeConfig
from spark_purge.policy.groups import KEYS, group_status, is_external, with_group_status
from spark_purge.policy.incarnation import same_incarnation
from spark_purge.policy.inputs import TopicRuleRow, group_rows, refuse_name_clashes, resolve_topics, with_groups
from spark_purge.policy.positions import MatchedFacts, Positions
from spark_purge.policy.retirement import with_retirement, with_retirement_facts
from spark_purge.policy.reuse import reused
from spark_purge.schemas import EXTERNAL_CONSUMER_TYPES, MANUAL_RULES, PARTITION_STATE, PLAN, TOPIC_RULES
from spark_purge.snapshot_pack import PACKED_COLUMN

log = logging.getLogger(__name__)


def _manual_table(spark: SparkSession, config: PurgeConfig) -> DataFrame:
    rows = [(e.topic, e.partition, e.offset, e.timestamp, e.force) for e in config.manual]
    return spark.createDataFrame(rows, MANUAL_RULES)


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

    def pick(c: str) -> Column:  # the partition's own entry, else the all-partitions one
        return F.when(has_specific, F.col(f"s_{c}")).otherwise(F.col(f"a_{c}"))

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
    have = df.schema  # one schema round trip, not one per column
    return df.select(*_widened(schema, tuple(f.nullable and not have[f.name].nullable for f in schema.fields)))


@reused
def _widened(schema: StructType, widen: tuple[bool, ...]) -> list[Column]:
    cols = []
    for f, nullable in zip(schema.fields, widen):
        col = F.col(f.name).cast(f.dataType)
        if nullable:
            # A CASE with a NULL branch is nullable; the analyzer folds a constant condition.
            col = F.when(col.isNull(), F.lit(None)).otherwise(col)
        cols.append(col.alias(f.name))
    return cols


def compute_plan(
    partitions: DataFrame,
    groups: DataFrame | None,
    config: PurgeConfig,
    now: datetime,
    progress: DataFrame | None = None,
    manual_offsets: DataFrame | None = None,
    unreadable_groups: Mapping[str, str] | None = None,
    append_history: DataFrame | None = None,
    retirement: RetirementInput | None = None,
    tiering_transitions: Collection[str] = (),
    staleness: DataFrame | pa.Table | None = None,
    discovery: pa.Table | None = None,
    facts: MatchedFacts | None = None,
) -> DataFrame:
    """The purge plan (schema ``PLAN``) for a snapshot: see the module docstring for the rules.

    ``partitions``: ``PARTITION_STATE``, or ``SNAPSHOT`` rows whose ``groups`` column holds
    each partition's group rows (they then stay in their partition's row: ``with_group_status``),
    or ``PACKED_SNAPSHOT`` rows (the group rows packed: unpacked only if the plan reads them);
    ``groups``: ``GROUP_OFFSETS`` rows besides those (every one when ``partitions`` has no
    ``groups`` column; a committed_offset < 0 means no commit; None: none; the planner passes
    a snapshot and its vanished groups' rows); ``progress``: ``GROUP_PROGRESS`` or None (then
    no group is stale);
    ``manual_offsets``: ``MANUAL_OFFSETS`` answering ``timestamp_lookups(config)``;
    ``unreadable_groups``: group -> error for groups whose commits the snapshot could not read
    (``unreadable_groups_of(row)``); ``append_history``: ``APPEND_HISTORY`` rows (see
    ``with_append_floor``; an empty one means no history yet). None means the caller keeps no
    history and the time floor is the timestamp lookup alone (the ``Planner`` always passes one).
    ``retirement``: the registry's current state and ``retirement.delay`` (None: retirement is
    off); retiring partitions are then decided by ``policy.retirement`` after the explanation.
    ``tiering_transitions``: topics whose tiered storage is being disabled (``spark_purge.tiering``,
    state DISABLING): never cut, not even by a forced manual entry (``tiering_transition``).
    ``staleness``: each group's staleness (``positions.Positions.staleness``, or its Arrow table,
    ``Positions.staleness_table``) when the caller has it already (the planner matches the commits with the store once per batch); None:
    computed here from ``groups`` and ``progress``.

    Collects the distinct topics and their committing groups to the driver (small) to resolve
    rules with Python regexes, unless given them (``discovery``: the distinct ``topic``,
    ``group_id``, ``external`` of every group row in ``partitions`` and ``groups`` and a row of
    each topic with no group, as ``positions.NestedPositions.discovery`` gives them); raises
    ``ConfigError`` when a topic matches two rules. ``facts``: the consumer facts a store
    match's task made (``positions.NestedPositions.facts``), taken in place of the facts' own
    task when the rules they were made with are exactly the rules resolved here and no
    ``groups`` join them; otherwise ignored.

    Three steps, each a ``DataFrame -> DataFrame`` function: ``with_bounds`` (the cutoff each
    bound allows and which bound sets it), ``with_binding_constraint`` (what blocks or binds the
    partition, and whether to act) and ``with_explanation`` (the blocking group and the detail).
    """
    # Built only when read: with the match's pairs and facts (the usual batch) the group rows are
    # never read, and making their DataFrames (the packed snapshot's unpacking, the rows'
    # explode) is Catalyst's analysis for nothing (issue 12).
    @functools.cache
    def nested() -> DataFrame:
        return _nested_rows(partitions)

    @functools.cache
    def every_group() -> DataFrame:
        return _every_group_row(nested(), groups)

    if discovery is None:
        topic_rules = _selected_topic_rules(nested(), every_group(), config, as_utc(now), unreadable_groups)
    else:
        topic_rules = _selected_topic_rules(None, None, config, as_utc(now), unreadable_groups, discovery)
    in_transition = sorted(set(tiering_transitions))
    made = facts is not None and groups is None and list(facts.rules) == topic_rules
    # The store match's task made the facts with these very rules (``facts``): its rows carry
    # the partitions' columns, so the facts' own task (and its read of the group rows) is not run.
    base = with_topic_rules(facts.rows if made and facts is not None else nested(), topic_rules).withColumn(
        "tiering_transition", F.col("topic").isin(in_transition) if in_transition else F.lit(False)
    )
    if facts is not None:  # (which way, for a run that wants to know: DEBUG)
        log.debug("consumer facts: %s", "the store match's task made them" if made else "their own task (the rules changed)")
    if made:
        df = base
    else:
        if staleness is None and progress is not None:
            staleness = Positions.match(nested(), every_group(), progress, keep=False).staleness(unreadable_groups or ())
        if groups is None and "groups" in base.columns:  # the usual case: the facts come in their own task
            df = with_group_status(base, staleness)
        else:  # vanished groups' rows (few) join the snapshot's own (or a snapshot without nested rows)
            df = base.drop("groups", "unreadable_groups").join(group_status(base, groups, staleness), KEYS, "left")
    df = _with_manual(df, config, manual_offsets)
    # The history matters only where a rule has a time floor (``min_retention``): without one,
    # its join would change no row, and its keys would run the facts' task a second time.
    floors = any(rule.floor_time is not None for rule in topic_rules)
    df = with_append_floor(df, append_history if floors else None, keyed_by=base)
    df = with_explanation(with_binding_constraint(with_bounds(df)))
    if retirement is not None:
        df = with_retirement_facts(df, retirement.state, append_history, as_utc(now), retirement.delay_ms)
        df = with_retirement(df, retirement.delay_ms)
        # Retirement decides anew whether a retiring partition acts (a reclaim, or held for
        # recent writes): whether its cut reaches remote storage follows that decision.
        df = df.withColumn("cuts_remote", _cuts_remote())
    return _widen(df.select(*PLAN.fieldNames()), PLAN)


# ``TOPIC_RULES`` but the topic, as the rules' constant carries them: timestamps as microseconds
# since the epoch (no time zone or text format between Python and Spark).
_RULE_VALUE = StructType(
    [StructField(f.name, LongType() if f.dataType == TimestampType() else f.dataType, f.nullable) for f in TOPIC_RULES.fields[1:]]
)
_RULES = MapType(StringType(), _RULE_VALUE, False).json()  # from_json takes a map's schema as its JSON text
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def with_topic_rules(partitions: DataFrame, rules: Sequence[TopicRuleRow]) -> DataFrame:
    """The rows of ``partitions`` whose topic has a rule in ``rules``, each with its rule's
    ``TOPIC_RULES`` columns (an inner join on the topic, without a join).

    The rules travel inside the query as one constant: a JSON text of topic -> rule that the
    optimizer parses once into a map literal (``from_json`` of a literal is folded), looked up by
    each row's topic. A rules table joined on instead (a broadcast join) cost a Spark job to
    broadcast it, twice a plan (issue 12); a constant costs none, and Spark's generated code
    refers to it rather than spelling it, so a new batch's rules compile nothing new."""
    text = json.dumps({r.topic: _rule_value(r) for r in rules}, ensure_ascii=False)
    found = F.try_element_at(F.from_json(F.lit(text), _RULES, {"mode": "FAILFAST"}), F.col("topic"))
    found_rule, kept = _rule_columns(tuple(partitions.columns))
    return partitions.select("*", found.alias("_rule")).where(found_rule).select(*kept)


@reused
def _rule_columns(columns: tuple[str, ...]) -> tuple[Column, list[Column]]:
    """(a rule was found, the partition's ``columns`` and the rule's values), made once."""
    rule = F.col("_rule")
    values = [
        (F.timestamp_micros(rule[f.name]) if f.dataType == TimestampType() else rule[f.name]).alias(f.name)
        for f in TOPIC_RULES.fields[1:]
    ]
    return rule.isNotNull(), [*(F.col(c) for c in columns), *values]


def _rule_value(rule: TopicRuleRow) -> dict[str, object]:
    """One rule as ``_RULE_VALUE`` reads it from JSON (timestamps as epoch microseconds)."""
    values = rule._asdict()
    del values["topic"]
    for name, value in values.items():
        if isinstance(value, datetime):
            values[name] = (as_utc(value) - _EPOCH) // timedelta(microseconds=1)
    return values


def _nested_rows(partitions: DataFrame) -> DataFrame:
    """``partitions`` with their group rows nested in ``groups``: packed rows (``PACKED_SNAPSHOT``)
    unpacked (``with_groups``: a task of its own when read) to ``PARTITION_STATE`` and ``groups``;
    others as they are."""
    if PACKED_COLUMN not in partitions.columns:
        return partitions
    return with_groups(partitions).select(*PARTITION_STATE.fieldNames(), "groups")


def _every_group_row(partitions: DataFrame, groups: DataFrame | None) -> DataFrame:
    """``GROUP_OFFSETS``: the rows nested in ``partitions`` (if any) and ``groups``."""
    if "groups" not in partitions.columns:
        if groups is None:
            raise ValueError("compute_plan needs group rows: a groups column in partitions, or a groups DataFrame")
        return groups
    nested = group_rows(partitions)
    return nested if groups is None else nested.unionByName(groups)


@dataclass(frozen=True)
class RetirementInput:
    """What the policy needs of partition retirement: the registry's current state
    (``RetirementRegistry.current``) and ``retirement.delay`` in ms."""

    state: DataFrame
    delay_ms: int


def _selected_topic_rules(
    partitions: DataFrame | None,
    groups: DataFrame | None,
    config: PurgeConfig,
    now: datetime,
    unreadable_groups: Mapping[str, str] | None,
    pairs: pa.Table | None = None,
) -> list[TopicRuleRow]:
    """``resolve_topics`` over the snapshot's topics and the groups with rows on each: their
    discovery pairs (``_discovery_pairs``), or ``pairs`` when the caller has them already (the
    planner's store match gives them in its own job: ``positions.NestedPositions.discovery``)."""
    if pairs is None:
        if partitions is None or groups is None:
            raise ValueError("_selected_topic_rules needs the partitions and their group rows, or their discovery pairs")
        pairs = _discovery_pairs(partitions, groups)
    return rules_of_pairs(pairs, config, now, unreadable_groups)


def rules_of_pairs(pairs: pa.Table, config: PurgeConfig, now: datetime, unreadable_groups: Mapping[str, str] | None) -> list[TopicRuleRow]:
    """``resolve_topics`` over discovery pairs (``_discovery_pairs``'s columns): the rules
    ``compute_plan`` plans with, given those pairs. ``ConfigError`` as ``resolve_topics`` (and a
    Kafka group named as an external consumer)."""
    rows = zip(*(pairs.column(name).to_pylist() for name in ("topic", "group_id", "external")))
    topics: set[str] = set()
    discovered: dict[str, list[str]] = {}
    external: dict[str, list[str]] = {}
    for topic, group_id, is_outside in rows:
        if group_id is None:
            topics.add(topic)
        else:
            (external if is_outside else discovered).setdefault(topic, []).append(group_id)
    refuse_name_clashes(config, (g for names in discovered.values() for g in names), "it has rows in the snapshot")
    selected = [t for t in topics if config.rule_for(t) is not None]
    return resolve_topics(selected, discovered, config, now, unreadable_groups, external)


def _discovery_pairs(partitions: DataFrame, groups: DataFrame) -> pa.Table:
    """Every distinct (``topic``, ``group_id``, ``external``) of the group rows, and each topic
    of the partitions with a null ``group_id``: on the driver, one small Spark job (O(topics +
    groups) rows, crossing as Arrow). ``external``: the row's type is an external consumer's."""
    # Any row counts for discovery: a commit, a share-partition start offset, or members holding
    # a partition without a position (-1) — a consumer that needs the topic either way.
    return (
        partitions.select("topic", F.lit(None).cast(StringType()).alias("group_id"), F.lit(False).alias("external"))
        .unionByName(groups.select("topic", "group_id", is_external(F.col("group_type")).alias("external")))
        .distinct()
        .toArrow()
    )


# Column helpers shared by the steps below (functions: a Column needs an active session).


def _manual() -> Column:
    """The partition has a manual entry with a target offset (``_with_manual``'s ``m_target``)."""
    return F.col("m_target").isNotNull()


def _forced() -> Column:
    return _manual() & F.col("m_force")


def _step() -> Column:
    """How many records the cutoff would delete (``c_cutoff`` - log start offset)."""
    return F.col("c_cutoff") - F.col("log_start_offset")


def _missing() -> Column:
    return F.coalesce(F.col("missing"), F.array().cast("array<string>"))


def _n_commits() -> Column:
    return F.coalesce(F.col("n_commits"), F.lit(0))


def _stale() -> Column:
    return F.coalesce(F.col("stale"), F.array().cast("array<string>"))


# ---- 0. the time floor in append time ----------------------------------------------------------


def with_append_floor(df: DataFrame, history: DataFrame | None, keyed_by: DataFrame | None = None) -> DataFrame:
    """Lowers ``time_floor_offset`` to what the append history can prove, and adds
    ``time_floor_source`` (``schemas.TIME_FLOOR_SOURCES``; null where no floor is needed or
    the timestamp lookup is unknown, which blocks anyway).

    The timestamp index answers in record time (a producer's CreateTime may be days old on a
    record appended a second ago). The high watermark h of the newest history row at or before
    ``floor_time`` proves every offset >= h was appended after ``floor_time``, so the floor is
    min(timestamp lookup, h) (``append_history`` when h is lower). It counts only while no later
    row and not the current high watermark is below h (a lower high watermark means the offsets
    now name other records: a recreated topic, an unclean election). Without such a row
    (``no_history``) nothing older is proven and the floor is the log start: a new purge deletes
    nothing under ``min_retention`` until its history is that old. Only rows of the partition's
    own topic incarnation count (``same_incarnation``): a topic recreated under the same name
    and refilled past an old row's high watermark between two batches would otherwise have its
    new records, appended a moment ago, taken as proven old. ``history`` None: timestamp
    index only (what a history gives too when no row has a ``floor_time``).

    ``keyed_by``: rows with the same (topic, partition, floor_time, topic_id) as ``df``, from
    which the history's keys are taken (default ``df``): ``compute_plan`` passes the rows before
    the consumer facts, so that the keys' query does not run the facts' task again.
    """
    if history is None:
        needs, ts_floor = F.col("floor_time").isNotNull(), F.col("time_floor_offset")
        return df.select("*", F.when(needs & ts_floor.isNotNull(), F.lit("timestamp_index")).alias("time_floor_source"))
    keys = (df if keyed_by is None else keyed_by).where(F.col("floor_time").isNotNull()).select("topic", "partition", "floor_time", "topic_id").distinct()
    before = F.col("snapshot_time") <= F.col("floor_time")
    facts = (
        same_incarnation(history, keys)
        .groupBy("topic", "partition")
        .agg(
            F.max(F.when(before, F.struct("snapshot_time", "high_watermark"))).alias("h_at"),
            F.min(F.when(~before, F.col("high_watermark"))).alias("h_later_min"),
        )
    )
    return df.join(facts, ["topic", "partition"], "left").withColumns(_append_floor_columns()).drop("h_at", "h_later_min")


@reused
def _append_floor_columns() -> dict[str, Column]:
    """``time_floor_offset`` lowered to what the history proves, and ``time_floor_source``
    (``with_append_floor``; made once per process)."""
    needs, ts_floor = F.col("floor_time").isNotNull(), F.col("time_floor_offset")
    h_hw, current = F.col("h_at.high_watermark"), F.col("high_watermark")
    proven = h_hw.isNotNull() & (h_hw <= F.least(current, F.coalesce(F.col("h_later_min"), current)))
    append_floor = F.when(proven, h_hw).otherwise(F.col("log_start_offset"))
    known = needs & ts_floor.isNotNull()
    source = (
        F.when(~known, F.lit(None).cast(StringType()))
        .when(~proven, F.lit("no_history"))
        .when(append_floor < ts_floor, F.lit("append_history"))
        .otherwise(F.lit("timestamp_index"))
    )
    floor = F.when(known, F.least(ts_floor, append_floor)).otherwise(ts_floor)
    return {"time_floor_offset": floor, "time_floor_source": source}


# ---- 1. bounds -------------------------------------------------------------------------------


def with_bounds(df: DataFrame) -> DataFrame:
    """Adds ``c_cutoff``, the cutoff the bounds allow (ignoring blockers), and ``c_bound``, the
    bound that sets it: ``group`` (or ``stale_group``, ``vanished_group``, ``external`` for the
    kind of consumer at the minimum), ``time_floor``, ``high_watermark``,
    ``last_stable_offset`` or ``manual`` (ties: the high watermark first, then in that order;
    see the module docstring)."""
    return df.select("*", *_bounds_columns())


@reused
def _bounds_columns() -> list[Column]:
    high_watermark, last_stable_offset = F.col("high_watermark"), F.col("last_stable_offset")
    group_bound = F.col("gmin.offset")
    floor_bound = F.when(F.col("floor_time").isNotNull(), F.col("time_floor_offset"))
    safe = F.least(group_bound, floor_bound, high_watermark, last_stable_offset)
    group_kind = (
        F.when(F.col("gmin.stale") == 1, F.lit("stale_group"))
        .when(F.col("gmin.vanished"), F.lit("vanished_group"))
        .when(F.col("gmin.group_type").isin(*EXTERNAL_CONSUMER_TYPES), F.lit("external"))
        .otherwise(F.lit("group"))
    )
    safe_bound = (  # at the high watermark nothing is held back, whoever else sits there
        F.when(high_watermark == safe, F.lit("high_watermark"))
        .when(group_bound == safe, group_kind)
        .when(floor_bound == safe, F.lit("time_floor"))
        .otherwise(F.lit("last_stable_offset"))
    )
    target, manual, forced = F.col("m_target"), _manual(), _forced()
    # Even a forced cut never passes the high watermark or an open transaction's first record.
    end = F.least(high_watermark, last_stable_offset)
    end_bound = F.when(high_watermark <= last_stable_offset, F.lit("high_watermark")).otherwise(F.lit("last_stable_offset"))
    cutoff = (
        F.when(forced, F.least(target, end))
        .when(manual, F.least(target, safe))
        .otherwise(safe)
    )
    bound = (
        F.when(forced, F.when(target <= end, F.lit("manual")).otherwise(end_bound))
        .when(manual & (target <= safe), F.lit("manual"))
        .otherwise(safe_bound)
    )
    return [cutoff.alias("c_cutoff"), bound.alias("c_bound")]


# ---- 2. binding constraint -------------------------------------------------------------------

# Consumers that keep their name in the plan even when they hold a partition at its log start:
# the ones an operator would not expect to be holding anything.
def _blockers() -> list[tuple[Column, str]]:
    """(condition, binding_constraint) for what blocks a partition outright, first match wins."""
    forced = _forced()
    needs_floor = F.col("floor_time").isNotNull()
    floor_ok = (
        F.col("time_floor_offset").isNotNull()
        & F.col("time_floor_time").isNotNull()
        & (F.col("time_floor_time") <= F.col("floor_time"))
    )
    policies = F.split(F.regexp_replace(F.lower(F.col("cleanup_policy")), r"\s", ""), ",")
    return [
        (F.col("internal") | F.col("topic").startswith("__"), "internal"),
        (F.col("protected"), "protected"),
        (F.col("cleanup_policy").isNotNull() & ~F.array_contains(policies, "delete"), "compacted"),
        # The purge and a tiered-storage disablement never act on one topic at once.
        (F.col("tiering_transition"), "tiering_transition"),
        (F.col("m_unknown"), "manual"),
        (~forced & F.col("beyond").isNotNull(), "commit_beyond_end"),
        (~forced & F.col("diverged").isNotNull(), "commit_diverged"),
        (~forced & (F.size("unreadable") > 0), "group_unreadable"),
        (
            ~forced
            & (
                ((F.size(_missing()) > 0) & F.col("block_missing"))
                | (_n_commits() == 0)
                | (F.size(F.coalesce(F.col("missing_external"), F.array().cast("array<string>"))) > 0)
            ),
            "missing_commit",
        ),
        (~forced & needs_floor & ~floor_ok, "time_floor"),
    ]


def with_binding_constraint(df: DataFrame) -> DataFrame:
    """Adds ``blocked`` (a blocker applies: no cutoff), ``binding_constraint`` and ``actionable``."""
    blocked, binding, actionable = _binding_columns()
    return df.select("*", blocked, binding).select("*", actionable)


@reused
def _binding_columns() -> tuple[Column, Column, Column]:
    blockers = _blockers()
    blocked = F.lit(False)
    for condition, _ in blockers:
        blocked = blocked | condition
    binding = F.when(blockers[0][0], F.lit(blockers[0][1]))
    for condition, name in blockers[1:]:
        binding = binding.when(condition, F.lit(name))
    step, bound = _step(), F.col("c_bound")
    # Whatever stops the partition from going further binds it, also at its log start: a group
    # sitting there holds back every record (``group``), an emptied partition is at its
    # ``high_watermark``.
    binding = (
        binding.when(step <= 0, bound)
        .when(~_manual() & (step < F.col("min_step")), F.lit("below_min_step"))
        .otherwise(bound)
    )
    actionable = ~F.col("blocked") & (F.col("binding_constraint") != "below_min_step") & (step > 0)
    return blocked.alias("blocked"), binding.alias("binding_constraint"), F.coalesce(actionable, F.lit(False)).alias("actionable")


# ---- 3. explanation --------------------------------------------------------------------------


def _blocking_group() -> Column:
    bc = F.col("binding_constraint")
    return (
        F.when(bc == "missing_commit", F.try_element_at(_missing(), F.lit(1)))  # ANSI: element_at on [] raises
        .when(bc == "group_unreadable", F.try_element_at(F.col("unreadable"), F.lit(1)))
        .when(bc == "commit_beyond_end", F.col("beyond.group_id"))
        .when(bc == "commit_diverged", F.col("diverged.group_id"))
        .when(~F.col("blocked") & F.col("c_bound").isin(*_GROUP_BOUNDS), F.col("gmin.group_id"))
    )


_GROUP_BOUNDS = ("group", "stale_group", "vanished_group", "external")


def _blocking_group_type() -> Column:
    """The type of ``_blocking_group``: the first missing group's under missing_commit."""
    first_missing = F.try_element_at(F.col("missing_typed"), F.lit(1))  # null array or [] -> null
    return F.when(F.col("binding_constraint") == "missing_commit", first_missing.getField("group_type")).when(
        ~F.col("blocked") & F.col("c_bound").isin(*_GROUP_BOUNDS), F.col("gmin.group_type")
    )


def _why_bound() -> Column:
    """The bound that sets ``c_cutoff``, in words."""
    bound, cutoff = F.col("c_bound"), F.col("c_cutoff")
    kind = F.when(F.col("gmin.group_type") == "share", F.lit("share group")).otherwise(F.lit("group"))
    return (
        F.when(bound == "group", F.format_string("%s %s at %d", kind, F.col("gmin.group_id"), cutoff))
        .when(
            bound == "vanished_group",
            F.format_string(
                "vanished %s %s (Kafka no longer has its offsets; last position seen) at %d", kind, F.col("gmin.group_id"), cutoff
            ),
        )
        .when(
            bound == "external",
            F.format_string("external consumer %s (%s) at %d", F.col("gmin.group_id"), F.col("gmin.group_type"), cutoff),
        )
        .when(
            bound == "stale_group",
            F.format_string(
                "stale group %s (no members, no progress for over %s) at %d", F.col("gmin.group_id"), F.col("stale_after"), cutoff
            ),
        )
        .when(bound == "time_floor", _why_time_floor())
        .when(
            (bound == "last_stable_offset") & _forced(),
            F.format_string("forced manual cutoff %s bounded by an open transaction: last stable offset %d", F.col("m_kind"), cutoff),
        )
        .when(bound == "last_stable_offset", F.format_string("open transaction: last stable offset %d", cutoff))
        .when(
            (bound == "high_watermark") & _forced(),
            F.format_string("forced manual cutoff %s bounded by the high watermark %d", F.col("m_kind"), cutoff),
        )
        .when(bound == "high_watermark", F.format_string("high watermark %d", cutoff))
        .when(
            bound == "manual",
            F.format_string("%smanual cutoff %d (%s)", F.when(_forced(), F.lit("forced ")).otherwise(F.lit("")), cutoff, F.col("m_kind")),
        )
    )


def _why_time_floor() -> Column:
    """The time floor in words, saying which lookup set it (``with_append_floor``)."""
    since, source, cutoff = F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss"), F.col("time_floor_source"), F.col("c_cutoff")
    return (
        F.when(source == "append_history", F.format_string("time floor (records appended since %s, by the append history) at %d", since, cutoff))
        .when(
            source == "no_history",
            F.format_string(
                "time floor (no append history from %s or before: nothing older is proven, so a new purge "
                "deletes nothing under min_retention until it has run that long) at %d",
                since,
                cutoff,
            ),
        )
        .otherwise(F.format_string("time floor (records since %s) at %d", since, cutoff))
    )


def _time_floor_unknown() -> Column:
    return F.when(
        F.col("time_floor_offset").isNull(),
        F.format_string("time floor unknown (needed for %s): not purged", F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss")),
    ).otherwise(
        F.format_string(
            "time floor unknown: looked up for %s, need %s or earlier",
            F.date_format("time_floor_time", "yyyy-MM-dd HH:mm:ss"),
            F.date_format("floor_time", "yyyy-MM-dd HH:mm:ss"),
        )
    )


def _detail() -> Column:
    """Why the partition's plan is what it is, for an operator reading ``spark-purge plan``."""
    bc, blocked, missing, log_start, why = F.col("binding_constraint"), F.col("blocked"), _missing(), F.col("log_start_offset"), _why_bound()
    held = F.col("high_watermark") - F.greatest(F.col("c_cutoff"), log_start)  # records the bound keeps
    reason = (
        F.when(bc == "internal", F.lit("internal topic: never purged"))
        .when(bc == "protected", F.lit("topic matches protected_topics: never purged"))
        .when(
            bc == "tiering_transition",
            F.lit("tiered storage is being disabled on this topic (DISABLING, see spark-purge tiering status): not purged until DISABLED"),
        )
        .when(
            bc == "compacted",
            F.format_string("cleanup.policy=%s lacks delete: the broker refuses DeleteRecords", F.col("cleanup_policy")),
        )
        .when((bc == "manual") & blocked, F.format_string("manual %s: no offset known for that time", F.col("m_kind")))
        .when(
            bc == "group_unreadable",
            F.format_string(
                "commits of %s could not be read, so what they consumed is unknown: not purged "
                "(grant Describe on the group, wait for its coordinator, or exclude it)",
                F.col("unreadable_note"),
            ),
        )
        .when(
            (bc == "missing_commit") & (_n_commits() == 0) & (F.size(missing) == 0),
            F.lit("no consumer group has committed on this topic: nothing is known to be consumed"),
        )
        .when(
            bc == "missing_commit",
            F.format_string("required group %s has no commit on this partition", F.array_join(missing, ", ")),
        )
        .when(
            bc == "commit_beyond_end",
            F.format_string(
                "group %s committed %d, beyond the high watermark %d: it read another incarnation of the topic "
                "(deleted and recreated) or a truncated log, so nothing is known to be consumed: not purged",
                F.col("beyond.group_id"), F.col("beyond.offset"), F.col("high_watermark"),
            ),
        )
        .when(
            bc == "commit_diverged",
            F.format_string(
                "group %s committed %d in leader epoch %d, but the log ends that epoch at %d: its history diverged "
                "from the log (KIP-320 truncation): not purged",
                F.col("diverged.group_id"), F.col("diverged.offset"), F.col("diverged.epoch"), F.col("diverged.epoch_end"),
            ),
        )
        .when((bc == "time_floor") & blocked, _time_floor_unknown())
        .when((_step() <= 0) & (held <= 0), F.format_string("nothing left to delete: log start %d is the high watermark", log_start))
        .when(bc == "stale_group", F.format_string("%s, log start %d: set on_stale_group: ignore to skip it", why, log_start))
        .when(
            (bc == "vanished_group") & (_step() <= 0),
            F.format_string("%s, log start %d: released once stale, or by spark-purge forget-group", why, log_start),
        )
        .when((bc == "external") & (_step() <= 0), F.format_string("%s, log start %d", why, log_start))
        .when(
            bc == "below_min_step",
            F.format_string("%s: only %d records deletable, min_step %d", why, _step(), F.col("min_step")),
        )
        .when((_step() <= 0), F.format_string("%s, log start %d: holds back %d records", why, log_start, held))
        .when(held <= 0, F.format_string("%s: nothing held back (the high watermark)", why))
        .otherwise(F.format_string("%s holds back %d records", why, held))
    )
    stale = _stale()
    ignored = F.when(
        (F.size(stale) > 0) & F.col("ignore_stale") & ~blocked,
        F.concat(F.lit("; ignoring stale group(s) "), F.array_join(stale, ", ")),
    ).otherwise(F.lit(""))
    remote = F.when(
        F.col("actionable") & F.coalesce(_cuts_remote(), F.lit(False)),
        F.format_string("; reaches remote storage (offsets below %d are remote only)", F.col("local_log_start_offset")),
    ).otherwise(F.lit(""))
    return F.concat(reason, ignored, remote)


@reused
def _cuts_remote() -> Column:
    """Whether the cut deletes offsets remote storage holds, [log start, latest tiered]: false
    without tiered storage or without a cut, null when the snapshot could not read the latest
    tiered offset. (Offsets below the local log start exist only remotely; a cut up to there
    removes remote data alone.)"""
    tiered = F.coalesce(F.col("remote_storage_enable"), F.lit(False))
    latest = F.col("latest_tiered_offset")
    return (
        F.when(~tiered | ~F.col("actionable"), F.lit(False))
        .when(latest.isNull(), F.lit(None).cast("boolean"))
        .otherwise(latest >= F.col("log_start_offset"))
    )


def with_explanation(df: DataFrame) -> DataFrame:
    """Adds the ``PLAN`` columns that report the decision: ``cutoff`` (null when blocked),
    ``records_to_delete``, ``blocking_group``, ``stale_groups`` and ``detail``."""
    return df.select("*", *_explanation_columns())


@reused
def _explanation_columns() -> list[Column]:
    records = F.when(F.col("actionable"), F.greatest(_step(), F.lit(0))).otherwise(F.lit(0))
    return [
        F.when(~F.col("blocked"), F.col("c_cutoff")).alias("cutoff"),
        F.coalesce(records, F.lit(0)).cast(LongType()).alias("records_to_delete"),
        _blocking_group().alias("blocking_group"),
        _blocking_group_type().alias("blocking_group_type"),
        F.array_compact(_stale()).alias("stale_groups"),
        _detail().alias("detail"),
        _cuts_remote().alias("cuts_remote"),
    ]
