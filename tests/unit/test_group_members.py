"""Every group type's reads over scripted coordinator answers (no Kafka), through the real ``Wire``
and ``GroupReader``: one request per API and coordinator, coordinator moves retried until the
deadline, refusals reported as unreadable; and the snapshot rows ``assemble_groups`` makes
(commits, share-partition start offsets, -1 for partitions held without a position)."""
from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace as NS
from typing import Any, Optional

import kafka.errors as Errors
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from spark_purge._time import Deadline
from spark_purge.kafka.groups import GroupReader
from spark_purge.kafka.members import GroupReads, assemble_groups, reads_for
from spark_purge.kafka.messages import (
    GroupDescription,
    ShareGroupOffsets,
    SharePartitionOffset,
    parse_classic_group_assignments,
    parse_consumer_group_describe,
    parse_share_group_describe,
    parse_streams_group_describe,
)
from spark_purge.kafka.model import ClusterSnapshot, GroupCommit, GroupInfo, SnapshotIssue
from spark_purge.kafka.offset_fetch import CommitBlock
from spark_purge.kafka.offsets import OffsetReader
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.kafka.snapshot import held_beside_dropped
from spark_purge.kafka.wire import Wire

T1 = uuid.UUID(int=1)
NOT_COORDINATOR, GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND, TOPIC_AUTHORIZATION_FAILED = 16, 30, 69, 29


# ---- scripted answers ----------------------------------------------------------------------------


def find(**coordinators: int) -> NS:
    """FindCoordinator v4: group -> node (negative: COORDINATOR_NOT_AVAILABLE)."""
    return NS(
        coordinators=[NS(key=g, error_code=0 if n >= 0 else 15, node_id=n, error_message=None) for g, n in coordinators.items()]
    )


def share_offsets(*groups: tuple[str, int, list[tuple[str, int, int]]], partition_error: int = 0) -> NS:
    """DescribeShareGroupOffsets v1: (group, error, [(topic, partition, start)])."""
    out = []
    for g, err, parts in groups:
        topics: dict[str, list[NS]] = {}
        for t, p, start in parts:
            topics.setdefault(t, []).append(
                NS(partition_index=p, start_offset=start, leader_epoch=0, lag=-1, error_code=partition_error, error_message=None)
            )
        out.append(
            NS(group_id=g, error_code=err, error_message=None, topics=[NS(topic_name=t, topic_id=T1, partitions=ps) for t, ps in topics.items()])
        )
    return NS(version=1, groups=out)


def described(*groups: tuple[str, int, list[tuple[str, int]]], target: Optional[list[tuple[str, int]]] = None) -> NS:
    """Share/ConsumerGroupDescribe: (group, error, one member's assignment [(topic, partition)])."""

    def assignment(tps: list[tuple[str, int]]) -> NS:
        return NS(topic_partitions=[NS(topic_id=T1, topic_name=t, partitions=[p]) for t, p in tps])

    out = []
    for g, err, tps in groups:
        member = NS(subscribed_topic_names=["orders"], assignment=assignment(tps), target_assignment=assignment(target or []))
        out.append(
            NS(group_id=g, error_code=err, error_message=None, group_state="Stable", group_epoch=1, assignment_epoch=1, members=[member])
        )
    return NS(groups=out)


def streams_described(group: str, active: list[tuple[str, list[int]]], sources: dict[str, list[str]]) -> NS:
    """StreamsGroupDescribe: one member with active tasks [(subtopology, partitions)] and the
    topology's subtopology -> source topics."""
    topology = NS(
        epoch=1,
        subtopologies=[NS(subtopology_id=st, source_topics=ts, repartition_source_topics=[]) for st, ts in sources.items()],
    )
    tasks = [NS(subtopology_id=st, partitions=ps) for st, ps in active]
    member = NS(assignment=NS(active_tasks=tasks), target_assignment=NS(active_tasks=[]))
    answer = NS(group_id=group, error_code=0, error_message=None, group_state="Stable", group_epoch=1, assignment_epoch=1)
    answer.topology, answer.members = topology, [member]
    return NS(groups=[answer])


def offset_fetch(*groups: tuple[str, int, list[tuple[str, int, int]]]) -> NS:
    """OffsetFetch v8: (group, error, [(topic, partition, committed)])."""
    out = []
    for g, err, commits in groups:
        topics: dict[str, list[NS]] = {}
        for t, p, off in commits:
            topics.setdefault(t, []).append(NS(partition_index=p, committed_offset=off, metadata="m", error_code=0))
        out.append(NS(group_id=g, error_code=err, topics=[NS(name=t, partitions=ps) for t, ps in topics.items()]))
    return NS(error_code=0, groups=out)


def classic(*groups: tuple[str, list[tuple[str, int]]], raw: Optional[bytes] = None) -> NS:
    """DescribeGroups: (group, its one member's assignment) or ``raw`` assignment bytes."""
    out = []
    for g, tps in groups:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        data = raw if raw is not None else ConsumerProtocolAssignment(
            version=0,
            assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()],
            user_data=None,
        ).encode()
        member = NS(member_id="m-1", member_assignment=data)
        out.append(NS(group_id=g, error_code=0, group_state="Stable", protocol_type="consumer", members=[member]))
    return NS(groups=out)


class FakeManager:
    """Answers requests by (API name, node) from a script; records what was sent."""

    def __init__(self, script: dict[tuple[str, Optional[int]], list[Any]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.sent: list[tuple[str, Optional[int], list[str]]] = []
        self.broker_version_data = NS(api_version=lambda request, **kw: 8)
        self.cluster = NS(_coordinators={})

    def send(self, request: Any, node_id: Optional[int] = None, request_timeout_ms: Optional[int] = None) -> Any:
        name = request.name
        if name == "FindCoordinatorRequest":
            groups = list(request.coordinator_keys)
        else:
            raw = getattr(request, "group_ids", None) or getattr(request, "groups", None) or []
            groups = [g if isinstance(g, str) else g.group_id for g in raw]
        self.sent.append((name, node_id, groups))
        answers = self.script.get((name, node_id))
        answer = answers.pop(0) if answers else Errors.KafkaConnectionError(f"nothing scripted for {name} on {node_id}")

        async def reply() -> Any:
            if isinstance(answer, BaseException):
                raise answer
            return answer

        return reply()


LISTED = {
    "a": ("Stable", "share", "share"),
    "b": ("Empty", "share", "share"),
    "k": ("Stable", "consumer", "consumer"),
    "c": ("Stable", "classic", "consumer"),
    "s": ("Stable", "streams", "streams"),
}


def read(
    manager: FakeManager, groups: list[str], timeout_s: float = 5.0, topics: tuple[str, ...] = ("orders",)
) -> tuple[Wire, list[Any], list[Any], list[str], list[SnapshotIssue]]:
    """GroupReader.fetch_group_state + assemble_groups over the scripted manager."""
    admin = NS(_manager=manager, _net=NS(sleep=asyncio.sleep), close=lambda: None)
    wire = Wire(ConnectionSettings("h:1", retry_backoff_ms=10), admin_factory=lambda **kw: admin)
    reader = GroupReader(wire, OffsetReader(wire))
    reads, unread = asyncio.run(reader.fetch_group_state(groups, LISTED, Deadline(timeout_s), {T1: "orders"}))
    issues: list[SnapshotIssue] = []
    infos, rows, unreadable = assemble_groups(groups, LISTED, reads, unread, topics, issues)
    return wire, infos, rows, unreadable, issues


def rows_of(rows: list[Any]) -> set[tuple[str, str, int, int]]:
    return {(info.group_id, tp[0], tp[1], offset) for info, tp, offset, _, _ in rows}


def not_find(sent: list[tuple[str, Optional[int], list[str]]]) -> list[tuple[str, Optional[int], list[str]]]:
    return [s for s in sent if s[0] != "FindCoordinatorRequest"]


# ---- the reads -----------------------------------------------------------------------------------


def test_reads_by_group_type() -> None:
    assert reads_for("share") == ("DescribeShareGroupOffsets", "ShareGroupDescribe")
    assert reads_for("consumer") == ("OffsetFetch", "ConsumerGroupDescribe")
    assert reads_for("classic") == ("OffsetFetch", "DescribeGroups")
    assert reads_for("streams") == ("OffsetFetch", "StreamsGroupDescribe")


def test_one_request_per_api_and_coordinator_and_the_rows_they_make() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1, b=2, c=2, k=1, s=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [share_offsets(("a", 0, [("orders", 0, 10)]))],
            ("DescribeShareGroupOffsetsRequest", 2): [share_offsets(("b", 0, [("orders", 0, 4), ("orders", 1, -1)]))],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, [("orders", 0)]))],
            ("ShareGroupDescribeRequest", 2): [described(("b", 0, []))],
            ("ConsumerGroupDescribeRequest", 1): [described(("k", 0, [("orders", 1)]), target=[("orders", 2)])],
            ("OffsetFetchRequest", 1): [offset_fetch(("k", 0, [("orders", 0, 5)]), ("s", 0, [("orders", 0, 3), ("other", 0, 9)]))],
            ("StreamsGroupDescribeRequest", 1): [streams_described("s", [("0", [0, 1])], {"0": ["orders"]})],
            ("OffsetFetchRequest", 2): [offset_fetch(("c", 0, [("other", 0, 1)]))],
            ("DescribeGroupsRequest", 2): [classic(("c", [("orders", 0), ("orders", 1), ("other", 1)]))],
        }
    )
    wire, infos, rows, unreadable, issues = read(manager, ["a", "b", "c", "k", "s"])
    assert unreadable == [] and issues == []
    assert sorted(manager.sent) == sorted(
        [
            ("FindCoordinatorRequest", None, ["a", "b", "c", "k", "s"]),
            ("DescribeShareGroupOffsetsRequest", 1, ["a"]),
            ("ShareGroupDescribeRequest", 1, ["a"]),
            ("ConsumerGroupDescribeRequest", 1, ["k"]),
            ("OffsetFetchRequest", 1, ["k", "s"]),
            ("StreamsGroupDescribeRequest", 1, ["s"]),
            ("DescribeShareGroupOffsetsRequest", 2, ["b"]),
            ("ShareGroupDescribeRequest", 2, ["b"]),
            ("OffsetFetchRequest", 2, ["c"]),
            ("DescribeGroupsRequest", 2, ["c"]),
        ]
    )
    counted = wire.requests.snapshot()
    assert sum(counted.values()) == len(manager.sent) == 10
    assert counted["OffsetFetchRequest"] == 2 and counted["DescribeShareGroupOffsetsRequest"] == 2
    assert rows_of(rows) == {
        ("a", "orders", 0, 10),  # the share-partition start offset
        ("b", "orders", 0, 4),
        ("b", "orders", 1, -1),  # listed with start offset -1: needed, no position
        ("k", "orders", 0, 5),  # a commit nobody holds still counts
        ("k", "orders", 1, -1),  # assigned, no commit
        ("k", "orders", 2, -1),  # target-assigned, no commit
        ("s", "orders", 0, 3),  # streams: the commit of a task's partition
        ("s", "orders", 1, -1),  # an active task (subtopology 0 reads orders) without a commit
        ("c", "orders", 0, -1),  # classic member assignment, no commit
        ("c", "orders", 1, -1),
    }
    assert all(meta is None and epoch is None for info, _, off, meta, epoch in rows if off == -1 or info.group_type == "share")
    by_id = {i.group_id: i for i in infos}
    assert by_id["a"] == GroupInfo("a", "Stable", "share", 1)
    assert by_id["k"] == GroupInfo("k", "Stable", "consumer", 1)  # from ConsumerGroupDescribe, not "Dead"
    assert by_id["c"] == GroupInfo("c", "Stable", "classic", 1)
    assert by_id["s"] == GroupInfo("s", "Stable", "streams", 1)


def test_a_moved_coordinator_is_looked_up_again_and_only_the_missing_read_is_resent() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1), find(a=2)],
            ("DescribeShareGroupOffsetsRequest", 1): [share_offsets(("a", NOT_COORDINATOR, []))],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, [("orders", 0)]))],
            ("DescribeShareGroupOffsetsRequest", 2): [share_offsets(("a", 0, [("orders", 0, 7)]))],
        }
    )
    _, _, rows, unreadable, issues = read(manager, ["a"])
    assert unreadable == [] and issues == []
    assert rows_of(rows) == {("a", "orders", 0, 7)}
    assert not_find(manager.sent) == [
        ("DescribeShareGroupOffsetsRequest", 1, ["a"]),
        ("ShareGroupDescribeRequest", 1, ["a"]),
        ("DescribeShareGroupOffsetsRequest", 2, ["a"]),
    ]


def test_an_unreachable_coordinator_is_forgotten_and_the_reads_go_to_the_new_one() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(k=1), find(k=2)],
            ("OffsetFetchRequest", 1): [Errors.KafkaConnectionError("down")],
            ("ConsumerGroupDescribeRequest", 1): [Errors.KafkaConnectionError("down")],
            ("OffsetFetchRequest", 2): [offset_fetch(("k", 0, []))],
            ("ConsumerGroupDescribeRequest", 2): [described(("k", 0, [("orders", 0)]))],
        }
    )
    _, _, rows, unreadable, _ = read(manager, ["k"])
    assert unreadable == []
    assert rows_of(rows) == {("k", "orders", 0, -1)}


def test_refusals_are_unreadable_at_once_never_no_position() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1, k=1, c=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [share_offsets(("a", GROUP_AUTHORIZATION_FAILED, []))],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, []))],
            ("OffsetFetchRequest", 1): [offset_fetch(("k", 0, []), ("c", 0, []))],
            ("ConsumerGroupDescribeRequest", 1): [described(("k", GROUP_ID_NOT_FOUND, []))],
            ("DescribeGroupsRequest", 1): [classic(("c", []), raw=b"\x00\x07garbage")],
        }
    )
    _, infos, rows, unreadable, issues = read(manager, ["a", "c", "k"])
    assert rows == [] and unreadable == ["a", "c", "k"]
    assert {i.resource: i.error for i in issues} == {
        "a": "GROUP_AUTHORIZATION_FAILED",
        "c": "MALFORMED_ASSIGNMENT",
        "k": "GROUP_ID_NOT_FOUND",
    }
    assert all(i.kind == "group" and i.resource in i.message for i in issues)
    assert len(not_find(manager.sent)) == 5  # no retry for a refusal
    assert len(infos) == 3  # still listed as groups


def test_a_broker_without_the_api_is_unreadable_at_once() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1)],
            ("DescribeShareGroupOffsetsRequest", 1): [Errors.IncompatibleBrokerVersion("no API 90")],
            ("ShareGroupDescribeRequest", 1): [Errors.IncompatibleBrokerVersion("no API 77")],
        }
    )
    _, _, rows, unreadable, issues = read(manager, ["a"])
    assert (rows, unreadable) == ([], ["a"])
    assert [(i.resource, i.error) for i in issues] == [("a", "UNSUPPORTED_VERSION")]
    assert len(manager.sent) == 3


def test_no_coordinator_until_the_deadline_is_unreadable() -> None:
    manager = FakeManager({("FindCoordinatorRequest", None): [find(a=-1) for _ in range(1000)]})
    started = time.monotonic()
    _, _, rows, unreadable, issues = read(manager, ["a"], timeout_s=0.5)
    assert (rows, unreadable) == ([], ["a"])
    assert [(i.kind, i.error) for i in issues] == [("coordinator", "COORDINATOR_NOT_AVAILABLE")]
    assert time.monotonic() - started < 3
    assert len(manager.sent) >= 2 and all(s[0] == "FindCoordinatorRequest" for s in manager.sent)


def test_a_coordinator_moving_until_the_deadline_is_unreadable_naming_the_error() -> None:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(a=1) for _ in range(1000)],
            ("DescribeShareGroupOffsetsRequest", 1): [share_offsets(("a", NOT_COORDINATOR, [])) for _ in range(1000)],
            ("ShareGroupDescribeRequest", 1): [described(("a", 0, []))],
        }
    )
    _, _, rows, unreadable, issues = read(manager, ["a"], timeout_s=0.5)
    assert (rows, unreadable) == ([], ["a"])
    assert [(i.resource, i.error) for i in issues] == [("a", "NOT_COORDINATOR")]
    assert sum(1 for s in manager.sent if s[0] == "ShareGroupDescribeRequest") == 1  # read once, kept


def test_a_refused_coordinator_lookup_is_unreadable_at_once() -> None:
    refused = NS(coordinators=[NS(key="a", error_code=GROUP_AUTHORIZATION_FAILED, node_id=-1, error_message=None)])
    manager = FakeManager({("FindCoordinatorRequest", None): [refused]})
    _, _, _, unreadable, issues = read(manager, ["a"])
    assert unreadable == ["a"]
    assert [(i.kind, i.error) for i in issues] == [("coordinator", "GROUP_AUTHORIZATION_FAILED")]
    assert len(manager.sent) == 1


def test_a_share_partition_error_on_a_snapshot_topic_makes_the_group_unreadable() -> None:
    def script() -> FakeManager:
        return FakeManager(
            {
                ("FindCoordinatorRequest", None): [find(a=1)],
                ("DescribeShareGroupOffsetsRequest", 1): [
                    share_offsets(("a", 0, [("orders", 0, -1)]), partition_error=TOPIC_AUTHORIZATION_FAILED)
                ],
                ("ShareGroupDescribeRequest", 1): [described(("a", 0, []))],
            }
        )

    _, _, rows, unreadable, issues = read(script(), ["a"])
    assert (rows, unreadable) == ([], ["a"])
    assert issues[0].error == "TOPIC_AUTHORIZATION_FAILED" and "orders-0" in issues[0].message
    # ...but not one on a topic the snapshot does not cover.
    _, _, rows, unreadable, issues = read(script(), ["a"], topics=("elsewhere",))
    assert (rows, unreadable, issues) == ([], [], [])


# ---- the rows (pure) -----------------------------------------------------------------------------


def test_rows_only_for_snapshot_topics_and_a_commit_wins_over_no_position() -> None:
    reads = GroupReads()
    reads.commits["k"] = CommitBlock.of({("orders", 0): (5, "m", 3), ("other", 0): (1, None, None)})
    reads.descriptions["k"] = GroupDescription(
        "k", "consumer", "Reconciling", 2, assigned=frozenset({("orders", 0), ("other", 1)}), target_assigned=frozenset({("orders", 1)})
    )
    reads.share_offsets["a"] = ShareGroupOffsets(
        "a", (SharePartitionOffset("a", "orders", 0, 12, 0, 3), SharePartitionOffset("a", "orders", 1, None, 0, None))
    )
    reads.descriptions["a"] = GroupDescription("a", "share", "Empty", 0)
    issues: list[SnapshotIssue] = []
    infos, rows, unreadable = assemble_groups(["k", "a"], LISTED, reads, {}, ["orders"], issues)
    assert [(i.group_id, tp, off, meta, epoch) for i, tp, off, meta, epoch in rows] == [
        ("a", ("orders", 0), 12, None, None),
        ("a", ("orders", 1), -1, None, None),
        ("k", ("orders", 0), 5, "m", 3),  # the commit's leader epoch travels with it
        ("k", ("orders", 1), -1, None, None),
    ]
    assert [i.group_state for i in infos] == ["Empty", "Reconciling"]
    assert unreadable == [] and issues == []


_keys = st.tuples(st.sampled_from(["orders", "audit", "other"]), st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(
    positions=st.dictionaries(_keys, st.tuples(st.integers(0, 9), st.sampled_from([None, ""]), st.none() | st.integers(0, 3)), max_size=8),
    held=st.frozensets(_keys, max_size=4),
    subscribed=st.frozensets(st.sampled_from(["orders", "audit"]), max_size=1),
    described=st.booleans(),
)
def test_a_sorted_block_makes_the_rows_an_unsorted_one_makes(
    positions: dict[tuple[str, int], tuple[int, Optional[str], Optional[int]]], held: frozenset[tuple[str, int]], subscribed: frozenset[str], described: bool
) -> None:
    """A block ``offset_fetch`` read column-wise (``ordered``: sorted, each key once) is taken as
    it is, column by column, when every partition the group needs has a position and all are on
    the snapshot's topics; otherwise, and for a block in the broker's order, the rows are made
    one by one. Both give the same rows."""
    sorted_block, plain_block = CommitBlock.of(dict(sorted(positions.items()))), CommitBlock.of(dict(reversed(list(positions.items()))))
    sorted_block.ordered = True
    made = []
    for block in (sorted_block, plain_block):
        reads = GroupReads()
        reads.commits["k"] = block
        if described:
            reads.descriptions["k"] = GroupDescription("k", "consumer", "Stable", 1, assigned=held, subscribed_topics=subscribed)
        made.append(assemble_groups(["k"], {"k": ("Stable", "consumer", "consumer")}, reads, {}, ["orders", "audit"], [], {"orders": [0, 1]}))
    assert made[0] == made[1]
    assert list(made[0][1]) == sorted(made[0][1], key=lambda row: row[1])


def test_minus_one_rows_survive_the_json_round_trip() -> None:
    snap = ClusterSnapshot(
        "s1",
        1,
        (),
        (GroupCommit("k", "Stable", "consumer", 1, "orders", 0, -1, None), GroupCommit("a", "Empty", "share", 0, "orders", 0, 10, None)),
        groups=(GroupInfo("a", "Empty", "share", 0),),
    )
    assert ClusterSnapshot.from_json(snap.to_json()) == snap


def _classic_reads(answer: Any) -> tuple[GroupReads, dict[str, SnapshotIssue]]:
    manager = FakeManager(
        {
            ("FindCoordinatorRequest", None): [find(c=1)],
            ("OffsetFetchRequest", 1): [offset_fetch(("c", 0, [("orders", 1, 4)]))],
            ("DescribeGroupsRequest", 1): [answer],
        }
    )
    admin = NS(_manager=manager, _net=NS(sleep=asyncio.sleep), close=lambda: None)
    wire = Wire(ConnectionSettings("h:1"), admin_factory=lambda **kw: admin)
    return asyncio.run(GroupReader(wire, OffsetReader(wire)).fetch_group_state(["c"], LISTED, Deadline(5), {}))


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance"])
def test_a_rebalancing_classic_group_is_unreadable(state: str) -> None:
    """A broker shows members' subscriptions only while a group is Stable; in a rebalance a member
    that just joined holds nothing and its topics are unknown. Such a group is unreadable, never a
    group that needs nothing (it had been: a new group with no commit vanished from the snapshot
    for its first rebalance)."""
    held = ConsumerProtocolAssignment(
        version=0, assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="orders", partitions=[1])], user_data=None
    ).encode()
    old = NS(member_id="m-1", member_assignment=held, member_metadata=b"")  # what the broker sends
    new = NS(member_id="m-2", member_assignment=b"", member_metadata=b"")
    answer = NS(groups=[NS(group_id="c", error_code=0, group_state=state, protocol_type="consumer", members=[old, new])])
    reads, unread = _classic_reads(answer)
    issues: list[SnapshotIssue] = []
    _, rows, unreadable = assemble_groups(["c"], LISTED, reads, unread, ["orders"], issues, {"orders": [0, 1, 2]})
    assert unreadable == ["c"] and rows == []
    assert [(i.resource, i.error) for i in issues] == [("c", "REBALANCE_IN_PROGRESS")]
    assert f"the group is {state}" in issues[0].message and "m-1, m-2" in issues[0].message


def test_a_classic_group_holds_every_partition_it_subscribes_to() -> None:
    """Stable, with one member given only orders-1: its subscription to orders still holds
    orders-0 and orders-2 (a partition added since the assignment is read from the reset
    position at the next rebalance); a topic the snapshot does not select adds nothing."""
    subscription = ConsumerProtocolSubscription(version=0, topics=["orders", "other"], user_data=None).encode()
    held = ConsumerProtocolAssignment(
        version=0, assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="orders", partitions=[1])], user_data=None
    ).encode()
    member = NS(member_id="m-1", member_assignment=held, member_metadata=subscription)
    answer = NS(groups=[NS(group_id="c", error_code=0, group_state="Stable", protocol_type="consumer", members=[member])])
    reads, unread = _classic_reads(answer)
    issues: list[SnapshotIssue] = []
    _, rows, unreadable = assemble_groups(["c"], LISTED, reads, unread, ["orders"], issues, {"orders": [0, 1, 2]})
    assert unreadable == [] and issues == []
    assert rows_of(rows) == {("c", "orders", 0, -1), ("c", "orders", 1, 4), ("c", "orders", 2, -1)}


def _member(subscribed: list[str], regex: Optional[str] = None) -> NS:
    empty = NS(topic_partitions=[])
    return NS(member_id="m-1", subscribed_topic_names=subscribed, subscribed_topic_regex=regex, assignment=empty, target_assignment=empty)


def _group(kind: str, *members: NS) -> NS:
    g = NS(group_id="k", error_code=0, error_message=None, group_state="Assigning", group_epoch=2, assignment_epoch=1, members=list(members))
    return NS(groups=[g])


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_members_not_assigned_yet_hold_every_partition_they_subscribe_to(kind: str) -> None:
    """KIP-848 and share groups assign at intervals: until then a new group's members hold
    nothing, and a group without a commit would have vanished from the snapshot."""
    parse = parse_consumer_group_describe if kind == "consumer" else parse_share_group_describe
    reads = GroupReads()
    reads.descriptions["k"] = parse(_group(kind, _member(["orders", "elsewhere"])), {})["k"]
    assert reads.descriptions["k"].held == frozenset()
    issues: list[SnapshotIssue] = []
    _, rows, unreadable = assemble_groups(["k"], {"k": ("Assigning", kind, kind)}, reads, {}, ["orders", "audit"], issues,
                                          {"orders": [0, 1], "audit": [0]})
    assert rows_of(rows) == {("k", "orders", 0, -1), ("k", "orders", 1, -1)}
    assert unreadable == [] and issues == []


def test_a_regex_subscription_holds_every_topic_it_matches_whole() -> None:
    reads = GroupReads()
    reads.descriptions["k"] = parse_consumer_group_describe(_group("consumer", _member([], regex="orders-.*")), {})["k"]
    _, rows, _ = assemble_groups(["k"], {"k": ("Assigning", "consumer", "consumer")}, reads, {}, ["orders-eu", "x-orders-us"], [],
                                 {"orders-eu": [0], "x-orders-us": [0]})
    assert rows_of(rows) == {("k", "orders-eu", 0, -1)}


def test_a_regex_python_cannot_compile_makes_the_group_unreadable() -> None:
    parsed = parse_consumer_group_describe(_group("consumer", _member([], regex="orders-(?<eu>x)")), {})["k"]
    assert parsed.error == "INVALID_REGULAR_EXPRESSION" and "orders-(?<eu>x)" in (parsed.error_message or "")


def test_a_streams_group_with_members_and_no_topology_yet_is_unreadable() -> None:
    answer = streams_described("s", [], {})
    answer.groups[0].topology = None
    answer.groups[0].group_state = "NotReady"
    parsed = parse_streams_group_describe(answer)["s"]
    assert parsed.error == "UNKNOWN_TOPOLOGY" and "no topology yet" in (parsed.error_message or "")
    answer.groups[0].members = []  # nobody to read anything: nothing to hold, and readable
    assert parse_streams_group_describe(answer)["s"].error is None


def test_a_streams_group_holds_every_partition_of_its_sources_before_its_first_tasks() -> None:
    reads = GroupReads()
    reads.descriptions["s"] = parse_streams_group_describe(streams_described("s", [], {"0": ["orders"]}))["s"]
    _, rows, unreadable = assemble_groups(["s"], {"s": ("Assigning", "streams", "streams")}, reads, {}, ["orders"], [], {"orders": [0, 1]})
    assert rows_of(rows) == {("s", "orders", 0, -1), ("s", "orders", 1, -1)} and unreadable == []


def test_an_undecodable_subscription_of_a_member_without_assignment_is_unreadable() -> None:
    member = NS(member_id="m-1", member_assignment=b"", member_metadata=b"\x00\x07junk")
    answer = NS(groups=[NS(group_id="c", error_code=0, group_state="CompletingRebalance", protocol_type="consumer", members=[member])])
    parsed = parse_classic_group_assignments(answer)["c"]
    assert parsed.error == "MALFORMED_ASSIGNMENT" and "subscription" in (parsed.error_message or "")


def test_offset_fetch_keeps_positions_only_and_each_commit_epoch() -> None:
    from spark_purge.kafka.members import _parse_offset_fetch

    parts = [
        NS(partition_index=0, committed_offset=5, metadata="m", error_code=0, committed_leader_epoch=3),
        NS(partition_index=1, committed_offset=7, metadata="", error_code=0, committed_leader_epoch=-1),  # no epoch
        NS(partition_index=2, committed_offset=-1, metadata="", error_code=0, committed_leader_epoch=-1),  # no commit
        NS(partition_index=3, committed_offset=9, metadata="", error_code=88, committed_leader_epoch=1),  # UNSTABLE_OFFSET_COMMIT
    ]
    answer = NS(error_code=0, groups=[NS(group_id="g", error_code=0, topics=[NS(name="t", partitions=parts)])])
    (outcome,) = _parse_offset_fetch(["g"], answer, True).values()
    assert outcome.error is None and outcome.payload is not None
    assert outcome.payload.as_dict() == {("t", 0): (5, "m", 3), ("t", 1): (7, "", None)}


def test_a_group_seen_only_on_a_dropped_partition_is_held_on_the_topics_other_partitions() -> None:
    """Discovery counts a group on a topic from its rows: with its only rows on a partition the
    snapshot dropped (no leader), it must still be required on the topic's kept partitions."""
    billing, analytics = GroupInfo("billing", "Empty", "classic", 0), GroupInfo("analytics", "Stable", "classic", 1)
    raw = [
        (analytics, ("orders", 0), 900, None, None),
        (analytics, ("orders", 1), 900, None, None),
        (billing, ("orders", 0), 50, "m", 2),  # orders-0 is dropped: billing's only row on orders
        (billing, ("audit", 0), 7, None, None),  # audit-0 is dropped too, and audit has no kept partition
        (GroupInfo("idle", "Stable", "classic", 1), ("orders", 0), -1, None, None),  # members hold orders-0 only
    ]
    kept = {("orders", 1), ("orders", 2)}
    held = held_beside_dropped(raw, kept)
    assert [(i.group_id, tp, off, meta, epoch) for i, tp, off, meta, epoch in held] == [
        ("billing", ("orders", 1), -1, None, None),
        ("billing", ("orders", 2), -1, None, None),
        ("idle", ("orders", 1), -1, None, None),
        ("idle", ("orders", 2), -1, None, None),
    ]
    assert held[0][0] is billing  # its state, type and members travel with the row
    assert held_beside_dropped(raw, {("orders", 0), ("orders", 1), ("orders", 2), ("audit", 0)}) == []
