"""Producer awareness: who holds a partition's last stable offset (KIP-664 DescribeProducers).

A partition with an open transaction cannot be cut past its last stable offset (the first
record of the oldest open transaction): the policy binds it there (``last_stable_offset``).
For such partitions only (LSO < high watermark) the batch asks each partition's leader for its
active producers — one DescribeProducers (API 61) per leader, leaders in parallel — so the plan
can name the producer pinning the partition (id, epoch, the transaction's first offset, its
last write) and the audit can record how many producers are active there.

A transaction still open after the broker's ``transaction.max.timeout.ms`` should have been
aborted by its coordinator; one that is not (a *hanging* transaction, e.g. KAFKA-12671) stops
the LSO — and so the purge — on that partition for good. It is flagged when the producer's last
write (``LastTimestamp``, the producer's record time) is older than that timeout: the
transaction has then been open at least that long (its first record came no later). The same
rule as ``kafka-transactions.sh find-hanging``. The timeout is read once per client with
DescribeConfigs on a broker resource (Cluster DescribeConfigs; unknown without it: no flag).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Optional

from kafka import errors as Errors
from kafka.protocol.admin import DescribeConfigsRequest

from spark_purge._time import Deadline
from spark_purge.kafka.configs import int_or_none
from spark_purge.kafka.messages import PartitionProducers, build_describe_producers, parse_describe_producers
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.wire import Wire, error_name, exc_name

TXN_MAX_TIMEOUT_KEY = "transaction.max.timeout.ms"
_BROKER_RESOURCE = 4


@dataclass(frozen=True)
class OpenTransactions:
    """Active producers per partition asked, and the broker's ``transaction.max.timeout.ms``."""

    producers: Mapping[TopicPartitionKey, PartitionProducers]
    max_timeout_ms: Optional[int]


async def describe_producers(
    wire: Wire, tps: Collection[TopicPartitionKey], leaders: Mapping[TopicPartitionKey, Optional[int]], deadline: Deadline
) -> dict[TopicPartitionKey, PartitionProducers]:
    """Every partition's active producers: one DescribeProducers per leader, in parallel. A
    partition without a leader, or whose leader failed, carries the error instead."""
    out: dict[TopicPartitionKey, PartitionProducers] = {}
    by_leader: dict[int, list[TopicPartitionKey]] = defaultdict(list)
    for tp in sorted(tps):
        leader = leaders.get(tp)
        if leader is None:
            out[tp] = PartitionProducers(tp[0], tp[1], error="LEADER_NOT_AVAILABLE")
        else:
            by_leader[leader].append(tp)
    sends = [
        (asked, wire.send(build_describe_producers(asked), node_id=leader, timeout_ms=deadline.remaining_ms()))
        for leader, asked in sorted(by_leader.items())
    ]
    answers = await wire.gather([f for _, f in sends])
    for (asked, _), answer in zip(sends, answers):
        if isinstance(answer, Exception):
            out.update({tp: PartitionProducers(tp[0], tp[1], error=exc_name(answer)) for tp in asked})
            continue
        got = parse_describe_producers(answer)
        out.update({tp: got.get(tp, PartitionProducers(tp[0], tp[1], error="MISSING_FROM_RESPONSE")) for tp in asked})
    return out


async def transaction_max_timeout_ms(wire: Wire, broker: int) -> Optional[int]:
    """The broker's ``transaction.max.timeout.ms`` (None: refused or unreadable)."""
    _Res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[_Res(resource_type=_BROKER_RESOURCE, resource_name=str(broker), configuration_keys=[TXN_MAX_TIMEOUT_KEY])],
        include_synonyms=False,
    )
    try:
        response = await wire.send(request, node_id=broker)
    except Errors.KafkaError:
        return None
    for result in response.results:
        if error_name(result.error_code) is None:
            return int_or_none({c.name: c.value for c in result.configs}.get(TXN_MAX_TIMEOUT_KEY))
    return None


__all__ = ["TXN_MAX_TIMEOUT_KEY", "OpenTransactions", "describe_producers", "transaction_max_timeout_ms"]
