"""``GroupReader.read_groups`` over scripted broker answers (no Kafka), through the real ``Wire``:
it lists only once every coordinator has caught up (``caught_up``), and reads the groups again
when a coordinator moved while they were read."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

from spark_purge._time import Deadline
from spark_purge.kafka.caught_up import probe_groups
from spark_purge.kafka.groups import GroupReader
from spark_purge.kafka.model import SnapshotIssue
from spark_purge.kafka.offsets import OffsetReader
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.kafka.wire import Wire
from tests.unit.test_caught_up import hw_answer, meta, start_answer
from tests.unit.test_group_members import FakeManager, classic, find, offset_fetch

CAUGHT = {0: (1, 3), 1: (1, 3)}  # __consumer_offsets partition -> (leader, epoch); broker 1 leads both


BROKERS = NS(brokers=[NS(node_id=1, host="h", port=1)], topics=[])


def listing(*groups: str) -> NS:
    return NS(error_code=0, API_VERSION=5, groups=[NS(group_id=g, group_type="classic", group_state="Stable", protocol_type="consumer") for g in groups])


def probes_ok() -> NS:
    return offset_fetch(*((g, 0, []) for g in probe_groups(2).values()))


def run(manager: FakeManager) -> tuple[list[Any], list[Any], list[str], list[SnapshotIssue]]:
    admin = NS(_manager=manager, _net=NS(sleep=asyncio.sleep), close=lambda: None)
    wire = Wire(ConnectionSettings("h:1", retry_backoff_ms=10), admin_factory=lambda **kw: admin)
    issues: list[SnapshotIssue] = []
    infos, rows, unreadable = asyncio.run(
        GroupReader(wire, OffsetReader(wire)).read_groups([1], ["orders"], issues, Deadline(10), lambda g: True)
    )
    return infos, rows, unreadable, issues


def commits(rows: list[Any]) -> dict[tuple[str, str, int], int]:
    return {(info.group_id, tp[0], tp[1]): offset for info, tp, offset, _, _ in rows}


def test_the_listing_waits_until_a_new_coordinators_high_watermark_reaches_its_epoch_start() -> None:
    manager = FakeManager({
        ("DescribeClusterRequest", None): [NS(error_code=0, authorized_operations=None)],
        # check, the brokers before the retry, check, after the reads
        ("MetadataRequest", None): [meta(CAUGHT), BROKERS, meta(CAUGHT), meta(CAUGHT)],
        # epoch 3 of partition 0 starts at 120: not served at a high watermark of 100, at 120 it is
        ("ListOffsetsRequest", 1): [hw_answer({0: 100, 1: 50}), hw_answer({0: 120, 1: 50})],
        ("OffsetForLeaderEpochRequest", 1): [start_answer({0: 120, 1: 40}), start_answer({0: 120, 1: 40})],
        ("OffsetFetchRequest", 1): [probes_ok(), probes_ok(), offset_fetch(("g", 0, [("orders", 0, 7)]))],
        ("MetadataRequest", 1): [meta(CAUGHT), meta(CAUGHT)],
        ("ListGroupsRequest", 1): [listing("g")],
        ("FindCoordinatorRequest", None): [find(g=1)],
        ("DescribeGroupsRequest", 1): [classic(("g", [("orders", 0)]))],
    })
    _, rows, unreadable, issues = run(manager)
    assert commits(rows) == {("g", "orders", 0): 7} and unreadable == [] and issues == []
    sent = [name for name, _, _ in manager.sent]
    # no ListGroups before the second check, the one that found partition 0 caught up
    assert sent.index("ListGroupsRequest") > [i for i, n in enumerate(sent) if n == "ListOffsetsRequest"][1]


def test_groups_read_while_a_coordinator_moved_are_read_again() -> None:
    moved = {0: (1, 3), 1: (1, 4)}  # partition 1 got a new leader epoch during the first reads
    manager = FakeManager({
        ("DescribeClusterRequest", None): [NS(error_code=0, authorized_operations=None)],
        ("MetadataRequest", None): [meta(CAUGHT), meta(moved), meta(moved), meta(moved)],
        ("ListOffsetsRequest", 1): [hw_answer({0: 120, 1: 50}), hw_answer({0: 120, 1: 60})],
        ("OffsetForLeaderEpochRequest", 1): [start_answer({0: 120, 1: 40}), start_answer({0: 120, 1: 60})],
        ("OffsetFetchRequest", 1): [
            probes_ok(), offset_fetch(("g", 0, [])),  # a coordinator not caught up: no commit seen
            probes_ok(), offset_fetch(("g", 0, [("orders", 0, 7)])),
        ],
        ("MetadataRequest", 1): [meta(CAUGHT), meta(CAUGHT), meta(moved), meta(moved)],
        ("ListGroupsRequest", 1): [listing("g"), listing("g")],
        ("FindCoordinatorRequest", None): [find(g=1)],
        ("DescribeGroupsRequest", 1): [classic(("g", [("orders", 0)])), classic(("g", [("orders", 0)]))],
    })
    _, rows, _, issues = run(manager)
    assert commits(rows) == {("g", "orders", 0): 7} and issues == []
    assert [name for name, _, _ in manager.sent].count("ListGroupsRequest") == 2
