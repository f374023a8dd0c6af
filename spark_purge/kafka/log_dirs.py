"""DescribeLogDirs (API 35): each partition's size on disk, from its leader's replica.

One request per leader broker, naming only the partitions it leads (leaders in parallel).
A broker answers per log directory; a partition's size is the sum over the broker's log
directories of its current replica (a *future* replica, being moved between directories by
AlterReplicaLogDirs, is not counted). The leader's replica stands for the partition: followers
hold the same segments, give or take the records they have not fetched yet.

Sizes are informational (the audit's bytes), never a safety input: a broker that cannot answer
(down, a log directory offline, Cluster Describe denied) leaves its partitions' sizes unknown
(``None``), logged once, and the snapshot goes on. kafka-python's own request/response
definitions (``kafka.protocol.admin``) fit this API, so none are redefined here.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Optional

from kafka.protocol.admin import DescribeLogDirsRequest

from spark_purge._time import Deadline
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.wire import Wire, error_name, exc_name

log = logging.getLogger(__name__)

Sizes = dict[TopicPartitionKey, int]


def size_request(partitions: list[TopicPartitionKey]) -> Any:
    """One DescribeLogDirs request for ``partitions`` (topics sorted, partitions ascending)."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for t, p in sorted(partitions):
        by_topic[t].append(p)
    _Topic = DescribeLogDirsRequest.DescribableLogDirTopic
    return DescribeLogDirsRequest(topics=[_Topic(topic=t, partitions=ps) for t, ps in by_topic.items()])


def sizes_from_response(response: Any, wanted: set[TopicPartitionKey]) -> tuple[Sizes, Optional[str]]:
    """({tp: bytes} for the ``wanted`` partitions the answer has, an error naming what failed or
    None). Only log directories without an error count; a partition in none of them is absent."""
    top = error_name(getattr(response, "error_code", 0) or 0)  # v3+: e.g. CLUSTER_AUTHORIZATION_FAILED
    if top is not None:
        return {}, top
    sizes: Sizes = {}
    failed_dirs: list[str] = []
    for result in response.results:
        err = error_name(result.error_code)
        if err is not None:  # e.g. KAFKA_STORAGE_ERROR: an offline log directory
            failed_dirs.append(f"{result.log_dir}: {err}")
            continue
        for topic in result.topics:
            for part in topic.partitions:
                tp = (topic.name, part.partition_index)
                if tp in wanted and not part.is_future_key:
                    sizes[tp] = sizes.get(tp, 0) + int(part.partition_size)
    return sizes, ("; ".join(failed_dirs) or None)


async def partition_sizes(
    wire: Wire, leaders: Mapping[TopicPartitionKey, Optional[int]], deadline: Deadline
) -> tuple[Sizes, dict[TopicPartitionKey, str]]:
    """({tp: bytes on the leader's disk}, {tp: why unknown}) for every partition with a leader."""
    by_leader: dict[int, list[TopicPartitionKey]] = defaultdict(list)
    unknown: dict[TopicPartitionKey, str] = {}
    for tp, leader in leaders.items():
        if leader is None or leader < 0:
            unknown[tp] = "LEADER_NOT_AVAILABLE"
        else:
            by_leader[leader].append(tp)
    if not by_leader:
        return {}, unknown
    brokers = sorted(by_leader)
    futures = [wire.send(size_request(by_leader[b]), node_id=b, timeout_ms=max(1, deadline.remaining_ms())) for b in brokers]
    sizes: Sizes = {}
    for broker, answer in zip(brokers, await wire.gather(futures)):
        wanted = set(by_leader[broker])
        found: Sizes
        err: Optional[str]
        if isinstance(answer, BaseException):
            found, err = {}, exc_name(answer)
        else:
            found, err = sizes_from_response(answer, wanted)
        sizes.update(found)
        for tp in wanted - found.keys():
            unknown[tp] = err or "NOT_IN_ANY_LOG_DIR"
        if err is not None:
            log.warning("DescribeLogDirs to broker %d: %s; sizes of %d partition(s) unknown this snapshot", broker, err, len(wanted - found.keys()))
    return sizes, unknown


__all__ = ["partition_sizes", "size_request", "sizes_from_response"]
