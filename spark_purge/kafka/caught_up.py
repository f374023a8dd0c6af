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
(FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), never a wrong number. The
group listing then trusts a partition only when the same leader, at the same epoch, was checked
here before ListGroups and led it around ListGroups (``groups.check_group_listing``), and the
group reads are kept only when that leadership still holds after them (``leadership_changed``).

The parts that decide are pure (``offsets_leadership``, ``build_requests``, ``check_caught_up``);
``coordinators_caught_up`` sends. Cost: one Metadata request and two requests per broker leading
a ``__consumer_offsets`` partition, in parallel, per snapshot.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from kafka.protocol.consumer import IsolationLevel, ListOffsetsRequest, OffsetForLeaderEpochRequest, OffsetSpec
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
    ``lagging``: partition -> why it is not caught up yet (retry). ``problem``: a line for logs.
    """

    checked: Optional[Leadership]
    lagging: dict[int, str] = field(default_factory=dict)

    @property
    def problem(self) -> str:
        if not self.lagging:
            return ""
        shown = "; ".join(f"{p}: {why}" for p, why in sorted(self.lagging.items())[:5])
        more = f" (and {len(self.lagging) - 5} more)" if len(self.lagging) > 5 else ""
        return f"{OFFSETS_TOPIC} partitions not caught up after a leader change: {shown}{more}"


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


def build_requests(leaders: Leadership) -> dict[int, tuple[Any, Any]]:
    """Per leader: (ListOffsets LATEST, OffsetForLeaderEpoch E - 1), both fenced at epoch E."""
    per_leader: dict[int, list[int]] = defaultdict(list)
    for partition, (leader, _) in sorted(leaders.items()):
        per_leader[leader].append(partition)
    _LTopic = ListOffsetsRequest.ListOffsetsTopic
    _LPart = _LTopic.ListOffsetsPartition
    _ETopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    _EPart = _ETopic.OffsetForLeaderPartition
    out: dict[int, tuple[Any, Any]] = {}
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
        out[leader] = (hw, start)
    return out


def check_caught_up(leaders: Leadership, answers: Mapping[int, tuple[Any, Any]]) -> CatchUp:
    """Which partitions' leaders serve every acknowledged commit, from each leader's (ListOffsets,
    OffsetForLeaderEpoch) answers (a response or the exception its request ended with).

    A denied read makes the whole check unverifiable (``checked`` None), as a denied Metadata
    does: the caller warns instead of guessing."""
    high: dict[int, int] = {}
    start: dict[int, int] = {}
    lagging: dict[int, str] = {}
    for leader, (hw_answer, start_answer) in answers.items():
        mine = sorted(p for p, (lead, _) in leaders.items() if lead == leader)
        for name, answer in (("ListOffsets", hw_answer), ("OffsetForLeaderEpoch", start_answer)):
            if isinstance(answer, Exception):
                lagging.update(dict.fromkeys(mine, f"{name} to broker {leader}: {exc_name(answer)}"))
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
    return CatchUp(checked, lagging)


async def coordinators_caught_up(wire: Wire, deadline: Deadline) -> CatchUp:
    """Metadata(``__consumer_offsets``), then per leader the two reads of ``build_requests``."""
    meta = await wire.send_any(offsets_metadata())
    try:
        leaders, leaderless = offsets_leadership(meta)
    except LookupError as exc:
        return CatchUp({}, {-1: str(exc)})
    if leaders is None:
        return CatchUp(None)
    requests = build_requests(leaders)
    sends: list[tuple[int, Any, Any]] = [
        (leader, wire.send(hw, node_id=leader, timeout_ms=deadline.remaining_ms()),
         wire.send(start, node_id=leader, timeout_ms=deadline.remaining_ms()))
        for leader, (hw, start) in requests.items()
    ]
    got = await wire.gather([f for _, a, b in sends for f in (a, b)])
    answers = {leader: (got[2 * i], got[2 * i + 1]) for i, (leader, _, _) in enumerate(sends)}
    result = check_caught_up(leaders, answers)
    if leaderless and result.checked is not None:
        return CatchUp(result.checked, {**result.lagging, **{p: f"no leader ({why})" for p, why in leaderless.items()}})
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
    "CatchUp",
    "Leadership",
    "build_requests",
    "check_caught_up",
    "coordinators_caught_up",
    "leadership_changed",
    "offsets_leadership",
    "offsets_metadata",
]
