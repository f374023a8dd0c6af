"""Per-leader DeleteRecords (KIP-107), every partition's outcome recorded on its own.

The executor is pure logic over a small ``DeleteTransport`` (``WireDeleteTransport`` below,
over the kafka-python transport in ``wire.py``, or a plain fake in unit tests):

- one request per leader carrying only its partitions, leaders in parallel (threads);
- NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE / UNKNOWN_LEADER_EPOCH (and a leader that
  cannot be reached): refresh leaders and retry those partitions until the deadline;
- REQUEST_TIMED_OUT, or the leader's whole request timing out: send it again, to the
  partition's leader as metadata now names it, while the deadline leaves room for another
  attempt (each attempt waits at most a third of the timeout, so a hung leader leaves time to
  reach the one elected in its place); a partition still unconfirmed at the deadline gets its
  log start offset re-read and recorded (the delete may have happened, or may yet happen on
  the deposed leader). So does one whose leader's connection was lost (LEADER_UNREACHABLE):
  a leader can apply a delete and die before it answers;
- before any partition is sent again, its topic's id is re-checked (``recheck``): a topic
  recreated or deleted since the plan is never cut on a later attempt either;
- anything else (OFFSET_OUT_OF_RANGE, POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED,
  UNKNOWN_TOPIC_OR_PARTITION, ...) is recorded and the rest goes on;
- a leader lookup (Metadata) that fails is retried until the deadline; then each partition
  still pending gets a failed outcome (METADATA_UNAVAILABLE or its last error): ``run`` never
  raises, so every partition's outcome reaches the audit.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from kafka.protocol.admin import DeleteRecordsRequest

from spark_purge._time import Backoff, Deadline
from spark_purge.errors import LeaderRequestError
from spark_purge.kafka.lineage import changed_topics
from spark_purge.kafka.model import DeleteOutcome, TopicPartitionKey
from spark_purge.kafka.offsets import OffsetReader
from spark_purge.kafka.wire import Wire, error_name, error_retriable, exc_name

log = logging.getLogger(__name__)

# Errors after which the partition goes to a (possibly new) leader again.
RETRY_ON_NEW_LEADER = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_LEADER",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "LEADER_UNREACHABLE",  # the transport could not reach the leader at all
        "NETWORK_EXCEPTION",
    }
)
TIMED_OUT = frozenset({"REQUEST_TIMED_OUT"})
# One attempt waits at most this share of the delete timeout (and at least MIN_ATTEMPT_MS): a
# leader that hangs leaves time to send again once its partitions have a new leader. A resend
# after a timeout needs MIN_ATTEMPT_MS left before the deadline.
ATTEMPTS_PER_TIMEOUT = 3
MIN_ATTEMPT_MS = 1_000


@dataclass(frozen=True)
class PartitionResult:
    """One partition's part of a DeleteRecords response."""

    error: Optional[str]  # broker error name; None on success
    low_watermark: int = -1
    retriable: bool = False
    message: Optional[str] = None


class DeleteTransport(Protocol):
    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        """Leader per partition (None: no leader now). Partitions unknown to the cluster are absent."""
        ...

    def send_delete_records(
        self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
    ) -> Mapping[TopicPartitionKey, PartitionResult]:
        """One DeleteRecords request to ``leader``; raises LeaderRequestError if it fails as a whole."""
        ...

    def log_start_offsets(self, tps: Collection[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]:
        """Current log start offsets (partitions that could not be read are absent)."""
        ...


@dataclass
class _State:
    requested: int
    leader: Optional[int] = None
    attempts: int = 0
    last_error: Optional[str] = None
    last_message: Optional[str] = None


class DeleteExecutor:
    """Runs one batch of cutoffs to completion (or the deadline) and returns one outcome each."""

    def __init__(
        self,
        transport: DeleteTransport,
        max_parallel: int = 16,
        backoff_ms: int = 100,
        max_retries: Optional[int] = None,  # per partition, on top of the first attempt; None: until the deadline
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        recheck: Optional[Callable[[Collection[str]], Mapping[str, tuple[str, str]]]] = None,
    ) -> None:
        """``recheck(topics)``: the topics among ``topics`` recreated or deleted since the plan,
        topic -> (``TOPIC_RECREATED`` / ``TOPIC_DELETED``, why); asked before every resend."""
        self._recheck = recheck
        self._transport = transport
        self._max_parallel = max_parallel
        self._backoff_ms = backoff_ms
        self._max_retries = max_retries
        self._clock = clock
        self._sleep = sleep

    def run(self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int) -> list[DeleteOutcome]:
        deadline = Deadline(timeout_ms / 1000, clock=self._clock)
        attempt_cap_ms = max(MIN_ATTEMPT_MS, timeout_ms // ATTEMPTS_PER_TIMEOUT)
        states = {(str(tp[0]), int(tp[1])): _State(requested=int(off)) for tp, off in cutoffs.items()}
        outcomes: dict[TopicPartitionKey, DeleteOutcome] = {}
        # Partitions an attempt of which got no answer (timed out, or the connection lost): that
        # attempt may have cut, now or later (a deposed leader applies it when it leads again).
        # Unless a later attempt is answered with success, their outcome is the log start offset
        # re-read at the end, under the error of that first unanswered attempt.
        unanswered: dict[TopicPartitionKey, str] = {}
        pending = set(states)
        refresh = False
        first = max(0.001, self._backoff_ms / 1000)
        backoff = Backoff(first=first, cap=max(first, 1.0))
        while pending:
            try:
                if refresh:  # a resend: never to a topic that is no longer the one planned for
                    pending -= self._skip_changed(pending, states, outcomes)
                    if not pending:
                        break
                leaders = self._transport.leaders(sorted(pending), refresh)
            except Exception as exc:  # metadata unreadable (a broker just died, cluster away)
                # Nothing was sent for these partitions in this round: retry the lookup until the
                # deadline, then give every pending partition its own failed outcome - never raise
                # and lose the outcomes of partitions already done.
                lookup = f"leader lookup failed: {type(exc).__name__}: {exc}"
                pause = backoff.next()
                if not deadline.allows(pause):
                    outcomes.update(self._give_up_at_deadline(pending, states, "METADATA_UNAVAILABLE", lookup))
                    break
                log.warning("DeleteRecords: %s; retrying", lookup)
                self._sleep(pause)
                refresh = True
                continue
            by_leader: dict[int, dict[TopicPartitionKey, int]] = {}
            retry: set[TopicPartitionKey] = set()
            again: set[TopicPartitionKey] = set()  # timed out in this round
            for tp in sorted(pending):
                st = states[tp]
                if tp not in leaders:
                    outcomes[tp] = self._final(tp, st, "UNKNOWN_TOPIC_OR_PARTITION", "not in cluster metadata", False)
                    continue
                st.leader = leaders[tp]
                if st.leader is None or st.leader < 0:
                    st.leader = None
                    st.last_error, st.last_message = "LEADER_NOT_AVAILABLE", "no leader in metadata"
                    retry.add(tp)
                    continue
                by_leader.setdefault(st.leader, {})[tp] = st.requested
            for leader, results in self._send_all(by_leader, min(deadline.remaining_ms(), attempt_cap_ms)):
                for tp in by_leader[leader]:
                    st = states[tp]
                    st.attempts += 1
                    if isinstance(results, LeaderRequestError):
                        if results.timed_out:
                            st.last_error, st.last_message = "REQUEST_TIMED_OUT", str(results)
                            again.add(tp)
                        else:
                            st.last_error, st.last_message = "LEADER_UNREACHABLE", str(results)
                            retry.add(tp)
                        unanswered.setdefault(tp, st.last_error)
                        continue
                    res = results.get(tp)
                    if res is None:
                        st.last_error, st.last_message = "UNKNOWN_SERVER_ERROR", "partition missing from the response"
                        outcomes[tp] = self._final(tp, st, st.last_error, st.last_message, True)
                    elif res.error is None:
                        outcomes[tp] = DeleteOutcome(
                            tp[0], tp[1], st.requested, st.leader, res.low_watermark, None, None, st.attempts
                        )
                    elif res.error in TIMED_OUT:
                        st.last_error, st.last_message = res.error, res.message
                        unanswered.setdefault(tp, res.error)
                        again.add(tp)
                    elif res.error in RETRY_ON_NEW_LEADER:
                        st.last_error, st.last_message = res.error, res.message
                        retry.add(tp)
                    else:
                        outcomes[tp] = self._final(tp, st, res.error, res.message, res.retriable)
            pending = retry | again
            if self._max_retries is not None:
                for tp in sorted(tp for tp in pending if states[tp].attempts > self._max_retries):
                    st = states[tp]
                    msg = f"{st.last_message or st.last_error}; gave up after {st.attempts} attempt(s) (retries={self._max_retries})"
                    outcomes[tp] = self._final(tp, st, st.last_error or "LEADER_NOT_AVAILABLE", msg, True)
                    pending = pending - {tp}
            if pending:
                pause = backoff.next()
                if not deadline.allows(pause):
                    outcomes.update(self._give_up_at_deadline(pending, states, "REQUEST_TIMED_OUT"))
                    break
                # A resend after a timeout needs room for an attempt of its own.
                late = {tp for tp in pending & again if not deadline.allows(pause + MIN_ATTEMPT_MS / 1000)}
                pending -= late
                if not pending:
                    break
                log.info("DeleteRecords: %d partition(s) need a new leader or timed out; refreshing metadata", len(pending))
                self._sleep(pause)
                refresh = True
        unconfirmed = {tp: e for tp, e in unanswered.items() if tp not in outcomes or not (outcomes[tp].ok or outcomes[tp].skipped)}
        if unconfirmed:
            outcomes.update(self._reread(unconfirmed, states))
        return [outcomes[tp] for tp in states]  # input order

    def _skip_changed(
        self, pending: set[TopicPartitionKey], states: Mapping[TopicPartitionKey, _State], outcomes: dict[TopicPartitionKey, DeleteOutcome]
    ) -> set[TopicPartitionKey]:
        """Partitions of ``pending`` whose topic changed identity since the plan (``recheck``),
        each given its skipped outcome; raises if the check cannot be made."""
        if self._recheck is None:
            return set()
        changed = self._recheck(sorted({tp[0] for tp in pending}))
        gone = {tp for tp in pending if tp[0] in changed}
        for tp in sorted(gone):
            st = states[tp]
            error, why = changed[tp[0]]
            log.warning("DeleteRecords on %s-%d not sent again: %s", tp[0], tp[1], why)
            outcomes[tp] = DeleteOutcome(tp[0], tp[1], st.requested, st.leader, None, error, why, st.attempts, False)
        return gone

    # ---- internals --------------------------------------------------------------------------
    def _send_all(
        self, by_leader: Mapping[int, Mapping[TopicPartitionKey, int]], timeout_ms: int
    ) -> list[tuple[int, Mapping[TopicPartitionKey, PartitionResult] | LeaderRequestError]]:
        def one(leader: int) -> Mapping[TopicPartitionKey, PartitionResult] | LeaderRequestError:
            try:
                return self._transport.send_delete_records(leader, by_leader[leader], timeout_ms)
            except LeaderRequestError as exc:
                return exc

        leaders = sorted(by_leader)
        if len(leaders) <= 1:
            return [(leader, one(leader)) for leader in leaders]
        with ThreadPoolExecutor(max_workers=min(self._max_parallel, len(leaders))) as pool:
            return list(zip(leaders, pool.map(one, leaders)))

    def _give_up_at_deadline(
        self,
        pending: Collection[TopicPartitionKey],
        states: Mapping[TopicPartitionKey, _State],
        default_error: str,
        cause: Optional[str] = None,
    ) -> dict[TopicPartitionKey, DeleteOutcome]:
        """A failed outcome for each partition still pending when the deadline comes: its last
        error (else ``default_error``), what it last heard, and ``cause`` of this final round."""
        out = {}
        for tp in sorted(pending):
            st = states[tp]
            reasons = [r for r in (st.last_message or st.last_error, cause) if r]
            msg = "; ".join(reasons + [f"gave up after {st.attempts} attempt(s) at the deadline"])
            out[tp] = self._final(tp, st, st.last_error or default_error, msg, True)
        return out

    @staticmethod
    def _final(tp: TopicPartitionKey, st: _State, error: str, message: Optional[str], retriable: bool) -> DeleteOutcome:
        return DeleteOutcome(tp[0], tp[1], st.requested, st.leader, None, error, message, st.attempts, retriable)

    def _reread(self, tps: Mapping[TopicPartitionKey, str], states: Mapping[TopicPartitionKey, _State]) -> dict[TopicPartitionKey, DeleteOutcome]:
        """The outcome of each partition of ``tps`` (-> the error of its first unanswered
        attempt) that no attempt confirmed: its log start offset as Kafka reports it now."""
        try:
            starts = dict(self._transport.log_start_offsets(sorted(tps)))
            reread_error = None
        except Exception as exc:  # the truth is unknown: say so, keep going
            starts, reread_error = {}, f"{type(exc).__name__}: {exc}"
        out = {}
        for tp in tps:
            st = states[tp]
            start = starts.get(tp)
            if start is None:
                detail = f"log start offset could not be re-read ({reread_error or 'no answer'})"
            else:
                reached = "reached" if start >= st.requested else "not reached"
                detail = f"log start offset re-read: {start} (requested {st.requested}: {reached})"
            msg = f"{st.last_message or 'no answer'}; {detail}; {st.attempts} attempt(s)"
            out[tp] = DeleteOutcome(tp[0], tp[1], st.requested, st.leader, start, tps[tp], msg, st.attempts, True)
        return out


# ---- the transport over kafka-python ------------------------------------------------------------

# The broker waits up to timeout_ms for followers; the wire gets this much more.
_WIRE_GRACE_MS = 5_000


def send_delete_records(
    wire: Wire, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
) -> dict[TopicPartitionKey, PartitionResult]:
    """One DeleteRecords request to ``leader``; ``LeaderRequestError`` if it fails as a whole."""
    _Topic = DeleteRecordsRequest.DeleteRecordsTopic
    _Partition = _Topic.DeleteRecordsPartition
    per_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), offset in sorted(offsets.items()):
        per_topic[topic].append(_Partition(partition_index=partition, offset=int(offset)))
    request = DeleteRecordsRequest(
        topics=[_Topic(name=t, partitions=ps) for t, ps in per_topic.items()], timeout_ms=int(timeout_ms)
    )

    async def send() -> Any:
        return await wire.send(request, node_id=leader, timeout_ms=int(timeout_ms) + _WIRE_GRACE_MS)

    try:
        response = wire.run_raw(send)
    except Exception as exc:
        name = exc_name(exc)
        raise LeaderRequestError(f"DeleteRecords to leader {leader} failed: {name}", timed_out=name == "REQUEST_TIMED_OUT") from None
    out: dict[TopicPartitionKey, PartitionResult] = {}
    for t in response.topics:
        for p in t.partitions:
            err = error_name(p.error_code)
            message = None
            if err is not None:
                message = f"DeleteRecords on {t.name}-{p.partition_index} at offset {offsets.get((t.name, p.partition_index))}: {err}"
                if err == "TOPIC_AUTHORIZATION_FAILED":
                    message = f"Delete on topic {t.name!r} denied (TOPIC_AUTHORIZATION_FAILED)"
            out[(t.name, p.partition_index)] = PartitionResult(err, int(p.low_watermark), error_retriable(p.error_code), message)
    return out


class WireDeleteTransport:
    """``DeleteTransport`` over a ``Wire`` (blocking calls, safe from several threads)."""

    def __init__(self, offsets: OffsetReader) -> None:
        self._offsets = offsets
        self._wire = offsets.wire

    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        return self._wire.run(self._offsets.leaders_for, list(tps), refresh)

    def send_delete_records(
        self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
    ) -> Mapping[TopicPartitionKey, PartitionResult]:
        return send_delete_records(self._wire, leader, offsets, timeout_ms)

    def log_start_offsets(self, tps: Collection[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]:
        return self._wire.run(self._offsets.log_start_offsets, tps)


def delete_records(
    offsets: OffsetReader,
    cutoffs: Mapping[TopicPartitionKey, int],
    timeout_ms: int,
    topic_ids: Optional[Mapping[str, str]] = None,
) -> list[DeleteOutcome]:
    """Run ``cutoffs`` through a ``DeleteExecutor`` with the connection's retries and backoff.

    ``topic_ids``: topic -> the id the cutoffs were planned for. Right before sending, one
    Metadata request re-reads them; partitions of a topic recreated or deleted since get a
    ``TOPIC_RECREATED`` / ``TOPIC_DELETED`` outcome and are never sent (``lineage.changed_topics``);
    the ids are checked again before any partition is sent a second time.
    """
    settings = offsets.wire.settings
    deadline = Deadline(timeout_ms / 1000)
    changed = _recheck_topic_ids(offsets, dict(topic_ids or {}), deadline)
    if isinstance(changed, str):  # identity unknown: nothing is sent, every partition says why
        return [DeleteOutcome(t, p, int(off), None, None, "METADATA_UNAVAILABLE", changed, 0, True) for (t, p), off in cutoffs.items()]
    skipped = {
        tp: DeleteOutcome(tp[0], tp[1], int(off), None, None, *changed[tp[0]]) for tp, off in cutoffs.items() if tp[0] in changed
    }
    for (t, p), outcome in sorted(skipped.items()):
        log.warning("DeleteRecords on %s-%d skipped: %s", t, p, outcome.error_message)
    timeout_ms = max(1, deadline.remaining_ms())
    expected = {t: i for t, i in (topic_ids or {}).items() if t not in changed}

    def recheck(topics: Collection[str]) -> Mapping[str, tuple[str, str]]:
        return offsets.wire.run(changed_topics, offsets, {t: expected[t] for t in topics if t in expected})

    executor = DeleteExecutor(
        WireDeleteTransport(offsets), backoff_ms=settings.retry_backoff_ms, max_retries=settings.retries, recheck=recheck
    )
    done = {(o.topic, o.partition): o for o in executor.run({tp: o for tp, o in cutoffs.items() if tp not in skipped}, timeout_ms)}
    return [skipped.get(tp) or done[tp] for tp in cutoffs]


def _recheck_topic_ids(
    offsets: OffsetReader, topic_ids: Mapping[str, str], deadline: Deadline
) -> dict[str, tuple[str, str]] | str:
    """``lineage.changed_topics``, retried (connection backoff) until ``deadline``; the last
    error, as a message, when it never answered (then nothing may be sent: identity unknown)."""
    first = max(0.001, offsets.wire.settings.retry_backoff_ms / 1000)
    backoff = Backoff(first=first, cap=max(first, 1.0))
    while True:
        try:
            return offsets.wire.run(changed_topics, offsets, topic_ids)
        except Exception as exc:  # metadata unreadable (a broker just died, cluster away)
            pause = backoff.next()
            reason = f"topic ids could not be re-checked before DeleteRecords: {type(exc).__name__}: {exc}"
            if not deadline.allows(pause):
                return reason + "; nothing sent"
            log.warning("%s; retrying", reason)
            time.sleep(pause)


__all__ = [
    "DeleteExecutor",
    "DeleteTransport",
    "LeaderRequestError",
    "PartitionResult",
    "WireDeleteTransport",
    "delete_records",
    "send_delete_records",
]
