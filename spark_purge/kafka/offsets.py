"""Metadata and ListOffsets: partition leaders, and offsets read per leader in parallel.

- Metadata: 1 request (explicit topics or all topics); every answer refreshes the leader cache.
- ListOffsets: several queries at once (EARLIEST, LATEST, LATEST/READ_COMMITTED, timestamps),
  one request per leader and query, all leaders in parallel; partitions whose leader moved are
  retried after a metadata refresh (``retries`` rounds, with backoff, until the deadline).
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Optional

from kafka.protocol.consumer import IsolationLevel, ListOffsetsRequest, OffsetSpec
from kafka.protocol.metadata import MetadataRequest

from spark_purge._time import Backoff, Deadline
from spark_purge.errors import AuthorizationError, KafkaError
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name, exc_name

log = logging.getLogger(__name__)

METADATA_RETRY = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_UNREACHABLE",
        "REQUEST_TIMED_OUT",
        "OFFSET_NOT_AVAILABLE",  # a new leader whose high watermark has not caught up yet (KIP-207)
    }
)
DEFAULT_RETRIES = 4  # snapshot reads when ConnectionSettings.retries is None

EARLIEST = int(OffsetSpec.EARLIEST)
LATEST = int(OffsetSpec.LATEST)
# Tiered storage (KIP-405/KIP-1005): the local log's start (v8+) and the highest offset copied
# to remote storage (v9+; -1 when nothing is).
EARLIEST_LOCAL = int(OffsetSpec.EARLIEST_LOCAL)
LATEST_TIERED = int(OffsetSpec.LATEST_TIERED)
READ_COMMITTED = int(IsolationLevel.READ_COMMITTED)

# name -> (isolation level, {tp: timestamp or OffsetSpec})
Queries = Mapping[str, tuple[int, Mapping[TopicPartitionKey, int]]]
# ({name: {tp: (offset, timestamp)}}, {tp: error name} for partitions given up on)
OffsetResults = tuple[dict[str, dict[TopicPartitionKey, tuple[int, int]]], dict[TopicPartitionKey, str]]
Leaders = dict[TopicPartitionKey, Optional[int]]


def retry_backoff(wire: Wire) -> Backoff:
    """The pauses between retry rounds: ``retry_backoff_ms`` first, doubled up to 2 s."""
    first = max(0.001, wire.settings.retry_backoff_ms / 1000)
    return Backoff(first=first, cap=max(first, 2.0))


def retry_rounds(wire: Wire) -> int:
    """Attempts of one read: the first and ``retries`` more."""
    retries = wire.settings.retries
    return 1 + (DEFAULT_RETRIES if retries is None else retries)


class Metadata:
    """One Metadata answer, parsed."""

    def __init__(self) -> None:
        self.brokers: dict[int, str] = {}
        self.internal: dict[str, bool] = {}
        self.partitions: dict[TopicPartitionKey, tuple[Optional[int], tuple[int, ...], tuple[int, ...]]] = {}
        self.topic_errors: dict[str, str] = {}
        self.topic_ids: dict[uuid.UUID, str] = {}  # Metadata v10+; KIP-848 and share groups name topics by id

    def ids_by_name(self) -> dict[str, str]:
        """Topic name -> its id as a string (topics without one, from brokers before Metadata v10, absent)."""
        return {name: str(i) for i, name in self.topic_ids.items()}


class OffsetReader:
    """Metadata and ListOffsets over one ``Wire``; keeps the partition leaders it last saw."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self._leaders: Leaders = {}
        self._lock = threading.Lock()

    # ---- metadata ----------------------------------------------------------------------------
    async def metadata(self, topics: Optional[Collection[str]]) -> Metadata:
        """Metadata for ``topics`` (None: every topic; empty: brokers only)."""
        _Topic = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(
            topics=None if topics is None else [_Topic(name=t) for t in sorted(topics)],
            allow_auto_topic_creation=False,
        )
        response = await self.wire.send_any(request)
        meta = Metadata()
        for b in response.brokers:
            meta.brokers[b.node_id] = f"{b.host}:{b.port}"
        for t in response.topics:
            err = error_name(t.error_code)
            if err is not None:
                meta.topic_errors[t.name] = err
                continue
            meta.internal[t.name] = bool(t.is_internal)
            topic_id = getattr(t, "topic_id", None)
            if topic_id is not None:
                topic_id = topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id))
                if topic_id.int:
                    meta.topic_ids[topic_id] = t.name
            for p in t.partitions:
                leader = p.leader_id if p.leader_id is not None and p.leader_id >= 0 else None
                meta.partitions[(t.name, p.partition_index)] = (leader, tuple(p.replica_nodes), tuple(p.isr_nodes))
        with self._lock:
            for tp, (leader, _, _) in meta.partitions.items():
                self._leaders[tp] = leader
        return meta

    async def leaders_for(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Leaders:
        """Leader per partition, from the cache unless ``refresh`` or some are unknown."""
        with self._lock:
            known = {tp: self._leaders[tp] for tp in tps if tp in self._leaders}
        if refresh or len(known) < len(tps):
            meta = await self.metadata({tp[0] for tp in tps})
            return {tp: meta.partitions[tp][0] for tp in tps if tp in meta.partitions}
        return known

    # ---- ListOffsets -------------------------------------------------------------------------
    async def list_offsets(self, queries: Queries, leaders: Leaders, deadline: Deadline) -> OffsetResults:
        """Several ListOffsets queries at once, per leader; see ``OffsetResults``.

        Partitions with a stale leader are retried after a metadata refresh until the deadline.
        """
        results: dict[str, dict[TopicPartitionKey, tuple[int, int]]] = {name: {} for name in queries}
        todo: dict[str, dict[TopicPartitionKey, int]] = {name: dict(specs) for name, (_, specs) in queries.items()}
        failed: dict[TopicPartitionKey, str] = {}
        rounds, backoff = retry_rounds(self.wire), retry_backoff(self.wire)
        for round_ in range(rounds):
            retry = await self._list_offsets_round(queries, todo, leaders, deadline, results, failed)
            todo = {name: {tp: todo[name][tp] for tp in tps} for name, tps in retry.items() if tps}
            if not todo or deadline.expired() or round_ == rounds - 1:
                break
            await self.wire.sleep(backoff.within(deadline))
            meta = await self.metadata({tp[0] for specs in todo.values() for tp in specs})
            for tp in {tp for specs in todo.values() for tp in specs}:
                if tp in meta.partitions:
                    leaders[tp] = meta.partitions[tp][0]
                else:  # the topic (or partition) is gone: nothing to retry
                    leaders[tp] = None
                    failed[tp] = meta.topic_errors.get(tp[0], "UNKNOWN_TOPIC_OR_PARTITION") + " (topic deleted?)"
                    for specs in todo.values():
                        specs.pop(tp, None)
            todo = {n: s for n, s in todo.items() if s}
            if not todo:
                break
        got_all = {tp for tp in failed if all(tp in results[n] for n in queries if tp in queries[n][1])}
        for tp in got_all:
            failed.pop(tp)
        return results, failed

    async def _list_offsets_round(
        self,
        queries: Queries,
        todo: Mapping[str, Mapping[TopicPartitionKey, int]],
        leaders: Leaders,
        deadline: Deadline,
        results: dict[str, dict[TopicPartitionKey, tuple[int, int]]],
        failed: dict[TopicPartitionKey, str],
    ) -> dict[str, set[TopicPartitionKey]]:
        """One request per (query, leader); fills ``results``/``failed``, returns what to retry."""
        _Topic = ListOffsetsRequest.ListOffsetsTopic
        _Partition = _Topic.ListOffsetsPartition
        sends: list[tuple[str, list[TopicPartitionKey], Any]] = []
        retry: dict[str, set[TopicPartitionKey]] = defaultdict(set)
        for name, specs in todo.items():
            isolation = queries[name][0]
            by_leader: dict[int, list[TopicPartitionKey]] = defaultdict(list)
            for tp in specs:
                leader = leaders.get(tp)
                if leader is None:
                    retry[name].add(tp)
                    failed.setdefault(tp, "LEADER_NOT_AVAILABLE")
                else:
                    by_leader[leader].append(tp)
            for leader, tps in by_leader.items():
                per_topic: dict[str, list[Any]] = defaultdict(list)
                min_version = 2 if isolation else 0
                for tp in tps:
                    per_topic[tp[0]].append(_Partition(partition_index=tp[1], timestamp=int(specs[tp])))
                    if specs[tp] < -2:
                        min_version = max(min_version, ListOffsetsRequest.min_version_for_timestamp(specs[tp]))
                request = ListOffsetsRequest(
                    isolation_level=isolation,
                    topics=[_Topic(name=t, partitions=ps) for t, ps in per_topic.items()],
                    min_version=min_version,
                )
                sends.append((name, tps, self.wire.send(request, node_id=leader, timeout_ms=deadline.remaining_ms())))
        answers = await self.wire.gather([f for _, _, f in sends])
        for (name, tps, _), answer in zip(sends, answers):
            if isinstance(answer, Exception):
                for tp in tps:
                    failed[tp] = exc_name(answer)
                    retry[name].add(tp)
                continue
            for topic in answer.topics:
                for p in topic.partitions:
                    tp = (topic.name, p.partition_index)
                    err = error_name(p.error_code)
                    if err is None:
                        offset = p.offset
                        if offset is None or (offset == -1 and p.old_style_offsets):
                            offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                        results[name][tp] = (int(offset), int(p.timestamp if p.timestamp is not None else -1))
                    elif err in AUTH_ERRORS:
                        raise AuthorizationError(f"Describe on topic {topic.name!r} denied ({err}, ListOffsets)")
                    elif err in METADATA_RETRY:
                        failed[tp] = err
                        retry[name].add(tp)
                    else:
                        failed[tp] = err
        return retry

    # ---- offsets by time / log start ----------------------------------------------------------
    async def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Offset of the first record at/after each timestamp (ms); the high watermark when every
        record is older. Partitions that could not be read raise KafkaError naming them."""
        if not timestamps:
            return {}
        deadline = Deadline(self.wire.settings.request_timeout_ms / 1000)
        leaders = await self.leaders_for(list(timestamps), refresh=False)
        queries = {
            "time": (0, {tp: max(0, int(ts)) for tp, ts in timestamps.items()}),
            "latest": (0, dict.fromkeys(timestamps, LATEST)),
        }
        res, failed = await self.list_offsets(queries, dict(leaders), deadline)
        if failed:
            raise KafkaError(f"ListOffsets by timestamp failed for {describe_failed(failed)}")
        return {tp: (res["time"][tp][0] if res["time"][tp][0] >= 0 else res["latest"][tp][0]) for tp in timestamps}

    async def log_start_offsets(self, tps: Iterable[TopicPartitionKey], spec: int = EARLIEST) -> dict[TopicPartitionKey, int]:
        """Current log start offsets (``spec`` EARLIEST_LOCAL: the local log's); partitions that
        could not be read are left out."""
        wanted = [(str(t), int(p)) for t, p in tps]
        if not wanted:
            return {}
        deadline = Deadline(self.wire.settings.request_timeout_ms / 1000)
        leaders = await self.leaders_for(wanted, refresh=False)
        res, _ = await self.list_offsets({"earliest": (0, dict.fromkeys(wanted, spec))}, dict(leaders), deadline)
        return {tp: v[0] for tp, v in res["earliest"].items()}


def describe_failed(failed: Mapping[TopicPartitionKey, str]) -> str:
    items = sorted(failed.items())
    text = ", ".join(f"{t}-{p} ({e})" for (t, p), e in items[:10])
    return text + (f" and {len(items) - 10} more" if len(items) > 10 else "")


__all__ = ["EARLIEST", "EARLIEST_LOCAL", "LATEST", "LATEST_TIERED", "READ_COMMITTED", "Metadata", "OffsetReader", "describe_failed"]
