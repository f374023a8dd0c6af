"""Lease cost benchmark (issue 13): what the purger lease adds to a batch's Delta work.

    ./dev.sh py bench/lease_bench.py [--repeat 7]

Side by side in one Spark session, on throwaway tables in a temporary folder (no Kafka
needed), ``--repeat`` times each, interleaved so that load drifts hit every kind alike:

- ``audit commit``: a one-row append to an audit table (``AuditSink.write``), the baseline;
- ``lease renew``: ``PurgerLease.renew`` (one one-row Delta commit with its txn id; its own row
  is not read back when the newest commit is that write: a read of one commit file);
- ``lease read (moved)``: ``LeaseTable.current`` when the table's version moved since the last
  read (a read of the newest row);
- ``lease read (same)``: ``LeaseTable.current`` on an unchanged table (a listing of its Delta
  log, ``deltalog.table_version``);
- ``lease confirm (fresh)``: ``PurgerLease.confirm`` within a third of the TTL (a check: the
  same listing);
- ``lease keep (fresh)``: ``PurgerLease.keep`` within a third of the TTL (no I/O at all).

Prints the median seconds of each and its ratio to the audit commit. A batch that deletes pays
a confirmation right before DeleteRecords and a read after its outcome write: while the lease
was renewed within a third of ``lease.ttl`` and nobody else wrote the table, two listings; a
renewal once a third of the TTL has passed. A batch that deletes nothing pays a
renewal only once a third of ``lease.ttl`` has passed since the last.
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

    from spark_purge import lease as lease_module
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

            def moved_read() -> object:
                lease_module._LEASE_READS.clear()  # as if another job had written the table
                return table.current("bench")

            kinds: dict[str, Callable[[], object]] = {
                "audit commit": commit,
                "lease renew": lambda: lease.renew("bench"),
                "lease read (moved)": moved_read,
                "lease read (same)": lambda: table.current("bench"),
                "lease confirm (fresh)": lambda: lease.confirm("bench"),
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
    print(f"{'kind':<22} {'median s':>9} {'x audit commit':>15}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<22} {median:>9.3f} {median / base:>15.2f}")
    renew, same = statistics.median(times["lease renew"]), statistics.median(times["lease read (same)"])
    confirm = statistics.median(times["lease confirm (fresh)"])
    print(
        f"\na deleting batch adds a confirmation and a read: {confirm + same:.3f} s = {(confirm + same) / base:.2f} audit "
        f"commits while the lease is fresh; with a renewal (once a third of lease.ttl has passed) {renew + same:.3f} s "
        f"= {(renew + same) / base:.2f} (its own intent and outcome writes are 2)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
