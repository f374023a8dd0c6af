"""The high-watermark check: a group coordinator that has just taken over a ``__consumer_offsets``
partition is trusted only once its high watermark reaches the start of its leader epoch (every
commit its predecessor acknowledged is below that offset). Pure functions over scripted broker
answers — no Kafka, no client; the real-broker repro is ``bench/diag/coordinator_move_repro.py``."""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest

from spark_purge.kafka.caught_up import (
    OFFSETS_TOPIC,
    PROBE_PREFIX,
    build_requests,
    check_caught_up,
    coordinator_partition,
    java_string_hash,
    leadership_changed,
    offsets_leadership,
    probe_groups,
)
from spark_purge.kafka.groups import check_group_listing

NOT_LEADER, FENCED, DENIED = 6, 74, 29  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, TOPIC_AUTHORIZATION_FAILED


def meta(leaders: dict[int, tuple[int, int]], error: int = 0) -> NS:
    parts = [NS(partition_index=p, leader_id=lead, leader_epoch=epoch, error_code=0) for p, (lead, epoch) in sorted(leaders.items())]
    return NS(topics=[NS(name=OFFSETS_TOPIC, error_code=error, partitions=parts)])


def hw_answer(highs: dict[int, int], error: int = 0) -> NS:
    return NS(topics=[NS(name=OFFSETS_TOPIC, partitions=[NS(partition_index=p, error_code=error, offset=o) for p, o in highs.items()])])


def start_answer(starts: dict[int, int], error: int = 0) -> NS:
    return NS(topics=[NS(topic=OFFSETS_TOPIC, partitions=[NS(partition=p, error_code=error, end_offset=o) for p, o in starts.items()])])


def listing(*groups: str) -> NS:
    return NS(error_code=0, API_VERSION=5, groups=[NS(group_id=g, group_type="classic", group_state="Stable", protocol_type="consumer") for g in groups])


def test_a_new_leader_whose_high_watermark_lags_its_epoch_start_is_not_trusted() -> None:
    # Partition 0 moved to broker 2 at epoch 7, which starts at offset 120; broker 2 has only
    # confirmed 100 so far: commits 100..119, acknowledged by the old leader, are not served yet.
    leaders = {0: (2, 7), 1: (1, 3)}
    result = check_caught_up(leaders, {2: (hw_answer({0: 100}), start_answer({0: 120}), None), 1: (hw_answer({1: 50}), start_answer({1: 40}), None)})
    assert result.checked == {1: (1, 3)}
    assert list(result.lagging) == [0] and "epoch 7 from offset 120, its high watermark is 100" in result.lagging[0]
    assert "partitions not confirmed caught up (a new leader still behind" in result.problem


def test_caught_up_when_the_high_watermark_reaches_the_epoch_start() -> None:
    leaders = {0: (2, 7), 1: (1, 0)}  # epoch 0 starts at the beginning, whatever the broker says
    result = check_caught_up(leaders, {2: (hw_answer({0: 120}), start_answer({0: 120}), None), 1: (hw_answer({1: 0}), start_answer({1: -1}), None)})
    assert result.checked == leaders and result.lagging == {} and result.problem == ""


def test_a_leader_that_moved_on_or_did_not_answer_means_retry() -> None:
    leaders = {0: (2, 7), 1: (1, 3)}
    fenced = check_caught_up(leaders, {2: (hw_answer({0: 0}, error=FENCED), start_answer({0: 5}), None), 1: (ConnectionError("x"), start_answer({1: 1}), None)})
    assert fenced.checked == {}
    assert "FENCED_LEADER_EPOCH" in fenced.lagging[0] and "ListOffsets to broker 1" in fenced.lagging[1]
    unknown = check_caught_up({0: (2, 7)}, {2: (hw_answer({0: 10}), start_answer({0: -1}), None)})
    assert unknown.checked == {} and "does not know where its epoch starts" in unknown.lagging[0]
    silent = check_caught_up({0: (2, 7)}, {2: (hw_answer({}), start_answer({}), None)})
    assert "did not answer for it" in silent.lagging[0]


def test_a_denied_read_makes_the_check_unverifiable_not_a_failure() -> None:
    result = check_caught_up({0: (1, 2)}, {1: (hw_answer({0: 0}, error=DENIED), start_answer({0: 0}), None)})
    assert result.checked is None and result.lagging == {}


def test_leadership_from_metadata() -> None:
    m = meta({0: (1, 4), 1: (-1, 5)})
    assert offsets_leadership(m) == ({0: (1, 4)}, {1: "LEADER_NOT_AVAILABLE"})
    assert offsets_leadership(meta({}, error=3)) == ({}, {})  # no __consumer_offsets yet
    assert offsets_leadership(meta({}, error=DENIED)) == (None, {})


def test_requests_are_fenced_at_the_leaders_epoch_and_ask_where_the_previous_epoch_ends() -> None:
    reqs = build_requests({0: (1, 4), 1: (2, 0), 2: (1, 9)})
    assert sorted(reqs) == [1, 2]
    hw, start, _ = reqs[1]
    assert [(p.partition_index, p.current_leader_epoch, p.timestamp) for p in hw.topics[0].partitions] == [(0, 4, -1), (2, 9, -1)]
    assert hw.isolation_level == 0 and hw.topics[0].name == OFFSETS_TOPIC
    assert [(p.partition, p.current_leader_epoch, p.leader_epoch) for p in start.topics[0].partitions] == [(0, 4, 3), (2, 9, 8)]
    _, start2, _ = reqs[2]
    assert [(p.current_leader_epoch, p.leader_epoch) for p in start2.topics[0].partitions] == [(0, 0)]


def run_listing(script: dict[int, tuple[Any, Any, Any]], checked: dict[int, tuple[int, int]]) -> tuple[Any, str]:
    result = check_group_listing([(b, *a) for b, a in sorted(script.items())], checked)
    return result.groups, result.problem


def test_the_listing_needs_the_leadership_the_high_watermark_was_checked_under() -> None:
    view = {0: (1, 5), 1: (2, 4)}
    ok, _ = run_listing({1: (meta(view), listing("a"), meta(view)), 2: (meta(view), listing("b"), meta(view))}, view)
    assert sorted(ok or {}) == ["a", "b"]
    # partition 1 changed leader (epoch 3 -> 4) between the check and ListGroups, and stayed
    # stable around ListGroups: the new leader's high watermark was never checked.
    groups, problem = run_listing(
        {1: (meta(view), listing("a"), meta(view)), 2: (meta(view), listing(), meta(view))}, {0: (1, 5), 1: (2, 3)}
    )
    assert groups is None and "partitions 1 changed leader since their high-watermark check" in problem


def test_group_reads_are_kept_only_while_the_checked_leadership_holds() -> None:
    checked = {0: (1, 5), 1: (2, 4)}
    assert leadership_changed(checked, meta(checked)) == ""
    moved = leadership_changed(checked, meta({0: (1, 5), 1: (3, 5)}))
    assert "leaders changed while the groups were read: 1 ((2, 4) -> (3, 5))" in moved
    assert leadership_changed(checked, meta({}, error=DENIED)) == ""


# ---- the coordinator probe ------------------------------------------------------------------

# String.hashCode, then Kafka's Utils.abs(hash) % 50 and % 5, as Java 17's jshell printed them.
JAVA = [
    ("hello", 99162322, 22, 2),
    ("", 0, 0, 0),
    ("polygenelubricants", -2147483648, 0, 0),  # Integer.MIN_VALUE: Utils.abs maps it to 0
    ("diag-t1-73cf256d", -1316054178, 28, 3),  # FindCoordinator agreed on a 5-partition cluster
    ("spark-purge-probe-0", -848726207, 7, 2),
    ("spark-purge-probe-17", -540708555, 5, 0),
    ("größe-ü", 421250112, 12, 2),
]


@pytest.mark.parametrize(("group", "java_hash", "of_50", "of_5"), JAVA)
def test_a_groups_partition_is_the_one_kafka_computes(group: str, java_hash: int, of_50: int, of_5: int) -> None:
    assert java_string_hash(group) == java_hash
    assert (coordinator_partition(group, 50), coordinator_partition(group, 5)) == (of_50, of_5)


def test_one_probe_group_per_partition_mapping_to_it() -> None:
    for count in (1, 5, 50):
        probes = probe_groups(count)
        assert sorted(probes) == list(range(count))
        assert all(coordinator_partition(g, count) == p and g.startswith(PROBE_PREFIX) for p, g in probes.items())


def probe_answer(errors: dict[str, int]) -> NS:
    return NS(groups=[NS(group_id=g, error_code=e, topics=[]) for g, e in errors.items()])


def test_a_leader_whose_group_coordinator_is_not_active_yet_is_not_trusted() -> None:
    # The broker leads partition 0 and has caught up, but its coordinator has not taken the
    # partition over: ListGroups would leave that partition's groups out with no error.
    leaders = {0: (2, 7), 1: (2, 3)}
    probes = {0: "probe-a", 1: "probe-b"}
    answers = {2: (hw_answer({0: 120, 1: 50}), start_answer({0: 120, 1: 40}), probe_answer({"probe-a": 16, "probe-b": 0}))}
    result = check_caught_up(leaders, answers, probes)  # 16: NOT_COORDINATOR
    assert result.checked == {1: (2, 3)} and "group coordinator for it is not active yet (NOT_COORDINATOR)" in result.lagging[0]
    loading = check_caught_up(leaders, {2: (*answers[2][:2], probe_answer({"probe-a": 14}))}, probes)
    assert "COORDINATOR_LOAD_IN_PROGRESS" in loading.lagging[0]


def test_a_denied_probe_leaves_the_high_watermark_check_standing() -> None:
    leaders = {0: (2, 7)}
    result = check_caught_up(leaders, {2: (hw_answer({0: 100}), start_answer({0: 120}), probe_answer({"p": 30}))}, {0: "p"})
    assert result.probe_denied and result.checked == {} and "high watermark is 100" in result.lagging[0]
    ok = check_caught_up(leaders, {2: (hw_answer({0: 120}), start_answer({0: 120}), probe_answer({"p": 30}))}, {0: "p"})
    assert ok.probe_denied and ok.checked == leaders  # 30: GROUP_AUTHORIZATION_FAILED


def test_probe_requests_name_each_partitions_probe_group() -> None:
    reqs = build_requests({0: (1, 4), 1: (2, 0), 2: (1, 9)}, {0: "p0", 1: "p1", 2: "p2"})
    assert [g.group_id for g in reqs[1][2].groups] == ["p0", "p2"] and [g.group_id for g in reqs[2][2].groups] == ["p1"]
    assert build_requests({0: (1, 4)})[1][2] is None
