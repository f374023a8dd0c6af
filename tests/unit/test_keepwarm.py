"""``keepwarm.IdleKeeper`` without Spark: a thread that calls its touch only while no batch runs,
once every period of idleness, survives a failing touch and stops when told. (The real touch
on a real continuous query: ``tests/integration/test_pipeline.py``.)"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from spark_purge.keepwarm import IdleKeeper


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


class Batches:
    """A pipeline's ``idle_since``: None while a batch runs, else when the last one ended."""

    def __init__(self) -> None:
        self.since: float | None = time.monotonic()
        self.touched_while_busy = 0
        self.touches: list[float] = []

    def begin(self) -> None:
        self.since = None

    def end(self) -> None:
        self.since = time.monotonic()

    def touch(self) -> None:
        if self.since is None:
            self.touched_while_busy += 1
        self.touches.append(time.monotonic())


def test_it_touches_once_a_period_while_idle_and_never_while_a_batch_runs() -> None:
    batches = Batches()
    keeper = IdleKeeper(0.05, lambda: batches.since, batches.touch).start()
    try:
        wait_for(lambda: len(batches.touches) >= 3)
        batches.begin()
        during = len(batches.touches)
        time.sleep(0.3)  # six periods of a batch: no touch may come
        assert len(batches.touches) - during <= 1  # one already under way when the batch began, at most
        settled = len(batches.touches)
        time.sleep(0.2)
        assert len(batches.touches) == settled
        batches.end()
        wait_for(lambda: len(batches.touches) > settled)
    finally:
        keeper.stop()
    assert batches.touched_while_busy <= 1
    gaps = [b - a for a, b in zip(batches.touches, batches.touches[1:3])]
    assert all(gap >= 0.045 for gap in gaps), gaps  # once a period, not in a loop
    assert keeper.touches == len(batches.touches)


def test_the_first_touch_waits_a_whole_period_after_the_last_batch() -> None:
    batches = Batches()
    keeper = IdleKeeper(10.0, lambda: batches.since, batches.touch)
    now = time.monotonic()
    keeper._last = now - 100.0  # its own last touch long ago
    batches.since = now - 4.0
    assert keeper.due_in(now) == pytest.approx(6.0)
    batches.since = now - 30.0  # long idle: due now
    assert keeper.due_in(now) == 0
    keeper._last = now - 1.0  # but it touched a second ago: a whole period after that
    assert keeper.due_in(now) == pytest.approx(9.0)
    batches.begin()
    assert keeper.due_in(now) is None


def test_a_failing_touch_is_logged_and_the_keeper_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def touch() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the session is stopping")

    caplog.set_level("DEBUG", logger="spark_purge.keepwarm")
    keeper = IdleKeeper(0.02, lambda: 0.0, touch)  # idle since long ago
    keeper.start()
    try:
        wait_for(lambda: len(calls) >= 2)
    finally:
        keeper.stop()
    assert keeper.touches == len(calls) - 1  # the failed one is not counted
    assert "the session is stopping" in caplog.text


def test_stop_ends_the_thread_and_no_touch_comes_after() -> None:
    batches = Batches()
    keeper = IdleKeeper(0.02, lambda: batches.since, batches.touch).start()
    wait_for(lambda: len(batches.touches) >= 1)
    keeper.stop()
    assert not any(t.name == "spark-purge-keep-warm" and t.is_alive() for t in threading.enumerate())
    stopped = len(batches.touches)
    time.sleep(0.1)
    assert len(batches.touches) == stopped


def test_a_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period > 0"):
        IdleKeeper(0, time.monotonic, lambda: None)


def test_the_keeper_ends_when_its_query_is_no_longer_alive() -> None:
    batches = Batches()
    active = [True]
    keeper = IdleKeeper(0.02, lambda: batches.since, batches.touch, alive=lambda: active[0]).start()
    wait_for(lambda: len(batches.touches) >= 1)
    active[0] = False
    wait_for(lambda: not keeper._thread.is_alive())
    ended = len(batches.touches)
    time.sleep(0.1)
    assert len(batches.touches) == ended
    keeper.stop()  # after the thread ended on its own: a no-op
