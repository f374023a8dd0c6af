"""``pipeline.beside``: the progress store's record runs in a thread beside the batch's runner
(issue 12). No JVM: without Spark's pinned-thread gateway ``InheritableThread`` is a plain thread."""
from __future__ import annotations

import logging
import threading

import pytest

from spark_purge.pipeline import beside


def test_the_work_runs_while_the_block_runs_and_the_block_waits_for_it() -> None:
    started = threading.Event()
    release = threading.Event()
    done: list[str] = []

    def work() -> None:
        started.set()
        assert release.wait(10), "the block never let the work finish"
        done.append("work")

    with beside(work, "test-beside"):
        # The work started before the block ended: they run at the same time.
        assert started.wait(10)
        assert done == []
        release.set()
    assert done == ["work"]  # the block's end waited for it


def test_an_error_of_the_work_is_raised_when_the_block_ends() -> None:
    ran: list[str] = []

    def work() -> None:
        raise ValueError("record failed")

    with pytest.raises(ValueError, match="record failed"), beside(work, "test-beside"):
        ran.append("block")
    assert ran == ["block"]


def test_the_block_s_own_error_wins_and_the_work_s_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    finished = threading.Event()

    def work() -> None:
        try:
            raise ValueError("record failed")
        finally:
            finished.set()

    with (
        caplog.at_level(logging.WARNING, logger="spark_purge.pipeline"),
        pytest.raises(RuntimeError, match="deletes failed"),
        beside(work, "test-beside"),
    ):
        raise RuntimeError("deletes failed")
    assert finished.is_set()  # waited for before the block's error went on
    assert any("test-beside failed beside an error of its own: record failed" in r.getMessage() for r in caplog.records)
