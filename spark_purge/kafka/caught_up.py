"""Do the group coordinators serve every acknowledged commit? (the high-watermark check)

A broker that has just become leader of a ``__consumer_offsets`` partition serves that
partition's group reads (ListGroups, OffsetFetch, the Describe APIs) as of its high watermark.
Right after an election the high watermark can lag the commits the old leader acknowledged:
the new leader learns what its followers hold only when they next fetch from it. Until then it
answers from an older state, with no error: ListGroups leaves out a group that first committed
in that gap, and OffsetFetch shows older commits. The invariant checker caught the first case
(a group whose coordinator had just moved was missing from a snapshot, and a rule that discovers
groups cut past it); ``bench/diag/coordinator_move_repro.py`` reproduces it with the client alone.

Every commit the old leader acknowledged is below the offset where the new leader's epoch starts
(the new leader was in the ISR), so a partition's reads are complete once its leader's high
watermark reaches that offset. Per partition, with leader L and leader epoch E from Metadata:

- the epoch's start: OffsetForLeaderEpoch(E - 1) to L, which answers where epoch E - 1 ends, that
  is where the next epoch L knows (E) starts; E = 0 starts at 0;
- the high watermark: ListOffsets(LATEST, READ_UNCOMMITTED) to L.

Both carry ``current_leader_epoch = E``, so an answer from a leader that has moved on is an error
(FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), never a wrong number.

A leader's group coordinator also takes over a moment after the broker becomes leader, and
Kafka's ListGroups leaves out, with no error, a partition whose coordinator is not active yet
(its read fails with NOT_COORDINATOR inside the broker). So the same round sends the leader one
OffsetFetch for a probe group per partition it leads: a group id that never exists, chosen so
that it maps to that partition (``probe_group``: Kafka's ``Utils.abs(groupId.hashCode()) %
partitions``). An answer without a group error means the partition's coordinator is active;
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS means wait. OffsetFetch creates no group. A
principal that may not describe the probe groups (``spark-purge-probe-*``) gets only the
high-watermark part of the check, and a warning.

The
group listing then trusts a partition only when the same leader, at the same epoch, was checked
here before ListGroups and led it around ListGroups (``groups.check_group_listing``), and the
group reads are kept only when that leadership still holds after them (``leadership_changed``).

The parts that decide are pure (``offsets_leadership``, ``build_requests``, ``check_caught_up``);
``coordinators_caught_up`` sends. Cost: one Metadata request and three requests per broker
leading a ``__consumer_offsets`` partition, in parallel, per snapshot.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from kafka.protocol.consumer import (
    IsolationLevel,
    ListOffsetsRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    OffsetSpec,
)
from kafka.protocol.metadata import MetadataRequest

from spark_purge._time import Deadline
from spark_purge.kafka.lineage import CONSUMER_REPLICA_ID
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name, exc_name

OFFSETS_TOPIC = "__consumer_offsets"

# __consumer_offsets partition -> (leader, leader epoch)
Leadership = dict[int, tuple[int, int]]


@dataclass(frozen=True)
class CatchUp:
    """What one check proves.

    ``checked``: the partitions whose leader's high watermark reached its epoch's start, with that
    (leader, epoch); None when the check cannot run (no Describe on ``__consumer_offsets``).
    ``lagging``: partition -> why it is not confirmed caught up yet (retry). ``problem``: a line for logs.
    """

    checked: Optional[Leadership]
    lagging: dict[int, str] = field(default_factory=dict)
    probe_denied: bool = False  # the coordinator probe was refused: only the high watermarks were checked

    @property
    def problem(self) -> str:
        if not self.lagging:
            return ""
        shown = "; ".join(f"{p}: {why}" for p, why in sorted(self.lagging.items())[:5])
        more = f" (and {len(self.lagging) - 5} more)" if len(self.lagging) > 5 else ""
        return (
            f"{OFFSETS_TOPIC} partitions not confirmed caught up (a new leader still behind, "
            f"or a read of the check that failed): {shown}{more}"
        )


PROBE_PREFIX = "spark-purge-probe-"
COORDINATOR_NOT_ACTIVE = frozenset({"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"})


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's ``Utils.abs(hashCode) % partitions``
    (``Utils.abs`` is ``Math.abs`` with ``Integer.MIN_VALUE`` mapped to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@functools.lru_cache(maxsize=8)
def probe_groups(partitions: int) -> dict[int, str]:
    """One probe group id per ``__consumer_offsets`` partition, mapping to it."""
    out: dict[int, str] = {}
    k = 0
    while len(out) < partitions:
        name = f"{PROBE_PREFIX}{k}"
        out.setdefault(coordinator_partition(name, partitions), name)
        k += 1
    return out


def offsets_metadata() -> MetadataRequest:
    """Metadata for ``__consumer_offsets`` alone: who leads each coordinator partition, at which epoch."""
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC)], allow_auto_topic_creation=False)


def offsets_leadership(meta: Any) -> tuple[Optional[Leadership], dict[int, str]]:
    """(leader and epoch per ``__consumer_offsets`` partition, partitions without a leader).

    None when the principal may not describe the topic; ``({}, {})`` when the topic does not
    exist yet (no group has ever committed). Any other topic error raises ``LookupError``."""
    topic = next((t for t in meta.topics if t.name == OFFSETS_TOPIC), None)
    err = error_name(topic.error_code) if topic is not None else "UNKNOWN_TOPIC_OR_PARTITION"
    if err == "UNKNOWN_TOPIC_OR_PARTITION":
        return {}, {}
    if err in AUTH_ERRORS:
        return None, {}
    if err is not None:
        raise LookupError(f"Metadata for {OFFSETS_TOPIC}: {err}")
    assert topic is not None
    leaders: Leadership = {}
    leaderless: dict[int, str] = {}
    for p in topic.partitions:
        p_err = error_name(p.error_code) if getattr(p, "error_code", 0) else None
        if p.leader_id is None or p.leader_id < 0 or p_err is not None:
            leaderless[p.partition_index] = p_err or "LEADER_NOT_AVAILABLE"
        else:
            leaders[p.partition_index] = (int(p.leader_id), int(p.leader_epoch))
    return leaders, leaderless


def build_requests(
    leaders: Leadership, probes: Optional[Mapping[int, str]] = None
) -> dict[int, tuple[Any, Any, Optional[Any]]]:
    """Per leader: (ListOffsets LATEST, OffsetForLeaderEpoch E - 1, both fenced at epoch E; and
    OffsetFetch v8 of the probe groups of its partitions, or None without ``probes``)."""
    per_leader: dict[int, list[int]] = defaultdict(list)
    for partition, (leader, _) in sorted(leaders.items()):
        per_leader[leader].append(partition)
    _LTopic = ListOffsetsRequest.ListOffsetsTopic
    _LPart = _LTopic.ListOffsetsPartition
    _ETopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    _EPart = _ETopic.OffsetForLeaderPartition
    out: dict[int, tuple[Any, Any, Optional[Any]]] = {}
    for leader, partitions in per_leader.items():
        hw = ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            topics=[_LTopic(name=OFFSETS_TOPIC, partitions=[
                _LPart(partition_index=p, current_leader_epoch=leaders[p][1], timestamp=OffsetSpec.LATEST)
                for p in partitions
            ])],
            min_version=4,  # current_leader_epoch
        )
        start = OffsetForLeaderEpochRequest(
            replica_id=CONSUMER_REPLICA_ID,
            topics=[_ETopic(topic=OFFSETS_TOPIC, partitions=[
                _EPart(partition=p, current_leader_epoch=leaders[p][1], leader_epoch=max(leaders[p][1] - 1, 0))
                for p in partitions
            ])],
            min_version=2,  # current_leader_epoch
        )
        probe = None
        if probes is not None:
            _Group = OffsetFetchRequest.OffsetFetchRequestGroup
            probe = OffsetFetchRequest(
                groups=[_Group(group_id=probes[p], topics=None) for p in partitions], min_version=8, max_version=8
            )
        out[leader] = (hw, start, probe)
    return out


def check_caught_up(
    leaders: Leadership, answers: Mapping[int, tuple[Any, Any, Optional[Any]]], probes: Optional[Mapping[int, str]] = None
) -> CatchUp:
    """Which partitions' leaders serve every acknowledged commit, from each leader's (ListOffsets,
    OffsetForLeaderEpoch, probe OffsetFetch or None) answers (a response or the exception its
    request ended with); ``probes``: partition -> its probe group, as sent.

    A denied ListOffsets or OffsetForLeaderEpoch makes the whole check unverifiable (``checked``
    None), as a denied Metadata does: the caller warns instead of guessing. A denied probe leaves
    the high-watermark part standing (``probe_denied``)."""
    high: dict[int, int] = {}
    start: dict[int, int] = {}
    lagging: dict[int, str] = {}
    probe_denied = False
    partition_of = {g: p for p, g in (probes or {}).items()}
    for leader, (hw_answer, start_answer, probe_answer) in answers.items():
        mine = sorted(p for p, (lead, _) in leaders.items() if lead == leader)
        for name, answer in (("ListOffsets", hw_answer), ("OffsetForLeaderEpoch", start_answer), ("OffsetFetch", probe_answer)):
            if isinstance(answer, Exception):
                lagging.update(dict.fromkeys(mine, f"{name} to broker {leader}: {exc_name(answer)}"))
        if probe_answer is not None and not isinstance(probe_answer, Exception):
            for ga in probe_answer.groups:
                err = error_name(ga.error_code)
                partition = partition_of.get(ga.group_id)
                if partition is None or err is None:
                    continue
                if err in AUTH_ERRORS:
                    probe_denied = True
                elif err in COORDINATOR_NOT_ACTIVE:
                    lagging.setdefault(partition, f"broker {leader}'s group coordinator for it is not active yet ({err})")
                else:
                    lagging.setdefault(partition, f"probe OffsetFetch: {err}")
        if not isinstance(hw_answer, Exception):
            for t in hw_answer.topics:
                for p in t.partitions:
                    err = error_name(p.error_code)
                    if err in AUTH_ERRORS:
                        return CatchUp(None)
                    if err is not None:
                        lagging.setdefault(p.partition_index, f"ListOffsets: {err}")
                    else:
                        high[p.partition_index] = int(p.offset)
        if not isinstance(start_answer, Exception):
            for t in start_answer.topics:
                for p in t.partitions:
                    err = error_name(p.error_code)
                    if err in AUTH_ERRORS:
                        return CatchUp(None)
                    if err is not None:
                        lagging.setdefault(p.partition, f"OffsetForLeaderEpoch: {err}")
                    elif leaders.get(p.partition, (0, 0))[1] == 0:
                        start[p.partition] = 0  # the first epoch starts at the log's beginning
                    elif int(p.end_offset) < 0:
                        lagging.setdefault(p.partition, f"broker {leader} does not know where its epoch starts")
                    else:
                        start[p.partition] = int(p.end_offset)
    checked: Leadership = {}
    for partition, (leader, epoch) in sorted(leaders.items()):
        if partition in lagging:
            continue
        if partition not in high or partition not in start:
            lagging[partition] = f"broker {leader} did not answer for it"
        elif high[partition] < start[partition]:
            lagging[partition] = (
                f"broker {leader} leads at epoch {epoch} from offset {start[partition]}, "
                f"its high watermark is {high[partition]}"
            )
        else:
            checked[partition] = (leader, epoch)
    return CatchUp(checked, lagging, probe_denied)


async def coordinators_caught_up(wire: Wire, deadline: Deadline, probe: bool = True) -> CatchUp:
    """Metadata(``__consumer_offsets``), then per leader the reads of ``build_requests`` (the
    probe only when ``probe`` and the brokers have OffsetFetch v8)."""
    meta = await wire.send_any(offsets_metadata())
    try:
        leaders, leaderless = offsets_leadership(meta)
    except LookupError as exc:
        return CatchUp({}, {-1: str(exc)})
    if leaders is None:
        return CatchUp(None)
    count = len(leaders) + len(leaderless)
    probes = probe_groups(count) if probe and count and wire.api_version(OffsetFetchRequest) >= 8 else None
    sends: list[int] = []
    futures: list[Any] = []
    for leader, requests in build_requests(leaders, probes).items():
        sends.append(leader)
        futures += [
            None if r is None else wire.send(r, node_id=leader, timeout_ms=deadline.remaining_ms()) for r in requests
        ]
    got = iter(await wire.gather([f for f in futures if f is not None]))
    answers_flat = [None if f is None else next(got) for f in futures]
    answers = {leader: (answers_flat[3 * i], answers_flat[3 * i + 1], answers_flat[3 * i + 2]) for i, leader in enumerate(sends)}
    result = check_caught_up(leaders, answers, probes)
    if leaderless and result.checked is not None:
        lagging = {**result.lagging, **{p: f"no leader ({why})" for p, why in leaderless.items()}}
        return CatchUp(result.checked, lagging, result.probe_denied)
    return result


def leadership_changed(before: Leadership, meta: Any) -> str:
    """'' when every partition in ``before`` still has the same leader at the same epoch in
    ``meta`` (a Metadata(``__consumer_offsets``) answer), else what moved."""
    try:
        now, _ = offsets_leadership(meta)
    except LookupError as exc:
        return str(exc)
    if now is None:
        return ""  # cannot see who leads any more: the listing was checked, say nothing new
    moved = sorted(p for p, lead in before.items() if now.get(p) != lead)
    if not moved:
        return ""
    shown = ", ".join(f"{p} ({before[p]} -> {now.get(p)})" for p in moved[:5])
    return f"{OFFSETS_TOPIC} leaders changed while the groups were read: {shown}"


__all__ = [
    "OFFSETS_TOPIC",
    "PROBE_PREFIX",
    "CatchUp",
    "Leadership",
    "build_requests",
    "check_caught_up",
    "coordinator_partition",
    "coordinators_caught_up",
    "leadership_changed",
    "offsets_leadership",
    "offsets_metadata",
    "probe_groups",
]
