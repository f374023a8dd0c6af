"""The store match with the store held packed or as nested rows, alternating in one process
(issue 12, stop 68).

    ./dev.sh py bench/diag/packed_store.py --partitions 10000 --groups 10000 --rounds 8

A synthetic snapshot of ``plan_bench.py``'s shape is held as the pipeline holds a batch's
(``pipeline.kept``). Two stores are made from it by a first match each: one held packed
(``NestedPositions.match(packed=True)``, Arrow IPC in binary rows), one as nested rows
(``packed=False``, stop 67's way). Then, round by round and in turn, each store is matched
with the snapshot again (the same way it is held: a steady batch's read and write of its
store) and the match's job is run (``staleness_table``); the new store replaces the old. Prints
per way min / median seconds of that job. Not a test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)

    import pyarrow as pa
    from plan_bench import synthetic

    from spark_purge.detach import drop
    from spark_purge.pipeline import kept
    from spark_purge.policy.positions import NestedPositions
    from spark_purge.session import get_spark
    from spark_purge.source_arrow import snapshot_batch

    spark = get_spark("packed-store", master="local[2]")
    now = datetime.now(timezone.utc)
    snap = synthetic(args.partitions, args.groups, args.per_topic, 0, int(now.timestamp() * 1000))
    df = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(snap, "snapshot")])))
    at = datetime.fromtimestamp(int(now.timestamp() * 1000) / 1000, timezone.utc)
    empty = spark.createDataFrame([], "topic string, partition int, positions array<struct<group_id:string,committed_offset:bigint,"
                                  "last_progress_time:timestamp,group_type:string,topic_id:string,changed:boolean>>, changed bigint")
    stores = {}
    for way in ("packed", "nested"):
        first = NestedPositions.match(df, empty, (), at=at, packed=way == "packed")
        first.staleness_table()
        stores[way] = first.hand_over(at)
    seconds: dict[str, list[float]] = {"packed": [], "nested": []}
    for r in range(args.rounds):
        for way in (("packed", "nested") if r % 2 == 0 else ("nested", "packed")):
            rows, holder = stores[way]
            t0 = time.perf_counter()
            match = NestedPositions.match(df, rows, (), at=at, packed=way == "packed")
            match.staleness_table()
            seconds[way].append(time.perf_counter() - t0)
            stores[way] = match.hand_over(at)
            drop(holder)
        print(f"round {r}: packed {seconds['packed'][-1]:.2f}s, nested {seconds['nested'][-1]:.2f}s", flush=True)
    print(f"\n{args.partitions} partitions x {args.groups} groups, the store match's job (match + staleness), rounds after the first:")
    for way, values in seconds.items():
        v = values[1:] if len(values) > 1 else values
        print(f"  {way:<7} {min(v):6.2f} / {statistics.median(v):6.2f} s (min / median)")
    for _, holder in stores.values():
        drop(holder)
    drop(df)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
