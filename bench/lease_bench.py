"""Lease cost benchmark (issue 13): what the purger lease adds to a batch's Delta work.

    ./dev.sh py bench/lease_bench.py [--repeat 7]

Side by side in one Spark session, on throwaway tables in a temporary folder (no Kafka
needed), ``--repeat`` times each, interleaved so that load drifts hit every kind alike:

- ``audit commit``: a one-row append to an audit table (``AuditSink.write``), the baseline;
- ``lease renew``: ``PurgerLease.renew`` (one one-row Delta commit with its txn id + one read);
- ``lease read``: ``LeaseTable.current`` (one read of the newest row);
- ``lease keep (fresh)``: ``PurgerLease.keep`` within a third of the TTL (no I/O at all).

Prints the median seconds of each and its ratio to the audit commit. A batch that deletes pays
one renewal (right before DeleteRecords) and one read (after its outcome write); a batch that
deletes nothing pays a renewal only once a third of ``lease.ttl`` has passed since the last.
Not a test: absolute figures depend on the machine and its load; the ratios travel better.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="timings per kind (default 7)")
    args = ap.parse_args(argv)

    from spark_purge.audit import AuditSink, lease_row
    from spark_purge.lease import LeaseTable, PurgerLease
    from spark_purge.session import get_spark

    spark = get_spark("lease-bench", master="local[2]")
    try:
        with tempfile.TemporaryDirectory(prefix="lease-bench-") as tmp:
            audit = AuditSink(spark, str(Path(tmp) / "audit"), app_id="bench")
            audit.ensure_table()
            table = LeaseTable(spark, str(Path(tmp) / "audit_leases"))
            lease = PurgerLease(table, "bench", "run-1", "fingerprint", ttl_ms=3_600_000, wait_ms=0)
            lease.acquire()
            now = datetime.now(timezone.utc)
            row = lease_row("run-1", "q", now, "bench", 1, "acquired", "bench", None, "fingerprint")
            batch = [0]

            def commit() -> None:
                batch[0] += 1
                audit.write([row], "lease", batch[0])

            kinds: dict[str, Callable[[], object]] = {
                "audit commit": commit,
                "lease renew": lambda: lease.renew("bench"),
                "lease read": lambda: table.current("bench"),
                "lease keep (fresh)": lambda: lease.keep("bench"),
            }
            for fn in kinds.values():  # warm-up: JIT, Python workers, table caches
                fn()
            times: dict[str, list[float]] = {k: [] for k in kinds}
            for _ in range(args.repeat):
                for name, fn in kinds.items():
                    times[name].append(_timed(fn))
    finally:
        spark.stop()

    base = statistics.median(times["audit commit"])
    print(f"{'kind':<20} {'median s':>9} {'x audit commit':>15}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<20} {median:>9.3f} {median / base:>15.2f}")
    renew, read = statistics.median(times["lease renew"]), statistics.median(times["lease read"])
    print(
        f"\na deleting batch adds one renewal and one read: {renew + read:.3f} s "
        f"= {(renew + read) / base:.2f} audit commits (its own intent and outcome writes are 2)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
