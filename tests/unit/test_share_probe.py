"""share_probe over scripted coordinator answers (no Kafka): batching per coordinator, coordinator
moves retried, refusals and unsupported brokers reported as unreadable, never as "no position"."""
from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace as NS
from typing import Any, Optional

import kafka.errors as Errors

from spark_purge.kafka import share_probe
from spark_purge.kafka.share_probe import GroupProbe

T1 = uuid.UUID(int=1)


def find(**coordinators: int) -> NS:
    """FindCoordinator v4: group -> node (negative: COORDINATOR_NOT_AVAILABLE)."""
    return NS(
        coordinators=[NS(key=g, error_code=0 if n >= 0 else 15, node_id=n) for g, n in coordinators.items()]
    )


def offsets(*groups: tuple[str, int, list[tuple[str, int, int]]]) -> NS:
    """DescribeShareGroupOffsets v1: (group, error, [(topic, partition, start)])."""
    out = []
    for g, err, parts in groups:
        topics: dict[str, list[NS]] = {}
        for t, p, start in parts:
            topics.setdefault(t, []).append(
                NS(partition_index=p, start_offset=start, leader_epoch=0, lag=-1, error_code=0, error_message=None)
            )
        out.append(
            NS(
                group_id=g,
                error_code=err,
                error_message=None,
                topics=[NS(topic_name=t, topic_id=T1, partitions=ps) for t, ps in topics.items()],
            )
        )
    return NS(version=1, groups=out)


def described(*groups: tuple[str, int, list[tuple[str, int]]]) -> NS:
    """Share/ConsumerGroupDescribe: (group, error, one member's assignment [(topic, partition)])."""
    out = []
    for g, err, assignment in groups:
        tps = [NS(topic_id=T1, topic_name=t, partitions=[p]) for t, p in assignment]
        member = NS(subscribed_topic_names=["orders"], assignment=NS(topic_partitions=tps), target_assignment=None)
        out.append(
            NS(group_id=g, error_code=err, error_message=None, group_state="Stable", group_epoch=1, assignment_epoch=1, members=[member])
        )
    return NS(groups=out)


class FakeManager:
    """Answers requests by (API name, node) from a script; records what was sent."""

    def __init__(self, script: dict[tuple[str, Optional[int]], list[Any]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.sent: list[tuple[str, Optional[int], list[str]]] = []
        self.broker_version_data = NS(api_version=lambda request, **kw: 6)

    def send(self, request: Any, node_id: Optional[int] = None, request_timeout_ms: Optional[int] = None) -> Any:
        name = request.name
        groups = list(getattr(request, "group_ids", None) or [g.group_id for g in getattr(request, "groups", None) or []])
        if name == "FindCoordinatorRequest":
            groups = list(request.coordinator_keys)
        self.sent.append((name, node_id, groups))
        answers = self.script.get((name, node_id))
        answer = answers.pop(0) if answers else Errors.KafkaConnectionError(f"nothing scripted for {name} on {node_id}")

        async def reply() -> Any:
            if isinstance(answer, BaseException):
                raise answer
            return answer

        return reply()


def run(manager: FakeManager, share: list[str], consumer: list[str], timeout_s: float = 5.0, counted: Optional[list[str]] = None) -> GroupProbe:
    admin: Any = NS(_manager=manager, _net=NS(sleep=asyncio.sleep))
    coro = share_probe.probe_groups_async(
        admin, share, consumer, None, {T1: "orders"}, time.monotonic() + timeout_s, on_request=None if counted is None else counted.append
    )
    return asyncio.run(coro)


def test_one_request_per_api_and_coordinator() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1, b=2, k=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [offsets(("a", 0, [("orders", 0, 10)]))],
            ("DescribeShareGroupOffsetsRequest", 2): [offsets(("b", 0, [("orders", 0, 4), ("orders", 1, -1)]))],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, [("orders", 0)]))],
            ("ShareGroupDescribeRequest", 2): [described(("b", 0, []))],
            ("ConsumerGroupDescribeRequest", 1): [described(("k", 0, [("orders", 1)]))],
        }
    )
    counted: list[str] = []
    probe = run(manager, ["a", "b"], ["k"], counted=counted)
    assert sorted(counted) == sorted(name for name, _, _ in manager.sent)
    assert probe.unreadable == {}
    assert probe.share_positions() == {("a", "orders", 0): 10, ("b", "orders", 0): 4}
    assert probe.share_offsets["b"].without_position() == {("orders", 1)}
    assert probe.assignments() == {"a": {("orders", 0)}, "b": frozenset(), "k": {("orders", 1)}}
    assert sorted(manager.sent) == sorted(
        [
            ("FindCoordinatorRequest", None, ["a", "b", "k"]),
            ("DescribeShareGroupOffsetsRequest", 1, ["a"]),
            ("ShareGroupDescribeRequest", 1, ["a"]),
            ("ConsumerGroupDescribeRequest", 1, ["k"]),
            ("DescribeShareGroupOffsetsRequest", 2, ["b"]),
            ("ShareGroupDescribeRequest", 2, ["b"]),
        ]
    )


def test_a_moved_coordinator_is_looked_up_again_and_only_the_missing_read_is_resent() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1), find(a=2)],
            ("DescribeShareGroupOffsetsRequest", 1): [offsets(("a", 16, []))],  # NOT_COORDINATOR
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, [("orders", 0)]))],
            ("DescribeShareGroupOffsetsRequest", 2): [offsets(("a", 0, [("orders", 0, 7)]))],
        }
    )
    probe = run(manager, ["a"], [])
    assert probe.unreadable == {}
    assert probe.share_positions() == {("a", "orders", 0): 7}
    assert [s for s in manager.sent if s[0] != "FindCoordinatorRequest"] == [
        ("DescribeShareGroupOffsetsRequest", 1, ["a"]),
        ("ShareGroupDescribeRequest", 1, ["a"]),
        ("DescribeShareGroupOffsetsRequest", 2, ["a"]),
    ]


def test_refusals_and_missing_groups_are_unreadable_not_empty() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1, gone=1, k=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [offsets(("a", 30, []), ("gone", 69, []))],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, []), ("gone", 69, []))],
            ("ConsumerGroupDescribeRequest", 1): [described(("k", 30, []))],
        }
    )
    probe = run(manager, ["a", "gone"], ["k"])
    assert probe.unreadable == {"a": "GROUP_AUTHORIZATION_FAILED", "gone": "GROUP_ID_NOT_FOUND", "k": "GROUP_AUTHORIZATION_FAILED"}
    assert probe.share_positions() == {}
    assert len(manager.sent) == 4  # no retry for a refusal


def test_a_broker_without_the_api_is_unreadable_at_once() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [Errors.IncompatibleBrokerVersion("no API 90")],
            ("ShareGroupDescribeRequest", 1): [Errors.IncompatibleBrokerVersion("no API 77")],
        }
    )
    probe = run(manager, ["a"], [])
    assert probe.unreadable == {"a": "UNSUPPORTED_VERSION"}
    assert len(manager.sent) == 3


def test_no_coordinator_until_the_deadline_is_unreadable() -> None:
    manager = FakeManager({("FindCoordinatorRequest", None): [find(a=-1) for _ in range(100)]})
    started = time.monotonic()
    probe = run(manager, ["a"], [], timeout_s=0.5)
    assert probe.unreadable == {"a": "COORDINATOR_NOT_AVAILABLE"}
    assert time.monotonic() - started < 3
    assert all(s[0] == "FindCoordinatorRequest" for s in manager.sent) and len(manager.sent) >= 2


def test_a_coordinator_lookup_refused_is_unreadable_at_once() -> None:
    refused = NS(coordinators=[NS(key="a", error_code=30, node_id=-1)])  # GROUP_AUTHORIZATION_FAILED
    manager = FakeManager({("FindCoordinatorRequest", None): [refused]})
    probe = run(manager, ["a"], [])
    assert probe.unreadable == {"a": "GROUP_AUTHORIZATION_FAILED"}
    assert len(manager.sent) == 1
