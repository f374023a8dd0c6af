"""The terminal spinner: drawn on a pseudo-terminal, silent on pipes and files."""
from __future__ import annotations

import io
import os
import pty
import select
import time

from spark_purge.progress import FRAMES, progress


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the slave side closed
            break
        if not chunk:
            break
        out += chunk
    return out


def test_a_terminal_sees_the_label_spinner_and_seconds_then_a_cleared_line() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8", closefd=False) as tty:
            with progress("reading the cluster snapshot", stream=tty, interval=0.05, delay=0.0):
                time.sleep(0.3)
            seen = _drain(master).decode("utf-8")
    finally:
        os.close(slave)
        os.close(master)
    assert f"{FRAMES[0]} reading the cluster snapshot… 0s" in seen
    assert f"{FRAMES[1]} reading the cluster snapshot…" in seen  # redrawn in place
    assert seen.endswith("\r\x1b[2K")  # the line is cleared for the step's own output


def test_a_quick_step_draws_nothing_even_on_a_terminal() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8", closefd=False) as tty:
            with progress("starting Spark", stream=tty, delay=5.0):
                pass
            assert _drain(master) == b""
    finally:
        os.close(slave)
        os.close(master)


def test_pipes_and_files_get_nothing() -> None:
    captured = io.StringIO()
    with progress("starting Spark", stream=captured, interval=0.01, delay=0.0):
        time.sleep(0.05)
    assert captured.getvalue() == ""
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "w", closefd=False) as pipe, progress("starting Spark", stream=pipe, interval=0.01, delay=0.0):
            time.sleep(0.05)
        assert _drain(read_end) == b""
    finally:
        os.close(read_end)
        os.close(write_end)
