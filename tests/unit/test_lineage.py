"""OffsetForLeaderEpoch requests and answers (pure): one epoch per partition per request,
answers mapped back to (partition, epoch), failures named per partition."""
from __future__ import annotations

from types import SimpleNamespace as NS

from spark_purge.kafka.lineage import build_request, epoch_rounds, parse_response


def test_one_epoch_per_partition_per_round() -> None:
    wanted = {("a", 0): {3, 1}, ("a", 1): {2}, ("b", 0): {5, 4, 6}}
    assert epoch_rounds(wanted) == [
        {("a", 0): 1, ("a", 1): 2, ("b", 0): 4},
        {("a", 0): 3, ("b", 0): 5},
        {("b", 0): 6},
    ]
    assert epoch_rounds({}) == []


def test_request_asks_as_a_consumer_without_fencing() -> None:
    request = build_request({("a", 1): 7, ("a", 0): 2, ("b", 3): 0})
    assert request.replica_id == -1  # a consumer, not a follower
    asked = {(t.topic, p.partition): (p.leader_epoch, p.current_leader_epoch) for t in request.topics for p in t.partitions}
    assert asked == {("a", 0): (2, -1), ("a", 1): (7, -1), ("b", 3): (0, -1)}


def test_answers_map_to_the_asked_epoch_and_errors_name_the_partition() -> None:
    answer = NS(
        topics=[
            NS(
                topic="a",
                partitions=[
                    NS(partition=0, error_code=0, leader_epoch=2, end_offset=40),
                    NS(partition=1, error_code=6, leader_epoch=-1, end_offset=-1),  # NOT_LEADER_OR_FOLLOWER
                    NS(partition=9, error_code=0, leader_epoch=0, end_offset=1),  # not asked: ignored
                ],
            )
        ]
    )
    ends, failed = parse_response({("a", 0): 2, ("a", 1): 7, ("b", 0): 1}, answer)
    assert ends == {(("a", 0), 2): 40}
    assert failed == {("a", 1): "NOT_LEADER_OR_FOLLOWER", ("b", 0): "MISSING_FROM_RESPONSE"}
