"""A snapshot's consumer positions beside the remembered ones: one join per batch (issue 12).

Three things need the snapshot's commits matched with the group progress store
(``audit.ProgressStore``, ``PROGRESS_STORE``): the vanished groups (remembered positions the
snapshot no longer shows, ``spark_purge.vanished``), group staleness (a group is a stale
candidate when every commit it has is a position the store knows, ``policy.groups``) and, after
the batch, the store's update (the positions that are new or moved). Each used to join the
O(commits) rows with the store on its own. ``Positions.match`` does it once: the commits
reduced to one row per (group, topic, partition), full outer joined with the store, each row
given its partition's snapshot id, time and topic id (one broadcast of the snapshot's partitions,
not one in each of the three), kept for the batch (``detach.held``; ``release`` when the batch is
done). The three are then filters and small aggregations of that one table, each giving exactly
what its own join gave.

The planner runs the same match nested (``NestedPositions``, stop 65): the snapshot's group rows
stay in their partition's row, the store is held nested by partition between batches
(``NESTED_STORE``), and one Arrow task (``spark_purge.position_match``) gives the three at once,
with no row per commit in Spark; asked with the rules (stop 80), also each partition's consumer
facts (``NestedPositions.facts``), so the plan needs no task of its own for them. ``Positions`` stays the flat query: the store's first batch
(``ProgressStore.update``), ``vanished.vanished_rows``, ``compute_plan`` called without
staleness, and the oracle the nested match is tested against (``tests/unit/test_nested_positions.py``).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import ArrayType, StructField, StructType

from spark_purge._time import as_utc
from spark_purge.detach import drop, held
from spark_purge.group_facts import STATUS_FIELDS
from spark_purge.policy.groups import STATUS, is_external, no_members
from spark_purge.policy.inputs import TopicRuleRow
from spark_purge.policy.reuse import reused
from spark_purge.position_match import (
    ROW_FACT,
    ROW_FILE,
    ROW_GROUP,
    ROW_KIND,
    ROW_PACKED,
    ROW_PAIR,
    ROW_PARTITION,
    ROW_VANISHED,
    FactsAsk,
)
from spark_purge.schemas import GROUP_OFFSETS, PARTITION_STATE, PROGRESS_STORE, SNAPSHOT, VANISHED_STATE
from spark_purge.snapshot_pack import PACKED_COLUMN

KEY = ["group_id", "topic", "partition"]
CHANGED = "changed"  # ``Positions.after``: the key is one the batch records
PLACED = ("snapshot_id", "snapshot_time", "topic_id")  # the partition's columns a match gives each key, as ``p_<name>``


@dataclass(frozen=True)
class Positions:
    """The snapshot's positions (>= 0) matched with the store's, one row per key on either side.

    ``matched`` columns: the key; ``live`` (the snapshot has a position there, Kafka or external);
    ``k_offset`` / ``k_type`` / ``k_time`` (the lowest Kafka position, its group's type and the
    snapshot time of the Kafka rows; null: no Kafka
    position); ``k_no_members`` (every Kafka row of the key has surely no members);
    ``x_present`` (an external consumer has a position there); ``s_offset`` / ``s_time`` /
    ``s_type`` / ``s_topic_id`` (the store's row; null: not remembered); when ``placed``,
    ``p_snapshot_id`` / ``p_snapshot_time`` / ``p_topic_id`` (the snapshot's row of the key's
    partition; a null ``p_snapshot_id``: the snapshot lacks the partition).
    """

    matched: DataFrame
    placed: bool  # ``matched`` has the ``p_`` columns (the match had the snapshot's partitions; else topic ids unknown)
    kept: bool = False  # ``matched`` is held (``detach.held``) until ``release``
    # The snapshot time every Kafka row of the match has, when the caller knows it (the
    # planner: one snapshot); ``after`` at that time then reads it from ``k_time``.
    at: datetime | None = None

    @classmethod
    def match(
        cls, partitions: DataFrame | None, groups: DataFrame, store: DataFrame, keep: bool = True, at: datetime | None = None
    ) -> Positions:
        """Match ``groups`` (``GROUP_OFFSETS``) with ``store`` (``PROGRESS_STORE``; a table
        without ``group_type`` / ``topic_id`` reads them as null); held until ``release``
        (``keep``; otherwise left lazy, for a single use).
        ``partitions`` (``PARTITION_STATE``) is needed by ``vanished`` and ``staleness``; without
        it, ``changed`` gives every position a null topic id. ``at``: the ``snapshot_time`` of
        every row of ``groups``, when the caller knows it is one time (see ``after``)."""
        external = is_external(F.col("group_type"))
        live = (
            groups.where(F.col("committed_offset") >= 0)
            .groupBy(*KEY)
            .agg(
                F.min(F.when(~external, F.col("committed_offset"))).alias("k_offset"),
                F.max(F.when(~external, F.col("group_type"))).alias("k_type"),
                F.bool_and(F.when(~external, no_members(F.col("group_state"), F.col("group_type"), F.col("member_count")))).alias(
                    "k_no_members"
                ),
                F.bool_or(external).alias("x_present"),
                F.max(F.when(~external, F.col("snapshot_time"))).alias("k_time"),
            )
            .withColumn("live", F.lit(True))
        )
        s_type = F.col("group_type") if "group_type" in store.columns else F.lit(None).cast("string")
        s_topic_id = F.col("topic_id") if "topic_id" in store.columns else F.lit(None).cast("string")
        stored = store.where(F.col("committed_offset") >= 0).select(
            *KEY,
            F.col("committed_offset").alias("s_offset"),
            F.col("last_progress_time").alias("s_time"),
            s_type.alias("s_type"),
            s_topic_id.alias("s_topic_id"),
        )
        matched = live.join(stored, KEY, "full_outer").withColumn("live", F.coalesce(F.col("live"), F.lit(False)))
        if partitions is not None:  # once here, for vanished, staleness and after alike
            on = partitions.select("topic", "partition", *[F.col(c).alias(f"p_{c}") for c in PLACED])
            matched = matched.join(F.broadcast(on), ["topic", "partition"], "left")
        placed = partitions is not None
        return cls(held(matched), placed, kept=True, at=at) if keep else cls(matched, placed, at=at)

    def release(self) -> None:
        """Free ``matched``'s held rows (kept by ``match``); nothing when it was left lazy."""
        if self.kept:
            drop(self.matched)

    def _on_snapshot(self) -> DataFrame:
        """``matched``'s rows on the snapshot's partitions (keys on partitions the snapshot lacks
        drop out), with the partition's ``snapshot_id``, ``snapshot_time`` and ``topic_id``."""
        if not self.placed:
            raise ValueError("Positions.vanished needs the snapshot's partitions")
        return self.matched.where(F.col("p_snapshot_id").isNotNull()).select("*", *[F.col(f"p_{c}").alias(c) for c in PLACED])

    def _gone(self, unreadable: Iterable[str]) -> DataFrame:
        """The remembered positions the snapshot lacks, on its partitions: not of unreadable
        groups (unknown is not vanished), not seen on another incarnation of the topic (unknown
        ids on either side: it holds)."""
        gone = self._on_snapshot().where(~F.col("live") & F.col("s_offset").isNotNull())
        skip = sorted(set(unreadable))
        if skip:
            gone = gone.where(~F.col("group_id").isin(skip))
        return gone.where(~_other_incarnation(F.col("topic_id"), F.col("s_topic_id")))

    def vanished(self, unreadable: Iterable[str] = ()) -> DataFrame:
        """``GROUP_OFFSETS`` rows, ``Vanished``, for the remembered positions the snapshot lacks
        (see ``spark_purge.vanished``)."""
        return self._gone(unreadable).select(*_vanished_columns())

    def staleness(self, unreadable: Iterable[str] = ()) -> DataFrame:
        """Per group (``group_id``, ``stale_candidate``, ``last_progress``) over the snapshot's
        positions plus ``vanished(unreadable)``: a candidate surely has no members and every
        position it has is one the store knows at that offset; ``last_progress`` is the latest
        time the store saw one of them move (see the policy package docstring)."""
        return self._staleness(unreadable).drop("gone")

    def staleness_table(self, unreadable: Iterable[str] = ()) -> tuple[pa.Table, bool]:
        """``staleness(unreadable)`` on the driver as one Arrow table (O(groups): the columnar
        group facts look it up, ``spark_purge.group_facts``) and whether ``vanished(unreadable)``
        has a row, in one Spark job (issue 12). Without one, a plan needs no vanished rows: the
        planner then joins none, and runs one broadcast and one read of the match less."""
        table = self._staleness(unreadable).toArrow()
        gone = bool(pc.any(table.column("gone")).as_py()) if table.num_rows else False
        return table.drop_columns(["gone"]), gone

    def _staleness(self, unreadable: Iterable[str]) -> DataFrame:
        """``staleness``'s rows, each group's with ``gone``: it has a vanished row."""
        kafka, external, vanished, verdict = _staleness_columns()
        seen = self.matched.where(F.col("k_offset").isNotNull())
        if self.placed:
            # A position on another incarnation of the topic (another topic id) is not the one the
            # store knows, whatever its number: it is new, as ``changed`` records it.
            other = _other_incarnation(F.col("p_topic_id"), F.col("s_topic_id"))
            seen = seen.withColumn("s_offset", F.when(other, F.lit(None).cast("long")).otherwise(F.col("s_offset")))
        rows = seen.select(*kafka).unionByName(self.matched.where(F.col("x_present")).select(*external))
        rows = rows.unionByName(self._gone(unreadable).select(*vanished))
        return rows.groupBy("group_id").agg(*verdict)

    def changed(self, now: datetime) -> DataFrame:
        """The Kafka positions the store must record at ``now`` (``PROGRESS_STORE`` columns), with
        the values the store keeps for them from now on: a new key, or a moved offset, or a
        position on another incarnation of the topic (another topic id) is progress at ``now``;
        a newly known group type or topic id alone changes only those (the progress time and
        offset stay). Unchanged keys are left out. Keys on partitions the snapshot lacks keep
        a null topic id."""
        return self.after(now).where(F.col(CHANGED)).drop(CHANGED)

    def after(self, now: datetime) -> DataFrame:
        """What the store holds once ``changed(now)`` is recorded: every key it held or the
        snapshot adds, each with its values then (``PROGRESS_STORE`` columns: the changed keys'
        new values, the others' stored ones), plus ``changed`` (true: the key is one of
        ``changed(now)``). Keys only external consumers have, and nothing the store held, are
        left out, as the store never records them.

        A moved key's progress time is ``now``. When ``now`` is the match's ``at`` (the planner's
        batch: its time is the snapshot's), it is read from the rows (``k_time``, the same
        value) rather than written into the query as a constant: Spark inlines a timestamp
        constant into the code it generates, so each batch's query would be new code, compiled
        anew (twice) and run unoptimized by the JVM at every batch; from the rows, the query is
        the same every batch and its code is compiled once (issue 12)."""
        seen = F.col("k_offset").isNotNull()
        # k_time is the snapshot time of the key's Kafka rows: never null where ``moved_now``
        # holds (a moved key is ``seen``: it has a Kafka row).
        moved_at = F.col("k_time") if self.at is not None and self.at == now else F.lit(now).cast("timestamp")
        topic_id = F.col("p_topic_id") if self.placed else F.lit(None).cast("string")
        rows = self.matched.withColumn("topic_id", topic_id)
        recreated = _other_incarnation(F.col("topic_id"), F.col("s_topic_id"))
        moved = F.col("s_offset").isNull() | (F.col("s_offset") != F.col("k_offset")) | recreated
        retyped = (F.col("k_type").isNotNull() & ~F.col("k_type").eqNullSafe(F.col("s_type"))) | (
            F.col("topic_id").isNotNull() & F.col("s_topic_id").isNull()
        )
        changed = seen & (moved | retyped)
        moved_now = changed & moved
        return rows.where(changed | F.col("s_offset").isNotNull()).select(
            *KEY,
            F.when(changed, F.col("k_offset")).otherwise(F.col("s_offset")).alias("committed_offset"),
            F.when(moved_now, moved_at).otherwise(F.col("s_time")).alias("last_progress_time"),
            F.when(moved_now, F.col("k_type"))
            .when(changed, F.coalesce(F.col("k_type"), F.col("s_type")))
            .otherwise(F.col("s_type"))
            .alias("group_type"),
            F.when(changed, F.coalesce(F.col("topic_id"), F.col("s_topic_id"))).otherwise(F.col("s_topic_id")).alias("topic_id"),
            changed.alias(CHANGED),
        )


# The store held nested by partition (``NestedPositions``): one row per (topic, partition), its
# positions (``position_match.POSITION``: ``PROGRESS_STORE``'s values and the batch's flags) and
# how many of them the batch changed.
NESTED_KEY = "positions"


def _nested_types() -> tuple[StructType, StructType, StructType]:
    """The nested match's input and output rows and the nested store's, as Spark types (declared
    once, in Arrow, by ``spark_purge.position_match``)."""
    from spark_purge.position_match import NESTED_INPUT, NESTED_OUTPUT

    schema = from_arrow_schema(pa.schema([pa.field(n, k) for n, k in NESTED_INPUT]))
    out = from_arrow_schema(pa.schema([pa.field(n, k) for n, k in NESTED_OUTPUT]))
    store = StructType([out[name] for name in ("topic", "partition", NESTED_KEY, "changed")])
    return schema, out, store


NESTED_INPUT_TYPE, NESTED_OUTPUT_TYPE, NESTED_STORE = _nested_types()
# The store held packed (``NestedPositions.match``'s ``packed``): a row per chunk of partitions,
# its ``NESTED_STORE`` rows as one Arrow IPC stream (``position_match.pack``) and how many of
# their positions the batch changed.
PACKED_KEY = "packed"
PACKED_STORE = StructType([NESTED_OUTPUT_TYPE[PACKED_KEY], NESTED_OUTPUT_TYPE["changed"]])


def is_nested(store: DataFrame) -> bool:
    """``store`` is nested by partition (``NESTED_STORE``) or packed (``PACKED_STORE``), not flat."""
    return NESTED_KEY in store.columns or PACKED_KEY in store.columns


def unpack_store(store: DataFrame) -> DataFrame:
    """A store's rows nested by partition (``NESTED_STORE``): packed ones (``PACKED_STORE``)
    unpacked in a Python task (``position_match.unpacked_batches``), others as they are."""
    if PACKED_KEY not in store.columns:
        return store
    from spark_purge.position_match import unpacked_batches

    return store.select(PACKED_KEY).mapInArrow(unpacked_batches, NESTED_STORE)


def nest_store(store: DataFrame) -> DataFrame:
    """Flat store rows (``PROGRESS_STORE``; a table without ``group_type`` / ``topic_id`` reads
    them as null) nested by partition (``NESTED_STORE``, nothing changed): one shuffle, for a
    store read from its table (a batch's own rows stay nested from one batch to the next)."""
    position = NESTED_STORE[NESTED_KEY].dataType
    assert isinstance(position, ArrayType) and isinstance(position.elementType, StructType)
    values = {
        "group_id": F.col("group_id"),
        "committed_offset": F.col("committed_offset"),
        "last_progress_time": F.col("last_progress_time"),
        "group_type": F.col("group_type") if "group_type" in store.columns else F.lit(None),
        "topic_id": F.col("topic_id") if "topic_id" in store.columns else F.lit(None),
        "changed": F.lit(False),
    }
    entry = F.struct(*[values[f.name].cast(f.dataType).alias(f.name) for f in position.elementType.fields])
    return store.groupBy("topic", "partition").agg(F.collect_list(entry).cast(position).alias(NESTED_KEY), F.lit(0).cast("long").alias("changed"))


def flat_store(nested: DataFrame, changed_only: bool = False) -> DataFrame:
    """Nested store rows (``NESTED_STORE``, or packed: ``PACKED_STORE``) as flat ones
    (``PROGRESS_STORE``): every position, or only those the batch changed (the rows its append
    records)."""
    rows = unpack_store(nested).select("topic", "partition", F.explode(NESTED_KEY).alias("e"))
    if changed_only:
        rows = rows.where(F.col("e.changed"))
    keys = ("topic", "partition")
    return rows.select(*[F.col(n) if n in keys else F.col(f"e.{n}").alias(n) for n in PROGRESS_STORE.fieldNames()])


class NestedPositions:
    """The snapshot's positions matched with the store's, both nested by partition, in one Arrow
    task (``spark_purge.position_match``; issue 12): what ``Positions`` gives through
    ``staleness_table``, ``vanished`` and ``after`` at the snapshot's time, from one held table
    of O(partitions + groups) rows, with no shuffle and no row per commit in Spark.

    ``match`` takes the snapshot's rows (``SNAPSHOT``: the group rows nested in ``groups``) and
    the store's nested (``NESTED_STORE``: ``nest_store``) or packed (``PACKED_STORE``: the
    store's rows after the last batch as this class gave them, ``hand_over``); ``unreadable``:
    groups whose commits the snapshot could not read (their remembered positions never vanish);
    ``at``: the snapshot's time; ``packed`` (the default): the store after the batch is held
    packed, so the next batch's match reads it with no conversion of its rows (issue 12).
    """

    def __init__(self, out: DataFrame, at: datetime, log_batch: int | None, packed: bool, asked: Sequence[TopicRuleRow] | None = None) -> None:
        """``match`` makes one; ``packed``: the task gave the store after the batch packed (``match``'s);
        ``asked``: the rules the task made the consumer facts with (None: not asked)."""
        self.out = out  # held (``detach.held``) until ``release``
        self.at = at
        self.log_batch = log_batch
        self.packed = packed
        self._log_rows: list[dict[str, Any]] | None = None  # the task's file row, once a job read it
        self._pairs: pa.Table | None = None  # the rules' discovery pairs, once a job read them
        self._gone: bool | None = None  # a remembered position vanished, once a job read it
        self._asked = None if asked is None else tuple(asked)  # the rules the task made facts with (``match``'s ``facts``)
        self._released = False

    @classmethod
    def match(
        cls,
        snapshot: DataFrame,
        store: DataFrame,
        unreadable: Iterable[str],
        at: datetime,
        chunk: int | None = None,
        log_batch: int | None = None,
        rewrite_above: int | None = None,
        packed: bool = True,
        facts: Sequence[TopicRuleRow] | None = None,
    ) -> NestedPositions:
        """``log_batch``: the task also writes the changed positions as batch ``log_batch``'s
        progress log rows, in Parquet (``log_file``); ``rewrite_above``: with the unchanged ones
        when the changed ones are more (``position_match.LogWriter``). ``facts``: the task also
        gives the consumer facts of the snapshot's partitions whose topic has one of these rules
        (``facts``), unless a remembered position vanished (none or empty: not asked)."""
        from spark_purge.position_match import nested_batches

        none = {f.name: F.lit(None).cast(f.dataType) for f in NESTED_INPUT_TYPE.fields}
        none["groups"] = F.lit(None).cast(SNAPSHOT["groups"].dataType)
        ask, carried, out_type = _facts_ask(snapshot.schema, facts)
        for name in carried:
            none[name] = F.lit(None).cast(snapshot.schema[name].dataType)
        names = [*NESTED_INPUT_TYPE.fieldNames(), *carried]
        # The snapshot's group rows nested (``groups``) or packed (``PACKED_SNAPSHOT``: the task
        # reads them from the blobs, ``snapshot_pack``); the other column null.
        absent = {NESTED_KEY, PACKED_KEY} | {n for n in ("groups", PACKED_COLUMN) if n not in snapshot.columns}
        snap = snapshot.select(*[F.lit(False).alias(n) if n == "stored" else (none[n].alias(n) if n in absent else F.col(n)) for n in names])
        kept = store.select(
            *[
                F.lit(True).alias(n) if n == "stored" else (F.col(n) if n in store.columns and n in ("topic", "partition", NESTED_KEY, PACKED_KEY) else none[n].alias(n))
                for n in names
            ]
        )
        # One task, both sides whole: its Python worker is the one a local session keeps idle
        # (``session.IDLE_PYTHON_WORKERS``), and no side is shuffled.
        task = nested_batches(tuple(sorted(set(unreadable))), chunk, log_batch, rewrite_above, packed, ask)
        out = snap.unionByName(kept).coalesce(1).mapInArrow(task, out_type)
        return cls(held(out), at, log_batch, packed, None if ask is None else facts)

    def release(self) -> None:
        """Free the held match (nothing when already freed)."""
        if not self._released:
            self._released = True
            drop(self.out)

    def staleness_table(self) -> tuple[pa.Table, bool]:
        """Per group (``group_id``, ``stale_candidate``, ``last_progress``) on the driver as one
        Arrow table (O(groups)), and whether any remembered position vanished: the Spark job that
        computes the match."""
        columns = ["group_id", "stale_candidate", "last_progress", "gone"]
        # The rules' discovery pairs (``discovery``) come in the same job, and so does the task's
        # file row (``log_file``) when asked for.
        kinds = [ROW_GROUP, ROW_PAIR] + ([ROW_FILE] if self.log_batch is not None else [])
        extra = ["topic", "external", *(_LOG_COLUMNS if self.log_batch is not None else ())]
        table = self.out.where(_kind().isin(kinds)).select(*columns, *extra, ROW_KIND).toArrow()
        kind = table.column(ROW_KIND)
        self._pairs = table.filter(pc.equal(kind, ROW_PAIR)).select(["topic", "group_id", "external"])
        if self.log_batch is not None:
            self._log_rows = table.filter(pc.equal(kind, ROW_FILE)).select(list(_LOG_COLUMNS)).to_pylist()
        table = table.filter(pc.equal(kind, ROW_GROUP)).select(columns)
        gone = bool(pc.any(table.column("gone")).as_py()) if table.num_rows else False
        self._gone = gone
        return table.drop_columns(["gone"]), gone

    def facts(self) -> MatchedFacts | None:
        """The consumer facts the task gave (``match``'s ``facts``) and the rules it made them
        with, once ``staleness_table`` ran; None when not asked, or when a remembered position
        vanished (the task then made none: the vanished groups' rows join the facts' own task)."""
        if self._asked is None or self._gone is None or self._gone:
            return None
        rows = self.out.where(_kind() == ROW_FACT).select(*PARTITION_STATE.fieldNames(), *STATUS.fieldNames())
        return MatchedFacts(rows, self._asked)

    def discovery(self) -> pa.Table | None:
        """The rules' discovery pairs of the matched snapshot and its vanished positions (``topic``,
        ``group_id``, ``external``: ``position_match.discovery``, the rows
        ``policy.plan._discovery_pairs`` gives as a set), as ``staleness_table`` read them in its
        job; None before it ran."""
        return self._pairs

    def vanished(self) -> DataFrame:
        """``GROUP_OFFSETS`` rows, ``Vanished``, for the remembered positions the snapshot lacks."""
        rows = self.out.where(_kind() == ROW_VANISHED)
        columns = {
            "snapshot_id": F.col("snapshot_id"),
            "snapshot_time": F.col("snapshot_time"),
            "group_id": F.col("group_id"),
            "group_state": F.lit(VANISHED_STATE),
            "group_type": F.col("group_type"),
            "member_count": F.lit(0),
            "topic": F.col("topic"),
            "partition": F.col("partition"),
            "committed_offset": F.col("offset"),
            "commit_metadata": F.lit(None),
            "committed_leader_epoch": F.lit(None),
            "epoch_end_offset": F.lit(None),
        }
        return rows.select(*[columns[f.name].cast(f.dataType).alias(f.name) for f in GROUP_OFFSETS.fields])

    def after(self, now: datetime) -> DataFrame:
        """What the store holds once the batch is recorded (``NESTED_STORE``: every position
        flagged ``changed`` or not, as ``Positions.after`` gives them flat). Only at the
        snapshot's time (``at``), which the match was computed at."""
        return unpack_store(self._after(now))

    def _after(self, now: datetime) -> DataFrame:
        """``after(now)`` as the match holds it: packed (``PACKED_STORE``) or nested."""
        if now != self.at:
            raise ValueError(f"NestedPositions.after: the match is at {self.at.isoformat()}, not {now.isoformat()}")
        if self.packed:
            return self.out.where(_kind() == ROW_PACKED).select(*PACKED_STORE.fieldNames())
        return self.out.where(_kind() == ROW_PARTITION).select(*NESTED_STORE.fieldNames())

    def log_file(self) -> LogFile | None:
        """The changed positions as the match's task wrote them (``match``'s ``log_batch``), read
        with the staleness (``staleness_table``), or from the held rows (a small job: one row of
        them) when that did not run; None when not asked for."""
        if self.log_batch is None:
            return None
        rows = self._log_rows
        if rows is None:
            rows = self.out.where(_kind() == ROW_FILE).select(*_LOG_COLUMNS).toArrow().to_pylist()
        if len(rows) != 1:
            return None
        row = rows[0]
        rest = row["log_rest"]
        return LogFile(
            self.log_batch,
            int(row["changed"] or 0),
            bytes(row["log_file"]) if row["log_file"] else None,
            None if rest is None else bytes(rest),
            None if row["offset"] is None else int(row["offset"]),
        )

    def hand_over(self, now: datetime) -> tuple[DataFrame, DataFrame]:
        """``after(now)`` as the match holds it (packed: ``PACKED_STORE``, when asked) and the
        held rows it reads, which the caller now owns (``release`` leaves them; ``detach.drop``
        of the second frees them): the store keeps them for its next read with no copy. They
        are cut from any table's lineage already (``held``)."""
        rows = self._after(now)
        self._released = True
        return rows, self.out


@dataclass(frozen=True)
class MatchedFacts:
    """The consumer facts a store match's task gave (``NestedPositions.facts``): ``rows``, a row
    per snapshot partition whose topic has one of ``rules``, its ``PARTITION_STATE`` columns and
    ``policy.groups.STATUS``'s facts, as ``policy.groups.with_group_status`` gives them for
    those rules; ``compute_plan`` takes them when its own rules are these. Every column of
    ``rows`` may hold a null as Spark sees it (the match's rows of every kind share its output
    columns), so a plan made from them has ``PLAN``'s columns and types, all nullable."""

    rows: DataFrame
    rules: tuple[TopicRuleRow, ...]


def _facts_ask(snapshot: StructType, rules: Sequence[TopicRuleRow] | None) -> tuple[FactsAsk | None, list[str], StructType]:
    """What ``NestedPositions.match`` asks its task for the facts (None: ``rules`` none or empty),
    the snapshot columns its input then carries beyond ``NESTED_INPUT_TYPE``'s, and the output type."""
    if not rules:
        return None, [], NESTED_OUTPUT_TYPE
    carry = PARTITION_STATE.fieldNames()
    carried = [c for c in carry if c not in NESTED_INPUT_TYPE.fieldNames()]
    added = [StructField(c, snapshot[c].dataType, True) for c in carry if c not in NESTED_OUTPUT_TYPE.fieldNames()]
    arrow = to_arrow_schema(StructType(added), timezone="UTC")
    fields = tuple((f.name, f.type) for f in arrow) + tuple(STATUS_FIELDS)
    out_type = StructType([*NESTED_OUTPUT_TYPE.fields, *added, *STATUS.fields])
    table = pa.table(
        {
            "topic": pa.array([r.topic for r in rules], pa.string()),
            "required": pa.array([list(r.required) for r in rules], pa.list_(pa.string())),
            "ignore_stale": pa.array([r.ignore_stale for r in rules], pa.bool_()),
            "stale_before": pa.array([as_utc(r.stale_before) for r in rules], pa.timestamp("us", tz="UTC")),
        }
    )
    return FactsAsk(table, tuple(carry), fields), carried, out_type


# The match's file row (``position_match.LogWriter.row``): the files and their row counts.
_LOG_COLUMNS = ("log_file", "changed", "log_rest", "offset")
def _kind() -> Column:
    """What a row of the match is (``position_match.ROW_KINDS``)."""
    return F.col(ROW_KIND)


@dataclass(frozen=True)
class LogFile:
    """Batch ``batch_id``'s changed positions as the match's task wrote them: ``rows`` of them,
    in ``body`` (a Parquet file of ``position_match.LOG_SCHEMA``'s columns, its not-null ones
    checked), or None when the task made no file (no rows; a null where the log keeps none).
    ``rest``: when the log is due a rewrite, the other positions the store keeps, ``rest_rows``
    of them, the same way (empty bytes: none), else None."""

    batch_id: int
    rows: int
    body: bytes | None
    rest: bytes | None = None
    rest_rows: int | None = None


def _other_incarnation(seen: Column, stored: Column) -> Column:
    """A remembered position (topic id ``stored``) is of another incarnation of the topic than
    the snapshot's (``seen``): both ids known and different. An unknown id on either side is
    not another incarnation: the position holds."""
    return seen.isNotNull() & stored.isNotNull() & (seen != stored)


@reused
def _vanished_columns() -> list[Column]:
    """``GROUP_OFFSETS`` columns of a remembered position the snapshot lacks (``Vanished``;
    made once per process)."""
    columns = {
        "snapshot_id": F.col("snapshot_id"),
        "snapshot_time": F.col("snapshot_time"),
        "group_id": F.col("group_id"),
        "group_state": F.lit(VANISHED_STATE),
        "group_type": F.col("s_type"),
        "member_count": F.lit(0),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "committed_offset": F.col("s_offset"),
        "commit_metadata": F.lit(None),
        "committed_leader_epoch": F.lit(None),  # a remembered position carries no epoch to check
        "epoch_end_offset": F.lit(None),
    }
    return [columns[f.name].cast(f.dataType).alias(f.name) for f in GROUP_OFFSETS.fields]


@reused
def _staleness_columns() -> tuple[list[Column], list[Column], list[Column], list[Column]]:
    """``staleness``'s selects (Kafka, external and vanished positions) and its per-group
    verdict (made once per process)."""
    # Kafka positions: known when the store has the same offset.
    kafka = [
        F.col("group_id"),
        F.lit(False).alias("gone"),
        F.col("k_no_members").alias("no_members"),
        F.coalesce(F.col("s_offset") == F.col("k_offset"), F.lit(False)).alias("known"),
        F.col("s_time").alias("p_time"),
    ]
    # External positions: never stale (and a Kafka group of the same name is not either).
    external = [F.col("group_id"), F.lit(False).alias("gone"), F.lit(False).alias("no_members"), F.lit(False).alias("known"), F.lit(None).cast("timestamp").alias("p_time")]
    # Vanished rows: no members, at the remembered offset (known), since its time.
    gone = [F.col("group_id"), F.lit(True).alias("gone"), F.lit(True).alias("no_members"), F.lit(True).alias("known"), F.col("s_time").alias("p_time")]
    verdict = [
        (F.bool_and("no_members") & F.bool_and("known")).alias("stale_candidate"),
        F.max("p_time").alias("last_progress"),
        F.bool_or("gone").alias("gone"),
    ]
    return kafka, external, gone, verdict


__all__ = [
    "NESTED_KEY",
    "NESTED_STORE",
    "PACKED_KEY",
    "PACKED_STORE",
    "LogFile",
    "NestedPositions",
    "Positions",
    "flat_store",
    "is_nested",
    "nest_store",
    "unpack_store",
]
