"""DescribeLogDirs (API 35): the request we send byte for byte, and sizes read from answers
(log directories in error, future replicas, partitions not asked for, brokers that fail)."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kafka import errors as Errors
from kafka.protocol.admin import DescribeLogDirsResponse as Resp

from spark_purge._time import Deadline
from spark_purge.kafka.log_dirs import partition_sizes, size_request, sizes_from_response

_Result = Resp.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Part = _Topic.DescribeLogDirsPartition


def answer(dirs: Sequence[tuple[str, int, dict[str, list[tuple[int, int, bool]]]]], error_code: int = 0) -> Any:
    """A v4 response, encoded and decoded by kafka-python as it would come off the wire.
    ``dirs``: (log dir, error code, {topic: [(partition, size, is_future)]})."""
    results = [
        _Result(
            error_code=err, log_dir=d, total_bytes=10**9, usable_bytes=10**8,
            topics=[
                _Topic(name=t, partitions=[_Part(partition_index=p, partition_size=s, offset_lag=0, is_future_key=f) for p, s, f in ps])
                for t, ps in topics.items()
            ],
        )
        for d, err, topics in dirs
    ]
    encoded = Resp(throttle_time_ms=0, error_code=error_code, results=results, version=4).encode(version=4)
    return Resp.decode(bytes(encoded), version=4)


def test_request_names_each_topic_once_with_its_partitions_byte_for_byte() -> None:
    request = size_request([("b", 1), ("a", 1), ("a", 0)])
    assert [(t.topic, t.partitions) for t in request.topics] == [("a", [0, 1]), ("b", [1])]
    # v4 (flexible): compact array of 2 topics; "a" [0, 1], tags; "b" [1], tags; tags. From
    # DescribeLogDirsRequest.json: Topics []DescribableLogDirTopic { Topic string, Partitions []int32 }.
    assert bytes(size_request([("a", 0), ("a", 1)]).encode(version=4)).hex() == "0202610300000000000000010000"
    assert bytes(request.encode(version=4)).hex() == "03" + "026103000000000000000100" + "02620200000001" + "00" + "00"


def test_sizes_sum_the_current_replica_over_healthy_log_dirs() -> None:
    response = answer(
        [
            ("/d1", 0, {"orders": [(0, 1000, False), (1, 70, False), (9, 5, False)], "other": [(0, 3, False)]}),
            ("/d2", 0, {"orders": [(0, 24, False), (1, 999, True)]}),  # p1 moving into /d2: a future replica
            ("/d3", 56, {}),  # KAFKA_STORAGE_ERROR: an offline directory
        ]
    )
    sizes, err = sizes_from_response(response, {("orders", 0), ("orders", 1), ("orders", 2)})
    assert sizes == {("orders", 0): 1024, ("orders", 1): 70}  # p9 and "other" were not asked for
    assert err == "/d3: KAFKA_STORAGE_ERROR"


def test_a_top_level_error_makes_every_size_unknown() -> None:
    response = answer([("/d1", 0, {"orders": [(0, 1000, False)]})], error_code=31)
    assert sizes_from_response(response, {("orders", 0)}) == ({}, "CLUSTER_AUTHORIZATION_FAILED")


class FakeWire:
    """Answers per broker: a response, or an exception to return from gather."""

    def __init__(self, answers: dict[int, Any]) -> None:
        self.answers = answers
        self.sent: list[tuple[int, list[tuple[str, list[int]]]]] = []

    def send(self, request: Any, node_id: int | None = None, timeout_ms: int | None = None) -> Any:
        assert node_id is not None and timeout_ms is not None and timeout_ms > 0
        self.sent.append((node_id, [(t.topic, list(t.partitions)) for t in request.topics]))
        return self.answers[node_id]

    async def gather(self, futures: Sequence[Any]) -> list[Any]:
        return list(futures)


def test_one_request_per_leader_and_a_failed_broker_leaves_its_sizes_unknown() -> None:
    wire = FakeWire({1: answer([("/d", 0, {"t": [(0, 11, False), (2, 33, False)]})]), 2: Errors.KafkaConnectionError("down")})
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 1, ("t", 3): None}
    sizes, unknown = asyncio.run(partition_sizes(wire, leaders, Deadline(5)))  # type: ignore[arg-type]
    assert sorted(wire.sent) == [(1, [("t", [0, 2])]), (2, [("t", [1])])]
    assert sizes == {("t", 0): 11, ("t", 2): 33}
    assert unknown == {("t", 1): "LEADER_UNREACHABLE", ("t", 3): "LEADER_NOT_AVAILABLE"}


def test_no_leader_at_all_sends_nothing() -> None:
    wire = FakeWire({})
    assert asyncio.run(partition_sizes(wire, {("t", 0): None}, Deadline(5))) == ({}, {("t", 0): "LEADER_NOT_AVAILABLE"})  # type: ignore[arg-type]
    assert wire.sent == []
