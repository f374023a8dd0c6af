"""Where the plan rows' job goes (issue 12): the plan's ``toArrow`` against the same rows with
some columns left out, no Kafka.

    ./dev.sh py bench/diag/plan_rows.py --partitions 10000 --groups 10000 --rounds 7

A synthetic snapshot of the cycle bench's shape (``bench/plan_bench.py``'s ``synthetic``) is
planned as a batch plans it, three times (the third plan takes the consumer facts from the store
match's task, as a steady purge does); then the third plan's rows are read to the driver as
Arrow, ``--rounds`` times each way, the ways alternating round by round:

- ``plan``: every column (what the pipeline's ``collect_table`` reads);
- ``no detail``: without the ``detail`` text (Spark prunes what no column needs);
- ``no explanation``: without the explanation's text columns (``detail``, ``blocking_group``,
  ``blocking_group_type``, ``stale_groups``);
- ``keys``: topic and partition only (the facts' held rows read, the plan's expressions not run).

Prints min / median seconds per way. Not a test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa

WAYS = {
    "plan": None,
    "no detail": ("detail",),
    "no explanation": ("detail", "blocking_group", "blocking_group_type", "stale_groups"),
    "keys": (),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    args = ap.parse_args(argv)

    from plan_bench import bench_config, synthetic

    from spark_purge.detach import drop
    from spark_purge.pipeline import kept, progress_store
    from spark_purge.planner import LastPairs, Planner
    from spark_purge.session import get_spark
    from spark_purge.source_arrow import snapshot_batch

    spark = get_spark("plan-rows", master="local[2]", conf=dict(c.split("=", 1) for c in args.conf))
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="plan-rows-") as tmp_s:
        tmp = Path(tmp_s)
        cfg = bench_config(tmp)
        store = progress_store(spark, str(tmp / "checkpoint"), app_id="plan-rows")
        planner = Planner(cfg, lambda _: {}, store.read_nested_if_exists, rewrite_above=store.rewrite_above, last_pairs=LastPairs())
        plan = snapshot = None
        for c in range(3):  # the first plan creates the store, the second keeps its discovery pairs; the third takes the match's facts
            now = datetime.now(timezone.utc)
            snap = synthetic(args.partitions, args.groups, args.per_topic, c, int(now.timestamp() * 1000))
            snapshot = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(snap, "packed")])))
            plan = planner.plan(snapshot, c)
            assert plan is not None
            plan.rows.toArrow()
            if c < 2:
                if plan.positions is not None:  # as the pipeline records a batch (``PurgePipeline._remember``)
                    after, holder = plan.positions.hand_over(plan.planned_at)
                    plan.release()
                    store.record(after, c, holder=holder, log_file=None)
                else:
                    from spark_purge.policy import split_snapshot

                    parts, groups = split_snapshot(snapshot)
                    store.update(groups, plan.planned_at, c, parts)
                    plan.release()
                drop(snapshot)
        assert plan is not None and snapshot is not None
        made = plan.positions is not None and plan.positions.facts() is not None
        print(f"the plan's consumer facts: {'from the store match' if made else 'their own task'}", flush=True)
        columns = plan.rows.columns
        for r in range(args.rounds):
            for way, left_out in WAYS.items():
                rows = plan.rows if left_out is None else plan.rows.select(*(
                    [c for c in columns if c not in left_out] if left_out else ["topic", "partition"]
                ))
                t0 = time.perf_counter()
                table = rows.toArrow()
                seconds[way].append(time.perf_counter() - t0)
                assert table.num_rows == args.partitions, (way, table.num_rows)
            print(f"round {r}: " + ", ".join(f"{way} {s[-1]:.3f}s" for way, s in seconds.items()), flush=True)
        plan.release()
        drop(snapshot)
    spark.stop()
    print(f"\n{args.partitions} partitions x {args.groups} groups: the plan rows to the driver as Arrow, min / median s over rounds 2..")
    for way, values in seconds.items():
        v = values[1:] if len(values) > 1 else values
        print(f"  {way:<16} {min(v):6.3f} / {statistics.median(v):6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
