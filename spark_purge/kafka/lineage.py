"""Lineage: is a group's commit part of the log's history? (KIP-320)

A consumer that commits with a leader epoch (``committed_leader_epoch`` >= 0, OffsetFetch v5+)
says "offset N, the last record I read was written in epoch E". Like a KIP-320 consumer, the
snapshot asks the partition's leader where epoch E ends (OffsetForLeaderEpoch, API 23): an end
offset below N means the log was truncated or diverged under the commit (unclean leader
election, a topic recreated under the same name), so the commit says nothing about what the
group read of *this* log. The policy blocks such a partition (``commit_diverged``).

Cost: one request per leader, only for partitions with an epoch-carrying commit; a partition
whose groups committed at k different epochs needs k rounds (one epoch per partition per
request), in practice 1. A leader that cannot answer leaves those commits unchecked (recorded
as a ``SnapshotIssue``; the commit counts as it did before KIP-320).

``changed_topics``: right before DeleteRecords (which names topics, never ids: DeleteRecords v2
has no topic id), one Metadata request for the topics about to be cut; a topic whose id is not
the one the plan was made for (recreated) or that is gone is not cut.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any, Optional

from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from spark_purge._time import Deadline
from spark_purge.kafka.model import TOPIC_DELETED, TOPIC_RECREATED, TopicPartitionKey
from spark_purge.kafka.offsets import OffsetReader
from spark_purge.kafka.wire import Wire, error_name, exc_name

CONSUMER_REPLICA_ID = -1  # what a consumer (not a follower) sends as ReplicaId (v3+)

# (tp, leader epoch) -> end offset of that epoch in the log (-1: the log does not know it)
EpochEnds = dict[tuple[TopicPartitionKey, int], int]


def epoch_rounds(wanted: Mapping[TopicPartitionKey, Collection[int]]) -> list[dict[TopicPartitionKey, int]]:
    """The epochs to ask, as rounds of at most one epoch per partition (a request cannot carry
    one partition twice)."""
    rounds: list[dict[TopicPartitionKey, int]] = []
    for tp, epochs in sorted(wanted.items()):
        for i, epoch in enumerate(sorted(set(epochs))):
            if i == len(rounds):
                rounds.append({})
            rounds[i][tp] = epoch
    return rounds


def build_request(epochs: Mapping[TopicPartitionKey, int]) -> Any:
    _Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    _Partition = _Topic.OffsetForLeaderPartition
    per_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), epoch in sorted(epochs.items()):
        per_topic[topic].append(_Partition(partition=partition, current_leader_epoch=-1, leader_epoch=int(epoch)))
    return OffsetForLeaderEpochRequest(
        replica_id=CONSUMER_REPLICA_ID, topics=[_Topic(topic=t, partitions=ps) for t, ps in per_topic.items()]
    )


def parse_response(epochs: Mapping[TopicPartitionKey, int], answer: Any) -> tuple[EpochEnds, dict[TopicPartitionKey, str]]:
    """(end offset per asked (tp, epoch), error per partition the leader could not answer)."""
    ends: EpochEnds = {}
    failed: dict[TopicPartitionKey, str] = {}
    for t in answer.topics:
        for p in t.partitions:
            tp = (t.topic, p.partition)
            if tp not in epochs:
                continue
            err = error_name(p.error_code)
            if err is None:
                ends[(tp, epochs[tp])] = int(p.end_offset)
            else:
                failed[tp] = err
    for tp in epochs:
        if (tp, epochs[tp]) not in ends and tp not in failed:
            failed[tp] = "MISSING_FROM_RESPONSE"
    return ends, failed


async def epoch_end_offsets(
    wire: Wire,
    wanted: Mapping[TopicPartitionKey, Collection[int]],
    leaders: Mapping[TopicPartitionKey, Optional[int]],
    deadline: Deadline,
) -> tuple[EpochEnds, dict[TopicPartitionKey, str]]:
    """Where each wanted (partition, epoch) ends in the log: OffsetForLeaderEpoch per leader, in
    parallel; returns the ends and, per partition left unchecked, the error."""
    ends: EpochEnds = {}
    failed: dict[TopicPartitionKey, str] = {}
    for round_ in epoch_rounds(wanted):
        by_leader: dict[int, dict[TopicPartitionKey, int]] = defaultdict(dict)
        for tp, epoch in round_.items():
            leader = leaders.get(tp)
            if leader is None:
                failed[tp] = "LEADER_NOT_AVAILABLE"
            else:
                by_leader[leader][tp] = epoch
        sends = [(asked, wire.send(build_request(asked), node_id=leader, timeout_ms=deadline.remaining_ms())) for leader, asked in by_leader.items()]
        answers = await wire.gather([f for _, f in sends])
        for (asked, _), answer in zip(sends, answers):
            if isinstance(answer, Exception):
                failed.update(dict.fromkeys(asked, exc_name(answer)))
                continue
            got, errors = parse_response(asked, answer)
            ends.update(got)
            failed.update(errors)
    return ends, failed


async def changed_topics(reader: OffsetReader, expected: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Topics whose id is no longer ``expected`` (topic -> id as the plan saw it): topic ->
    (``TOPIC_RECREATED`` or ``TOPIC_DELETED``, why). One Metadata request, which also refreshes
    the leaders the deletes go to."""
    if not expected:
        return {}
    meta = await reader.metadata(sorted(expected))
    now = meta.ids_by_name()
    changed: dict[str, tuple[str, str]] = {}
    for topic, old in sorted(expected.items()):
        if topic not in meta.internal:
            err = meta.topic_errors.get(topic, "UNKNOWN_TOPIC_OR_PARTITION")
            changed[topic] = (TOPIC_DELETED, f"topic {topic!r} (id {old}) is gone ({err}): not cut")
        elif now.get(topic) != old:
            changed[topic] = (
                TOPIC_RECREATED,
                f"topic {topic!r} was recreated: id {old} when planned, {now.get(topic)} now: not cut",
            )
    return changed


__all__ = ["EpochEnds", "build_request", "changed_topics", "epoch_end_offsets", "epoch_rounds", "parse_response"]
