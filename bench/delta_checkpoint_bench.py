"""Delta checkpoint interval benchmark (issue 12): what the checkpoint Delta makes every
``delta.checkpointInterval`` commits costs the audit writes, at 10 commits (Delta's default) and
at 100 (the purge's own tables since stop 56, ``deltalog.OWN_TABLE_PROPERTIES``).

    ./dev.sh py bench/delta_checkpoint_bench.py [--writes 60] [--rows 1000] [--intervals 10,100]

Side by side in one Spark session, on throwaway audit tables in a temporary folder (no Kafka
needed), one table per interval: ``--writes`` writes of ``--rows`` audit rows each through
``AuditSink.write`` (the purge's own write), interleaved so that load drifts hit every table
alike; the first 3 warm up. Delta makes a checkpoint inside the commit that reaches the
interval (the table's state reconstructed and written as Parquet), so with 10 some writes are
seconds long. Then a fresh read of each table (Delta's log cache cleared: a new process's first
read, ``AuditSink.recorded``), which replays the JSON commits after the last checkpoint, 4 times.

Prints per interval the writes' total, median and longest seconds, their Spark jobs, the total's
ratio to the first interval's, and the fresh reads. Not a test: figures depend on the machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writes", type=int, default=60, help="writes per table (default 60; the first 3 warm up)")
    ap.add_argument("--rows", type=int, default=1000, help="audit rows per write (default 1000)")
    ap.add_argument("--gap", type=float, default=0.3, help="idle seconds before each write (default 0.3)")
    ap.add_argument("--intervals", default="10,100", help="checkpoint intervals to compare, the first the baseline (default 10,100)")
    args = ap.parse_args(argv)
    try:
        intervals = [int(v) for v in args.intervals.split(",")]
    except ValueError:
        ap.error(f"--intervals: expected comma-separated integers, got {args.intervals!r}")
    if args.writes < 4 or any(i < 1 for i in intervals):
        ap.error(f"--writes must be at least 4 and every interval at least 1, got {args.writes} and {args.intervals!r}")

    from pyspark.sql import Row

    from spark_purge.audit import AuditSink
    from spark_purge.session import get_spark
    from spark_purge.testing.workload import outcome_rows

    spark = get_spark("delta-checkpoint-bench", master="local[2]")
    sc = spark.sparkContext
    at = datetime.now(timezone.utc)

    def rows(batch: int) -> list[Row]:
        return outcome_rows(batch, args.rows, at)

    writes: dict[int, list[tuple[float, int]]] = {i: [] for i in intervals}
    reads: dict[int, list[float]] = {i: [] for i in intervals}
    try:
        with tempfile.TemporaryDirectory(prefix="delta-checkpoint-bench-") as tmp:
            sinks = {i: AuditSink(spark, str(Path(tmp) / f"every-{i}"), app_id="bench") for i in intervals}
            for interval, sink in sinks.items():
                sink.ensure_table()
                spark.sql(f"ALTER TABLE delta.`{sink.path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')")
            for n in range(args.writes):
                batch = rows(n)
                for interval, sink in sinks.items():
                    time.sleep(args.gap)
                    group = f"bench-{uuid.uuid4().hex}"
                    sc.setJobGroup(group, group)
                    start = time.perf_counter()
                    sink.write(batch, "outcome", n)
                    writes[interval].append((time.perf_counter() - start, len(sc.statusTracker().getJobIdsForGroup(group))))
            delta_log = spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog  # type: ignore[union-attr]
            for _ in range(4):
                for interval, sink in sinks.items():
                    delta_log.clearCache()
                    start = time.perf_counter()
                    sink.recorded(1)
                    reads[interval].append(time.perf_counter() - start)
    finally:
        spark.stop()

    base = sum(s for s, _ in writes[intervals[0]][3:])
    print(f"{args.rows} audit rows a write, {args.writes - 3} timed writes per table after a {args.gap:.1f} s gap each")
    print(f"{'interval':>8} {'total s':>8} {'median s':>9} {'max s':>6} {'jobs':>5} {'x first':>8}   fresh reads s")
    for interval in intervals:
        kept = writes[interval][3:]
        total = sum(s for s, _ in kept)
        print(
            f"{interval:>8} {total:8.2f} {statistics.median(s for s, _ in kept):9.3f} {max(s for s, _ in kept):6.2f} "
            f"{sum(j for _, j in kept):5d} {total / base:8.2f}   {' '.join(f'{s:.2f}' for s in reads[interval])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
