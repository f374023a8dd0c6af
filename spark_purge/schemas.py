"""Every DataFrame schema spark-purge reads or writes, declared once.

- ``PARTITION_STATE``: one row per topic-partition of a cluster snapshot.
- ``GROUP_OFFSETS``: one row per (consumer group, topic-partition) committed offset.
- ``SNAPSHOT``: what the streaming source emits — ``PARTITION_STATE`` plus the partition's
  group commits nested in ``groups`` and the snapshot's ``unreadable_groups`` (one consistent
  snapshot per micro-batch).
- ``GROUP_PROGRESS``: when each group's commit on a partition last moved (for staleness);
  ``PROGRESS_STORE``: the same plus ``group_type``, as the checkpoint keeps it.
- ``APPEND_HISTORY``: (snapshot time, high watermark) per partition, for the append-time floor.
- ``TOPIC_RULES``, ``MANUAL_RULES``, ``MANUAL_OFFSETS``: the policy's inputs besides a snapshot
  (rules resolved per topic, manual entries, answers to ``@timestamp`` lookups).
- ``PLAN``: the purge plan, one row per selected partition.
- ``AUDIT``: the Delta audit table, one row per partition decision (intent or outcome).
- ``LEASES``: the purger lease table beside the audit (``spark_purge.lease``), one row per
  acquisition, renewal or release.
- ``RETIREMENTS``: the partition retirement registry beside the audit, one row per event.
- ``TIERING``: the tiered-storage disablement state machine, one row per step.
"""
from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Columns shared by every snapshot view: which snapshot, taken when.
_SNAPSHOT_ID = [
    StructField("snapshot_id", StringType(), False),
    StructField("snapshot_time", TimestampType(), False),
]

PARTITION_STATE = StructType(
    _SNAPSHOT_ID
    + [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("leader", IntegerType(), True),  # null: no leader right now
        StructField("replicas", ArrayType(IntegerType(), False), False),
        StructField("isr", ArrayType(IntegerType(), False), False),
        StructField("log_start_offset", LongType(), False),
        StructField("high_watermark", LongType(), False),
        # READ_COMMITTED end offset; < high_watermark while a transaction is open.
        StructField("last_stable_offset", LongType(), False),
        StructField("internal", BooleanType(), False),
        StructField("cleanup_policy", StringType(), True),  # e.g. "delete", "compact,delete"
        StructField("retention_ms", LongType(), True),
        StructField("remote_storage_enable", BooleanType(), True),
        # The time floor: offset of the first record at/after time_floor_time (ListOffsets by
        # timestamp). Null when the snapshot was not asked for a floor for this topic; equal to
        # high_watermark when every record is older than time_floor_time.
        StructField("time_floor_time", TimestampType(), True),
        StructField("time_floor_offset", LongType(), True),
        # Metadata v10+ topic id (UUID string; null: a broker too old to say). A topic recreated
        # under the same name gets a new id: the batch re-checks it right before DeleteRecords.
        StructField("topic_id", StringType(), True),
        # Bytes on the leader's disk (DescribeLogDirs; null: unknown). Kafka removes only whole
        # segments below the log start offset, asynchronously: it falls after a delete, later.
        StructField("size_bytes", LongType(), True),
        # Tiered storage (read only for topics with remote.storage.enable=true; null otherwise or
        # when the broker could not say): the local log start offset (ListOffsets EARLIEST_LOCAL,
        # -4): offsets below it exist only in remote storage; and the highest offset copied to
        # remote storage (ListOffsets LATEST_TIERED, -5; -1: nothing copied yet).
        StructField("local_log_start_offset", LongType(), True),
        StructField("latest_tiered_offset", LongType(), True),
    ]
)

# KIP-320: the commit's leader epoch (null: none) and the log's end offset for that epoch
# (OffsetForLeaderEpoch; -1: epoch unknown to the log; null: not checked). An end offset below
# committed_offset means the committed history diverged from the log (commit_diverged).
_LINEAGE_FIELDS = [
    StructField("committed_leader_epoch", IntegerType(), True),
    StructField("epoch_end_offset", LongType(), True),
]

# One group's commit on one partition (also the element type of SNAPSHOT.groups).
_GROUP_COMMIT_FIELDS = [
    StructField("group_id", StringType(), False),
    StructField("group_state", StringType(), True),  # Stable, Empty, Dead, ... as the broker says
    StructField("group_type", StringType(), True),  # "classic" | "consumer" (KIP-848) | "unknown"
    StructField("member_count", IntegerType(), True),
    StructField("committed_offset", LongType(), False),
    StructField("commit_metadata", StringType(), True),
] + _LINEAGE_FIELDS

GROUP_COMMIT = StructType(_GROUP_COMMIT_FIELDS)

GROUP_OFFSETS = StructType(
    _SNAPSHOT_ID
    + [
        StructField("group_id", StringType(), False),
        StructField("group_state", StringType(), True),
        StructField("group_type", StringType(), True),
        StructField("member_count", IntegerType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("committed_offset", LongType(), False),
        StructField("commit_metadata", StringType(), True),
    ]
    + _LINEAGE_FIELDS
)

# A selected group whose commits the snapshot could not read, and the error (e.g.
# GROUP_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE).
UNREADABLE_GROUP = StructType(
    [StructField("group_id", StringType(), False), StructField("error", StringType(), False)]
)

SNAPSHOT = StructType(
    list(PARTITION_STATE.fields)
    + [
        StructField("groups", ArrayType(GROUP_COMMIT, False), False),
        # The same on every row of one snapshot: groups whose commits could not be read. They may
        # hold commits on any topic, so the policy blocks partitions they could be required for.
        StructField("unreadable_groups", ArrayType(UNREADABLE_GROUP, False), False),
    ]
)

# The pipeline's view of a snapshot (the source's ``packed`` view, ``spark_purge.snapshot_pack``):
# ``SNAPSHOT`` with its nested group rows packed as Arrow IPC into ``packed_groups``, a blob on the
# first row of each run of rows holding those rows' groups (null on the others). Only a reader
# with the whole snapshot in one task reads them (``policy.inputs.with_groups`` gives ``SNAPSHOT``).
PACKED_SNAPSHOT = StructType(
    list(PARTITION_STATE.fields)
    + [StructField("packed_groups", BinaryType(), True), SNAPSHOT["unreadable_groups"]]
)

GROUP_PROGRESS = StructType(
    [
        StructField("group_id", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("committed_offset", LongType(), False),
        # Last time this commit was seen to change (or first seen).
        StructField("last_progress_time", TimestampType(), False),
    ]
)

# The checkpoint's progress store: ``GROUP_PROGRESS`` plus the group's type, one row per
# (group, topic, partition) position the purge has ever seen (>= 0). Keys are never dropped
# because a group disappeared: a vanished group keeps holding its last seen position
# (``group_state`` "Vanished" rows, see ``spark_purge.vanished``) until an operator forgets it.
# ``topic_id``: the topic incarnation the position was seen on (null: unknown, or a table written
# before): a remembered position never holds a topic recreated under the same name.
PROGRESS_STORE = StructType(
    list(GROUP_PROGRESS.fields) + [StructField("group_type", StringType(), True), StructField("topic_id", StringType(), True)]
)

# The append history (``spark_purge.history``): a partition's high watermark as a snapshot saw
# it at snapshot_time. Every offset at or above it was appended after snapshot_time, whatever
# the records' timestamps say. ``topic_id``: the topic incarnation it was seen on (the
# snapshot's; null: unknown, or a table written before): a row proves nothing about a topic
# recreated under the same name since, whose offsets name other records.
APPEND_HISTORY = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("snapshot_time", TimestampType(), False),
        StructField("high_watermark", LongType(), False),
        StructField("topic_id", StringType(), True),
    ]
)

# Values of PLAN.time_floor_source: which lookup set a rule's time floor (null: no floor needed).
# timestamp_index: ListOffsets by timestamp (record time); append_history: the high watermark of
# the newest snapshot at or before now - min_retention (append time); no_history: no snapshot
# that old (or the high watermark went down since), so the floor is the log start.
TIME_FLOOR_SOURCES = ("timestamp_index", "append_history", "no_history")

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

# The config's manual entries, one row each, joined onto the partitions by the policy.
MANUAL_RULES = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("m_partition", IntegerType(), True),  # null: every partition
        StructField("m_offset", LongType(), True),  # END (-1) means the high watermark
        StructField("m_timestamp", TimestampType(), True),
        StructField("m_force", BooleanType(), False),
    ]
)


# Values of PLAN.binding_constraint, the reason a partition's cutoff is what it is.
BINDING_CONSTRAINTS = (
    "group",
    "time_floor",
    "high_watermark",
    "last_stable_offset",
    "manual",
    "protected",
    "compacted",
    "internal",
    "tiering_transition",  # tiered storage is being disabled on the topic (spark_purge.tiering)
    "missing_commit",
    "group_unreadable",
    "commit_beyond_end",  # a required commit above the high watermark: another topic's history
    "commit_diverged",  # a required commit whose leader epoch the log contradicts (KIP-320)
    "stale_group",
    "vanished_group",
    "external",
    "below_min_step",
    # A retiring (ReadOnly) partition: purged only to its high watermark once drained and quiet
    # (spark_purge.retirement); blocking_group / detail name what still holds it.
    "retiring",
    # A retired (None) partition written to since it was reclaimed: reported in every plan.
    "writes_to_retired_partition",
)
# (Audits written before the bound kept its name at the log start also hold ``nothing_to_do``.)

# The binding constraints of retiring partitions (blocking_group names a consumer holding one).
RETIREMENT_CONSTRAINTS = ("retiring", "writes_to_retired_partition")

# Partition retirement statuses (seed 002's StatusMode): ReadWrite, ReadOnly (retiring: no new
# writes wanted, drained then reclaimed), None (retired: reclaimed to its high watermark).
READ_WRITE, READ_ONLY, RETIRED = 0, 1, -1
RETIREMENT_STATUS_NAMES = {READ_WRITE: "ReadWrite", READ_ONLY: "ReadOnly", RETIRED: "None"}
# RETIREMENTS.event values: an operator's retire / cancel, the job's reclaim intent (written
# before DeleteRecords) and its confirmation (written once the log start reached the offset).
RETIREMENT_EVENTS = ("retire", "cancel", "reclaim_intent", "reclaimed")

# The retirement registry (``spark_purge.retirement``): an append-only Delta table beside the
# audit (``<audit.path>_retirements``); a partition's current state is its newest row.
RETIREMENTS = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("status", IntegerType(), False),  # READ_WRITE | READ_ONLY | RETIRED after this event
        StructField("event", StringType(), False),  # RETIREMENT_EVENTS
        StructField("since", TimestampType(), False),  # when this row was written
        StructField("requested_by", StringType(), True),  # user@host of the retire (carried along)
        StructField("reason", StringType(), True),  # the operator's --reason (carried along)
        # reclaim_intent / reclaimed: the offset the partition is (to be) purged to, its high
        # watermark then; null on retire / cancel.
        StructField("high_watermark", LongType(), True),
        StructField("batch_id", LongType(), True),  # the purge batch of a reclaim row
    ]
)

# Values of GROUP_OFFSETS.group_type for consumers whose positions the purge reads outside Kafka
# (configured under external_consumers, whose ``type`` names them): required wherever they have
# a row, in every rule.
EXTERNAL_SPARK_CHECKPOINT = "spark_checkpoint"  # a Spark query's checkpoint position
EXTERNAL_STATIC_HOLD = "static_hold"  # a configured hold
EXTERNAL_CONSUMER_TYPES = (EXTERNAL_SPARK_CHECKPOINT, EXTERNAL_STATIC_HOLD)
# GROUP_OFFSETS.group_state of a group Kafka no longer knows (offsets expired, group deleted):
# its last position seen by the purge, remembered in the progress store.
VANISHED_STATE = "Vanished"

# AUDIT.binding_constraint of a replayed batch's intent it did not execute (``spark_purge.replay``):
# older than stream.max_snapshot_age / its partition absent from the fresh snapshot's plan.
STALE_SNAPSHOT = "stale_snapshot"
NOT_IN_SNAPSHOT = "not_in_snapshot"
REPLAY_CONSTRAINTS = (STALE_SNAPSHOT, NOT_IN_SNAPSHOT)

# Which streaming query ids each checkpoint location has held (beside the audit table, at
# ``<audit.path>_checkpoints``): a reset checkpoint next to an audit of another query is refused.
CHECKPOINT_QUERIES = StructType(
    [
        StructField("checkpoint_location", StringType(), False),  # fully qualified URI
        StructField("query_id", StringType(), False),
        StructField("query_name", StringType(), True),
        StructField("registered_at", TimestampType(), False),
    ]
)

LEASES = StructType(
    [
        StructField("purger_id", StringType(), False),
        StructField("generation", LongType(), False),  # 1, 2, ...: +1 at every acquisition
        StructField("run_id", StringType(), False),  # the holding pipeline (one process run)
        StructField("holder", StringType(), False),  # user@host pid=N
        StructField("config_fingerprint", StringType(), False),
        StructField("event", StringType(), False),  # LEASE_EVENTS
        StructField("at", TimestampType(), False),  # the holder's clock when it wrote the row
        StructField("expires_at", TimestampType(), False),  # at + lease.ttl (= at on release)
        StructField("version", LongType(), False),  # the Delta txnVersion it was written with: its order
    ]
)
LEASE_EVENTS = ("acquired", "takeover", "renewed", "released")
# AUDIT.record_type / binding_constraint of the row a new lease generation writes first: from
# that commit on the audit refuses every write of an older generation (``spark_purge.lease``).
LEASE_RECORD = "lease"

PLAN = StructType(
    [
        StructField("snapshot_id", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("topic_id", StringType(), True),  # as the snapshot saw it (PARTITION_STATE)
        StructField("leader", IntegerType(), True),
        StructField("log_start_offset", LongType(), False),
        StructField("high_watermark", LongType(), False),
        StructField("cutoff", LongType(), True),  # null when nothing may be deleted
        StructField("records_to_delete", LongType(), False),
        StructField("binding_constraint", StringType(), False),
        StructField("blocking_group", StringType(), True),
        # classic | consumer | streams | share | spark_checkpoint | static_hold (null: no group)
        StructField("blocking_group_type", StringType(), True),
        StructField("rule", StringType(), True),  # name of the topic rule that selected it
        StructField("stale_groups", ArrayType(StringType(), False), False),  # named either way
        StructField("actionable", BooleanType(), False),
        StructField("remote_storage_enable", BooleanType(), True),
        StructField("detail", StringType(), True),  # human-readable why, for plan output
        StructField("time_floor_source", StringType(), True),  # TIME_FLOOR_SOURCES; null: no floor
        StructField("size_bytes", LongType(), True),  # as the snapshot measured it (PARTITION_STATE)
        # Tiered storage: the local log start as the snapshot saw it (null: not a tiered topic),
        # and whether the cut removes data from remote storage: true when the cut deletes offsets
        # remote storage holds ([log_start_offset, latest_tiered_offset]); null when tiering is on
        # but the snapshot could not tell; false for topics without tiered storage or no cut.
        StructField("local_log_start_offset", LongType(), True),
        StructField("cuts_remote", BooleanType(), True),
    ]
)

# A batch's plan rows as the runner takes them: PLAN's, and the partition's active producers
# when it has an open transaction (``pipeline.with_producers``; null elsewhere).
ANNOTATED_PLAN = StructType([*PLAN.fields, StructField("active_producers", IntegerType(), True)])

# spark_purge.tiering: a topic's tiered-storage disablement, one row per step, appended before
# the step acts (a Delta table beside the audit: ``<audit.path>_tiering``). The newest row per
# topic is its state. ``since``: when the topic entered ``state``.
TIERING_ENABLED, TIERING_DISABLING, TIERING_DISABLED = "ENABLED", "DISABLING", "DISABLED"
TIERING_STATES = (TIERING_ENABLED, TIERING_DISABLING, TIERING_DISABLED)
TIERING_POLICIES = ("retain", "delete")
TIERING = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("topic_id", StringType(), True),
        StructField("state", StringType(), False),  # TIERING_STATES
        StructField("policy", StringType(), False),  # TIERING_POLICIES
        # The step about to act (intent) or done: copy_disable, storage_disable, confirm, done
        StructField("step", StringType(), False),
        StructField("since", TimestampType(), False),
        StructField("recorded_at", TimestampType(), False),
        StructField("operator", StringType(), True),
        StructField("detail", StringType(), True),
    ]
)

AUDIT = StructType(
    [
        StructField("run_id", StringType(), False),  # one per process run of the job
        StructField("query_id", StringType(), False),  # the streaming query (stable across restarts)
        StructField("batch_id", LongType(), False),
        StructField("record_type", StringType(), False),  # "intent" | "outcome" | "forget" | "lease"
        StructField("planned_at", TimestampType(), False),
        StructField("executed_at", TimestampType(), True),
        StructField("snapshot_id", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        # The partition's leader in the snapshot; on a sent outcome, the broker its last
        # DeleteRecords attempt went to (a new leader, when the first one moved or hung).
        StructField("leader", IntegerType(), True),
        StructField("prior_log_start_offset", LongType(), False),
        StructField("high_watermark", LongType(), False),
        StructField("cutoff", LongType(), True),
        StructField("low_watermark", LongType(), True),
        StructField("records_deleted", LongType(), True),
        StructField("binding_constraint", StringType(), False),
        StructField("blocking_group", StringType(), True),
        StructField("blocking_group_type", StringType(), True),
        StructField("stale_groups", ArrayType(StringType(), False), False),
        StructField("rule", StringType(), True),
        # intent: "planned"; outcome: "deleted", "skipped", "dry_run", "failed"
        StructField("status", StringType(), False),
        StructField("error", StringType(), True),
        StructField("dry_run", BooleanType(), False),
        StructField("remote_storage_enable", BooleanType(), True),
        StructField("config_fingerprint", StringType(), False),
        # forget rows: who forgot the group (user@host); null on purge decisions
        StructField("operator", StringType(), True),
        StructField("time_floor_source", StringType(), True),  # as in PLAN (null on forget rows)
        # The topic id the decision was made for (null: unknown, or a table written before)
        StructField("topic_id", StringType(), True),
        # The purger lease generation that wrote the row (null: no lease, a dry run, older rows)
        StructField("lease_generation", LongType(), True),
        # Active producers (DescribeProducers) of a partition with an open transaction; null elsewhere
        StructField("active_producers", IntegerType(), True),
        # Bytes on the leader's disk at snapshot time (null: unknown, or a row written before).
        # A later decision's size_bytes_before is the size measured after this one.
        StructField("size_bytes_before", LongType(), True),
        # outcomes: size_bytes_before x records_deleted / records present (see audit.reclaimed_estimate)
        StructField("bytes_reclaimed_estimate", LongType(), True),
        # Tiered storage (null on topics without it, and in tables written before): the local
        # log start offset before the cut (as planned) and after it (re-read from Kafka once the
        # delete went through), whether the cut reached remote storage (PLAN.cuts_remote), and
        # the remote bytes removed, always null: Kafka's admin API reports no per-partition
        # remote log size (DescribeLogDirs covers local log directories only).
        StructField("prior_local_log_start_offset", LongType(), True),
        StructField("local_log_start_offset", LongType(), True),
        StructField("cuts_remote", BooleanType(), True),
        StructField("remote_bytes_removed", LongType(), True),
        StructField("event_date", StringType(), False),  # yyyy-MM-dd (UTC), the partition column
    ]
)
