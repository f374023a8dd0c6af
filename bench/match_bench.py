"""The store match alone (issue 12): ``Positions.match`` of a batch's commits with the group
progress store's rows, against a baseline checkout's, side by side in one Spark session.

    git worktree add /tmp/base <commit>
    ./dev.sh py bench/match_bench.py --baseline /tmp/base --partitions 10000 --groups 10000 [--repeat 14]

A synthetic snapshot of the cycle bench's shape (``plan_bench.synthetic``), held and hashed as
the pipeline holds a batch's snapshot (``pipeline.kept``); each implementation's store rows are
what its own ``Positions.after`` gives (every key one offset behind the snapshot), held as
``ProgressStore.record`` keeps them for the next batch, so each match reads the store's rows as
they would be in a steady state. Then ``--repeat`` times each, interleaved (the order swapped
every round), the match is made and its held rows computed (``matched.count()`` on the held
rows, every column). Prints each one's min / median seconds over the rounds after the first two
and the ratio of the medians. Without ``--baseline`` (as ``./dev.sh bench`` runs it) only this
tree's match is timed. Not a test.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _positions_of(tree: Path) -> ModuleType:
    """``spark_purge.policy.positions`` of another checkout, loaded under its own name (it
    imports the rest of the package from this one)."""
    spec = importlib.util.spec_from_file_location("baseline_positions", tree / "spark_purge" / "policy" / "positions.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"--baseline {tree}: no spark_purge/policy/positions.py there")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, help="a checkout of the baseline commit (git worktree add); none: this tree alone")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=14)
    args = ap.parse_args(argv)

    import pyarrow as pa
    from plan_bench import synthetic
    from pyspark.sql import functions as F

    from spark_purge.detach import cut, drop
    from spark_purge.pipeline import kept
    from spark_purge.policy import positions, split_snapshot
    from spark_purge.schemas import PROGRESS_STORE
    from spark_purge.session import get_spark
    from spark_purge.source_arrow import snapshot_batch

    kinds = {"this tree": positions}
    if args.baseline is not None:
        kinds = {"baseline": _positions_of(args.baseline.resolve()), **kinds}
    spark = get_spark("match-bench", master="local[2]")
    now = datetime.now(timezone.utc)
    snap = synthetic(args.partitions, args.groups, args.per_topic, 1, int(now.timestamp() * 1000))
    snapshot = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(snap, "snapshot")])))
    print(f"{args.partitions} partitions x {args.groups} groups: {snapshot.count()} snapshot rows, {len(snap.commits)} commits", flush=True)
    parts, groups = split_snapshot(snapshot)
    empty = spark.createDataFrame([], PROGRESS_STORE)
    stores = {}
    for name, module in kinds.items():
        behind = module.Positions.match(parts, groups, empty, keep=False).after(now)
        stores[name] = cut(behind.select(*[(F.col(c) - 1).alias(c) if c == "committed_offset" else F.col(c) for c in PROGRESS_STORE.fieldNames()]))
    seconds: dict[str, list[float]] = {name: [] for name in kinds}
    for r in range(args.repeat):
        order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
        for name in order:
            t0 = time.perf_counter()
            match = kinds[name].Positions.match(parts, groups, stores[name])
            rows = match.matched.count()
            seconds[name].append(time.perf_counter() - t0)
            match.release()
        print(f"round {r}: " + ", ".join(f"{n} {seconds[n][-1]:.2f}s" for n in kinds) + f" ({rows} rows)", flush=True)
    for store in stores.values():
        drop(store)
    drop(snapshot)
    spark.stop()
    steady = {name: v[2:] if len(v) > 2 else v for name, v in seconds.items()}
    for name, v in steady.items():
        print(f"{name:<10} min {min(v):.2f} / median {statistics.median(v):.2f} s ({len(v)} rounds)")
    if "baseline" in steady:
        print(f"ratio this tree / baseline (medians): x{statistics.median(steady['this tree']) / statistics.median(steady['baseline']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
