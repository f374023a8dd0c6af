"""Delta idempotent-write benchmark (issue 12): what a ``txnAppId`` costs an audit write the
way Delta's writer checks it, and the way the purge writes it since stop 55 (``txn_append``).

    ./dev.sh py bench/delta_txn_bench.py [--repeat 15] [--rows 1000] [--gap 0.5]

Side by side in one Spark session, on throwaway tables in a temporary folder (no Kafka needed),
``--repeat`` times each, interleaved so that load drifts hit every kind alike; every write is
``--rows`` audit rows, as a batch's intents or outcomes are, after ``--gap`` seconds of idle time
(a batch's DeleteRecords, or the time between batches):

- ``plain append``: the same rows without ``txnAppId`` (the floor: the write itself);
- ``txn, writer``: ``DataFrameWriter`` with ``txnAppId`` / ``txnVersion`` (the audit's writes
  before stop 55). Delta 4.4 answers "which version did this app id last write"
  (``Snapshot.transactions``) only by reconstructing the snapshot's state, a Spark job of its
  own, although the version's checksum file lists the ids;
- ``txn, direct``: ``AuditSink.write`` as the purge runs it: the id's version read from the
  snapshot's checksum, the commit made through Delta's transaction (``spark_purge.txn_append``),
  its file written by the driver itself (``txn_append.DriverRows``, ``spark_purge.delta_files``:
  no ``createDataFrame``, no Spark job; since stop 59);
- ``txn, direct, Spark file``: the same direct commit of a file Spark's writer makes from the rows
  in one piece (``txn_append.driver_rows``: one task, one file; the audit's writes of stops 56-58);
- ``txn, direct, sliced``: the same of the rows as ``createDataFrame`` slices them
  (``defaultParallelism`` pieces: two tasks and two files here; the audit's writes before stop 56).

Prints each kind's median and minimum seconds, Spark jobs per write (median), the ratio to the
plain append, and how the direct writes went (``txn_append.COUNTS``: all ``fast`` expected;
``txn_append.DRIVER_FILES``: one ``written`` per ``txn, direct`` write).
Not a test: absolute figures depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="writes per kind (default 15; the first 2 warm up)")
    ap.add_argument("--rows", type=int, default=1000, help="audit rows per write (default 1000)")
    ap.add_argument("--gap", type=float, default=0.5, help="idle seconds before each write (default 0.5)")
    args = ap.parse_args(argv)
    if args.repeat < 3:
        ap.error(f"--repeat must be at least 3 (the first 2 writes of each kind warm up), got {args.repeat}")

    from pyspark.sql import Row

    from spark_purge import txn_append
    from spark_purge.audit import AuditSink
    from spark_purge.schemas import AUDIT
    from spark_purge.session import get_spark
    from spark_purge.testing.workload import outcome_rows

    spark = get_spark("delta-txn-bench", master="local[2]")
    sc = spark.sparkContext
    at = datetime.now(timezone.utc)

    def rows(batch: int) -> list[Row]:
        return outcome_rows(batch, args.rows, at)

    def timed(action: Callable[[], object]) -> tuple[float, int]:
        group = f"bench-{uuid.uuid4().hex}"
        sc.setJobGroup(group, group)
        start = time.perf_counter()
        try:
            action()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None clears it
        return time.perf_counter() - start, len(sc.statusTracker().getJobIdsForGroup(group))

    results: dict[str, list[tuple[float, int]]] = {
        "plain append": [], "txn, writer": [], "txn, direct": [], "txn, direct, Spark file": [], "txn, direct, sliced": [],
    }
    try:
        with tempfile.TemporaryDirectory(prefix="delta-txn-bench-") as tmp:
            sinks = {kind: AuditSink(spark, str(Path(tmp) / kind.replace(",", "").replace(" ", "-")), app_id="bench") for kind in results}
            for sink in sinks.values():
                sink.ensure_table()
            for n in range(args.repeat):
                batch = rows(n)
                for kind, sink in sinks.items():
                    time.sleep(args.gap)
                    if kind == "plain append":  # rows to a DataFrame inside the timing, as AuditSink.write does
                        took = timed(
                            lambda: spark.createDataFrame(batch, AUDIT).write.format("delta").mode("append").save(sink.path)  # noqa: B023 (called at once)
                        )
                    elif kind == "txn, writer":
                        took = timed(
                            lambda: spark.createDataFrame(batch, AUDIT).write.format("delta").mode("append")  # noqa: B023 (called at once)
                            .option("mergeSchema", "true").option("txnAppId", "bench:outcome").option("txnVersion", str(n))  # noqa: B023
                            .option("userMetadata", f"outcome:{n}").save(sink.path)  # noqa: B023
                        )
                    elif kind == "txn, direct":
                        took = timed(lambda: sink.write(batch, "outcome", n))  # noqa: B023 (called at once)
                    elif kind == "txn, direct, Spark file":
                        took = timed(
                            lambda: txn_append.append(
                                spark, sink.path, txn_append.driver_rows(spark, batch, AUDIT), "bench:outcome", n, f"outcome:{n}", merge_schema=True  # noqa: B023
                            )
                        )
                    else:
                        took = timed(
                            lambda: txn_append.append(
                                spark, sink.path, spark.createDataFrame(batch, AUDIT), "bench:outcome", n, f"outcome:{n}", merge_schema=True  # noqa: B023
                            )
                        )
                    results[kind].append(took)
    finally:
        spark.stop()

    floor = statistics.median(s for s, _ in results["plain append"][2:])
    print(f"{args.rows} audit rows a write, {args.repeat - 2} timed writes per kind after a {args.gap:.1f} s gap each")
    print(f"{'kind':<20} {'median s':>9} {'min s':>7} {'jobs':>5} {'x plain':>8}")
    for kind, runs in results.items():
        kept = runs[2:]
        median = statistics.median(s for s, _ in kept)
        print(
            f"{kind:<20} {median:9.3f} {min(s for s, _ in kept):7.3f} {statistics.median(j for _, j in kept):5.1f} {median / floor:8.2f}"
        )
    print(f"direct writes: {txn_append.COUNTS}; files the driver wrote: {txn_append.DRIVER_FILES}")
    direct, spark_file, sliced = (statistics.median(s for s, _ in results[k][2:]) for k in ("txn, direct", "txn, direct, Spark file", "txn, direct, sliced"))
    print(f"the driver's file against Spark's (direct writes): x{direct / spark_file:.2f}")
    print(f"Spark's file in one piece against sliced (direct writes): x{spark_file / sliced:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
