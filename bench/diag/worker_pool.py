"""Python worker reuse by idle pool size (stop 78): a ``mapInArrow`` that only counts its rows,
over a held 10k x 10k snapshot, in one task and in two.

    ./dev.sh py bench/diag/worker_pool.py [--pool 1] [--partitions 10000] [--groups 10000]

With ``spark.python.factory.idleWorkerMaxPoolSize`` 1 (the local session's default since stop
51) a two-task job keeps one worker and forks the other anew each time (the pids printed change),
about 0.5 s a job here; with 2 both are reused. The purge's own Arrow tasks are one task each,
so its cycle does not pay it (``runs/bench78-ab10k-pool.txt``). Not a test: a diagnosis.

    ./dev.sh py bench/diag/worker_pool.py --touch [--pool 1]

times the keep-warm job (``keepwarm.touch``) read in one task and in two (stop 79), each followed
by the one-task ``mapInArrow`` a purge batch would run next, and prints that task's worker pid:
the same pid every round is the worker the touch kept warm; a new one, a worker forked for the
touch (which has not imported what the batch's task imports).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


# ``count_rows``' output: the rows its task saw, and the pid of the worker that ran it.
COUNTED = "n long, pid long"


def count_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function of every job here: one row, its task's row count and pid."""
    import pyarrow as pa

    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pylist([{"n": n, "pid": os.getpid()}])


def session(name: str, pool: int) -> Any:
    """A local[2] session keeping ``pool`` idle Python workers of a kind."""
    from spark_purge.session import get_spark

    return get_spark(name, master="local[2]", conf={"spark.python.factory.idleWorkerMaxPoolSize": str(pool)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", type=int, default=1, help="spark.python.factory.idleWorkerMaxPoolSize")
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--touch", action="store_true", help="time the keep-warm job in one read task and in two instead")
    args = ap.parse_args(argv)
    if args.touch:
        return touches(args)

    import pyarrow as pa
    from plan_bench import synthetic

    from spark_purge.pipeline import kept
    from spark_purge.source_arrow import snapshot_batch

    spark = session("worker-pool", args.pool)
    now = datetime.now(timezone.utc)
    snap = synthetic(args.partitions, args.groups, 50, 0, int(now.timestamp() * 1000))
    df = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(snap, "snapshot")])))
    df.count()

    def timed(name: str, query: Callable[[], list]) -> None:  # type: ignore[type-arg]
        seconds, pids = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rows = query()
            seconds.append(time.perf_counter() - t0)
            pids.append(sorted(r["pid"] for r in rows))
        rest = seconds[1:]
        print(f"{name}: min {min(rest):.3f} / median {statistics.median(rest):.3f} s; worker pids per run {pids}", flush=True)

    nested = df.select("topic", "partition", "groups")
    timed("one task (coalesce(1))", lambda: nested.coalesce(1).mapInArrow(count_rows, COUNTED).collect())
    timed("two tasks", lambda: nested.mapInArrow(count_rows, COUNTED).collect())
    spark.stop()
    return 0


def touches(args: argparse.Namespace) -> int:
    from spark_purge.keepwarm import touch

    spark = session("worker-pool-touch", args.pool)
    df = spark.range(10_000).coalesce(1)
    touch(spark), df.mapInArrow(count_rows, COUNTED).collect()  # both kinds of worker started once
    results: dict[int, tuple[list[float], list[int]]] = {1: ([], []), 2: ([], [])}
    for n in (1, 2):  # one block each: a two-task touch changes which worker the pool keeps
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            touch(spark, partitions=n)
            results[n][0].append(time.perf_counter() - t0)
            after = df.mapInArrow(count_rows, COUNTED).collect()
            results[n][1].append(after[0]["pid"])
    for n, (seconds, pids) in results.items():
        print(f"touch in {n} task(s): min {min(seconds):.3f} / median {statistics.median(seconds):.3f} s; "
              f"the next one-task job's worker pid per round {pids}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
