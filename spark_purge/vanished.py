"""Groups Kafka forgot: their last seen positions keep holding (issue 10, "vanished groups").

Kafka deletes an empty group's committed offsets after the broker's ``offsets.retention.minutes``
(7 days by default) — or an operator deletes the group. A purge that saw only current commits
would then purge past a consumer that is merely offline. So the pipeline remembers every
position it has seen (``audit.ProgressStore``) and, before planning, gives the policy one
``GROUP_OFFSETS`` row per remembered (group, topic, partition) that the snapshot no longer shows:

    group_state "Vanished", group_type as remembered, member_count 0,
    committed_offset = the last position seen.

The policy treats such a row as a group with no members: under discovery it is required like
any group with a row on the topic; it binds as ``vanished_group`` until the rule's stale policy
releases it (``stale_after`` counted from the position's last progress; ``on_stale_group:
ignore``), or an operator removes it (``spark-purge forget-group``).

Only partitions present in the snapshot get rows; groups the snapshot could not read (they
block anyway, as ``group_unreadable``) get none: unknown is not vanished. Nor do positions seen
on another incarnation of the topic (the store's ``topic_id`` differs from the snapshot's: the
topic was deleted and recreated under the same name): those records are gone, the new ones unread.
"""
from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame

from spark_purge._time import format_duration
from spark_purge.config import PurgeConfig
from spark_purge.schemas import VANISHED_STATE

VANISHED = VANISHED_STATE  # group_state of a remembered position the snapshot no longer shows
KEY = ["group_id", "topic", "partition"]


def vanished_rows(
    partitions: DataFrame, groups: DataFrame, progress: DataFrame, unreadable: Iterable[str] = ()
) -> DataFrame:
    """``GROUP_OFFSETS`` rows for remembered positions with no commit (>= 0) in the snapshot.

    ``partitions``: the snapshot's ``PARTITION_STATE``; ``groups``: its ``GROUP_OFFSETS``;
    ``progress``: the store (``PROGRESS_STORE``; a table without ``group_type`` reads as null).
    One join (``policy.positions.Positions``, which the planner keeps for the whole batch):
    nothing is collected.
    """
    from spark_purge.policy.positions import Positions

    return Positions.match(partitions, groups, progress, keep=False).vanished(unreadable)


def with_vanished_groups(
    partitions: DataFrame, groups: DataFrame, progress: DataFrame | None, unreadable: Iterable[str] = ()
) -> DataFrame:
    """The snapshot's group rows plus a ``Vanished`` row per remembered position it lost."""
    if progress is None:
        return groups
    return groups.unionByName(vanished_rows(partitions, groups, progress, unreadable))


def retention_warning(config: PurgeConfig, offsets_retention_ms: int | None) -> str | None:
    """A warning when the broker forgets empty groups sooner than some rule calls them stale.

    ``offsets_retention_ms``: the broker's ``offsets.retention.minutes`` in ms (None: unknown).
    """
    if offsets_retention_ms is None:
        return None
    longer = sorted(r.name for r in config.rules if r.stale_after > offsets_retention_ms)
    if not longer:
        return None
    worst = max(r.stale_after for r in config.rules)
    return (
        f"the broker's offsets.retention.minutes ({format_duration(offsets_retention_ms)}) is shorter than "
        f"stale_after ({format_duration(worst)} at most) of rule(s) {', '.join(longer)}: Kafka forgets an empty "
        "group's offsets before the purge would call the group stale. The purge holds such a group by memory: "
        "its last seen position (progress store in the stream checkpoint) binds as vanished_group until "
        "stale_after passes or `spark-purge forget-group` removes it; a config without a checkpoint "
        "(plan-only) cannot remember it"
    )


__all__ = ["VANISHED", "retention_warning", "vanished_rows", "with_vanished_groups"]
