"""``pipeline.remembering``: a batch's positions are remembered beside its runner, and the batch
never leaves before that is done (no Spark needed: without a Py4J gateway the thread is a plain
one)."""
from __future__ import annotations

import logging
import threading

import pytest

from spark_purge.pipeline import remembering

WAIT_S = 30  # a bound on each wait, so that a regression fails instead of hanging


def test_remember_runs_beside_the_body_and_is_done_when_it_ends() -> None:
    started, may_end = threading.Event(), threading.Event()
    done: list[str] = []

    def remember() -> None:
        started.set()
        assert may_end.wait(WAIT_S)
        done.append("remembered")

    with remembering(remember, "batch 7"):
        # The body sees remember under way: they run at the same time.
        assert started.wait(WAIT_S), "remember did not start while the body ran"
        assert done == []
        may_end.set()
    assert done == ["remembered"]  # waited for, not left running


def test_a_failed_remember_fails_the_batch_after_its_body() -> None:
    body_done: list[bool] = []

    def remember() -> None:
        raise OSError("progress store unwritable")

    with pytest.raises(OSError, match="progress store unwritable"):
        with remembering(remember, "batch 8"):
            body_done.append(True)
    assert body_done == [True]


def test_the_bodys_error_wins_and_remember_is_still_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    finished: list[bool] = []

    def remember() -> None:
        assert release.wait(WAIT_S)
        finished.append(True)
        raise OSError("store down too")

    caplog.set_level(logging.WARNING, logger="spark_purge.pipeline")
    with pytest.raises(RuntimeError, match="fenced"):
        with remembering(remember, "batch 9"):
            release.set()
            raise RuntimeError("fenced")
    assert finished == [True]
    assert "batch 9: remembering its positions failed too: store down too" in caplog.text
