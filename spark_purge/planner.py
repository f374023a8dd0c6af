"""The planner: one cluster snapshot (``schemas.SNAPSHOT``) -> the purge plan (``schemas.PLAN``).

It wires the pure policy to the inputs a snapshot does not carry: group progress (when each
commit last moved, for stale groups, and every position seen: a remembered position the
snapshot no longer shows is added as a ``Vanished`` group row, see ``spark_purge.vanished``)
the answers to the config's ``@timestamp`` manual
entries (ListOffsets by timestamp), and the append history (``spark_purge.history``: the high
watermarks past snapshots saw, so the time floor holds records by append time, whatever their
CreateTime), and, with ``retirement.enable``, the retirement registry's current state
(``spark_purge.retirement``: which partitions are retiring; the history says how long their high
watermarks have been still), and the topics whose tiered storage is being disabled
(``spark_purge.tiering``). The plan is made as of the snapshot's own time, so a
replayed batch plans exactly what it planned the first time.

    planner = Planner(config, lookup_offsets=client.offsets_for_times)
    plan = planner.plan(snapshot)        # None for an empty snapshot
    plan.rows, plan.planned_at
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from spark_purge._time import as_utc
from spark_purge.config import PurgeConfig
from spark_purge.detach import drop
from spark_purge.errors import ConfigError
from spark_purge.external_snapshot import CHECKPOINT_UNREADABLE
from spark_purge.kafka.clock import ClockReading
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.policy import (
    RetirementInput,
    compute_plan,
    history_keep_ms,
    partition_rows,
    refuse_name_clashes,
    timestamp_lookups,
    unreadable_groups_of,
    with_groups,
)
from spark_purge.policy.groups import is_external
from spark_purge.policy.inputs import TopicRuleRow
from spark_purge.policy.plan import rules_of_pairs
from spark_purge.policy.positions import NestedPositions, flat_store, is_nested, nest_store
from spark_purge.schemas import APPEND_HISTORY, MANUAL_OFFSETS, PARTITION_STATE
from spark_purge.snapshot_pack import PACKED_COLUMN

# (topic, partition) -> epoch ms  ->  (topic, partition) -> first offset at/after it (Kafka I/O).
OffsetLookup = Callable[[Mapping[TopicPartitionKey, int]], Mapping[TopicPartitionKey, int]]


@dataclass(frozen=True)
class Plan:
    """A snapshot's plan (``schemas.PLAN`` rows), the time it was planned as of, and the
    broker clock measured with it (None: not measured, see ``kafka.clock``)."""

    rows: DataFrame
    planned_at: datetime
    clock: ClockReading | None = None
    # Last stable offset of each partition with an open transaction (LSO < high watermark).
    open_transactions: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    # The snapshot's positions matched with the progress store (None: no store yet); kept
    # (held) for the batch: the pipeline updates the store from it, then releases it.
    positions: NestedPositions | None = None
    # Rows held for the plan that it does not own otherwise (``plan_snapshot``: its snapshot).
    held: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Drop what the plan holds for its batch. Its ``rows`` cannot be read after that: the
        held rows they are computed from are gone (``detach.held``)."""
        if self.positions is not None:
            self.positions.release()
        for rows in self.held:
            drop(rows)


class LastPairs:
    """The rules' discovery pairs of the last snapshot a planner matched with the store
    (``policy.positions.NestedPositions.discovery``), kept by the pipeline from one batch to the
    next: the next batch's store match is asked for the consumer facts with the rules those
    pairs resolve to (``Planner.plan``). In a steady purge the pairs rarely change; the plan
    takes the match's facts only when its own rules are the same, so a change costs only the
    facts' own task, as before."""

    def __init__(self) -> None:
        self.pairs: pa.Table | None = None


@dataclass(frozen=True)
class Planner:
    """Snapshot -> plan. ``progress`` reads the group progress table (None: no group is stale,
    none vanished): flat rows (``PROGRESS_STORE``), nested by partition
    (``positions.NESTED_STORE``) or packed (``positions.PACKED_STORE``), as
    ``ProgressStore.read_nested`` gives them;
    ``lookup_offsets`` answers ``@timestamp`` manual entries and is only called when some exist;
    ``append_history`` reads the append history (``APPEND_HISTORY``; None from it: no history
    yet, so time floors fall to the log start). Left unset, no history is kept and time floors
    are the timestamp lookup alone (record time): the pipeline always sets it.
    ``retirements`` reads the registry's current state (``RetirementRegistry.current``); it is
    called only with ``retirement.enable``."""

    config: PurgeConfig
    lookup_offsets: OffsetLookup
    progress: Callable[[], DataFrame | None] = lambda: None
    append_history: Callable[[], DataFrame | None] | None = None
    retirements: Callable[[], DataFrame] | None = None
    # Topics whose tiered storage is being disabled (``tiering.TieringTable.in_transition``).
    tiering_transitions: Callable[[], Collection[str]] = lambda: ()
    # How many changed positions a batch may append before the progress log is due a rewrite
    # (``ProgressStore.rewrite_above``; None: not known).
    rewrite_above: Callable[[], int | None] = lambda: None
    # The last batch's discovery pairs (None: none kept; every plan then runs the facts' own task).
    last_pairs: LastPairs | None = None

    def plan(self, snapshot: DataFrame, batch_id: int | None = None) -> Plan | None:
        """The plan for a snapshot, or None when the snapshot has no rows. ``batch_id``: the
        batch that will record the plan's positions in the progress store (the match then also
        makes their log file: ``NestedPositions.log_file``)."""
        # One small job (no shuffle: an aggregate of all rows) reads what the plan needs on the
        # driver: the snapshot's time and unreadable groups (every row carries the same) and the
        # partitions with an open transaction (last stable offset below the high watermark). It
        # is the first to read a batch's held snapshot, so it also fills the held rows whole.
        first = snapshot.agg(
            F.count(F.lit(1)).alias("rows"),
            F.first("snapshot_time").alias("snapshot_time"),
            F.first("unreadable_groups").alias("unreadable_groups"),
            F.collect_list(
                F.when(F.col("last_stable_offset") < F.col("high_watermark"), F.struct("topic", "partition", "last_stable_offset"))
            ).alias("pending"),
        ).collect()
        if not first[0]["rows"]:
            return None
        now = as_utc(first[0]["snapshot_time"])
        partitions = partition_rows(snapshot)
        stored = self.progress()
        # The store nested by partition, as the snapshot's group rows are (a store this process
        # recorded last is held so; one read from its table is nested here, once).
        nested = None if stored is None else (stored if is_nested(stored) else nest_store(stored))
        unreadable = unreadable_groups_of(first[0])  # unknown commits block, never vanish
        self.refuse_name_clashes(first[0]["unreadable_groups"], None if nested is None else functools.partial(flat_store, nested))
        # The commits matched with the store once, both nested, in one Arrow task (vanished
        # groups, staleness, the store's update: ``NestedPositions``).
        # Given the batch, the match's task also writes the progress log's new rows (and the
        # whole log when it is due a rewrite) as Parquet for the store to commit as they are.
        room = None if batch_id is None else self.rewrite_above()
        # Asked with the rules the last batch's pairs resolve to, it also makes the consumer facts.
        guess = None if nested is None else self.guessed_rules(now, unreadable)
        positions = (
            None if nested is None else NestedPositions.match(snapshot, nested, unreadable, at=now, log_batch=batch_id, rewrite_above=room, facts=guess)
        )
        # Staleness per group, and whether any remembered position is gone from the snapshot
        # (usually none: then no vanished rows to join), in one job.
        staleness, gone = (None, False) if positions is None else positions.staleness_table()
        if positions is not None and self.last_pairs is not None:
            self.last_pairs.pairs = positions.discovery()
        rows = compute_plan(
            # The group rows stay nested in their partition's row; the vanished ones join them.
            # A packed snapshot's are unpacked only if read (``compute_plan`` makes the unpacking
            # only then): not when the match made the facts.
            snapshot if PACKED_COLUMN in snapshot.columns else with_groups(snapshot).select(*PARTITION_STATE.fieldNames(), "groups"),
            positions.vanished() if positions is not None and gone else None,
            self.config,
            now=now,
            # The store's flat rows are read only without a match's staleness: never here (the
            # match runs whenever there is a store), so they are not built (issue 12).
            staleness=staleness,
            # The rules' discovery pairs, from the match's job (no job of their own).
            discovery=None if positions is None else positions.discovery(),
            # The match's facts, when its rules are the ones planned with (else the facts' own task).
            facts=None if positions is None else positions.facts(),
            manual_offsets=self.manual_offsets(partitions),
            unreadable_groups=unreadable,
            append_history=self.history(snapshot.sparkSession),
            retirement=self.retirement(),
            tiering_transitions=self.tiering_transitions(),
        )
        lsos = {(r["topic"], r["partition"]): int(r["last_stable_offset"]) for r in first[0]["pending"]}
        return Plan(rows, now, open_transactions=lsos, positions=positions)

    def guessed_rules(self, now: datetime, unreadable: Mapping[str, str]) -> list[TopicRuleRow] | None:
        """The rules the last batch's discovery pairs resolve to at ``now`` (None: no pairs kept,
        no rule, or they do not resolve: the plan will say why from its own pairs)."""
        pairs = None if self.last_pairs is None else self.last_pairs.pairs
        if pairs is None:
            return None
        try:
            return rules_of_pairs(pairs, self.config, now, unreadable) or None
        except ConfigError:
            return None

    def refuse_name_clashes(self, unreadable: Sequence[Row], store: Callable[[], DataFrame] | None) -> None:
        """``ConfigError`` when an external consumer's name is a Kafka group's that the snapshot
        could not read, or one the progress store remembers (it keeps Kafka positions only).
        (A Kafka group with rows in the snapshot is refused in ``compute_plan``.) ``store``
        makes the store's flat rows (``PROGRESS_STORE``; None: no store), only when some
        external consumer is configured."""
        names = [c.name for c in self.config.external_consumers]
        if not names:
            return
        progress = None if store is None else store()
        refuse_name_clashes(
            self.config,
            (g["group_id"] for g in unreadable if not str(g["error"]).startswith(CHECKPOINT_UNREADABLE)),
            "Kafka could not read its commits",
        )
        if progress is not None:
            kafka = ~is_external(F.col("group_type")) if "group_type" in progress.columns else F.lit(True)
            remembered = progress.where(F.col("group_id").isin(names) & kafka).select("group_id").limit(1).collect()
            refuse_name_clashes(self.config, (r["group_id"] for r in remembered), "the progress store remembers its positions")

    def retirement(self) -> RetirementInput | None:
        """The retirement state to plan with (None: retirement off, or no registry reader)."""
        if not self.config.retirement.enable or self.retirements is None:
            return None
        return RetirementInput(self.retirements(), self.config.retirement.delay)

    def history(self, spark: SparkSession) -> DataFrame | None:
        """The append history to plan with: None when none is kept, or when nothing would read
        it (``history_keep_ms`` 0: no rule has a ``min_retention``, retirement is off;
        ``compute_plan`` then joins no history); empty before the first row."""
        if self.append_history is None or not history_keep_ms(self.config):
            return None
        found = self.append_history()
        return found if found is not None else spark.createDataFrame([], APPEND_HISTORY)

    def manual_offsets(self, partitions: DataFrame) -> DataFrame | None:
        """``MANUAL_OFFSETS`` answering the config's ``offset: '@timestamp'`` entries, or None."""
        lookups = timestamp_lookups(self.config)
        if not lookups:
            return None
        topics = sorted({lookup.topic for lookup in lookups})
        wanted: dict[TopicPartitionKey, datetime] = {}
        for row in partitions.select("topic", "partition").where(F.col("topic").isin(topics)).collect():
            entry = self.config.manual_for(row["topic"], row["partition"])
            if entry is not None and entry.timestamp is not None:
                wanted[(row["topic"], row["partition"])] = entry.timestamp
        found = self.lookup_offsets({tp: int(ts.timestamp() * 1000) for tp, ts in wanted.items()})
        rows = [(t, p, ts, found.get((t, p))) for (t, p), ts in sorted(wanted.items())]
        return partitions.sparkSession.createDataFrame(rows, MANUAL_OFFSETS)


__all__ = ["LastPairs", "OffsetLookup", "Plan", "Planner"]
