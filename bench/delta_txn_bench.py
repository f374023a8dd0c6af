"""Delta idempotent-write benchmark (issue 12): what a ``txnAppId`` costs an audit write, and
what it would cost if Delta did not reconstruct the table's state to check it.

    ./dev.sh py bench/delta_txn_bench.py [--repeat 15] [--rows 1000] [--gap 0.5]

Side by side in one Spark session, on throwaway tables in a temporary folder (no Kafka needed),
``--repeat`` times each, interleaved so that load drifts hit every kind alike; every write is
``--rows`` audit rows, as a batch's intents or outcomes are, after ``--gap`` seconds of idle time
(a batch's DeleteRecords, or the time between batches):

- ``plain append``: the same rows without ``txnAppId`` (the floor: the write itself);
- ``txn, cold``: ``AuditSink.write`` as the purge runs it. Delta 4.4.0 answers "which version
  did this app id last write" (``Snapshot.transactions``) only by reconstructing the snapshot's
  state, a Spark job of its own, although the version's checksum file lists the ids;
- ``txn, ahead``: the same write, after a daemon thread computed the snapshot's ids during the
  gap (what a Delta that reads them from the checksum, or a driver with idle cores that computes
  them in the background, would pay). The purge does not do this: on a CPU-bound 2-core driver
  the moved work slows the phases it overlaps (README, "Known limits").

Prints each kind's median and minimum seconds, Spark jobs per write (median), and the ratio to
the plain append. Not a test: absolute figures depend on the machine and its load.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="writes per kind (default 15; the first 2 warm up)")
    ap.add_argument("--rows", type=int, default=1000, help="audit rows per write (default 1000)")
    ap.add_argument("--gap", type=float, default=0.5, help="idle seconds before each write (default 0.5)")
    args = ap.parse_args(argv)
    if args.repeat < 3:
        ap.error(f"--repeat must be at least 3 (the first 2 writes of each kind warm up), got {args.repeat}")

    import threading

    from pyspark.sql import Row

    from spark_purge.audit import AuditSink
    from spark_purge.schemas import AUDIT
    from spark_purge.session import get_spark

    spark = get_spark("delta-txn-bench", master="local[2]")
    sc = spark.sparkContext
    at = datetime.now(timezone.utc)

    def rows(batch: int) -> list[Row]:
        base = dict(
            run_id="bench", query_id="bench", batch_id=batch, record_type="outcome", planned_at=at, executed_at=at,
            snapshot_id="s", topic="t", stale_groups=[], status="deleted", dry_run=False, config_fingerprint="f",
            event_date=at.strftime("%Y-%m-%d"), prior_log_start_offset=0, high_watermark=10, binding_constraint="group",
        )
        return [Row(**{f.name: ({**base, "partition": i}).get(f.name) for f in AUDIT.fields}) for i in range(args.rows)]

    def timed(action: Callable[[], object]) -> tuple[float, int]:
        group = f"bench-{uuid.uuid4().hex}"
        sc.setJobGroup(group, group)
        start = time.perf_counter()
        try:
            action()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None clears it
        return time.perf_counter() - start, len(sc.statusTracker().getJobIdsForGroup(group))

    jvm: Any = sc._jvm

    def ahead(path: str) -> threading.Thread:
        """The table's current snapshot's write ids, computed on a daemon thread (Delta keeps
        them with the snapshot, which stays current until the next commit)."""

        def work() -> None:
            jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).unsafeVolatileSnapshot().transactions()

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        return thread

    pending: list[threading.Thread] = []
    results: dict[str, list[tuple[float, int]]] = {"plain append": [], "txn, cold": [], "txn, ahead": []}
    try:
        with tempfile.TemporaryDirectory(prefix="delta-txn-bench-") as tmp:
            sinks = {kind: AuditSink(spark, str(Path(tmp) / kind.replace(",", "").replace(" ", "-")), app_id="bench") for kind in results}
            for sink in sinks.values():
                sink.ensure_table()
            plain_path = sinks["plain append"].path
            for n in range(args.repeat):
                batch = rows(n)
                for kind, sink in sinks.items():
                    time.sleep(args.gap)
                    if kind == "plain append":  # rows to a DataFrame inside the timing, as AuditSink.write does
                        took = timed(
                            lambda: spark.createDataFrame(batch, AUDIT).write.format("delta").mode("append").save(plain_path)  # noqa: B023 (called at once)
                        )
                    else:
                        took = timed(lambda: sink.write(batch, "outcome", n))  # noqa: B023 (called at once)
                        if kind == "txn, ahead":  # for the next write, during its gap
                            pending.append(ahead(sink.path))
                    results[kind].append(took)
            for thread in pending:
                thread.join()
    finally:
        spark.stop()

    floor = statistics.median(s for s, _ in results["plain append"][2:])
    print(f"{args.rows} audit rows a write, {args.repeat - 2} timed writes per kind after a {args.gap:.1f} s gap each")
    print(f"{'kind':<14} {'median s':>9} {'min s':>7} {'jobs':>5} {'x plain':>8}")
    for kind, runs in results.items():
        kept = runs[2:]
        median = statistics.median(s for s, _ in kept)
        print(
            f"{kind:<14} {median:9.3f} {min(s for s, _ in kept):7.3f} {statistics.median(j for _, j in kept):5.1f} {median / floor:8.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
