"""The invariant checker's oracle for the share group and the Spark query (no Kafka: its
knowledge, and the log starts it reads, set by hand)."""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest

from spark_purge.testing import invariants
from spark_purge.testing.errors import WorkloadError
from spark_purge.testing.invariants import STATE_VERSION, InvariantReport, InvariantWorkload, life_state, load_life

TP = ("inv-b", 0)


def _oracle(joined: int, accepted: set[int], floor: int | None, kafka_start: int | None = None) -> InvariantWorkload:
    oracle = object.__new__(InvariantWorkload)  # only the share group's knowledge is read
    oracle.share_joined = {TP: joined}
    oracle.share_accepted = {TP: accepted}
    oracle.log_floor = {} if floor is None else {TP: floor}
    oracle.share_kafka_start = {} if kafka_start is None else {TP: kafka_start}
    return oracle


def test_the_share_group_holds_at_its_first_unaccepted_record() -> None:
    assert _oracle(0, set(range(0, 111)) | set(range(120, 130)), floor=50)._share_position(TP) == 111
    assert _oracle(5, set(range(5, 9)), floor=None)._share_position(TP) == 9


def test_records_gone_from_the_log_no_longer_hold_the_share_group() -> None:
    # Kafka deleted 111-294 itself (tiered storage disabled with `delete`): its share group
    # moved up to the log start, and the consumer accepted 295-698 since.
    accepted = set(range(0, 111)) | set(range(295, 699))
    assert _oracle(0, accepted, floor=295)._share_position(TP) == 699
    # A log start under the first unaccepted record changes nothing.
    assert _oracle(0, accepted, floor=100)._share_position(TP) == 111


def test_a_record_kafka_archived_no_longer_holds_the_share_group() -> None:
    # The seed-35 run, cycle 938: the consumer accepted 0-269 and 271-285, never 270; Kafka
    # archived 270 at its delivery limit (the checker had counted 3 of its 10 deliveries) and
    # persisted the start offset 271 before the purge.
    accepted = set(range(0, 270)) | set(range(271, 286))
    assert _oracle(0, accepted, floor=270)._share_position(TP) == 270  # the checker's count alone
    assert _oracle(0, accepted, floor=270, kafka_start=271)._share_position(TP) == 286
    # A start offset Kafka persisted under the first unaccepted record changes nothing (it trails
    # the acknowledgements by a round).
    assert _oracle(0, accepted, floor=270, kafka_start=200)._share_position(TP) == 270


def test_a_spark_query_whose_unread_records_are_gone_starts_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = object.__new__(InvariantWorkload)
    oracle.workdir = tmp_path
    oracle.stream_sink = tmp_path / "stream-sink"
    for folder in (tmp_path / "stream-checkpoint", oracle.stream_sink):
        folder.mkdir()
    oracle.admin = None
    oracle.report = InvariantReport(seed=1, stream_records=40)
    oracle.stream_records_before = 0
    oracle.stream_first_seen = {TP: 0, ("inv-b", 1): 0}
    oracle.stream_read = {TP: 30, ("inv-b", 1): 10}
    starts = {TP: 20, ("inv-b", 1): 10}
    monkeypatch.setattr(invariants.workload, "log_start_offsets", lambda admin, tps: {tp: starts[tp] for tp in tps})

    oracle._restart_stream_on_lost_records(list(starts))  # every unread record is still there
    assert oracle.stream_read == {TP: 30, ("inv-b", 1): 10} and not oracle.report.notes

    starts[("inv-b", 1)] = 12  # Kafka deleted 10 and 11, which the query had not read
    oracle._restart_stream_on_lost_records(list(starts))
    assert oracle.stream_first_seen == {} and oracle.stream_read == {}
    assert oracle._stream_position(TP) is None  # it needs nothing until it runs again
    assert not (tmp_path / "stream-checkpoint").exists() and not oracle.stream_sink.exists()
    assert oracle.stream_records_before == 40
    assert "inv-b-1 10 < log start 12" in oracle.report.notes[0], oracle.report.notes

    # A second start-over counts the records read once: the report's total already holds the
    # lives before (it was added to itself, which made a long run report 125 million records).
    oracle.report.stream_records = 40 + 25
    oracle._reset_stream()
    assert oracle.stream_records_before == 65


def test_a_timed_out_delete_that_takes_effect_later_is_no_new_cut() -> None:
    # Seen in a long run: DeleteRecords to 554 reached A-0's leader while it hung; the request
    # timed out (outcome failed, the new leader's log start 544), a group rewound to 536, and ten
    # minutes later the old leader led again: the log start rose to 554 in a cycle that cut nothing.
    a0 = ("inv-a", 0)
    oracle = object.__new__(InvariantWorkload)
    oracle.report = InvariantReport(seed=1)
    oracle.in_doubt, oracle.recreated = {}, set()
    oracle._safe = lambda tp, snapshot_ms: 536  # type: ignore[method-assign]
    intent = {"query_id": "q", "topic": "inv-a", "partition": 0, "record_type": "intent", "cutoff": 554}
    failed = {**intent, "record_type": "outcome", "status": "failed"}

    oracle._note_in_doubt({a0: 544}, {("q", "inv-a", 0): intent}, [failed])
    assert oracle.in_doubt == {a0: 554}
    oracle._check_starts(111, {a0: 544}, {a0: 554}, 0)
    assert oracle.report.violations == []
    oracle._check_starts(112, {a0: 544}, {a0: 560}, 0)  # past the cutoff it was sent with: a cut
    assert len(oracle.report.violations) == 1 and "log start 560 > allowed 554" in oracle.report.violations[0]

    oracle._note_in_doubt({a0: 554}, {}, [])  # it took effect: nothing in doubt any more
    assert oracle.in_doubt == {}
    # A failed outcome without an intent of its own proves nothing was sent.
    oracle._note_in_doubt({a0: 554}, {}, [{**failed, "cutoff": 600}])
    assert oracle.in_doubt == {}


def test_a_relative_workdir_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's long run passes `--workdir var/inv17`: the config's file: URI of the Spark
    # query's checkpoint, and a killed batch's driver (started inside the folder), need it whole.
    monkeypatch.chdir(tmp_path)
    workdir = invariants.checker_workdir("var/run1")
    assert workdir == tmp_path / "var" / "run1" and workdir.is_absolute() and workdir.is_dir()
    assert (workdir / "stream-checkpoint").as_uri().startswith("file:///")
    made = invariants.checker_workdir(None)
    assert made.is_absolute() and made.is_dir() and made.name.startswith("spark-purge-invariants-")
    made.rmdir()


def test_a_recreated_time_floor_topic_forgets_its_old_incarnation(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import Counter

    recreated: list[tuple[str, int, dict[str, str]]] = []
    monkeypatch.setattr(
        invariants.workload, "recreate_topic", lambda admin, topic, n, rf, configs: recreated.append((topic, n, configs))
    )
    oracle = object.__new__(InvariantWorkload)
    oracle.topic_a, oracle.topic_b = "inv-a", "inv-b"
    oracle.partitions = {"inv-a": 1, "inv-b": 2}
    oracle.replication, oracle.tiering, oracle.admin, oracle.kinds = 1, None, None, ("share_consume",)
    oracle.timestamps = {("inv-a", 0): [1, 2], TP: [1, 2, 3], ("inv-b", 1): [4]}
    oracle.sent_at = {k: list(v) for k, v in oracle.timestamps.items()}
    oracle.commits = {"g1": {("inv-a", 0): 2, TP: 3}, "g2": {("inv-b", 1): 1}}
    oracle.recreated, oracle.recreates = set(), Counter()
    oracle.share_joined = {TP: 0, ("inv-b", 1): 0}
    oracle.share_accepted = {TP: {0, 1}, ("inv-b", 1): {0}}
    oracle.share_deliveries = Counter({("inv-b", 0, 2): 3})
    oracle.share_kafka_start = {TP: 2}
    oracle.share_stopped, oracle.report = True, InvariantReport(seed=1)  # stopped for record 2's deliveries
    oracle.producer = type("P", (), {"close": lambda self: None})()
    monkeypatch.setattr(InvariantWorkload, "_new_producer", lambda self: oracle.producer)

    oracle._recreate_topic("inv-b")

    assert recreated == [("inv-b", 2, {})]
    assert oracle.recreated == {TP, ("inv-b", 1)} and oracle.recreates == Counter({"inv-b": 1})
    # The new incarnation's offsets start at 0: no records, send times or commits carried over.
    assert oracle._high_watermark(TP) == 0 and oracle.sent_at[TP] == [] and oracle.sent_at[("inv-b", 1)] == []
    assert oracle.commits == {"g1": {("inv-a", 0): 2}, "g2": {}}
    # The share group starts over on it: required again from its next run, as from its first.
    assert oracle.share_joined is None and oracle.share_accepted == {} and not oracle.share_deliveries
    assert oracle.share_kafka_start == {}  # the old incarnation's start offsets say nothing of the new
    assert not oracle.share_stopped and "runs again" in oracle.report.notes[0]
    # A's knowledge is untouched.
    assert oracle.timestamps[("inv-a", 0)] == [1, 2] and oracle.sent_at[("inv-a", 0)] == [1, 2]


def _commit_oracle(commits: dict[str, dict[tuple[str, int], int]], hw: dict[tuple[str, int], int]) -> InvariantWorkload:
    """An oracle knowing only commits and high watermarks (no share group, no Spark query; B's
    records all sent and stamped long ago, so its time floor binds nothing)."""
    oracle = object.__new__(InvariantWorkload)
    oracle.topic_a, oracle.topic_b = "inv-a", "inv-b"
    oracle.required_a = ("g0", "g1")
    oracle.commits = commits
    oracle.members = {}
    oracle.timestamps = {tp: [0] * n for tp, n in hw.items()}
    oracle.sent_at = {tp: [0] * n for tp, n in hw.items()}
    oracle.share_joined, oracle.kinds = None, ()
    oracle.report, oracle.in_doubt = InvariantReport(seed=1), {}
    return oracle


def test_a_classic_group_mid_rebalance_holds_every_partition_of_its_topic_from_the_log_start() -> None:
    # classic_rebalance: inv-cl4 joined B (members, no commit) right before the snapshot; g1 and
    # g2 have read B-0 to 30 and 40. While it is a member, nothing of B may be cut.
    b1 = ("inv-b", 1)
    oracle = _commit_oracle({"g1": {TP: 30, b1: 30}, "g2": {TP: 40, b1: 40}}, {TP: 50, b1: 50})
    assert oracle._safe(TP, 10**13) == 30
    oracle.commits["inv-cl4"] = {}
    oracle.members["inv-cl4"] = frozenset({"inv-b"})
    assert oracle._safe(TP, 10**13) == -1 and oracle._safe(b1, 10**13) == -1
    oracle._check_starts(4, {TP: 10, b1: 10}, {TP: 10, b1: 10}, 10**13)
    assert oracle.report.violations == []
    # The plan from before the fix: the group unreadable read as one needing nothing, B cut to g1.
    oracle._check_starts(4, {TP: 10, b1: 10}, {TP: 30, b1: 10}, 10**13)
    assert len(oracle.report.violations) == 1 and "inv-b-0 log start 30 > allowed 10" in oracle.report.violations[0]
    # It commits 20 on B-0 only: B-0 held at 20, B-1 still blocked; not on A (it reads only B).
    oracle.commits["inv-cl4"] = {TP: 20}
    assert oracle._safe(TP, 10**13) == 20 and oracle._safe(b1, 10**13) == -1
    oracle.commits["g0"], oracle.commits["g1"][("inv-a", 0)] = {("inv-a", 0): 7}, 9
    oracle.timestamps[("inv-a", 0)] = [0] * 10
    assert oracle._safe(("inv-a", 0), 10**13) == 7


def test_a_group_seen_only_on_a_leaderless_partition_is_required_on_the_others() -> None:
    # leaderless_group: inv-gm5 read both partitions of its topic, inv-gl5 committed only on
    # partition 0, whose node is down at the snapshot. Partition 1 is blocked (inv-gl5 reads it
    # from its reset position); without inv-gl5 it would be cut to inv-gm5's 12.
    l0, l1 = ("inv-l-x-5", 0), ("inv-l-x-5", 1)
    oracle = _commit_oracle({"inv-gm5": {l0: 9, l1: 12}, "inv-gl5": {l0: 3}}, {l0: 20, l1: 20})
    assert oracle._safe(l1, 10**13) == -1 and oracle._safe(l0, 10**13) == 3
    oracle._check_starts(5, {l1: 0}, {l1: 12}, 10**13)  # the cut the product made before its fix
    assert len(oracle.report.violations) == 1 and "inv-l-x-5-1 log start 12 > allowed 0" in oracle.report.violations[0]
    del oracle.commits["inv-gl5"]
    assert oracle._safe(l1, 10**13) == 12


def test_a_rewind_while_the_batch_waits_for_the_lease_binds_at_once() -> None:
    # lease_wait_rewind: g0 read A-0 to 60 when the snapshot was read, rewound to 10 while the
    # batch waited for the lease: the log start may reach 10, never 60.
    a0 = ("inv-a", 0)
    oracle = _commit_oracle({"g0": {a0: 60}, "g1": {a0: 80}}, {a0: 100})
    oracle.commits["g0"][a0] = 10  # what _rewind records once Kafka has it
    oracle._check_starts(6, {a0: 0}, {a0: 10}, 10**13)
    assert oracle.report.violations == []
    oracle._check_starts(6, {a0: 0}, {a0: 60}, 10**13)  # planned from the snapshot before the wait
    assert len(oracle.report.violations) == 1 and "log start 60 > allowed 10" in oracle.report.violations[0]


def test_a_life_file_carries_the_draws_and_tallies_as_json(tmp_path: Path) -> None:
    # --new-life: what a fresh cluster's life takes over from an earlier life, and nothing else.
    rng = random.Random(37)
    rng.random()
    report = InvariantReport(seed=37, cycles=12, faults=Counter(node_kill=2), failed_cycles={3, 7}, records_deleted=9)
    report.timed("whole cycle", 1.5)
    state = {
        "version": STATE_VERSION, "next_cycle": 12, "cycles": 1000, "run": {"seed": 37, "kinds": ["node_kill"]},
        "rng": rng.getstate(), "report": {f.name: getattr(report, f.name) for f in fields(InvariantReport)},
        "oracle": {"commits": {("t", 0): 5}},
    }
    path = tmp_path / "life.json"
    path.write_text(json.dumps(life_state(state)), encoding="utf-8")
    life = load_life(path)
    assert "oracle" not in life and life["next_cycle"] == 12 and life["run"] == state["run"]
    again = random.Random()
    again.setstate(life["rng"])
    assert again.random() == rng.random()
    assert InvariantReport(**life["report"]) == report
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(WorkloadError, match="not a checker life file"):
        load_life(path)
