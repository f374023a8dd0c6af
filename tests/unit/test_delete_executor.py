"""Per-leader DeleteRecords batching over a fake transport: success, NotLeader-then-retry,
mixed results, timeouts sent again (to a new leader) and re-read at the deadline, topics
re-checked before a resend, and leaders really sent to in parallel."""
from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping
from typing import Optional

from spark_purge.kafka.delete import DeleteExecutor, LeaderRequestError, PartitionResult
from spark_purge.kafka.model import TopicPartitionKey


class FakeTransport:
    """Leaders from a dict; answers scripted per (leader, call number)."""

    def __init__(self, leaders: dict[TopicPartitionKey, Optional[int]]) -> None:
        self.leader_map = dict(leaders)
        self.after_refresh: dict[TopicPartitionKey, Optional[int]] = {}
        self.sent: list[tuple[int, dict[TopicPartitionKey, int]]] = []
        self.timeouts: list[int] = []  # timeout_ms of each request
        self.refreshes = 0
        self.errors: dict[tuple[int, TopicPartitionKey], list[str]] = {}  # queued per leader+tp
        self.raise_for_leader: dict[int, LeaderRequestError] = {}
        self.starts: dict[TopicPartitionKey, int] = {}
        self.delay_s = 0.0
        self._lock = threading.Lock()

    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        if refresh:
            self.refreshes += 1
            self.leader_map.update(self.after_refresh)
        return {tp: self.leader_map[tp] for tp in tps if tp in self.leader_map}

    def send_delete_records(
        self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
    ) -> Mapping[TopicPartitionKey, PartitionResult]:
        with self._lock:
            self.sent.append((leader, dict(offsets)))
            self.timeouts.append(timeout_ms)
        if self.delay_s:
            time.sleep(self.delay_s)
        if leader in self.raise_for_leader:
            raise self.raise_for_leader[leader]
        out = {}
        for tp, off in offsets.items():
            queue = self.errors.get((leader, tp), [])
            err = queue.pop(0) if queue else None
            out[tp] = PartitionResult(err, -1 if err else off, err == "NOT_LEADER_OR_FOLLOWER", f"{err} on {tp}" if err else None)
        return out

    def log_start_offsets(self, tps: Collection[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]:
        return {tp: self.starts[tp] for tp in tps if tp in self.starts}


def _executor(t: FakeTransport) -> DeleteExecutor:
    return DeleteExecutor(t, backoff_ms=1)


def test_one_request_per_leader_with_only_its_partitions() -> None:
    t = FakeTransport({("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("b", 1): 3})
    cutoffs = {("a", 0): 10, ("a", 1): 11, ("b", 0): 12, ("b", 1): 13}

    outcomes = _executor(t).run(cutoffs, timeout_ms=5_000)

    assert sorted((leader, sorted(batch)) for leader, batch in t.sent) == [
        (1, [("a", 0), ("b", 0)]),
        (2, [("a", 1)]),
        (3, [("b", 1)]),
    ]
    assert [(o.topic, o.partition, o.low_watermark, o.error, o.attempts) for o in outcomes] == [
        ("a", 0, 10, None, 1),
        ("a", 1, 11, None, 1),
        ("b", 0, 12, None, 1),
        ("b", 1, 13, None, 1),
    ]
    assert all(o.ok and o.reached for o in outcomes)
    assert {o.leader for o in outcomes if o.topic == "a"} == {1, 2}


def test_not_leader_refreshes_metadata_and_retries_only_that_partition() -> None:
    t = FakeTransport({("a", 0): 1, ("a", 1): 1})
    t.errors[(1, ("a", 1))] = ["NOT_LEADER_OR_FOLLOWER"]
    t.after_refresh = {("a", 1): 2}

    outcomes = {(o.topic, o.partition): o for o in _executor(t).run({("a", 0): 5, ("a", 1): 6}, timeout_ms=5_000)}

    assert t.refreshes == 1
    assert t.sent == [(1, {("a", 0): 5, ("a", 1): 6}), (2, {("a", 1): 6})]
    assert outcomes[("a", 0)].attempts == 1 and outcomes[("a", 0)].ok
    assert outcomes[("a", 1)].attempts == 2 and outcomes[("a", 1)].ok
    assert outcomes[("a", 1)].leader == 2 and outcomes[("a", 1)].low_watermark == 6


def test_mixed_results_are_each_recorded_and_the_rest_goes_on() -> None:
    t = FakeTransport({("ok", 0): 1, ("compacted", 0): 1, ("denied", 0): 2, ("range", 0): 2})
    t.errors[(1, ("compacted", 0))] = ["POLICY_VIOLATION"]
    t.errors[(2, ("denied", 0))] = ["TOPIC_AUTHORIZATION_FAILED"]
    t.errors[(2, ("range", 0))] = ["OFFSET_OUT_OF_RANGE"]
    cutoffs = {("ok", 0): 3, ("compacted", 0): 3, ("denied", 0): 3, ("range", 0): 99, ("gone", 0): 1}

    outcomes = {o.topic: o for o in _executor(t).run(cutoffs, timeout_ms=5_000)}

    assert outcomes["ok"].ok and outcomes["ok"].low_watermark == 3
    assert outcomes["compacted"].error == "POLICY_VIOLATION" and outcomes["compacted"].low_watermark is None
    assert outcomes["denied"].error == "TOPIC_AUTHORIZATION_FAILED"
    assert outcomes["range"].error == "OFFSET_OUT_OF_RANGE" and outcomes["range"].requested_offset == 99
    assert outcomes["gone"].error == "UNKNOWN_TOPIC_OR_PARTITION" and outcomes["gone"].attempts == 0
    assert t.refreshes == 0  # none of these is worth a retry
    assert len(t.sent) == 2


def test_partition_timing_out_until_the_deadline_rereads_log_start_offset() -> None:
    t = FakeTransport({("a", 0): 1, ("a", 1): 1})
    t.errors[(1, ("a", 0))] = ["REQUEST_TIMED_OUT"] * 100
    t.errors[(1, ("a", 1))] = ["REQUEST_TIMED_OUT"] * 100
    t.starts = {("a", 0): 40, ("a", 1): 7}  # a-0 did move, a-1 did not

    outcomes = {o.partition: o for o in _executor(t).run({("a", 0): 40, ("a", 1): 50}, timeout_ms=1_500)}

    assert outcomes[0].timed_out and outcomes[0].low_watermark == 40 and outcomes[0].reached
    assert outcomes[1].timed_out and outcomes[1].low_watermark == 7 and not outcomes[1].reached
    assert "re-read: 7" in (outcomes[1].error_message or "")
    assert outcomes[1].retriable
    assert outcomes[1].attempts >= 2  # sent again while the deadline left room for an attempt


def test_partition_timing_out_is_sent_again_and_can_succeed() -> None:
    """A leader that timed out waiting for a dead follower answers a resend once the follower
    has left the ISR: the outcome is a confirmed delete, not a timeout."""
    t = FakeTransport({("a", 0): 1})
    t.errors[(1, ("a", 0))] = ["REQUEST_TIMED_OUT"]

    (outcome,) = _executor(t).run({("a", 0): 40}, timeout_ms=6_000)

    assert outcome.ok and outcome.low_watermark == 40 and outcome.attempts == 2
    assert t.timeouts[0] == 2_000  # one attempt waits a third of the timeout


def test_hung_leader_times_out_and_the_partition_is_cut_by_its_new_leader() -> None:
    """The leader hangs (SIGSTOP): its whole request times out. The controller elects another
    leader meanwhile; the resend goes there, so the cut is confirmed now, and the one the hung
    leader may apply later is the same cut."""
    t = FakeTransport({("a", 0): 3, ("a", 1): 2})
    t.raise_for_leader[3] = LeaderRequestError("DeleteRecords to leader 3 failed: REQUEST_TIMED_OUT", timed_out=True)
    t.after_refresh = {("a", 0): 1}

    outcomes = {o.partition: o for o in _executor(t).run({("a", 0): 554, ("a", 1): 9}, timeout_ms=15_000)}

    assert outcomes[0].ok and outcomes[0].low_watermark == 554 and outcomes[0].leader == 1 and outcomes[0].attempts == 2
    assert outcomes[1].ok and outcomes[1].attempts == 1
    assert [leader for leader, _ in t.sent] == [2, 3, 1] or [leader for leader, _ in t.sent] == [3, 2, 1]
    assert max(t.timeouts) == 5_000


def test_timed_out_then_moving_leader_rereads_at_the_deadline() -> None:
    """Timed out once, then only NOT_LEADER answers: the first attempt may still cut, so the
    outcome at the deadline is the re-read log start, not the last NOT_LEADER."""
    t = FakeTransport({("a", 0): 3})
    t.raise_for_leader[3] = LeaderRequestError("DeleteRecords to leader 3 failed: REQUEST_TIMED_OUT", timed_out=True)
    t.after_refresh = {("a", 0): 1}
    t.errors[(1, ("a", 0))] = ["NOT_LEADER_OR_FOLLOWER"] * 1000
    t.starts = {("a", 0): 544}

    (outcome,) = DeleteExecutor(t, backoff_ms=5).run({("a", 0): 554}, timeout_ms=300)

    assert outcome.timed_out and outcome.low_watermark == 544 and not outcome.reached
    assert "requested 554: not reached" in (outcome.error_message or "")


def test_a_resend_is_never_made_to_a_topic_recreated_since_the_plan() -> None:
    t = FakeTransport({("a", 0): 3, ("b", 0): 3})
    t.raise_for_leader[3] = LeaderRequestError("DeleteRecords to leader 3 failed: REQUEST_TIMED_OUT", timed_out=True)
    t.after_refresh = {("a", 0): 1, ("b", 0): 1}
    asked: list[list[str]] = []

    def recheck(topics: Collection[str]) -> Mapping[str, tuple[str, str]]:
        asked.append(list(topics))
        return {"a": ("TOPIC_RECREATED", "topic 'a' was recreated: id x when planned, y now: not cut")}

    outcomes = DeleteExecutor(t, backoff_ms=1, recheck=recheck).run({("a", 0): 5, ("b", 0): 6}, timeout_ms=6_000)

    assert asked == [["a", "b"]]
    assert outcomes[0].skipped and outcomes[0].error == "TOPIC_RECREATED"
    assert outcomes[1].ok and outcomes[1].leader == 1
    assert [(leader, sorted(offs)) for leader, offs in t.sent] == [(3, [("a", 0), ("b", 0)]), (1, [("b", 0)])]


def test_leader_request_timing_out_rereads_its_partitions_only() -> None:
    t = FakeTransport({("a", 0): 1, ("a", 1): 2})
    t.raise_for_leader[2] = LeaderRequestError("DeleteRecords to leader 2 failed: REQUEST_TIMED_OUT", timed_out=True)
    t.starts = {("a", 1): 3}

    outcomes = {o.partition: o for o in _executor(t).run({("a", 0): 4, ("a", 1): 9}, timeout_ms=1_500)}

    assert outcomes[0].ok and outcomes[0].low_watermark == 4 and outcomes[0].attempts == 1
    assert outcomes[1].error == "REQUEST_TIMED_OUT" and outcomes[1].low_watermark == 3


def test_unreachable_leader_gives_up_at_the_deadline_with_the_last_error() -> None:
    t = FakeTransport({("a", 0): 1})
    t.raise_for_leader[1] = LeaderRequestError("DeleteRecords to leader 1 failed: LEADER_UNREACHABLE", timed_out=False)

    started = time.monotonic()
    (outcome,) = DeleteExecutor(t, backoff_ms=20).run({("a", 0): 4}, timeout_ms=300)

    assert time.monotonic() - started < 2.0
    assert outcome.error == "LEADER_UNREACHABLE" and outcome.retriable
    assert outcome.attempts >= 2 and t.refreshes >= 1
    assert "could not be re-read" in (outcome.error_message or "")  # the fake knows no log start


def test_leader_lost_after_the_send_rereads_the_log_start_at_the_deadline() -> None:
    """A leader can apply a delete and die before it answers: with no answer from any later
    attempt, the outcome carries the log start as re-read, not a bare LEADER_UNREACHABLE."""
    t = FakeTransport({("a", 0): 3})
    t.raise_for_leader[3] = LeaderRequestError("DeleteRecords to leader 3 failed: KafkaConnectionError", timed_out=False)
    t.starts = {("a", 0): 60}

    (outcome,) = DeleteExecutor(t, backoff_ms=20).run({("a", 0): 60}, timeout_ms=300)

    assert outcome.error == "LEADER_UNREACHABLE" and outcome.low_watermark == 60 and outcome.reached
    assert "log start offset re-read: 60 (requested 60: reached)" in (outcome.error_message or "")


def test_leaders_are_sent_to_in_parallel() -> None:
    t = FakeTransport({("a", p): p + 1 for p in range(4)})
    t.delay_s = 0.3

    started = time.monotonic()
    outcomes = _executor(t).run({("a", p): 1 for p in range(4)}, timeout_ms=5_000)

    assert all(o.ok for o in outcomes)
    assert time.monotonic() - started < 0.9  # serial would take 1.2 s


def test_retries_bound_the_resends_after_leader_moves() -> None:
    """kafka.retries caps re-sends: a partition whose leader keeps moving gives up early."""

    class AlwaysMoving:
        sends = 0

        def leaders(self, tps, refresh):  # type: ignore[no-untyped-def]
            return {tp: 1 for tp in tps}

        def send_delete_records(self, leader, offsets, timeout_ms):  # type: ignore[no-untyped-def]
            AlwaysMoving.sends += 1
            return {tp: PartitionResult("NOT_LEADER_OR_FOLLOWER", -1, True, "moved") for tp in offsets}

        def log_start_offsets(self, tps):  # type: ignore[no-untyped-def]
            return {}

    (outcome,) = DeleteExecutor(AlwaysMoving(), max_retries=2, sleep=lambda s: None).run({("t", 0): 5}, timeout_ms=60_000)

    assert AlwaysMoving.sends == 3  # first attempt + 2 retries
    assert outcome.error == "NOT_LEADER_OR_FOLLOWER" and outcome.attempts == 3 and outcome.retriable
    assert "retries=2" in (outcome.error_message or "")


class FlakyMetadata(FakeTransport):
    """Leader lookups raise ``failures`` times (a broker just died), then answer."""

    def __init__(self, leaders: dict[TopicPartitionKey, Optional[int]], failures: int) -> None:
        super().__init__(leaders)
        self.failures = failures
        self.lookups = 0

    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        self.lookups += 1
        if self.lookups <= self.failures:
            raise ConnectionError("metadata request to node 2 failed: connection refused")
        return super().leaders(tps, refresh)


def test_failed_leader_lookup_is_retried_then_succeeds() -> None:
    t = FlakyMetadata({("a", 0): 1, ("a", 1): 2}, failures=2)

    outcomes = _executor(t).run({("a", 0): 5, ("a", 1): 6}, timeout_ms=5_000)

    assert t.lookups == 3
    assert [(o.partition, o.low_watermark, o.error) for o in outcomes] == [(0, 5, None), (1, 6, None)]


def test_leader_lookup_failing_until_the_deadline_gives_every_partition_an_outcome() -> None:
    t = FlakyMetadata({("a", 0): 1, ("b", 3): 2}, failures=10**6)

    started = time.monotonic()
    outcomes = DeleteExecutor(t, backoff_ms=10).run({("a", 0): 5, ("b", 3): 6}, timeout_ms=200)

    assert time.monotonic() - started < 2.0
    assert t.sent == []  # nothing was sent: the failure is the truth
    assert [(o.topic, o.partition, o.error, o.low_watermark) for o in outcomes] == [
        ("a", 0, "METADATA_UNAVAILABLE", None),
        ("b", 3, "METADATA_UNAVAILABLE", None),
    ]
    assert all(o.retriable and "connection refused" in (o.error_message or "") for o in outcomes)
    assert all((o.error_message or "").count("leader lookup failed") == 1 for o in outcomes)


def test_leader_lookup_failing_after_a_leader_move_keeps_the_done_partitions() -> None:
    t = FlakyMetadata({("a", 0): 1, ("a", 1): 1}, failures=0)
    t.errors[(1, ("a", 1))] = ["NOT_LEADER_OR_FOLLOWER"]
    original = t.leaders

    def refresh_fails(tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        if refresh:
            raise ConnectionError("no broker answers Metadata")
        return original(tps, refresh)

    t.leaders = refresh_fails  # type: ignore[method-assign]
    outcomes = DeleteExecutor(t, backoff_ms=10).run({("a", 0): 5, ("a", 1): 6}, timeout_ms=200)

    assert outcomes[0].ok and outcomes[0].low_watermark == 5
    assert outcomes[1].error == "NOT_LEADER_OR_FOLLOWER" and outcomes[1].attempts == 1
    assert "no broker answers Metadata" in (outcomes[1].error_message or "")


def test_leader_request_error_is_a_retriable_spark_purge_error() -> None:
    from spark_purge.errors import KafkaError, SparkPurgeError

    exc = LeaderRequestError("DeleteRecords to leader 1 failed: LEADER_UNREACHABLE", timed_out=False)
    assert isinstance(exc, KafkaError) and isinstance(exc, SparkPurgeError)
    assert exc.retriable and not exc.timed_out
    assert LeaderRequestError("x", timed_out=True).timed_out
