"""Purger lease logic (acquire, wait for expiry, takeover, fencing, release) on an in-memory
store that keeps Delta's idempotent-write rule: a write whose txnVersion is not above the
latest recorded for its app id is skipped. The Delta table itself: tests/integration/test_lease.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import Row

from spark_purge.errors import FencedError
from spark_purge.lease import (
    KEEP_GENERATIONS,
    FencedAudit,
    LeaseState,
    PurgerLease,
    lease_app_id,
    release_current,
    superseded,
    txn_version,
)

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc)


@dataclass
class MemoryStore:
    """Rows per purger; Delta's txn rule: a version not above the latest is skipped."""

    path: str = "memory"
    rows: list[LeaseState] = field(default_factory=list)

    def current(self, purger_id: str) -> LeaseState | None:
        mine = [r for r in self.rows if r.purger_id == purger_id]
        return max(mine, key=lambda r: r.version) if mine else None

    def newest_of(self, purger_id: str, generation: int) -> LeaseState | None:
        mine = [r for r in self.rows if r.purger_id == purger_id and r.generation == generation]
        return max(mine, key=lambda r: r.version) if mine else None

    due: bool = False  # set by a test: the next keep or acquisition tidies
    tidied: list[LeaseState] = field(default_factory=list)  # the newest row of each tidy

    def append(self, state: LeaseState) -> None:
        latest = self.current(state.purger_id)
        if latest is None or state.version > latest.version:
            self.rows.append(state)

    def tidy_due(self) -> bool:
        return self.due

    def tidy(self, newest: LeaseState) -> None:
        self.due = False
        self.tidied.append(newest)
        self.rows = [r for r in self.rows if not superseded(r, newest)]


@dataclass
class Clock:
    now: datetime = T0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


def lease(store: MemoryStore, clock: Clock, run_id: str, ttl_ms: int = 5000, wait_ms: int = 60_000) -> PurgerLease:
    return PurgerLease(store, "p", run_id, "fp", ttl_ms, wait_ms, holder=f"host pid={run_id}", clock=clock, sleep=clock.sleep)


def test_acquire_renew_release_then_the_next_job_takes_over_at_once() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a")
    first = a.acquire()
    assert (first.generation, first.event, first.expires_at, first.version) == (1, "acquired", T0 + timedelta(seconds=5), 1 << 32)
    clock.now += timedelta(seconds=3)
    assert a.renew("test").expires_at == T0 + timedelta(seconds=8)
    a.release()
    assert (store.current("p").event, a.held) == ("released", False)  # type: ignore[union-attr]
    b = lease(store, clock, "b")
    assert (b.acquire().generation, b.taken_over, clock.slept) == (2, None, [])  # no wait after a release


def test_a_live_lease_is_waited_for_then_taken_over_and_its_holder_is_fenced() -> None:
    store, clock = MemoryStore(), Clock()
    a, b = lease(store, clock, "a"), lease(store, clock, "b")
    a.acquire()
    taken = b.acquire()
    assert (taken.generation, taken.event) == (2, "takeover")
    assert sum(clock.slept) == pytest.approx(5.05)  # until a's expiry, not a poll interval more
    assert b.taken_over is not None and (b.taken_over.generation, b.taken_over.run_id) == (1, "a")
    with pytest.raises(FencedError, match=r"purger_id p: this job's generation 1 \(run a\) is fenced right before DeleteRecords: now generation 2 held by host pid=b run b"):
        a.renew("right before DeleteRecords")
    assert store.current("p") == taken  # a's renewal was refused, not recorded
    with pytest.raises(FencedError):
        a.audit_txn()  # nothing more is audited either
    a.release()  # a fenced job's release changes nothing
    assert store.current("p") == taken


def test_keep_renews_only_once_a_third_of_the_ttl_has_passed() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a", ttl_ms=6000)
    a.acquire()
    clock.now += timedelta(seconds=1.9)
    assert (a.keep("batch 1"), len(store.rows)) == (1, 1)  # no write within ttl/3 of the acquisition
    clock.now += timedelta(seconds=0.1)
    assert (a.keep("batch 2"), len(store.rows)) == (1, 2)  # 2 s = ttl/3: renewed
    assert store.current("p").expires_at == T0 + timedelta(seconds=8)  # type: ignore[union-attr]
    clock.now += timedelta(seconds=1)
    assert (a.keep("batch 3"), len(store.rows)) == (1, 2)  # counted from the renewal
    b = lease(store, clock, "b", ttl_ms=6000)
    clock.now += timedelta(seconds=6)  # a's lease expired: b takes over
    b.acquire()
    with pytest.raises(FencedError, match=r"this job's generation 1 .* is fenced batch 4"):
        a.keep("batch 4")  # more than ttl/3 since a's renewal: renews, refused, fenced


@dataclass
class RacingStore(MemoryStore):
    """A renewal of the holder's that lands between a taker's read and its write."""

    in_flight: LeaseState | None = None

    def append(self, state: LeaseState) -> None:
        if state.event == "takeover" and self.in_flight is not None:
            super().append(self.in_flight)
            self.in_flight = None
        super().append(state)


def test_a_takeover_outlasts_a_renewal_that_landed_after_it_read_the_lease_expired() -> None:
    store, clock = RacingStore(), Clock()
    a = lease(store, clock, "a")
    a.acquire()
    clock.now += timedelta(seconds=5.1)  # a expired at T0+5; b reads it so ...
    b = lease(store, clock, "b")
    store.in_flight = a._row(1, "renewed", 1)  # ... while a's late renewal (until T0+10.1) lands first
    taken = b.acquire()
    renewal = store.newest_of("p", 1)
    assert renewal is not None and renewal.event == "renewed" and renewal.expires_at == T0 + timedelta(seconds=10.1)
    assert clock.now >= renewal.expires_at and b.waited_s == pytest.approx(5.0)  # b acts only after it
    assert taken.generation == 2 and store.current("p").run_id == "b"  # type: ignore[union-attr]
    with pytest.raises(FencedError, match="is fenced"):
        a.check("right before DeleteRecords")  # and a, reading the table again, is fenced


def test_a_takeover_with_no_renewal_in_between_does_not_wait_more() -> None:
    store, clock = MemoryStore(), Clock()
    lease(store, clock, "a").acquire()
    clock.now += timedelta(seconds=6)
    b = lease(store, clock, "b")
    assert (b.acquire().event, b.waited_s, clock.slept) == ("takeover", 0.0, [])


def test_a_due_tidy_runs_at_a_batch_start_or_an_acquisition_never_in_confirm_and_keeps_the_newest_rows() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a", ttl_ms=6000)
    a.acquire()
    for _ in range(3):
        clock.now += timedelta(seconds=2)
        a.keep("batch")  # a renewal each time
    store.due = True
    clock.now += timedelta(seconds=2)
    a.confirm("right before DeleteRecords")  # a renewal; the tidy waits for the next batch
    assert (store.tidied, len(store.rows)) == ([], 5)
    a.keep("batch 5")  # within ttl/3: no renewal, but the tidy runs, below a's confirmed newest row
    newest = store.current("p")
    assert store.tidied == [newest]
    assert [(r.event, r.version) for r in store.rows] == [("acquired", txn_version(1, 0)), ("renewed", txn_version(1, 4))]
    assert a.confirm("right before DeleteRecords") == newest  # still a's, not fenced
    # Generations come and go: a tidy at an acquisition keeps the newest KEEP_GENERATIONS
    # generations' acquisitions and releases, and nothing newer than its own row.
    a.release()
    for run in range(KEEP_GENERATIONS + 3):
        b = lease(store, clock, f"b{run}", ttl_ms=6000)
        b.acquire()
        clock.now += timedelta(seconds=2)
        b.keep("batch")
        b.release()
    store.due = True
    last = lease(store, clock, "last", ttl_ms=6000)
    won = last.acquire()
    assert store.tidied[-1] == won
    generations = sorted({r.generation for r in store.rows})
    assert generations == list(range(won.generation - KEEP_GENERATIONS + 1, won.generation + 1))
    assert not any(r.event == "renewed" for r in store.rows)  # every renewal is older than the acquisition
    assert store.current("p") == won
    # superseded() never takes the newest row, nor a newer one written while the tidy ran.
    newer = LeaseState("p", won.generation + 1, "x", "h", "fp", "takeover", clock.now, clock.now, txn_version(won.generation + 1, 0))
    assert not superseded(won, won) and not superseded(newer, won)


def test_confirm_renews_after_a_third_of_the_ttl_else_reads_and_is_fenced_by_a_takeover_either_way() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a", ttl_ms=6000)
    a.acquire()
    clock.now += timedelta(seconds=1.9)
    state = a.confirm("right before DeleteRecords")
    assert (state.generation, state.run_id, len(store.rows)) == (1, "a", 1)  # a read: no write within ttl/3
    clock.now += timedelta(seconds=0.1)
    assert (a.confirm("right before DeleteRecords").event, len(store.rows)) == ("renewed", 2)  # 2 s = ttl/3: renewed
    # A takeover written behind a's back (an operator's release, then b) within ttl/3 of a's
    # renewal: the read finds it, a is fenced and sends nothing.
    release_current(store, "p", clock=lambda: clock.now)
    b = lease(store, clock, "b", ttl_ms=6000)
    b.acquire()
    clock.now += timedelta(seconds=0.5)
    with pytest.raises(FencedError, match=r"this job's generation 1 \(run a\) is fenced right before DeleteRecords: now generation 2"):
        a.confirm("right before DeleteRecords")


def test_waiting_longer_than_lease_wait_fails_naming_the_holder() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a", ttl_ms=60_000)
    a.acquire()
    with pytest.raises(FencedError, match=r"lease.purger_id p: generation 1 held by host pid=a run a .* still held after waiting lease.wait \(2000 ms\)"):
        lease(store, clock, "b", wait_ms=2000).acquire()
    assert sum(clock.slept) == pytest.approx(2.0)


def test_an_operator_release_fences_the_holder_and_frees_the_lease() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a", ttl_ms=60_000)
    a.acquire()
    released = release_current(store, "p", clock)
    assert released is not None and released.run_id == "a"
    assert release_current(store, "p", clock) is None  # nothing live any more
    with pytest.raises(FencedError, match=r"now generation 1 held by .* released"):
        a.renew("at the start of batch 3")
    b = lease(store, clock, "b")
    assert (b.acquire().generation, clock.slept) == (2, [])


def test_every_newer_generation_write_sorts_above_every_older_one() -> None:
    assert txn_version(2, 0) > txn_version(1, (1 << 32) - 1) > txn_version(1, 0)
    assert lease_app_id("p") == "lease:p"


@dataclass
class Sink:
    writes: list[tuple[str, int, tuple[str, int] | None]] = field(default_factory=list)

    def ensure_table(self) -> None: ...

    def write(self, rows: list[Row], kind: str, batch_id: int, txn: tuple[str, int] | None = None) -> bool:
        self.writes.append((kind, batch_id, txn))
        return True


def test_fenced_audit_writes_under_the_lease_txn_and_checks_after_outcomes() -> None:
    store, clock = MemoryStore(), Clock()
    a = lease(store, clock, "a")
    a.acquire()
    sink = Sink()
    audit = FencedAudit(sink, a)  # type: ignore[arg-type]
    audit.write([], "intent", 4)
    audit.write([], "outcome", 4)
    assert sink.writes == [("intent", 4, ("lease:p", txn_version(1, 1))), ("outcome", 4, ("lease:p", txn_version(1, 2)))]
    clock.now += timedelta(seconds=10)
    lease(store, clock, "b").acquire()  # a expired: taken over
    with pytest.raises(FencedError, match="after its audit outcome write for batch 5"):
        audit.write([], "outcome", 5)  # Delta would skip it (version below generation 2's)
    assert sink.writes[-1] == ("outcome", 5, ("lease:p", txn_version(1, 3)))
