"""The purge policy (package): which offsets are safe to delete, as pure ``DataFrame -> DataFrame`` logic.

No Kafka, no Delta, no clock: ``now`` is passed in. The main entry point is ``compute_plan``;
its output has exactly the schema ``schemas.PLAN``, one row per partition selected by a rule.
It runs in three steps (after ``with_append_floor``, which lowers the time floor to append
time): ``with_bounds`` (the cutoff the bounds allow, and which bound sets it)
-> ``with_binding_constraint`` (what blocks or binds the partition; whether to act) ->
``with_explanation`` (the blocking group and the human-readable ``detail``).

Names: ``log_start_offset`` is the partition's first offset (what DeleteRecords moves);
``last_stable_offset`` is Kafka's LSO, the READ_COMMITTED end, below the high watermark while
a transaction is open.

cutoff(p) = min(consumed(p), time floor(p), high watermark, last stable offset), where
consumed(p) is the lowest position over the topic's required consumers.

Consumers (``GROUP_OFFSETS`` rows; any row on a topic makes a group discovered there):

- Kafka groups of every type (classic, KIP-848 ``consumer``, ``streams``, ``share``): the row's
  ``committed_offset`` is the commit, or a share group's share-partition start offset; ``-1``
  means the group's members hold the partition without a position: a missing commit.
- ``group_state = "Vanished"`` (``schemas.VANISHED_STATE``): a group Kafka forgot, at the last
  position the purge saw; it has no members, so it can go stale; while it binds and is not stale
  the constraint is ``vanished_group``.
- External consumers (``group_type`` in ``schemas.EXTERNAL_CONSUMER_TYPES``: a Spark query's
  checkpoint, a static hold): required on exactly the partitions they have a row on, in every
  rule (listed groups or discovery, exclusions do not apply); a -1 row blocks the partition
  (``missing_commit``) whatever ``on_missing_commit`` says; never stale; binding ``external``.
  An unreadable one blocks only the topics it has rows on (its -1 rows name them).

Inputs the data source must provide (the pipeline asks for them up front):

- ``retention_floors(config)``: per rule with ``min_retention``, the topic regex and the
  retention, relative to the snapshot's time (``time_floor_requests(config, now)``: the same as
  floor times ``now - min_retention``). The snapshot's ``time_floor_time``/``time_floor_offset``
  answer it (offset of the first record at/after the floor time; the high watermark when every
  record is older). A partition whose floor is needed but null, or was looked up for a *later*
  time than required, is not purged (binding ``time_floor``).
- ``append_history`` (``APPEND_HISTORY``, kept by the pipeline in the checkpoint): the floor is
  lowered to the high watermark of the newest history row at or before the floor time, so
  records *appended* within ``min_retention`` are kept whatever their CreateTime; with no such
  row the floor is the log start (``with_append_floor``; ``time_floor_source`` says which bound).
  Only rows of the partition's current topic incarnation count (``incarnation``: same topic id).
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
   ``commit_beyond_end``: a required Kafka group's commit is above the high watermark (commits
   are read before the high watermark, so the log lost what the group read: the topic was
   recreated, or truncated). ``commit_diverged``: a required commit carries a leader epoch whose
   end offset in the log (``epoch_end_offset``, OffsetForLeaderEpoch) is below it (KIP-320).
   Both block: a commit of another history says nothing about what was read of this one.
4. ``time_floor``: the rule needs a floor and the snapshot has none usable ("floor unknown").
5. Otherwise the bound itself. A cutoff at the high watermark is ``high_watermark`` (nothing is
   held back, whoever else sits there). Other ties prefer the consumer (``group``, ``stale_group``,
   ``vanished_group`` or ``external``, by the kind at the minimum), then ``time_floor``, then
   ``high_watermark``, then ``last_stable_offset`` (so the last stable offset binds only while a
   transaction keeps it below the high watermark). Among groups: lowest offset, an active group before a stale one,
   then group id. A manual offset binds (``manual``) when it is <= the safe cutoff.
   Then: cutoff <= log start -> the bound keeps its name (a group sitting at the log start is
   ``group``, holding back every record; an emptied partition is ``high_watermark``), not
   actionable;
   cutoff - log start < min_step -> ``below_min_step`` (manual entries skip min_step);
   else actionable.

Stale groups: no members (state ``Empty`` or ``Vanished``; or a *classic* group that is ``Dead`` or has 0 members
— KIP-848 ``consumer`` groups show as Dead with no members to the classic API, so that alone never
counts) AND known progress on every partition it commits to (``progress`` row whose offset equals
the current commit) whose latest ``last_progress_time`` is older than the rule's ``stale_after``.
Unknown progress means not stale. A stale group with ``on_stale_group: block`` still holds the
cutoff at its commit (binding ``stale_group``); with ``ignore`` it is left out of the minimum.
Either way it is listed in ``stale_groups``.

Retiring partitions (``retirement`` input, ``policy.retirement``): after the explanation, a
ReadOnly partition (or a None one written past its reclaimed offset) is labelled ``retiring`` (or
``writes_to_retired_partition``); cut to its high watermark once drained (the cutoff above equals
it) and its high watermark has stood still for ``retirement.delay`` (append history); drained but
not still: no cut (``recent_writes``); otherwise planned as above, naming what holds it.

Manual entries: cutoff = min(manual, safe cutoff); with ``force``, min(manual, high watermark,
last stable offset) and no group or floor checks (still never on internal, protected or compacted
topics); when the high watermark or an open transaction bounds a forced cut, that is the binding
constraint and the detail says so.
"""
from __future__ import annotations

from spark_purge.policy.groups import group_status
from spark_purge.policy.inputs import (
    RetentionFloor,
    TimeFloorRequest,
    TimestampLookup,
    TopicRuleRow,
    history_keep_ms,
    nest_snapshot,
    partition_rows,
    refuse_name_clashes,
    required_groups,
    resolve_topics,
    retention_floors,
    split_snapshot,
    time_floor_requests,
    timestamp_lookups,
    unreadable_groups_of,
    unreadable_required,
    with_groups,
)
from spark_purge.policy.plan import (
    RetirementInput,
    compute_plan,
    with_append_floor,
    with_binding_constraint,
    with_bounds,
    with_explanation,
)
from spark_purge.policy.positions import Positions

__all__ = [
    "Positions",
    "RetentionFloor",
    "RetirementInput",
    "TimeFloorRequest",
    "TimestampLookup",
    "TopicRuleRow",
    "compute_plan",
    "group_status",
    "history_keep_ms",
    "nest_snapshot",
    "partition_rows",
    "refuse_name_clashes",
    "required_groups",
    "resolve_topics",
    "retention_floors",
    "split_snapshot",
    "time_floor_requests",
    "timestamp_lookups",
    "unreadable_groups_of",
    "unreadable_required",
    "with_append_floor",
    "with_binding_constraint",
    "with_bounds",
    "with_explanation",
    "with_groups",
]
