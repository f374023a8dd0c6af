"""A one-line spinner on stderr for long steps (the first Spark start, a large snapshot), shown
only when stderr is a terminal: a pipe, a log file or a scheduler's capture gets nothing.

    with progress("starting Spark"):
        spark = get_spark(...)

On a terminal: ``⠋ starting Spark… 3s`` redrawn in place every ``interval`` seconds, then the
line is cleared (the step's own output follows). Nothing is drawn for steps faster than
``delay`` seconds, so quick commands stay free of flicker.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional, TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_CLEAR = "\r\x1b[2K"  # carriage return, erase the whole line


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def progress(label: str, stream: Optional[TextIO] = None, interval: float = 0.2, delay: float = 0.5) -> Iterator[None]:
    """Show ``label`` with a spinner and the seconds elapsed while the block runs (terminal only)."""
    out = stream if stream is not None else sys.stderr
    if not is_terminal(out):
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    drawn = threading.Event()

    def spin() -> None:
        frame = 0
        if done.wait(delay):
            return
        while not done.is_set():
            out.write(f"{_CLEAR}{FRAMES[frame % len(FRAMES)]} {label}… {int(time.monotonic() - started)}s")
            out.flush()
            drawn.set()
            frame += 1
            done.wait(interval)

    spinner = threading.Thread(target=spin, name="spark-purge-progress", daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
        if drawn.is_set():
            out.write(_CLEAR)
            out.flush()


__all__ = ["FRAMES", "is_terminal", "progress"]
