"""Where the store match's job spends its time (issue 12): the whole job against the same inputs
carried to a Python task that only reads them, and the task's own Python on the driver.

    ./dev.sh py bench/diag/match_parts.py --partitions 10000 --groups 10000 [--repeat 6]

A synthetic snapshot of the cycle bench's shape (``plan_bench.synthetic``), its group rows
packed as the pipeline reads them (``--nested``: nested, as before stop 82), held as the
pipeline holds it (``pipeline.kept``), and a packed store one offset behind it (the match's own
``hand_over`` of a first batch). Each round times, interleaved:

- ``match``: ``NestedPositions.match`` and its first read (``staleness_table``), as the planner's
  job runs it (no consumer facts asked);
- ``carry``: the same input (the snapshot's rows and the store's, one task) handed to a Python
  task that reads every batch and gives nothing back;
- ``carry, no groups``: the same without the snapshot's group rows (``packed_groups`` or
  ``groups`` null);
- ``carry, no store`` / ``carry, nothing``: without the store's rows / without any row (the
  job's own cost);
- ``python``: the match's own function (``position_match.nested_batches``) over the input's
  Arrow batches in this process (no JVM), the output drained.

Not a test; the numbers say which part a change would have to cut.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def drain(batches: Iterator) -> Iterator:  # type: ignore[type-arg]
    """Reads every input batch and gives nothing (the ``carry`` task)."""
    for _ in batches:
        pass
    return iter(())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark SQL setting for the session (repeatable)")
    ap.add_argument("--nested", action="store_true", help="the snapshot's group rows nested, as before stop 82 (default: packed)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the rounds, profile one more `python` round (cProfile, every thread the match starts) and print its N costliest functions (stop 87)")
    args = ap.parse_args(argv)

    import pyarrow as pa
    from plan_bench import synthetic
    from pyspark.sql import functions as F

    from spark_purge import position_match
    from spark_purge.detach import drop
    from spark_purge.pipeline import kept
    from spark_purge.policy.positions import NESTED_STORE, NestedPositions
    from spark_purge.session import get_spark
    from spark_purge.source_arrow import snapshot_batch

    spark = get_spark("match-parts", master="local[2]")
    for key, value in (item.split("=", 1) for item in args.conf):
        spark.conf.set(key, value)
    now = datetime.now(timezone.utc)
    ms = int(now.timestamp() * 1000)
    at = datetime.fromtimestamp(ms / 1000, timezone.utc)
    view = "snapshot" if args.nested else "packed"  # as the pipeline reads it (stop 82), or as before
    behind = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(synthetic(args.partitions, args.groups, args.per_topic, 0, ms), view)])))
    snapshot = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(synthetic(args.partitions, args.groups, args.per_topic, 1, ms), view)])))
    print(f"{args.partitions} x {args.groups}: {snapshot.count()} snapshot rows, {behind.count()} behind", flush=True)
    first = NestedPositions.match(behind, spark.createDataFrame([], NESTED_STORE), (), at)
    first.staleness_table()
    store, holder = first.hand_over(at)
    store.count()

    real = position_match.nested_batches

    def carried(snap, store):  # type: ignore[no-untyped-def]
        position_match.nested_batches = lambda *a, **k: drain  # type: ignore[assignment]
        try:
            m = NestedPositions.match(snap, store, (), at)
        finally:
            position_match.nested_batches = real  # type: ignore[assignment]
        return m

    grouped = "groups" if args.nested else "packed_groups"
    no_groups = snapshot.withColumn(grouped, F.lit(None).cast(snapshot.schema[grouped].dataType))
    # The task's input as Arrow batches on the driver (for ``python``): the same select and union.
    union = _union(snapshot, store)
    table = union.toArrow()
    batches = table.to_batches(max_chunksize=10000)

    def python_round(batch_id: int) -> Iterator:  # type: ignore[type-arg]
        """The match's own function over the input in this process, its log as batch ``batch_id``'s, packed."""
        return real((), None, batch_id, None, True, None)(iter(batches))
    print(f"input: {table.num_rows} rows, {table.nbytes / 1e6:.0f} MB as Arrow", flush=True)

    empty_store = store.limit(0)
    variants = {"carry": (snapshot, store), "carry, no groups": (no_groups, store), "carry, no store": (snapshot, empty_store), "carry, nothing": (snapshot.limit(0), empty_store)}
    seconds: dict[str, list[float]] = {"match": [], **{k: [] for k in variants}, "python": []}
    for r in range(args.repeat):
        for name in seconds if r % 2 == 0 else reversed(list(seconds)):
            t0 = time.perf_counter()
            if name == "match":
                m = NestedPositions.match(snapshot, store, (), at, log_batch=r + 1)
                m.staleness_table()
                m.release()
            elif name == "python":
                for _ in python_round(r + 1):
                    pass
            else:
                m = carried(*variants[name])
                m.out.count()
                m.release()
            seconds[name].append(time.perf_counter() - t0)
        print(f"round {r}: " + ", ".join(f"{n} {v[-1]:.2f}s" for n, v in seconds.items()), flush=True)
    if args.profile:  # the match's own threads (``in_threads``) profiled too
        from profiles import every_thread, top

        _, profiled = every_thread(lambda: list(python_round(args.repeat + 1)))
        print(f"python, profiled over {len(profiled)} threads, by own time:\n{top(profiled, args.profile)}", flush=True)
    drop(holder)
    drop(snapshot)
    drop(behind)
    spark.stop()
    for name, v in seconds.items():
        steady = v[1:] if len(v) > 1 else v
        print(f"{name:<18} min {min(steady):.2f} / median {statistics.median(steady):.2f} s ({len(steady)} rounds)")
    return 0


def _union(snapshot, store):  # type: ignore[no-untyped-def]
    """The match task's input as ``NestedPositions.match`` builds it (no facts asked)."""
    from pyspark.sql import functions as F

    from spark_purge.policy.positions import NESTED_INPUT_TYPE, NESTED_KEY, PACKED_KEY
    from spark_purge.schemas import SNAPSHOT
    from spark_purge.snapshot_pack import PACKED_COLUMN

    none = {f.name: F.lit(None).cast(f.dataType) for f in NESTED_INPUT_TYPE.fields}
    none["groups"] = F.lit(None).cast(SNAPSHOT["groups"].dataType)
    names = NESTED_INPUT_TYPE.fieldNames()
    absent = {NESTED_KEY, PACKED_KEY} | {n for n in ("groups", PACKED_COLUMN) if n not in snapshot.columns}
    snap = snapshot.select(*[F.lit(False).alias(n) if n == "stored" else (none[n].alias(n) if n in absent else F.col(n)) for n in names])
    kept = store.select(
        *[F.lit(True).alias(n) if n == "stored" else (F.col(n) if n in store.columns and n in ("topic", "partition", NESTED_KEY, PACKED_KEY) else none[n].alias(n)) for n in names]
    )
    return snap.unionByName(kept).coalesce(1)


if __name__ == "__main__":
    sys.exit(main())
