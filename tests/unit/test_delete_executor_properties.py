"""Property test of the DeleteRecords executor over random broker behaviour (no Kafka, a fake
clock): whatever the leaders answer, the outcome of each partition tells the truth.

Each request a leader gets is drawn: answered (success, NOT_LEADER, or a per-partition
REQUEST_TIMED_OUT after the leader applied the cut), hung (no answer for the whole request
timeout; the leader may or may not have applied the cut), or the connection lost (before or
after the leader applied it). Leaders move between metadata refreshes, and a topic may be
recreated between rounds. The fake's own log start offsets are the oracle, independent of the
executor.

Properties:
- one outcome per partition, in order, for the requested offset;
- ``ok`` only when a leader answered the partition with success;
- a partition one attempt of which got no answer, and none confirmed, carries the log start
  offset as it is at the end (``low_watermark``) and REQUEST_TIMED_OUT or LEADER_UNREACHABLE:
  never a bare failure that hides a cut which happened;
- ``skipped`` only for a topic the re-check reported, and no request for that topic after it;
- every attempt fits in the delete timeout and waits at most a third of it (at least 1 s).
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_purge.kafka.delete import (
    ATTEMPTS_PER_TIMEOUT,
    MIN_ATTEMPT_MS,
    DeleteExecutor,
    LeaderRequestError,
    PartitionResult,
)
from spark_purge.kafka.model import TopicPartitionKey

ACTIONS = ("ok", "not_leader", "timeout_applied", "hang", "hang_applied", "lost", "lost_applied")
GRACE_S = 5.0  # what the wire adds to a request's timeout (spark_purge.kafka.delete._WIRE_GRACE_MS)


@dataclass
class Broker:
    """A scripted cluster: each request's fate and each refresh's leader moves are drawn up
    front and taken in turn (the executor's requests go out one leader at a time here:
    ``max_parallel=1``, so the order is the same on every run); the script repeats when used
    up. ``recreated_at``: the re-check (by count) from which topic ``a`` reads as recreated."""

    actions: list[str]
    moves: list[Optional[int]]
    leaders_now: dict[TopicPartitionKey, int]
    recreated_at: Optional[int]
    now: float = 0.0
    rechecks: int = 0
    starts: dict[TopicPartitionKey, int] = field(default_factory=dict)
    answered_ok: set[TopicPartitionKey] = field(default_factory=set)
    sends: list[tuple[float, int, dict[TopicPartitionKey, int], int]] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)
    sent_after_report: list[TopicPartitionKey] = field(default_factory=list)
    refreshes: int = 0
    round_s: float = 0.0

    def clock(self) -> float:
        """Requests of one round go to their leaders in parallel: the round takes as long as
        its slowest request, counted once the executor looks at the clock again."""
        self.now += self.round_s
        self.round_s = 0.0
        return self.now

    def _takes(self, seconds: float) -> None:
        self.round_s = max(self.round_s, seconds)

    def sleep(self, seconds: float) -> None:
        self.now = self.clock() + seconds

    def _next(self, script: list, i: int):  # type: ignore[no-untyped-def, type-arg]
        return script[i % len(script)]

    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        self.clock()
        if refresh:
            for tp in sorted(tps):
                move = self._next(self.moves, self.refreshes)
                self.refreshes += 1
                if move is not None:
                    self.leaders_now[tp] = move
        return {tp: self.leaders_now[tp] for tp in tps}

    def recheck(self, topics: Collection[str]) -> Mapping[str, tuple[str, str]]:
        if self.recreated_at is not None and self.rechecks >= self.recreated_at:
            self.reported.add("a")
        self.rechecks += 1
        return {t: ("TOPIC_RECREATED", f"topic {t!r} was recreated") for t in topics if t in self.reported}

    def _apply(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        for tp, off in offsets.items():
            self.starts[tp] = max(self.starts.get(tp, 0), off)

    def send_delete_records(
        self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
    ) -> Mapping[TopicPartitionKey, PartitionResult]:
        self.sends.append((self.now, leader, dict(offsets), timeout_ms))  # a round's requests all start at once
        self.sent_after_report.extend(tp for tp in offsets if tp[0] in self.reported)
        action = self._next(self.actions, len(self.sends) - 1)
        if action.startswith("hang"):
            self._takes(timeout_ms / 1000 + GRACE_S)
            if action == "hang_applied":
                self._apply(offsets)
            raise LeaderRequestError(f"DeleteRecords to leader {leader} failed: REQUEST_TIMED_OUT", timed_out=True)
        if action.startswith("lost"):
            if action == "lost_applied":
                self._apply(offsets)
            raise LeaderRequestError(f"DeleteRecords to leader {leader} failed: KafkaConnectionError", timed_out=False)
        self._takes(0.01)
        if action == "not_leader":
            return {tp: PartitionResult("NOT_LEADER_OR_FOLLOWER", -1, True, "moved") for tp in offsets}
        self._apply(offsets)
        if action == "timeout_applied":  # the leader cut, then waited for a follower in vain
            self._takes(timeout_ms / 1000)
            return {tp: PartitionResult("REQUEST_TIMED_OUT", -1, True, "followers") for tp in offsets}
        self.answered_ok |= set(offsets)
        return {tp: PartitionResult(None, off) for tp, off in offsets.items()}

    def log_start_offsets(self, tps: Collection[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]:
        self.clock()
        return {tp: self.starts.get(tp, 0) for tp in tps}


@settings(max_examples=300, deadline=None)
@given(
    cutoffs=st.dictionaries(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2)), st.integers(1, 1000), min_size=1, max_size=5
    ),
    first_leaders=st.lists(st.integers(1, 3), min_size=6, max_size=6),
    actions=st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=12),
    moves=st.lists(st.one_of(st.none(), st.integers(1, 3)), min_size=1, max_size=12),
    timeout_ms=st.sampled_from([1_000, 3_000, 15_000, 30_000]),
    retries=st.sampled_from([None, 0, 3]),
    recreated_at=st.one_of(st.none(), st.integers(0, 3)),
)
def test_every_outcome_tells_the_truth(
    cutoffs: dict[TopicPartitionKey, int],
    first_leaders: list[int],
    actions: list[str],
    moves: list[Optional[int]],
    timeout_ms: int,
    retries: Optional[int],
    recreated_at: Optional[int],
) -> None:
    leaders = {tp: first_leaders[i] for i, tp in enumerate(sorted(cutoffs))}
    broker = Broker(actions, moves, leaders, recreated_at)
    executor = DeleteExecutor(
        broker, max_parallel=1, backoff_ms=100, max_retries=retries, clock=broker.clock, sleep=broker.sleep,
        recheck=broker.recheck,
    )

    outcomes = executor.run(cutoffs, timeout_ms)

    assert [(o.topic, o.partition, o.requested_offset) for o in outcomes] == [(t, p, off) for (t, p), off in cutoffs.items()]
    sent = {tp for _, _, offsets, _ in broker.sends for tp in offsets}
    for o in outcomes:
        tp = (o.topic, o.partition)
        if o.ok:
            assert tp in broker.answered_ok and o.low_watermark == cutoffs[tp]
        elif o.skipped:
            assert o.error == "TOPIC_RECREATED" and o.topic in broker.reported
        elif o.error in ("REQUEST_TIMED_OUT", "LEADER_UNREACHABLE"):
            assert o.low_watermark == broker.starts.get(tp, 0), o  # the truth at the end, re-read
            assert "re-read" in (o.error_message or "")
        else:  # answered with an error, or never sent: nothing was cut
            assert tp not in broker.starts, o
    # A cut the broker made is never hidden behind an outcome without a log start.
    for o in outcomes:
        tp = (o.topic, o.partition)
        if tp in broker.starts and not o.skipped:
            assert o.low_watermark == broker.starts[tp], (o, broker.starts[tp])
    assert not broker.sent_after_report
    assert sent <= set(cutoffs)
    cap_ms = max(MIN_ATTEMPT_MS, timeout_ms // ATTEMPTS_PER_TIMEOUT)
    for started, _, _, attempt_ms in broker.sends:
        assert attempt_ms <= cap_ms
        assert started * 1000 + attempt_ms <= timeout_ms + 1  # every attempt ends by the deadline (the wire's grace aside)
