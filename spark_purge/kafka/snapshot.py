"""One consistent read of partition state and group commits: the snapshot, assembled.

Metadata (1 request, with each topic's id), then DescribeConfigs (1 request) in parallel with:
the group reads (see ``groups``), and *after* them ListOffsets per leader (earliest, latest,
last stable, and the time-floor timestamps) alongside OffsetForLeaderEpoch for commits carrying
a leader epoch (``lineage``), DescribeLogDirs per leader for the partitions' sizes (``log_dirs``;
unknown sizes stay None); then, for topics with ``remote.storage.enable=true`` only, the
local log start and latest tiered offsets (ListOffsets -4/-5). Commits read before the high watermark are never above it unless
the log lost their history (``commit_beyond_end`` in the policy). Partitions that could not be read completely are dropped with the reason; groups
whose commits could not be read are named, so the policy never purges past them blindly.

Group rows (``GroupCommit``), for the partitions kept: a committed offset, a share group's
share-partition start offset, or ``committed_offset = -1`` (``commit_metadata`` None) where a
group's members hold a partition (or a share group lists one) without a position there: the
policy reads -1 as a missing commit. Every group type is read; see ``members``.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Optional

from spark_purge._time import Deadline
from spark_purge.errors import AuthorizationError, KafkaError
from spark_purge.kafka.configs import TopicConfigs, bool_or_none, int_or_none, snapshot_configs
from spark_purge.kafka.groups import GroupReader
from spark_purge.kafka.lineage import EpochEnds, epoch_end_offsets
from spark_purge.kafka.log_dirs import Sizes, partition_sizes
from spark_purge.kafka.members import NO_POSITION, CommitRows, RawCommit
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    CommitColumns,
    DroppedPartition,
    GroupInfo,
    PartitionState,
    SnapshotIssue,
    SnapshotRequest,
    TopicPartitionKey,
)
from spark_purge.kafka.offsets import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    READ_COMMITTED,
    Metadata,
    OffsetReader,
)
from spark_purge.kafka.wire import AUTH_ERRORS, Wire

log = logging.getLogger(__name__)

Offsets = dict[str, dict[TopicPartitionKey, tuple[int, int]]]


async def take_snapshot(
    config: ClientConfig, offsets_reader: OffsetReader, group_reader: GroupReader, req: SnapshotRequest
) -> ClusterSnapshot:
    wire = offsets_reader.wire
    now_ms = req.snapshot_time_ms if req.snapshot_time_ms is not None else int(time.time() * 1000)
    snapshot_id = req.snapshot_id or str(uuid.uuid4())
    deadline = Deadline(config.connection.request_timeout_ms / 1000)
    issues: list[SnapshotIssue] = []

    explicit_only = config.topics is not None and config.topic_include is None
    meta = await offsets_reader.metadata(config.topics if explicit_only else None)
    missing: list[str] = []
    for t in config.topics or ():
        err = meta.topic_errors.get(t)
        if err in AUTH_ERRORS:
            raise AuthorizationError(f"Describe on topic {t!r} denied ({err}, Metadata)")
        if t not in meta.internal:
            missing.append(t)
    topics = sorted(t for t, internal in meta.internal.items() if config.selects_topic(t, internal))
    topic_set = set(topics)
    tps = sorted(tp for tp in meta.partitions if tp[0] in topic_set)
    leaders = {tp: meta.partitions[tp][0] for tp in tps}

    groups_future = None
    if req.include_groups:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        groups_future = wire.spawn(
            group_reader.read_groups, sorted(meta.brokers), topics, issues, deadline, config.selects_group, meta.topic_ids,
            by_topic,
        )
    configs_future = wire.spawn(snapshot_configs, wire, topics, sorted(meta.brokers))

    floors: dict[str, int] = {}
    for t in topics:
        matched = [f.resolve(now_ms) for f in req.time_floors if f.matches(t)]
        if matched:
            floors[t] = min(matched)  # the earliest floor protects the most
    queries: dict[str, tuple[int, Mapping[TopicPartitionKey, int]]] = {
        "earliest": (0, dict.fromkeys(tps, EARLIEST)),
        "latest": (0, dict.fromkeys(tps, LATEST)),
        "stable": (READ_COMMITTED, dict.fromkeys(tps, LATEST)),
    }
    floor_tps = {tp: max(0, floors[tp[0]]) for tp in tps if tp[0] in floors}
    if floor_tps:
        queries["floor"] = (0, floor_tps)
    infos: list[GroupInfo] = []
    raw = CommitRows()
    unreadable: list[str] = []
    if groups_future is not None:
        # Commits are read before the log offsets (not alongside): a commit is then never above
        # the high watermark read after it, unless the log lost what it was committed on.
        infos, raw, unreadable = await groups_future
    epochs_future = wire.spawn(_epoch_ends, wire, raw, dict(leaders), deadline, issues)
    sizes_future = wire.spawn(partition_sizes, wire, dict(leaders), deadline) if tps else None
    if tps:
        offsets, failed = await offsets_reader.list_offsets(queries, leaders, deadline)
    else:
        offsets, failed = {n: {} for n in queries}, {}
    sizes: Sizes = (await sizes_future)[0] if sizes_future is not None else {}

    configs, config_errors, offsets_retention_ms = await configs_future
    for t, err in config_errors.items():
        if err.startswith("UNKNOWN_TOPIC_OR_PARTITION"):
            for tp in tps:
                if tp[0] == t and tp not in failed:
                    failed[tp] = "UNKNOWN_TOPIC_OR_PARTITION (topic deleted during the snapshot)"
        else:
            issues.append(SnapshotIssue("topic_config", t, err.split(":")[0], f"DescribeConfigs on topic {t!r}: {err}"))

    tiered = await _tiered_offsets(offsets_reader, [tp for tp in tps if tp not in failed], configs, leaders, deadline, issues)
    partitions, dropped = _partition_states(tps, meta, offsets, failed, floors, floor_tps, configs, sizes, tiered)
    kept = {(p.topic, p.partition) for p in partitions}
    ends = await epochs_future
    rows = raw.select(kept)
    if dropped:
        log.warning("snapshot %s dropped %d partition(s), e.g. %s", snapshot_id, len(dropped), dropped[0])
        held = held_beside_dropped(raw, kept)
        if held:
            log.warning(
                "snapshot %s: %d group(s) have rows only on dropped partitions of a topic, held on its other "
                "partitions as missing commits, e.g. %s on %s", snapshot_id,
                len({(r[0].group_id, r[1][0]) for r in held}), held[0][0].group_id, held[0][1][0],
            )
            rows = CommitRows(sorted([*rows, *held], key=lambda r: (r[0].group_id, r[1])))
    commits = _commit_columns(rows, ends)
    return ClusterSnapshot(
        snapshot_id=snapshot_id,
        snapshot_time_ms=now_ms,
        partitions=tuple(partitions),
        commits=commits,
        groups=tuple(infos),
        missing_topics=tuple(missing),
        dropped_partitions=tuple(dropped),
        issues=tuple(issues),
        unreadable_groups=tuple(unreadable),
        offsets_retention_ms=offsets_retention_ms,
    )


def held_beside_dropped(raw: Sequence[RawCommit], kept: Collection[TopicPartitionKey]) -> list[RawCommit]:
    """-1 rows (no position) on every kept partition of a topic for each group whose rows on that
    topic are all on partitions the snapshot dropped (no leader, a failed read).

    A group's rows are what makes a discovering rule require it on a topic: with its only rows
    gone with their partitions, the group would not be required on the topic's other partitions,
    and a cut there could pass records it will read (a group stopped before a partition was
    added has no commit on it, and reads it from its reset position). A -1 row on each kept
    partition where the group has none makes it required there, as a missing commit, exactly as
    being discovered on the topic would."""
    kept_by_topic: dict[str, list[int]] = {}
    for t, p in kept:
        kept_by_topic.setdefault(t, []).append(p)
    seen = {(r[0].group_id, r[1][0]) for r in raw if r[1] in kept}
    infos: dict[tuple[str, str], GroupInfo] = {}
    for r in raw:
        key = (r[0].group_id, r[1][0])
        if r[1] not in kept and key not in seen:
            infos.setdefault(key, r[0])
    return [
        (info, (topic, p), NO_POSITION, None, None)
        for (_, topic), info in sorted(infos.items())
        for p in sorted(kept_by_topic.get(topic, ()))
    ]


def _commit_columns(rows: CommitRows, ends: EpochEnds) -> CommitColumns:
    """The snapshot's commits, column by column: no Python object per commit (at 500,000
    commits, building a ``GroupCommit`` each and reading their fields back for Arrow took
    about a second). The group fields stay one value a run of the group's rows, the integers
    the rows' arrays."""
    epochs = rows.epochs
    if ends:
        end_offsets = [None if e < 0 else ends.get(((t, p), e)) for t, p, e in zip(rows.topics, rows.partitions, epochs)]
    else:  # nothing to look up (no commit carries an epoch, or no leader answered)
        end_offsets = [None] * len(epochs)
    return CommitColumns.of_runs(
        rows.runs,
        {
            "topic": rows.topics,
            "partition": rows.partitions,
            "committed_offset": rows.offsets,
            "commit_metadata": rows.metadata,
            "committed_leader_epoch": epochs,
            "epoch_end_offset": end_offsets,
        },
    )


def _partition_states(
    tps: list[TopicPartitionKey],
    meta: Metadata,
    offsets: Offsets,
    failed: Mapping[TopicPartitionKey, str],
    floors: Mapping[str, int],
    floor_tps: Mapping[TopicPartitionKey, int],
    configs: TopicConfigs,
    sizes: Mapping[TopicPartitionKey, int],
    tiered: Offsets,
) -> tuple[list[PartitionState], list[DroppedPartition]]:
    """One ``PartitionState`` per partition read completely; the others dropped with the reason."""
    partitions: list[PartitionState] = []
    dropped: list[DroppedPartition] = []
    topic_ids = meta.ids_by_name()
    earliest, latest, stable, floor = offsets["earliest"], offsets["latest"], offsets["stable"], offsets.get("floor", {})
    local, tiered_end = tiered.get("local", {}), tiered.get("tiered", {})
    per_topic: dict[str, dict[str, Any]] = {}  # a topic's fields, the same on each of its partitions
    for tp in tps:
        if tp in failed or tp not in earliest or tp not in latest or tp not in stable or (tp in floor_tps and tp not in floor):
            need = [n for n in ("earliest", "latest", "stable") if tp not in offsets[n]]
            reason = failed.get(tp) or f"no answer for {', '.join(need) or 'floor'} offset"
            dropped.append(DroppedPartition(tp[0], tp[1], reason))
            continue
        topic = tp[0]
        same = per_topic.get(topic)
        if same is None:
            conf = configs.get(topic, {})
            same = per_topic[topic] = {
                "internal": meta.internal[topic],
                "cleanup_policy": conf.get("cleanup.policy"),
                "retention_ms": int_or_none(conf.get("retention.ms")),
                "remote_storage_enable": bool_or_none(conf.get("remote.storage.enable")),
                "time_floor_time_ms": floors.get(topic),
                "topic_id": topic_ids.get(topic),
            }
        leader, replicas, isr = meta.partitions[tp]
        hw = latest[tp][0]
        floor_offset: Optional[int] = None
        if tp in floor_tps:
            floor_offset = floor[tp][0]
            if floor_offset < 0:  # every record is older than the floor
                floor_offset = hw
        found_local, found_tiered = local.get(tp), tiered_end.get(tp)
        partitions.append(
            PartitionState(
                topic=topic,
                partition=tp[1],
                leader=leader,
                replicas=replicas,
                isr=isr,
                log_start_offset=earliest[tp][0],
                high_watermark=hw,
                last_stable_offset=stable[tp][0],
                time_floor_offset=floor_offset,
                size_bytes=sizes.get(tp),
                local_log_start_offset=None if found_local is None else found_local[0],
                latest_tiered_offset=None if found_tiered is None else found_tiered[0],
                **same,
            )
        )
    return partitions, dropped


async def _tiered_offsets(
    reader: OffsetReader,
    tps: list[TopicPartitionKey],
    configs: TopicConfigs,
    leaders: Mapping[TopicPartitionKey, Optional[int]],
    deadline: Deadline,
    issues: list[SnapshotIssue],
) -> Offsets:
    """EARLIEST_LOCAL and LATEST_TIERED (ListOffsets v8+/v9+) for the partitions of topics with
    ``remote.storage.enable=true`` only, after the configs said which (a round trip more, and
    only when tiered topics are selected). A partition the broker cannot answer keeps null
    tiered offsets and is named in ``issues``: the cut itself does not depend on them."""
    wanted = [tp for tp in tps if bool_or_none(configs.get(tp[0], {}).get("remote.storage.enable"))]
    if not wanted:
        return {}
    queries: dict[str, tuple[int, Mapping[TopicPartitionKey, int]]] = {
        "local": (0, dict.fromkeys(wanted, EARLIEST_LOCAL)),
        "tiered": (0, dict.fromkeys(wanted, LATEST_TIERED)),
    }
    try:
        offsets, failed = await reader.list_offsets(queries, dict(leaders), deadline)
    except KafkaError as exc:  # e.g. a broker without ListOffsets v9
        offsets, failed = {}, dict.fromkeys(wanted, type(exc).__name__)
    for (t, p), err in sorted(failed.items()):
        issues.append(SnapshotIssue("partition", f"{t}-{p}", err, f"tiered offsets of {t}-{p}: {err} (left unknown)"))
    return offsets


async def _epoch_ends(
    wire: Wire,
    raw: CommitRows,
    leaders: Mapping[TopicPartitionKey, Optional[int]],
    deadline: Deadline,
    issues: list[SnapshotIssue],
) -> EpochEnds:
    """The log's end offset of every leader epoch a commit carries (``lineage``); partitions
    whose leader could not answer are named in ``issues`` and left unchecked."""
    wanted: dict[TopicPartitionKey, set[int]] = {}
    for topic, partition, offset, epoch in zip(raw.topics, raw.partitions, raw.offsets, raw.epochs):
        if epoch >= 0 and offset >= 0 and (topic, partition) in leaders:
            wanted.setdefault((topic, partition), set()).add(epoch)
    if not wanted:
        return {}
    ends, failed = await epoch_end_offsets(wire, wanted, leaders, deadline)
    for (t, p), err in sorted(failed.items()):
        issues.append(
            SnapshotIssue("partition", f"{t}-{p}", err, f"OffsetForLeaderEpoch on {t}-{p}: {err} (commit epochs left unchecked)")
        )
    return ends


__all__ = ["take_snapshot"]
