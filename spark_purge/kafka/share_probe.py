"""Read share-group positions and KIP-848 member assignments over a connected KafkaAdminClient.

Self-contained (it borrows only kafka-python's connection manager from the admin client), so the
snapshot can call it once the client restructure lands:

    probe = probe_groups(admin, share_groups=[...], consumer_groups=[...], topic_names=ids_to_names)
    probe = await probe_groups_async(admin, share, consumer, None, ids_to_names, deadline)  # on the IO loop

Round trips: Metadata (only when no topic-id mapping is given), one batched FindCoordinator (v4),
then per coordinator, in parallel: DescribeShareGroupOffsets + ShareGroupDescribe (share groups),
ConsumerGroupDescribe (KIP-848 consumer groups) and, if asked, DescribeGroups (classic groups). Groups whose coordinator moved
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, an unreachable
coordinator) are looked up again and re-sent until the deadline; kafka-python's own coordinator
cache is neither read nor written (it is never invalidated). Whatever could not be read by the
deadline, or was refused, is in ``GroupProbe.unreadable`` (group id -> error name): the caller
treats those groups as ``group_unreadable``.
"""
from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import kafka.errors as Errors
from kafka import KafkaAdminClient
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from spark_purge.kafka.messages import (
    GroupDescription,
    ListedGroups,
    ShareGroupOffsets,
    TopicPartitionKey,
    build_consumer_group_describe,
    build_describe_share_group_offsets,
    build_list_groups,
    build_share_group_describe,
    error_name,
    parse_classic_group_assignments,
    parse_consumer_group_describe,
    parse_describe_share_group_offsets,
    parse_list_groups,
    parse_share_group_describe,
)

_COORDINATOR_RETRY = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"})
_RETRIABLE = _COORDINATOR_RETRY | {"REQUEST_TIMED_OUT"}
_GROUP_KEY_TYPE = 0  # FindCoordinator key type GROUP: share and consumer groups live on the group coordinator


@dataclass(frozen=True)
class GroupProbe:
    """What the probe read. Every requested group is in exactly one of: its maps, ``unreadable``."""

    share_offsets: Mapping[str, ShareGroupOffsets] = field(default_factory=dict)
    share_groups: Mapping[str, GroupDescription] = field(default_factory=dict)
    consumer_groups: Mapping[str, GroupDescription] = field(default_factory=dict)
    classic_groups: Mapping[str, GroupDescription] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=dict)

    def share_positions(self) -> dict[tuple[str, str, int], int]:
        """(group, topic, partition) -> share-partition start offset (partitions with a position)."""
        return {(g, t, p): off for g, so in self.share_offsets.items() for (t, p), off in so.positions().items()}

    def assignments(self) -> dict[str, frozenset[TopicPartitionKey]]:
        """group -> partitions its members hold or are about to get (every group type read)."""
        out = {g: d.held for g, d in self.share_groups.items()}
        out.update({g: d.held for g, d in self.consumer_groups.items()})
        out.update({g: d.held for g, d in self.classic_groups.items()})
        return out


def probe_groups(
    admin: KafkaAdminClient,
    share_groups: Collection[str] = (),
    consumer_groups: Collection[str] = (),
    topics: Optional[Mapping[str, Collection[int]]] = None,
    topic_names: Optional[Mapping[uuid.UUID, str]] = None,
    timeout_ms: int = 30_000,
    classic_groups: Collection[str] = (),
    on_request: Optional[Callable[[str], None]] = None,
) -> GroupProbe:
    """Share-group start offsets and descriptions, KIP-848 (and classic) group assignments.

    Blocking: runs on kafka-python's IO thread. From a coroutine already running there (the
    snapshot), ``await probe_groups_async(...)`` instead.

    ``share_groups`` / ``consumer_groups`` / ``classic_groups``: group ids by type (from ListGroups
    v5, e.g. :func:`list_groups`); classic groups are described with DescribeGroups and their
    members' ConsumerProtocol assignments decoded (the snapshot may pass none and parse its own
    DescribeGroups answer with ``messages.parse_classic_group_assignments`` instead).
    ``topics``: {topic: partitions} to ask start offsets for (None: every share-partition each
    group has state for). ``topic_names``: topic id -> name from the snapshot's Metadata (read
    here when None). ``on_request``: called with each request's API name before it is sent
    (request counting). Raises kafka errors only for failures outside any group (no broker
    answered Metadata at all); a group that cannot be read is in ``GroupProbe.unreadable``.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    return admin._manager.run(  # type: ignore[no-any-return]
        probe_groups_async, admin, share_groups, consumer_groups, topics, topic_names, deadline, classic_groups, on_request
    )


async def probe_groups_async(
    admin: KafkaAdminClient,
    share_groups: Collection[str],
    consumer_groups: Collection[str],
    topics: Optional[Mapping[str, Collection[int]]],
    topic_names: Optional[Mapping[uuid.UUID, str]],
    deadline: float,
    classic_groups: Collection[str] = (),
    on_request: Optional[Callable[[str], None]] = None,
) -> GroupProbe:
    """:func:`probe_groups` as a coroutine on kafka-python's IO loop; ``deadline`` is a
    ``time.monotonic()`` instant."""
    wire = _Wire(admin, on_request)
    return await _probe(
        wire, sorted(set(share_groups)), sorted(set(consumer_groups)), topics, topic_names, deadline, sorted(set(classic_groups))
    )


def list_groups(admin: KafkaAdminClient, types: Collection[str] = ("share", "consumer"), timeout_ms: int = 30_000) -> ListedGroups:
    """ListGroups v5 (TypesFilter) on every broker, merged; the first broker error is kept.

    A convenience for tests and standalone use: the snapshot has its own complete group listing
    (with coordinator-stability checks) and passes the ids it found to :func:`probe_groups`.
    """
    return admin._manager.run(_list_groups, _Wire(admin, None), tuple(types), timeout_ms)  # type: ignore[no-any-return]


def topic_id_names(admin: KafkaAdminClient, timeout_ms: int = 30_000) -> dict[uuid.UUID, str]:
    """topic id -> name for every topic the principal may describe (Metadata v10+)."""
    return admin._manager.run(_topic_id_names, _Wire(admin, None), timeout_ms)  # type: ignore[no-any-return]


# ---- internals ----------------------------------------------------------------------------------


class _Wire:
    """kafka-python's connection manager of an admin client, with a per-request hook."""

    def __init__(self, admin: KafkaAdminClient, on_request: Optional[Callable[[str], None]]) -> None:
        self.manager = admin._manager
        self.net = admin._net
        self.on_request = on_request

    def send(self, request: Any, node_id: Optional[int] = None, timeout_ms: Optional[int] = None) -> Any:
        """A kafka Future (awaitable on the IO loop) for the answer."""
        if self.on_request is not None:
            self.on_request(str(request.name))
        return self.manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)

    def api_version(self, request_class: Any) -> int:
        return int(self.manager.broker_version_data.api_version(request_class))

    def brokers(self) -> list[int]:
        return sorted(int(b.node_id) for b in self.manager.cluster.brokers())

    async def sleep(self, seconds: float) -> None:
        await self.net.sleep(seconds)


async def _gather(futures: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for fut in futures:
        try:
            out.append(await fut)
        except Exception as exc:  # one coordinator's failure must not hide the others' answers
            out.append(exc)
    return out


def _exc_name(exc: BaseException) -> str:
    name = getattr(exc, "message", None)
    if isinstance(name, str) and name.isupper():
        return name
    if isinstance(exc, Errors.IncompatibleBrokerVersion):
        return "UNSUPPORTED_VERSION"
    if isinstance(exc, (Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
        return "REQUEST_TIMED_OUT"
    if isinstance(exc, (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.UnknownBrokerIdError)):
        return "COORDINATOR_NOT_AVAILABLE"
    return type(exc).__name__


def _remaining_ms(deadline: float) -> int:
    return max(1, int((deadline - time.monotonic()) * 1000))


async def _topic_id_names(wire: _Wire, timeout_ms: int) -> dict[uuid.UUID, str]:
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False, min_version=10)
    response = await wire.send(request, timeout_ms=timeout_ms)
    out: dict[uuid.UUID, str] = {}
    for t in response.topics:
        if error_name(t.error_code) is None and t.topic_id is not None and t.name:
            topic_id = t.topic_id if isinstance(t.topic_id, uuid.UUID) else uuid.UUID(str(t.topic_id))
            if topic_id.int:
                out[topic_id] = t.name
    return out


async def _list_groups(wire: _Wire, types: tuple[str, ...], timeout_ms: int) -> ListedGroups:
    brokers = wire.brokers()
    answers = await _gather([wire.send(build_list_groups(types=types), node_id=b, timeout_ms=timeout_ms) for b in brokers])
    groups = {}
    error: Optional[str] = None
    for broker, answer in zip(brokers, answers):
        if isinstance(answer, Exception):
            error = error or f"{_exc_name(answer)} (broker {broker})"
            continue
        listed = parse_list_groups(answer)
        if listed.error is not None:
            error = error or f"{listed.error} (broker {broker})"
        groups.update({g.group_id: g for g in listed.groups})
    return ListedGroups(tuple(groups[g] for g in sorted(groups)), error)


async def _find_coordinators(wire: _Wire, groups: Sequence[str], deadline: float) -> tuple[dict[str, int], dict[str, str]]:
    """(group -> coordinator node, group -> error for groups without one)."""
    found: dict[str, int] = {}
    failed: dict[str, str] = {}
    if wire.api_version(FindCoordinatorRequest) >= 4:
        request = FindCoordinatorRequest(key_type=_GROUP_KEY_TYPE, coordinator_keys=list(groups), min_version=4)
        try:
            answer = await wire.send(request, timeout_ms=_remaining_ms(deadline))
        except Exception as exc:
            return {}, {g: _exc_name(exc) for g in groups}
        rows = [(c.key, c.error_code, c.node_id) for c in answer.coordinators]
    else:  # brokers before 3.0 have neither share nor KIP-848 groups; kept for completeness
        futures = [wire.send(FindCoordinatorRequest(key=g, key_type=_GROUP_KEY_TYPE, max_version=3)) for g in groups]
        rows = []
        for g, a in zip(groups, await _gather(futures)):
            rows.append((g, 15, -1) if isinstance(a, Exception) else (g, a.error_code, a.node_id))
    for key, code, node_id in rows:
        err = error_name(code)
        if err is None and node_id is not None and node_id >= 0:
            found[key] = int(node_id)
        else:
            failed[key] = err or "COORDINATOR_NOT_AVAILABLE"
    for g in groups:
        if g not in found and g not in failed:
            failed[g] = "COORDINATOR_NOT_AVAILABLE"
    return found, failed


async def _probe(
    wire: _Wire,
    share: list[str],
    consumer: list[str],
    topics: Optional[Mapping[str, Collection[int]]],
    topic_names: Optional[Mapping[uuid.UUID, str]],
    deadline: float,
    classic: Sequence[str] = (),
) -> GroupProbe:
    names: Mapping[uuid.UUID, str]
    if topic_names is None and (share or consumer):  # classic assignments carry topic names
        names = await _topic_id_names(wire, _remaining_ms(deadline))
    else:
        names = dict(topic_names or {})
    offsets: dict[str, ShareGroupOffsets] = {}
    share_desc: dict[str, GroupDescription] = {}
    consumer_desc: dict[str, GroupDescription] = {}
    classic_desc: dict[str, GroupDescription] = {}
    # (kind, group) still to read: "offsets"/"share" per share group, "consumer" / "classic" per
    # consumer / classic group.
    todo: set[tuple[str, str]] = {(k, g) for g in share for k in ("offsets", "share")}
    todo |= {("consumer", g) for g in consumer} | {("classic", g) for g in classic}
    last_error: dict[str, str] = {}
    round_ = 0
    while todo:
        groups = sorted({g for _, g in todo})
        coordinators, no_coordinator = await _find_coordinators(wire, groups, deadline)
        last_error.update(no_coordinator)
        refused = {g for g, err in no_coordinator.items() if err not in _RETRIABLE}
        todo = {(k, g) for k, g in todo if g not in refused}  # e.g. GROUP_AUTHORIZATION_FAILED
        by_coord: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for kind, g in sorted(todo):
            if g in coordinators:
                by_coord[coordinators[g]][kind].append(g)
        sends: list[tuple[str, list[str], Any]] = []
        for node, kinds in sorted(by_coord.items()):
            timeout = _remaining_ms(deadline)
            if kinds.get("offsets"):
                request = build_describe_share_group_offsets(kinds["offsets"], topics)
                sends.append(("offsets", kinds["offsets"], wire.send(request, node_id=node, timeout_ms=timeout)))
            if kinds.get("share"):
                request = build_share_group_describe(kinds["share"])
                sends.append(("share", kinds["share"], wire.send(request, node_id=node, timeout_ms=timeout)))
            if kinds.get("consumer"):
                request = build_consumer_group_describe(kinds["consumer"])
                sends.append(("consumer", kinds["consumer"], wire.send(request, node_id=node, timeout_ms=timeout)))
            if kinds.get("classic"):
                request = DescribeGroupsRequest(groups=kinds["classic"], include_authorized_operations=False)
                sends.append(("classic", kinds["classic"], wire.send(request, node_id=node, timeout_ms=timeout)))
        answers = await _gather([f for _, _, f in sends])
        for (kind, gs, _), answer in zip(sends, answers):
            if isinstance(answer, Exception):
                for g in gs:
                    last_error[g] = _exc_name(answer)
                if isinstance(answer, Errors.IncompatibleBrokerVersion):
                    todo.difference_update((kind, g) for g in gs)  # retrying will not help
                continue
            parsed: Mapping[str, ShareGroupOffsets | GroupDescription]
            if kind == "offsets":
                parsed = parse_describe_share_group_offsets(answer)
            elif kind == "share":
                parsed = parse_share_group_describe(answer, names)
            elif kind == "classic":
                parsed = parse_classic_group_assignments(answer)
            else:
                parsed = parse_consumer_group_describe(answer, names)
            for g in gs:
                result = parsed.get(g)
                if result is None:
                    last_error[g] = "MISSING_FROM_RESPONSE"
                    continue
                if result.error in _COORDINATOR_RETRY:
                    last_error[g] = result.error
                    continue
                todo.discard((kind, g))
                if result.error is not None:
                    last_error[g] = result.error
                    continue
                if isinstance(result, ShareGroupOffsets):
                    offsets[g] = result
                elif kind == "share":
                    share_desc[g] = result
                elif kind == "classic":
                    classic_desc[g] = result
                else:
                    consumer_desc[g] = result
        if not todo or time.monotonic() >= deadline:
            break
        round_ += 1
        await wire.sleep(min(0.1 * 2**round_, 2.0, max(0.0, deadline - time.monotonic())))
    unreadable: dict[str, str] = {}
    for g in share:
        if g not in offsets or g not in share_desc:
            unreadable[g] = last_error.get(g, "REQUEST_TIMED_OUT")
    for g in consumer:
        if g not in consumer_desc:
            unreadable[g] = last_error.get(g, "REQUEST_TIMED_OUT")
    for g in classic:
        if g not in classic_desc:
            unreadable[g] = last_error.get(g, "REQUEST_TIMED_OUT")
    return GroupProbe(
        share_offsets={g: o for g, o in offsets.items() if g not in unreadable},
        share_groups={g: d for g, d in share_desc.items() if g not in unreadable},
        consumer_groups=consumer_desc,
        classic_groups=classic_desc,
        unreadable=unreadable,
        topic_names=dict(names),
    )


__all__ = ["GroupProbe", "list_groups", "probe_groups", "probe_groups_async", "topic_id_names"]
