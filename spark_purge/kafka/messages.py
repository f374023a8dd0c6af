"""Kafka protocol messages kafka-python 3.0.12 lacks, and pure build/parse helpers for them.

kafka-python 3.0.x generates its request/response classes from Kafka's JSON message definitions
(``ApiMessage`` subclasses whose schema ``load_json`` reads from a package). The definitions here
live in :mod:`spark_purge.kafka.message_schemas`, written from the Kafka 4.4.0 wire schemas:

==============================  =======  ==================  ======================================
API                             key      versions (4.4)      what spark-purge reads
==============================  =======  ==================  ======================================
DescribeShareGroupOffsets       90       0-1 (v1 adds Lag)   share-partition start offset (SPSO)
ShareGroupDescribe              77       1 (v0 removed 4.1)  state, members, member assignments
ConsumerGroupDescribe           69       0-1 (v1 MemberType) KIP-848 state, members, assignments
StreamsGroupDescribe            89       0 (v1: KIP-1331)    KIP-1071 state, topology, members' tasks
DescribeProducers (KIP-664)     61       0                   active producers, open transactions
==============================  =======  ==================  ======================================

ListGroups with ``TypesFilter`` (v5, KIP-848) is already in kafka-python 3.0.12: the builder below
uses its ``ListGroupsRequest``. Classic groups' member assignments come from kafka-python's own
DescribeGroups answer (the snapshot already sends it): :func:`parse_classic_group_assignments`.

Each response class registers itself with kafka-python's response registry (by API key) when this
module is imported, so a connection that sent one of these requests decodes the answer.

The parse functions return plain frozen dataclasses; nothing here does I/O.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.api_message import ApiMessage

from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.wire import error_name

SCHEMA_PACKAGE = "spark_purge.kafka.message_schemas"

ZERO_UUID = uuid.UUID(int=0)
# Classic group states in which a rebalance runs: members may hold nothing yet, and DescribeGroups
# shows their subscriptions only in Stable.
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance"})


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class DescribeProducersRequest(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


class DescribeProducersResponse(ApiMessage, load_json=SCHEMA_PACKAGE):  # type: ignore[misc,call-arg]
    pass


# Versions the builders pin: the ones a Kafka 4.4 broker answers (ApiVersions) and these schemas
# define. kafka-python picks the highest version both sides support within [min, max].
SHARE_OFFSETS_VERSIONS = (0, 1)
SHARE_DESCRIBE_VERSIONS = (1, 1)
CONSUMER_DESCRIBE_VERSIONS = (0, 1)
STREAMS_DESCRIBE_VERSIONS = (0, 0)
DESCRIBE_PRODUCERS_VERSIONS = (0, 0)
LIST_GROUPS_TYPES_MIN_VERSION = 5


# ---- plain results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SharePartitionOffset:
    """One share-partition of a share group, as DescribeShareGroupOffsets reports it."""

    group_id: str
    topic: str
    partition: int
    # The share-partition start offset; None when the broker has no position (-1) or an error.
    start_offset: Optional[int]
    leader_epoch: int
    # Records between the SPSO and the high watermark still to deliver (v1; None when unknown).
    lag: Optional[int]
    error: Optional[str] = None
    error_message: Optional[str] = None
    topic_id: Optional[uuid.UUID] = None

    @property
    def tp(self) -> TopicPartitionKey:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class ShareGroupOffsets:
    """A share group's start offsets; ``error`` is the group-level error (then no partitions)."""

    group_id: str
    partitions: tuple[SharePartitionOffset, ...] = ()
    error: Optional[str] = None
    error_message: Optional[str] = None

    def positions(self) -> dict[TopicPartitionKey, int]:
        """(topic, partition) -> SPSO, for partitions with a position and no error."""
        return {p.tp: p.start_offset for p in self.partitions if p.error is None and p.start_offset is not None}

    def partition_errors(self) -> dict[TopicPartitionKey, str]:
        return {p.tp: p.error for p in self.partitions if p.error is not None}

    def without_position(self) -> frozenset[TopicPartitionKey]:
        """Partitions the broker listed with no start offset (-1) and no error."""
        return frozenset(p.tp for p in self.partitions if p.error is None and p.start_offset is None)


@dataclass(frozen=True)
class GroupDescription:
    """A share, KIP-848 consumer or KIP-1071 streams group (ShareGroupDescribe /
    ConsumerGroupDescribe / StreamsGroupDescribe), or a classic group (DescribeGroups)."""

    group_id: str
    group_type: str  # "share", "consumer", "streams" or "classic"
    state: Optional[str]
    member_count: int
    # Partitions members hold now, and (consumer groups) the ones they are about to get.
    assigned: frozenset[TopicPartitionKey] = frozenset()
    target_assigned: frozenset[TopicPartitionKey] = frozenset()
    # Topics members subscribe to (by name; a streams group: its topology's source topics), and
    # the regular expressions KIP-848 members subscribe with (``SubscribedTopicRegex``).
    subscribed_topics: frozenset[str] = frozenset()
    subscribed_patterns: frozenset[str] = frozenset()
    group_epoch: int = -1
    assignment_epoch: int = -1
    # Topic ids in an assignment that neither the mapping nor the broker could name.
    unresolved_topic_ids: frozenset[uuid.UUID] = frozenset()
    error: Optional[str] = None
    error_message: Optional[str] = None

    @property
    def held(self) -> frozenset[TopicPartitionKey]:
        """Every partition a member has or is about to get: what a missing commit must hold."""
        return self.assigned | self.target_assigned


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    group_type: str
    state: Optional[str]
    protocol_type: str


@dataclass(frozen=True)
class ListedGroups:
    groups: tuple[ListedGroup, ...] = ()
    error: Optional[str] = None

    def of_type(self, group_type: str) -> list[str]:
        return sorted(g.group_id for g in self.groups if g.group_type == group_type)


@dataclass(frozen=True)
class ProducerState:
    """One active producer of a partition, as its leader reports it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int  # the timestamp of its last append (ms; -1: unknown)
    coordinator_epoch: int
    # First offset of its open transaction on this partition; None: no transaction open.
    txn_start_offset: Optional[int]


@dataclass(frozen=True)
class PartitionProducers:
    """A partition's active producers, or the leader's error for it."""

    topic: str
    partition: int
    producers: tuple[ProducerState, ...] = ()
    error: Optional[str] = None
    error_message: Optional[str] = None

    @property
    def open_transactions(self) -> tuple[ProducerState, ...]:
        """Producers with a transaction open here, oldest first (by its start offset)."""
        return tuple(sorted((p for p in self.producers if p.txn_start_offset is not None), key=lambda p: (p.txn_start_offset, p.producer_id)))


# ---- builders -----------------------------------------------------------------------------------


def build_describe_share_group_offsets(
    groups: Iterable[str], topics: Optional[Mapping[str, Iterable[int]]] = None
) -> Any:
    """DescribeShareGroupOffsets for ``groups``; every group asks for ``topics`` ({topic: partitions}),
    or for all its share-partitions when ``topics`` is None."""
    Req = DescribeShareGroupOffsetsRequest
    _Group = Req.DescribeShareGroupOffsetsRequestGroup
    _Topic = _Group.DescribeShareGroupOffsetsRequestTopic

    def topic_list() -> Optional[list[Any]]:
        if topics is None:
            return None
        return [_Topic(topic_name=t, partitions=sorted({int(p) for p in ps})) for t, ps in sorted(topics.items())]

    return Req(
        groups=[_Group(group_id=g, topics=topic_list()) for g in sorted(set(groups))],
        min_version=SHARE_OFFSETS_VERSIONS[0],
        max_version=SHARE_OFFSETS_VERSIONS[1],
    )


def build_share_group_describe(groups: Iterable[str]) -> Any:
    return ShareGroupDescribeRequest(
        group_ids=sorted(set(groups)),
        include_authorized_operations=False,
        min_version=SHARE_DESCRIBE_VERSIONS[0],
        max_version=SHARE_DESCRIBE_VERSIONS[1],
    )


def build_consumer_group_describe(groups: Iterable[str]) -> Any:
    return ConsumerGroupDescribeRequest(
        group_ids=sorted(set(groups)),
        include_authorized_operations=False,
        min_version=CONSUMER_DESCRIBE_VERSIONS[0],
        max_version=CONSUMER_DESCRIBE_VERSIONS[1],
    )


def build_streams_group_describe(groups: Iterable[str]) -> Any:
    return StreamsGroupDescribeRequest(
        group_ids=sorted(set(groups)),
        include_authorized_operations=False,
        min_version=STREAMS_DESCRIBE_VERSIONS[0],
        max_version=STREAMS_DESCRIBE_VERSIONS[1],
    )


def build_describe_producers(tps: Iterable[TopicPartitionKey]) -> Any:
    """DescribeProducers for ``tps`` (all led by the broker it is sent to), topics and partitions sorted."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, set()).add(int(partition))
    _Topic = DescribeProducersRequest.TopicRequest
    return DescribeProducersRequest(
        topics=[_Topic(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(by_topic.items())],
        min_version=DESCRIBE_PRODUCERS_VERSIONS[0],
        max_version=DESCRIBE_PRODUCERS_VERSIONS[1],
    )


def build_list_groups(types: Collection[str] = (), states: Collection[str] = ()) -> Any:
    """ListGroups v5+ (the first with TypesFilter); empty filters list every group."""
    return ListGroupsRequest(
        states_filter=sorted(states),
        types_filter=sorted(types),
        min_version=LIST_GROUPS_TYPES_MIN_VERSION,
    )


# ---- parsers ------------------------------------------------------------------------------------


def parse_describe_share_group_offsets(response: Any) -> dict[str, ShareGroupOffsets]:
    """group id -> its start offsets (or its group-level error)."""
    out: dict[str, ShareGroupOffsets] = {}
    version = response.version if response.version is not None else 0
    for g in response.groups:
        g_err = error_name(g.error_code)
        parts: list[SharePartitionOffset] = []
        for t in g.topics or ():
            for p in t.partitions or ():
                p_err = error_name(p.error_code)
                start = int(p.start_offset)
                lag = int(p.lag) if version >= 1 and p.lag is not None and p.lag >= 0 else None
                parts.append(
                    SharePartitionOffset(
                        group_id=g.group_id,
                        topic=t.topic_name,
                        partition=int(p.partition_index),
                        start_offset=start if p_err is None and start >= 0 else None,
                        leader_epoch=int(p.leader_epoch),
                        lag=lag,
                        error=p_err,
                        error_message=p.error_message,
                        topic_id=_uuid_or_none(t.topic_id),
                    )
                )
        parts.sort(key=lambda x: (x.topic, x.partition))
        out[g.group_id] = ShareGroupOffsets(
            g.group_id, tuple(parts) if g_err is None else (), g_err, g.error_message if g_err else None
        )
    return out


def parse_share_group_describe(response: Any, topic_names: Mapping[uuid.UUID, str]) -> dict[str, GroupDescription]:
    """group id -> description of a share group (``topic_names``: topic id -> name, from Metadata)."""
    return _parse_describe(response, "share", topic_names)


def parse_consumer_group_describe(response: Any, topic_names: Mapping[uuid.UUID, str]) -> dict[str, GroupDescription]:
    """group id -> description of a KIP-848 consumer group (``topic_names`` as above)."""
    return _parse_describe(response, "consumer", topic_names)


def parse_streams_group_describe(response: Any) -> dict[str, GroupDescription]:
    """group id -> description of a KIP-1071 streams group.

    A member's active task ``(subtopology, p)`` reads partition ``p`` of every source topic of
    that subtopology (its user topics and the repartition topics it reads): those partitions are
    what it holds (``assigned`` from ``Assignment``, ``target_assigned`` from
    ``TargetAssignment``). Standby and warm-up tasks restore state stores from changelogs and read
    no source topic. An active task whose subtopology the group's topology does not list (the
    topology is null while the group is not initialised) makes the group's ``error``
    ``UNKNOWN_SUBTOPOLOGY``, and members with no topology at all ``UNKNOWN_TOPOLOGY``: the caller
    must not read either as "holds nothing".
    """
    out: dict[str, GroupDescription] = {}
    for g in response.groups:
        err = error_name(g.error_code)
        if err is not None:
            out[g.group_id] = GroupDescription(
                g.group_id, "streams", g.group_state or None, 0, error=err, error_message=g.error_message
            )
            continue
        sources = _subtopology_sources(g.topology)
        unknown: set[str] = set()
        assigned: set[TopicPartitionKey] = set()
        target: set[TopicPartitionKey] = set()
        for m in g.members or ():
            assigned |= _active_task_partitions(m.assignment, sources, unknown)
            target |= _active_task_partitions(m.target_assignment, sources, unknown)
        problem = f"active tasks of subtopologies {sorted(unknown)} the group's topology does not list" if unknown else None
        if problem is None and g.topology is None and g.members:
            # Not initialised yet: its members hold no task, and what they will read is unknown.
            problem = f"{len(g.members)} member(s) and no topology yet (the group is {g.group_state or 'not ready'})"
        out[g.group_id] = GroupDescription(
            group_id=g.group_id,
            group_type="streams",
            state=g.group_state or None,
            member_count=len(g.members or ()),
            assigned=frozenset(assigned),
            target_assigned=frozenset(target),
            subscribed_topics=frozenset(t for ts in sources.values() for t in ts),
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            error=("UNKNOWN_SUBTOPOLOGY" if unknown else "UNKNOWN_TOPOLOGY") if problem else None,
            error_message=problem,
        )
    return out


def parse_list_groups(response: Any) -> ListedGroups:
    err = error_name(response.error_code)
    groups = tuple(
        sorted(
            (
                ListedGroup(
                    g.group_id,
                    (g.group_type or "").lower() or "classic",
                    g.group_state or None,
                    g.protocol_type or "",
                )
                for g in response.groups or ()
            ),
            key=lambda x: x.group_id,
        )
    )
    return ListedGroups(groups, err)


def parse_describe_producers(response: Any) -> dict[TopicPartitionKey, PartitionProducers]:
    """(topic, partition) -> its active producers, or its error (then no producers)."""
    out: dict[TopicPartitionKey, PartitionProducers] = {}
    for t in response.topics:
        for p in t.partitions:
            err = error_name(p.error_code)
            producers = tuple(
                ProducerState(
                    int(s.producer_id), int(s.producer_epoch), int(s.last_sequence), int(s.last_timestamp),
                    int(s.coordinator_epoch), int(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else None,
                )
                for s in p.active_producers or ()
            )
            out[(t.name, int(p.partition_index))] = PartitionProducers(
                t.name, int(p.partition_index), () if err else producers, err, p.error_message if err else None
            )
    return out


def parse_classic_group_assignments(response: Any) -> dict[str, GroupDescription]:
    """group id -> description of a classic group from kafka-python's DescribeGroups response.

    Members of ``consumer`` protocol groups carry their assignment as ConsumerProtocolAssignment
    bytes (version-prefixed, as the Java client writes them); empty bytes mean "not assigned yet"
    (a rebalance in progress). Their subscription (ConsumerProtocolSubscription metadata) gives
    ``subscribed_topics``: what a member without an assignment is about to get. An assignment
    that does not decode, or the subscription of a member without one, makes the group's
    ``error`` ``MALFORMED_ASSIGNMENT``: the caller must not read that as "holds nothing". Groups
    of other protocol types (Connect, ...) assign no topic partitions.

    A broker sends member metadata only while the group is Stable (DescribeGroups: "only
    provided if the group is in the Stable state"). While a ``consumer`` group rebalances
    (``REBALANCING``), a member that just joined holds nothing yet and its subscription is not
    shown, so what the group is about to read is unknown: its ``error`` is then
    ``REBALANCE_IN_PROGRESS`` (unreadable for this snapshot, never "holds nothing").
    """
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    out: dict[str, GroupDescription] = {}
    for g in response.groups:
        err = error_name(g.error_code)
        state = g.group_state or None
        members = list(g.members or ())
        if err is not None:
            out[g.group_id] = GroupDescription(g.group_id, "classic", state, 0, error=err)
            continue
        assigned: set[TopicPartitionKey] = set()
        subscribed: set[str] = set()
        malformed: Optional[str] = None
        rebalancing: Optional[str] = None
        unknown: list[str] = []  # members whose subscription the broker did not show
        if (g.protocol_type or "") == "consumer":
            for m in members:
                raw = m.member_assignment
                if raw:
                    try:
                        decoded = ConsumerProtocolAssignment.decode(bytes(raw))
                        assigned.update(
                            (tp.topic, int(p)) for tp in decoded.assigned_partitions or () for p in tp.partitions or ()
                        )
                    except Exception as exc:  # a foreign or corrupt assignment: say so, do not guess
                        malformed = f"member {m.member_id}: assignment {type(exc).__name__}"
                metadata = getattr(m, "member_metadata", None)
                if not metadata:
                    unknown.append(m.member_id)
                else:
                    try:
                        subscribed.update(ConsumerProtocolSubscription.decode(bytes(metadata)).topics or ())
                    except Exception as exc:  # only needed while the member has no assignment
                        if not raw:
                            malformed = f"member {m.member_id}: subscription {type(exc).__name__}"
            if state in REBALANCING and unknown and malformed is None:
                unknown.sort()
                shown = ", ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
                rebalancing = (
                    f"the group is {state}: DescribeGroups shows members' subscriptions only when it is Stable, "
                    f"so the topics of {len(unknown)} member(s) ({shown}) are unknown"
                )
        out[g.group_id] = GroupDescription(
            group_id=g.group_id,
            group_type="classic",
            state=state,
            member_count=len(members),
            assigned=frozenset(assigned),
            subscribed_topics=frozenset(subscribed),
            error="MALFORMED_ASSIGNMENT" if malformed else "REBALANCE_IN_PROGRESS" if rebalancing else None,
            error_message=malformed or rebalancing,
        )
    return out


def _parse_describe(response: Any, group_type: str, topic_names: Mapping[uuid.UUID, str]) -> dict[str, GroupDescription]:
    out: dict[str, GroupDescription] = {}
    for g in response.groups:
        err = error_name(g.error_code)
        if err is not None:
            out[g.group_id] = GroupDescription(
                g.group_id, group_type, g.group_state or None, 0, error=err, error_message=g.error_message
            )
            continue
        unresolved: set[uuid.UUID] = set()
        assigned: set[TopicPartitionKey] = set()
        target: set[TopicPartitionKey] = set()
        subscribed: set[str] = set()
        patterns: set[str] = set()
        bad_regex: Optional[str] = None
        for m in g.members or ():
            subscribed.update(m.subscribed_topic_names or ())
            regex = getattr(m, "subscribed_topic_regex", None)
            if regex:
                try:
                    re.compile(regex)
                except re.error as exc:  # Kafka's RE2/J accepted it; unknown which topics it means here
                    bad_regex = f"member {m.member_id}: subscription regex {regex!r} does not compile in Python ({exc})"
                patterns.add(regex)
            assigned |= _assignment(m.assignment, topic_names, unresolved)
            if group_type == "consumer":
                target |= _assignment(m.target_assignment, topic_names, unresolved)
        out[g.group_id] = GroupDescription(
            group_id=g.group_id,
            group_type=group_type,
            state=g.group_state or None,
            member_count=len(g.members or ()),
            assigned=frozenset(assigned),
            target_assigned=frozenset(target),
            subscribed_topics=frozenset(subscribed),
            subscribed_patterns=frozenset(patterns),
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            unresolved_topic_ids=frozenset(unresolved),
            error="INVALID_REGULAR_EXPRESSION" if bad_regex else None,
            error_message=bad_regex,
        )
    return out


def _assignment(
    assignment: Any, topic_names: Mapping[uuid.UUID, str], unresolved: set[uuid.UUID]
) -> set[TopicPartitionKey]:
    """(topic, partition) pairs of one member assignment; topic ids named by ``topic_names`` first,
    then by the name the broker sent; ids neither can name go to ``unresolved``."""
    out: set[TopicPartitionKey] = set()
    if assignment is None:
        return out
    for tp in assignment.topic_partitions or ():
        topic_id = _uuid_or_none(tp.topic_id)
        name = topic_names.get(topic_id) if topic_id is not None else None
        name = name or (tp.topic_name or None)
        if name is None:
            if topic_id is not None:
                unresolved.add(topic_id)
            continue
        out.update((name, int(p)) for p in tp.partitions or ())
    return out


def _subtopology_sources(topology: Any) -> dict[str, frozenset[str]]:
    """subtopology id -> the topics its tasks read (source and repartition-source topics)."""
    if topology is None:
        return {}
    return {
        st.subtopology_id: frozenset(st.source_topics or ()) | {t.name for t in st.repartition_source_topics or ()}
        for st in topology.subtopologies or ()
    }


def _active_task_partitions(
    assignment: Any, sources: Mapping[str, frozenset[str]], unknown: set[str]
) -> set[TopicPartitionKey]:
    """(topic, partition) pairs the active tasks of one streams assignment read; subtopologies
    ``sources`` does not list go to ``unknown``."""
    out: set[TopicPartitionKey] = set()
    if assignment is None:
        return out
    for task in assignment.active_tasks or ():
        topics = sources.get(task.subtopology_id)
        if topics is None:
            unknown.add(task.subtopology_id)
            continue
        out.update((t, int(p)) for t in topics for p in task.partitions or ())
    return out


def _uuid_or_none(value: Any) -> Optional[uuid.UUID]:
    if value is None:
        return None
    u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    return None if u == ZERO_UUID else u


__all__ = [
    "CONSUMER_DESCRIBE_VERSIONS",
    "DESCRIBE_PRODUCERS_VERSIONS",
    "SHARE_DESCRIBE_VERSIONS",
    "SHARE_OFFSETS_VERSIONS",
    "STREAMS_DESCRIBE_VERSIONS",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "GroupDescription",
    "ListGroupsRequest",
    "ListedGroup",
    "ListedGroups",
    "PartitionProducers",
    "ProducerState",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupOffsets",
    "SharePartitionOffset",
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "build_consumer_group_describe",
    "build_describe_producers",
    "build_describe_share_group_offsets",
    "build_list_groups",
    "build_share_group_describe",
    "build_streams_group_describe",
    "error_name",
    "parse_classic_group_assignments",
    "parse_consumer_group_describe",
    "parse_describe_producers",
    "parse_describe_share_group_offsets",
    "parse_list_groups",
    "parse_share_group_describe",
    "parse_streams_group_describe",
]
