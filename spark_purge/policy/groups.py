"""Consumer-group facts per selected partition: which required groups lack a commit, which are
stale, and the lowest commit that counts (see the policy package docstring for staleness)."""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, StructField, StructType

from spark_purge.group_facts import STATUS_FIELDS, carried_batches, status_batches
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


def group_status(selected: DataFrame, groups: DataFrame | None, staleness: DataFrame | pa.Table | None) -> DataFrame:
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
    ``last_progress`` (``positions.Positions.staleness``, or its Arrow table from
    ``Positions.staleness_table``; None: no progress known, nobody is stale). A row with ``committed_offset`` -1 (members hold the partition, no position)
    is no commit: the group is missing there.

    The partition's required consumers are the rule's ``required`` groups plus every external
    consumer with a row on it (a static hold on partition 0 says nothing of partition 1). Each
    row of a required consumer counts once (a group with none counts as one row without a
    commit: missing). The rows never leave their partition's row: each partition's facts are
    computed from it where it is, columnar, in one ``mapInArrow`` (``spark_purge.group_facts``), with
    no row made per commit and no join on a group (issue 12; the snapshot is hashed by topic and
    partition, ``pipeline.kept``, and nothing shuffles it before the facts). Partitions without a
    required consumer get no row.
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
    # The rows' facts per partition, columnar (``spark_purge.group_facts``): an exploded row per
    # commit, filtered and aggregated back by Spark, was most of the plan's task time at 10k
    # partitions x 10k groups (issue 12). Staleness is O(groups): it crosses once, as Arrow.
    staleness = _staleness_arrow(staleness)
    # One task: its Python worker is the one a local session keeps idle between batches
    # (``session.IDLE_PYTHON_WORKERS``); two tasks forked a new worker every batch, whose start
    # (PySpark's worker, PyArrow and pandas imported) cost more than the work (0.1 s at 10k x 10k).
    return parts.coalesce(1).mapInArrow(status_batches(staleness), _status_schema(parts.schema))


def with_group_status(selected: DataFrame, staleness: DataFrame | pa.Table | None) -> DataFrame:
    """``selected`` without its ``groups`` and ``unreadable_groups``, with ``group_status``'s facts
    of its own group rows (``groups``) beside each row, null where the partition has no required
    consumer: what a left join on ``KEYS`` of ``selected`` with ``group_status(selected, None,
    staleness)`` gives (with the keys first), made in the facts' own task (``mapInArrow``), with
    no join: the rows go through the task and come back with their facts (issue 12: one Spark
    stage and job fewer a plan, and no broadcast)."""
    carry = tuple(c for c in selected.columns if c not in ("groups", "unreadable_groups"))
    clash = sorted(set(carry) & set(STATUS.fieldNames()))
    if clash:
        raise ValueError(f"with_group_status: selected has columns named as facts: {', '.join(clash)}")
    parts = selected.select(*carry, F.col("groups").alias("rows"))
    schema = StructType([selected.schema[c] for c in carry] + list(STATUS.fields))
    # One task, as group_status's (its worker is the one the session keeps idle).
    task = carried_batches(_staleness_arrow(staleness), carry)
    return parts.coalesce(1).mapInArrow(task, schema).select(*KEYS, *(c for c in schema.fieldNames() if c not in KEYS))


def _staleness_arrow(staleness: DataFrame | pa.Table | None) -> pa.Table | None:
    """The staleness the facts' task takes: O(groups) rows, crossing once as Arrow."""
    if isinstance(staleness, DataFrame):
        return staleness.select("group_id", "stale_candidate", "last_progress").toArrow()
    return staleness


def _status_schema(parts: StructType) -> StructType:
    """``group_status``'s output: the partition keys as ``parts`` has them, then the facts."""
    keys = [StructField(k, parts[k].dataType, True) for k in KEYS]
    return StructType(keys + list(STATUS.fields))


# The facts' Spark types: ``group_facts.STATUS_FIELDS``, declared once (as Arrow types).
STATUS = from_arrow_schema(pa.schema([pa.field(name, kind) for name, kind in STATUS_FIELDS]))


def is_external(group_type: Column) -> Column:
    """Whether a row's ``group_type`` is an external consumer's (false for a null type)."""
    return F.coalesce(group_type.isin(*EXTERNAL_CONSUMER_TYPES), F.lit(False))
