"""What the policy needs besides a snapshot's rows, resolved from the config: time floors and
``@timestamp`` lookups for the source, and each selected topic's rule (``TOPIC_RULES`` rows).
Pure Python (Python regex semantics) apart from ``split_snapshot``."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from spark_purge._time import as_utc, format_duration
from spark_purge.config import MANUAL_RULE_NAME, PurgeConfig, TopicRule
from spark_purge.errors import ConfigError
from spark_purge.policy.groups import KEYS, NESTED_ROWS, nested_groups
from spark_purge.policy.reuse import reused
from spark_purge.schemas import GROUP_OFFSETS, PARTITION_STATE, SNAPSHOT


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


@dataclass(frozen=True)
class RetentionFloor:
    """A rule's time floor relative to the snapshot's own time: records appended within
    ``min_retention_ms`` of it are never deleted, on topics matching ``topics``."""

    rule: str
    topics: str  # regex, full match (Python syntax)
    min_retention_ms: int

    def floor_time(self, now: datetime) -> datetime:
        return as_utc(now) - timedelta(milliseconds=self.min_retention_ms)


def retention_floors(config: PurgeConfig) -> list[RetentionFloor]:
    """The time floors the snapshot must carry: one per rule with a ``min_retention`` (and, from
    the defaults, one per manual-only topic, which gets a synthetic rule from them)."""
    floors = [RetentionFloor(rule.name, rule.topics, rule.min_retention) for rule in config.rules if rule.min_retention > 0]
    if config.defaults.min_retention > 0:
        for topic in sorted({e.topic for e in config.manual}):
            if not config.matching_rules(topic):
                floors.append(RetentionFloor(MANUAL_RULE_NAME, re.escape(topic), config.defaults.min_retention))
    return floors


def history_keep_ms(config: PurgeConfig) -> int:
    """How long the append history must keep its rows (ms): the longest ``min_retention`` of
    ``retention_floors`` and, with retirement on, its ``delay``; 0 when nothing reads the history
    (the pipeline then writes none and the planner reads none)."""
    keep_ms = max((f.min_retention_ms for f in retention_floors(config)), default=0)
    return max(keep_ms, config.retirement.delay) if config.retirement.enable else keep_ms


def time_floor_requests(config: PurgeConfig, now: datetime) -> list[TimeFloorRequest]:
    """``retention_floors`` as absolute floor times for a snapshot taken at ``now``."""
    return [TimeFloorRequest(f.rule, f.topics, f.floor_time(now)) for f in retention_floors(config)]


def timestamp_lookups(config: PurgeConfig) -> list[TimestampLookup]:
    """The ``@timestamp`` manual entries the source must resolve into ``MANUAL_OFFSETS`` rows."""
    return [
        TimestampLookup(e.topic, e.partition, e.timestamp) for e in config.manual if e.timestamp is not None
    ]


def refuse_name_clashes(config: PurgeConfig, kafka_groups: Iterable[str], seen_as: str) -> None:
    """``ConfigError`` when a configured external consumer's name is also a Kafka group's id.

    The plan tells consumers apart by name: a Kafka group and an external consumer sharing one
    would be taken for one consumer, and the one could hide the other's missing commit,
    unreadable state or remembered position (and so let a cut through). ``kafka_groups`` are
    Kafka group ids found somewhere (``seen_as`` says where, for the message)."""
    if not config.external_consumers:
        return
    found = set(kafka_groups)
    for i, consumer in enumerate(config.external_consumers):
        if consumer.name in found:
            raise ConfigError(
                f"external_consumers[{i}].name: {consumer.name!r} is also the id of a Kafka consumer group ({seen_as}); "
                "the plan tells consumers apart by name, so the two would be taken for one and either could hide the "
                "other's position: give the external consumer a name no Kafka group uses (nothing was purged)"
            )


def unreadable_groups_of(snapshot_row: Row) -> dict[str, str]:
    """group -> error for the groups a snapshot could not read, from any one of its ``SNAPSHOT``
    rows (every row of a snapshot carries the same list)."""
    return {g["group_id"]: g["error"] for g in snapshot_row["unreadable_groups"]}


def partition_rows(snapshot: DataFrame) -> DataFrame:
    """``SNAPSHOT`` rows -> their ``PARTITION_STATE`` columns (no group rows made)."""
    return snapshot.select(*PARTITION_STATE.fieldNames())


def split_snapshot(snapshot: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``SNAPSHOT`` (or ``PACKED_SNAPSHOT``) rows -> (``PARTITION_STATE``, ``GROUP_OFFSETS``) DataFrames."""
    return partition_rows(snapshot), group_rows(with_groups(snapshot))


def with_groups(snapshot: DataFrame) -> DataFrame:
    """A snapshot's rows with their group rows nested in ``groups`` (``SNAPSHOT``): packed rows
    (``PACKED_SNAPSHOT``, the pipeline's) unpacked in one Python task of the whole snapshot when
    read (``snapshot_pack.unpacked_batches``); others as they are. Lazy: a plan that never reads
    the group rows runs no task for them."""
    from spark_purge.snapshot_pack import PACKED_COLUMN, unpacked_batches

    if PACKED_COLUMN not in snapshot.columns:
        return snapshot
    return snapshot.coalesce(1).mapInArrow(unpacked_batches, SNAPSHOT)


def nest_snapshot(partitions: DataFrame, groups: DataFrame) -> DataFrame:
    """``split_snapshot`` undone: ``PARTITION_STATE`` rows with their ``GROUP_OFFSETS`` rows
    nested in ``groups`` (empty: none); rows on partitions ``partitions`` lacks are dropped."""
    return partitions.join(nested_groups(groups), KEYS, "left").select(
        *PARTITION_STATE.fieldNames(), F.coalesce(F.col("groups"), F.array().cast(NESTED_ROWS)).alias("groups")
    )


def group_rows(snapshot: DataFrame) -> DataFrame:
    """The ``GROUP_OFFSETS`` rows nested in rows with a ``groups`` column (``SNAPSHOT``)."""
    exploded = snapshot.select(*_SNAPSHOT_KEYS, F.explode("groups").alias("g"))
    return exploded.select(*_group_row_columns())


_SNAPSHOT_KEYS = ("snapshot_id", "snapshot_time", "topic", "partition")


@reused
def _group_row_columns() -> list[Column]:
    """``GROUP_OFFSETS``'s columns of an exploded nested row ``g`` (made once per process)."""
    return [F.col(name) if name in _SNAPSHOT_KEYS else F.col(f"g.{name}").alias(name) for name in GROUP_OFFSETS.fieldNames()]


class TopicRuleRow(NamedTuple):
    """One ``TOPIC_RULES`` row: a selected topic and its rule's parameters."""

    topic: str
    rule: str
    protected: bool
    required: list[str]
    block_missing: bool
    ignore_stale: bool
    stale_before: datetime
    stale_after: str  # rendered, for the detail
    min_step: int
    floor_time: datetime | None  # None: the rule needs no time floor
    unreadable: list[str]
    unreadable_note: str | None


def resolve_topics(
    topics: Iterable[str],
    discovered: Mapping[str, Iterable[str]],
    config: PurgeConfig,
    now: datetime,
    unreadable: Mapping[str, str] | None = None,
    external: Mapping[str, Iterable[str]] | None = None,
) -> list[TopicRuleRow]:
    """``TOPIC_RULES`` rows for the topics a rule selects (pure Python, Python regex semantics).

    ``discovered`` maps a topic to the Kafka groups with a row on it (a commit, a share-partition
    start offset, or members holding a partition without one); ``external`` maps a topic to the
    configured external consumers with a row on it: they are required (per partition, in
    ``group_status``) in every rule, and an unreadable one blocks the topic. ``unreadable`` maps groups whose positions the snapshot could
    not read to the error. Raises ``ConfigError`` when a topic matches more than one rule.
    """
    now = as_utc(now)
    unreadable = unreadable or {}
    external = external or {}
    # An unreadable external consumer blocks only the topics it covers (its rows say which);
    # an unreadable Kafka group may have commits anywhere.
    externals = {g for names in external.values() for g in names}
    kafka_unreadable = {g: e for g, e in unreadable.items() if g not in externals}
    rows = []
    for topic in sorted(set(topics)):
        rule = config.rule_for(topic)
        if rule is None:
            continue
        outside = sorted(set(external.get(topic, ())))
        blind = tuple(sorted({*unreadable_required(rule, kafka_unreadable, config), *(g for g in outside if g in unreadable)}))
        required = sorted(required_groups(rule, discovered.get(topic, ()), config))
        rows.append(
            TopicRuleRow(
                topic=topic,
                rule=rule.name,
                protected=config.is_protected(topic),
                required=required,
                block_missing=rule.on_missing_commit == "block",
                ignore_stale=rule.on_stale_group == "ignore",
                stale_before=now - timedelta(milliseconds=rule.stale_after),
                stale_after=format_duration(rule.stale_after),
                min_step=rule.min_step,
                floor_time=now - timedelta(milliseconds=rule.min_retention) if rule.min_retention > 0 else None,
                unreadable=list(blind),
                unreadable_note=", ".join(f"{g} ({unreadable[g]})" for g in blind) or None,
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
