from __future__ import annotations

import pytest

from spark_purge._time import Backoff, Deadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_deadline_counts_down_on_its_clock() -> None:
    clock = Clock()
    d = Deadline(2.0, clock)
    assert d.remaining() == 2.0 and d.remaining_ms() == 2000 and not d.expired()
    assert d.allows(1.5) and not d.allows(2.0)
    clock.now += 3
    assert d.expired() and d.remaining() == 0.0 and d.remaining_ms() == 1


def test_backoff_doubles_to_its_cap_and_clips_to_the_deadline() -> None:
    b = Backoff(0.1, cap=0.5)
    assert [b.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    b.reset()
    clock = Clock()
    d = Deadline(0.05, clock)
    assert b.within(d) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="first <= cap"):
        Backoff(1.0, cap=0.5)
