"""Where the streaming source's own Python spends a cycle (issue 12): the Kafka client's snapshot
(``latestOffset``; the cycle bench's floor times the same call) and the snapshot made Arrow and
packed (``partitions()``: ``source_arrow.plan_chunks``), timed, then profiled.

    ./dev.sh py bench/diag/snapshot_parts.py [--partitions 10000] [--groups 10000] [--repeat 5]

Builds the cycle bench's setup on one local KRaft node (``cycle_bench.build_topics`` and
``commit_all``), then, in a fresh Python process with the source's modules imported, takes
``--repeat`` snapshots through ``source.take_snapshot`` and packs each as the pipeline reads it
(``packed`` view), printing each step's wall time; then one more round of each under cProfile
(the snapshot's in every thread it starts: the client decodes on its IO thread), printing the
functions with the most time of their own. Not a test: the numbers say which part
a change would have to cut.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "diag")]

import profiles  # noqa: E402  (bench/diag/profiles.py)


def measure(config_file: str, repeat: int, top: int) -> dict[str, Any]:
    """The fresh process's side: the steps' times and their profiles."""
    from spark_purge import source, source_arrow
    from spark_purge.cli import load_config
    from spark_purge.pipeline import source_options

    options = source.parse_options({**source_options(load_config(config_file)), "view": "packed"})
    times: dict[str, list[float]] = {"take_snapshot": [], "plan_chunks": []}
    commits = 0
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        snap = source.take_snapshot(options)
        times["take_snapshot"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        chunks = source_arrow.plan_chunks(snap, "packed", options.rows_per_partition)
        times["plan_chunks"].append(time.perf_counter() - t0)
        commits = len(snap.commits)
        del snap, chunks
        gc.collect()
    out: dict[str, Any] = {"commits": commits}
    for name, values in times.items():  # the first round warms connections and imports
        out[name] = f"min {min(values[1:]):.3f} s, median {statistics.median(values[1:]):.3f} s (first {values[0]:.3f} s)"
    # The client's IO thread is where it decodes: every thread profiled.
    snap, snap_profiles = profiles.every_thread(lambda: source.take_snapshot(options))
    _, chunk_profiles = profiles.every_thread(lambda: source_arrow.plan_chunks(snap, "packed", options.rows_per_partition))
    out["profile: take_snapshot (every thread)"] = profiles.top(snap_profiles, top)
    out["profile: plan_chunks"] = profiles.top(chunk_profiles, top)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=25, help="functions listed per profile")
    ap.add_argument("--measure", metavar="CONFIG", help=argparse.SUPPRESS)  # the fresh process
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat, args.top)))
        return 0
    from on_setup import measured_on_setup

    found = measured_on_setup(__file__, args.partitions, args.groups, ["--repeat", str(args.repeat), "--top", str(args.top)])
    if found is None:
        return 1
    for key, value in found.items():
        print(f"{key}:\n{value}" if "\n" in str(value) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
