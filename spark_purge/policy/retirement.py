"""Partition retirement in the plan (seed 002): when a retiring partition may be reclaimed.

A partition's retirement status comes from the registry (``spark_purge.retirement``), as its
current state (``RetirementRegistry.current``): ``ReadOnly`` (1, retiring) or ``None`` (-1, retired, with the
high watermark it was reclaimed to). A partition is *retiring* while it is ReadOnly, or None with
records written since it was reclaimed (its high watermark is above that offset).

A retiring partition is planned like any other (every bound, every blocker), then:

- **drained**: nothing blocks it and the bounds allow its whole log (``c_cutoff`` equals the high
  watermark: every required consumer of every kind — groups, share groups, vanished groups,
  external consumers — is at it, and no time floor or open transaction holds it);
- **quiet**: its high watermark has not moved for ``retirement.delay``: the newest append-history
  row of the partition (``APPEND_HISTORY``, a row per change of the high watermark, stamped after
  the batch that saw it) has the current high watermark and is at least that old;
- drained and quiet: **reclaim**: cutoff = the high watermark (explicit offset), min_step does
  not apply; the runner then records it as None in the registry;
- drained, not quiet: **recent writes**: nothing is deleted (cutoff null);
- otherwise **held**: the ordinary plan stands (a partial purge to the consumers' positions is
  still made), and ``blocking_group`` / ``detail`` name what holds it.

The binding constraint of a retiring partition is always ``retiring``, or
``writes_to_retired_partition`` for a None one written to again (reported in every plan and audit
row until it is reclaimed again under the same rule). A row is a reclaim exactly when its
constraint is one of these two and its cutoff equals its high watermark (``is_reclaim``).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType

from spark_purge._time import as_utc, format_duration
from spark_purge.policy.incarnation import same_incarnation
from spark_purge.policy.reuse import reused
from spark_purge.schemas import READ_ONLY, RETIRED, RETIREMENT_CONSTRAINTS

RETIRING, WRITES_TO_RETIRED = RETIREMENT_CONSTRAINTS
RECENT_WRITES = "recent_writes"  # how the detail names writes within retirement.delay


class _Keyed(Protocol):
    def __getitem__(self, key: str) -> Any: ...


def is_reclaim(row: _Keyed) -> bool:
    """A plan row (``PLAN``) that reclaims a retiring partition to its high watermark."""
    return (
        row["binding_constraint"] in RETIREMENT_CONSTRAINTS
        and row["cutoff"] is not None
        and int(row["cutoff"]) == int(row["high_watermark"])
    )


def with_retirement_facts(
    df: DataFrame, state: DataFrame, history: DataFrame | None, now: datetime, delay_ms: int
) -> DataFrame:
    """Adds ``r_status`` (null: ReadWrite), ``r_hw`` (the offset a None partition was reclaimed
    to), ``r_seen_at`` (when the current high watermark was first recorded; null: not yet) and
    ``r_quiet`` (it has not moved for ``delay_ms`` before ``now``). ``state``: the registry's current state
    (``retirement.RetirementRegistry.current``: topic, partition, status, reclaimed_to);
    ``history``: ``APPEND_HISTORY`` (None: no history kept, so nothing is ever quiet); only its
    rows of each partition's own topic incarnation count (``policy.incarnation``)."""
    facts = state.select("topic", "partition", F.col("status").alias("r_status"), F.col("reclaimed_to").alias("r_hw"))
    df = df.join(facts, ["topic", "partition"], "left")
    if history is None:
        return df.select(
            "*", F.lit(None).cast("timestamp").alias("r_seen_at"), F.lit(False).alias("r_quiet")
        )
    mine = same_incarnation(history, df.select("topic", "partition", "topic_id"))
    newest = mine.groupBy("topic", "partition").agg(
        F.max("snapshot_time").alias("r_newest_at"), F.max_by("high_watermark", "snapshot_time").alias("r_newest_hw")
    )
    df = df.join(newest, ["topic", "partition"], "left")
    seen_at = F.when(F.col("r_newest_hw") == F.col("high_watermark"), F.col("r_newest_at"))
    quiet_before = F.lit(as_utc(now) - timedelta(milliseconds=delay_ms)).cast("timestamp")
    return df.withColumns(
        {"r_seen_at": seen_at, "r_quiet": F.coalesce(seen_at <= quiet_before, F.lit(False))}
    ).drop("r_newest_at", "r_newest_hw")


def _retiring() -> Column:
    status = F.col("r_status")
    return F.coalesce(
        (status == READ_ONLY) | ((status == RETIRED) & (F.col("high_watermark") > F.coalesce(F.col("r_hw"), F.lit(-1)))),
        F.lit(False),
    )


def with_retirement(df: DataFrame, delay_ms: int) -> DataFrame:
    """Overrides the explained plan columns of retiring partitions (see the module docstring):
    ``binding_constraint``, ``cutoff``, ``actionable``, ``records_to_delete``, ``blocking_group``,
    ``blocking_group_type`` and ``detail``, each in its place. Needs ``with_retirement_facts``
    and ``with_explanation``."""
    return df.withColumns(_retirement_columns(delay_ms))


@reused
def _retirement_columns(delay_ms: int) -> dict[str, Column]:
    """The columns ``with_retirement`` replaces (made once per process and delay)."""
    hw, log_start = F.col("high_watermark"), F.col("log_start_offset")
    retiring = _retiring()
    drained = ~F.col("blocked") & (F.col("c_cutoff") >= hw)
    reclaim = retiring & drained & F.col("r_quiet")
    recent = retiring & drained & ~F.col("r_quiet")
    retired_again = retiring & (F.col("r_status") == RETIRED)
    delay = format_duration(delay_ms)
    prefix = F.when(
        retired_again,
        F.format_string("%s: %d record(s) written since it was reclaimed at %d; ", F.lit(WRITES_TO_RETIRED), hw - F.col("r_hw"), F.col("r_hw")),
    ).otherwise(F.lit(""))
    seen = F.when(
        F.col("r_seen_at").isNull(), F.format_string("not yet seen unchanged at %d", hw)
    ).otherwise(F.format_string("at %d since %s", hw, F.date_format("r_seen_at", "yyyy-MM-dd HH:mm:ss")))
    why = (
        F.when(
            reclaim,
            F.format_string(
                "drained by every required consumer and no writes for over %s: reclaimed to its high watermark %d", F.lit(delay), hw
            ),
        )
        .when(
            recent,
            F.format_string(
                "%s: drained, but the high watermark is %s; reclaimed once unchanged for %s", F.lit(RECENT_WRITES), seen, F.lit(delay)
            ),
        )
        .otherwise(F.concat(F.lit("retiring, not drained: "), F.coalesce(F.col("detail"), F.lit(""))))
    )
    binding = F.when(retired_again, F.lit(WRITES_TO_RETIRED)).when(retiring, F.lit(RETIRING)).otherwise(F.col("binding_constraint"))
    cutoff = F.when(reclaim, hw).when(recent, F.lit(None).cast(LongType())).otherwise(F.col("cutoff"))
    actionable = F.when(reclaim, hw > log_start).when(recent, F.lit(False)).otherwise(F.col("actionable"))
    records = F.when(reclaim, F.greatest(hw - log_start, F.lit(0))).when(recent, F.lit(0)).otherwise(F.col("records_to_delete"))
    no_group = reclaim | recent
    replaced = {
        "binding_constraint": binding,
        "cutoff": cutoff,
        "actionable": actionable,
        "records_to_delete": records.cast(LongType()),
        "blocking_group": F.when(no_group, F.lit(None).cast(StringType())).otherwise(F.col("blocking_group")),
        "blocking_group_type": F.when(no_group, F.lit(None).cast(StringType())).otherwise(F.col("blocking_group_type")),
        "detail": F.when(retiring, F.concat(prefix, why)).otherwise(F.col("detail")),
    }
    return replaced


__all__ = [
    "RECENT_WRITES",
    "RETIREMENT_CONSTRAINTS",
    "RETIRING",
    "WRITES_TO_RETIRED",
    "is_reclaim",
    "with_retirement",
    "with_retirement_facts",
]
