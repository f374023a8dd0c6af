"""Spark 4.2.0's cache against the executor's heartbeat: why a batch holds its rows with
``detach.held`` (a local checkpoint) and never with ``DataFrame.persist``.

    ./dev.sh py bench/heartbeat_race.py --iterations 150 --interval 20ms

Runs the same loop in two fresh local Spark processes, one per way of keeping rows: build rows
hashed into ``--pieces`` pieces, keep them, read them twice, free them. ``persist`` keeps them in
Spark's cache; ``held`` is ``detach.held`` / ``detach.drop``. Each process's heartbeat runs every
``--interval`` (Spark's default is 10 s; a short one makes the race frequent enough to see).

Spark 4.2.0's cache gives every task that builds it a ``PartitionKeyedAccumulator`` whose map is
null while the task deserializes it; the heartbeat thread asks each registered accumulator
``isZero`` and can catch it then. That NullPointerException ends the heartbeat thread: Spark
logs "Uncaught exception in thread executor-heartbeater" once and never sends another heartbeat
(``--linger`` seconds after the loop show the driver removing the executor as lost once
``spark.network.timeout``, 120 s, has passed). Prints, per way, the loop's time, whether the
heartbeat thread died, and whether the executor was then removed. Each child is stopped by its
own process id (``run_reaped``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DIED = "Uncaught exception in thread executor-heartbeater"
REMOVED = "with no recent heartbeats"


def child(way: str, iterations: int, interval: str, pieces: int, linger_s: float) -> None:
    from spark_purge.detach import drop, held
    from spark_purge.session import get_spark

    spark = get_spark("heartbeat-race", conf={"spark.executor.heartbeatInterval": interval})
    t0 = time.perf_counter()
    for _ in range(iterations):
        rows = spark.range(20_000).selectExpr("id", "id % 7 as k").repartition(pieces, "k")
        kept = rows.persist() if way == "persist" else held(rows)
        kept.count()
        kept.groupBy("k").count().collect()
        if way == "persist":
            kept.unpersist()
        else:
            drop(kept)
    print(f"loop {time.perf_counter() - t0:.1f} s", flush=True)
    deadline = time.monotonic() + linger_s
    while time.monotonic() < deadline:  # jobs keep running: the driver checks heartbeats meanwhile
        spark.range(10).count()
        time.sleep(1)
    spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--interval", default="20ms", help="spark.executor.heartbeatInterval")
    ap.add_argument("--pieces", type=int, default=64, help="tasks that build the kept rows, per iteration")
    ap.add_argument("--linger", type=float, default=0.0, help="seconds of small jobs after the loop")
    ap.add_argument("--child", choices=("persist", "held"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.iterations, args.interval, args.pieces, args.linger)
        return 0

    from spark_purge.testing.processes import python_env, run_reaped

    print(f"{args.iterations} iterations x {args.pieces} tasks, heartbeat every {args.interval}, linger {args.linger:.0f} s")
    print(f"{'way':<8} {'rc':>3} {'loop':>9}  heartbeat thread died  executor removed as lost")
    for way in ("persist", "held"):
        argv = [sys.executable, __file__, "--child", way, "--iterations", str(args.iterations), "--interval", args.interval,
                "--pieces", str(args.pieces), "--linger", str(args.linger)]
        done = run_reaped(argv, cwd=REPO, env=python_env(), timeout_s=3600)
        loop = next((line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("loop ")), "-")
        died = done.stderr.count(DIED)
        removed = done.stderr.count(REMOVED)
        print(f"{way:<8} {done.returncode:>3} {loop:>9}  {'yes' if died else 'no':<21}  {'yes' if removed else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
