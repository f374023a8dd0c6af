"""cProfile over every thread a call starts, for the diagnoses (``snapshot_parts.py``: the Kafka
client decodes on its IO thread; ``match_parts.py --profile``: the match's ``in_threads``)."""
from __future__ import annotations

import cProfile
import io
import pstats
import threading
from collections.abc import Callable
from typing import Any


def every_thread(call: Callable[[], Any]) -> tuple[Any, list[cProfile.Profile]]:
    """``call()``'s result and its profiles: this thread's first, then one per thread started
    meanwhile (``Thread.run`` wrapped while it runs)."""
    profiles = [cProfile.Profile()]
    plain_run = threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.runcall(plain_run, thread)

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    try:
        result = profiles[0].runcall(call)
    finally:
        threading.Thread.run = plain_run  # type: ignore[method-assign]
    return result, profiles


def top(profiles: list[cProfile.Profile], n: int) -> str:
    """The ``n`` functions of ``profiles`` (merged) with the most own time."""
    out = io.StringIO()
    stats = pstats.Stats(profiles[0], stream=out)
    for other in profiles[1:]:
        stats.add(other)
    stats.sort_stats("tottime").print_stats(n)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip() and "Ordered by" not in line)
