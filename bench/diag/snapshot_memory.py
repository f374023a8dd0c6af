"""Where the data source's read-planning worker's memory goes while it takes a snapshot.

    ./dev.sh py bench/diag/snapshot_memory.py [--partitions 10000] [--groups 10000] [--repeat 3]

Builds the cycle bench's setup on one local KRaft node (``cycle_bench.build_topics`` and
``commit_all``: topics of 50 partitions, group *i* committing on every partition of topic *i*
mod #topics), then, in a fresh Python process with the data source's modules imported (as the
worker that runs ``partitions()`` has them), ``--repeat`` times: ``source.take_snapshot`` and
``source_arrow.plan_chunks``, as ``KafkaStateReader.partitions`` runs them. Prints the process's
resident size (VmRSS, MB) and its peak (VmHWM, reset before each step through
``/proc/self/clear_refs``) after each step, and at the entry and exit of the snapshot's stages:
the group reads' answers (``Wire.gather``: the decoded OffsetFetch answers), their parsing into
per-group commits, ``assemble_groups`` (the snapshot's commit rows) and ``_commit_columns``.
Not a test: a diagnosis (docs/performance.md, "Memory").
"""
from __future__ import annotations

import argparse
import functools
import gc
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


# Not cycle_bench's: the measured process imports only what the worker has.
def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def measure(config_file: str, repeat: int) -> dict[str, Any]:
    """The fresh process's side: each step's (VmRSS, VmHWM) and the stages' marks."""
    from spark_purge import source, source_arrow
    from spark_purge.cli import load_config
    from spark_purge.kafka import groups, snapshot, wire
    from spark_purge.pipeline import source_options

    marks: list[tuple[str, int, int]] = []

    def mark(label: str) -> None:
        marks.append((label, round(_status_mb("VmRSS")), round(_status_mb("VmHWM"))))

    def traced(owner: Any, name: str) -> None:
        fn = getattr(owner, name)
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                mark(name + " >")
                out = await fn(*args, **kwargs)
                mark(name + " <")
                return out
        else:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                mark(name + " >")
                out = fn(*args, **kwargs)
                mark(name + " <")
                return out
        setattr(owner, name, wrapper)

    for owner, name in ((wire.Wire, "gather"), (groups, "parse_answer"), (groups, "assemble_groups"), (snapshot, "_commit_columns")):
        traced(owner, name)
    options = source.parse_options({**source_options(load_config(config_file)), "view": "snapshot"})
    gc.collect()
    out: dict[str, Any] = {"imported": round(_status_mb("VmRSS"))}
    for i in range(repeat):
        _reset_peak()
        t0 = time.monotonic()
        snap = source.take_snapshot(options)
        out[f"{i}: take_snapshot"] = (round(_status_mb("VmRSS")), round(_status_mb("VmHWM")), round(time.monotonic() - t0, 2))
        # a parse_answer per answer: only its last exit, to keep the line short
        out[f"{i}: stages"] = [m for j, m in enumerate(marks) if m[0] != "parse_answer >"
                               and not (m[0] == "parse_answer <" and j + 1 < len(marks) and marks[j + 1][0] == "parse_answer <")]
        marks.clear()
        _reset_peak()
        t0 = time.monotonic()
        chunks = source_arrow.plan_chunks(snap, "snapshot", options.rows_per_partition)
        out[f"{i}: plan_chunks"] = (round(_status_mb("VmRSS")), round(_status_mb("VmHWM")), round(time.monotonic() - t0, 2),
                                    f"{sum(len(c.payload) for c in chunks)} bytes in {len(chunks)} chunks")
        del snap, chunks
        gc.collect()
        out[f"{i}: freed"] = round(_status_mb("VmRSS"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--measure", metavar="CONFIG", help=argparse.SUPPRESS)  # the fresh process
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat)))
        return 0
    from on_setup import measured_on_setup

    found = measured_on_setup(__file__, args.partitions, args.groups, ["--repeat", str(args.repeat)])
    if found is None:
        return 1
    for key, value in found.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
