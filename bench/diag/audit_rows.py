"""The driver's per-row work of a batch at scale (issue 12), without Kafka or Spark jobs.

    ./dev.sh py bench/diag/audit_rows.py --partitions 10000
    ./dev.sh py bench/diag/audit_rows.py --partitions 10000 --root /tmp/base   # another checkout's code

What a batch does in Python on the driver once per plan row, timed step by step on synthetic
plan rows of ``schemas.PLAN`` (every partition actionable, every delete answered): the plan's
Arrow table made into rows (``collect_rows`` after ``toArrow``; since stop 83 the plan stays a
table: nothing), their open transactions' annotation (``pipeline.with_producers``, none open),
the audit's intent and outcome rows (``audit.intent_table``, ``audit.outcome_table``; before
stop 83 ``intent_rows``, ``outcome_rows``) and both as the Arrow table the audit's Parquet files
are written from (``delta_files.arrow_table``). A cProfile of
``cycle_bench`` at 10k x 10k put about 1 s of driver CPU a cycle here (stop 70). ``--root``
runs another checkout's package on the same input (an A/B: run both, compare the medians).
Prints min / median seconds per step over ``--rounds``. Not a test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--partitions", type=int, default=10000)
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the checkout whose spark_purge runs")
args = ap.parse_args()
sys.path.insert(0, str(args.root.resolve()))

import pyarrow as pa  # noqa: E402
from pyspark.sql import Row  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StringType, StructType, TimestampType  # noqa: E402

import spark_purge  # noqa: E402
from spark_purge import audit, pipeline, schemas  # noqa: E402
from spark_purge.delta_files import arrow_table  # noqa: E402
from spark_purge.kafka.model import DeleteOutcome  # noqa: E402
from spark_purge.planner import Plan  # noqa: E402

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=timezone.utc)


def value(name: str, kind: Any, i: int) -> Any:
    if name == "actionable":
        return True
    if isinstance(kind, StringType):
        return f"{name}-{i % 97}"
    if isinstance(kind, (LongType, IntegerType)):
        return i % 1000 + 1
    if isinstance(kind, BooleanType):
        return False
    if isinstance(kind, TimestampType):
        return NOW - timedelta(seconds=i % 600)
    if isinstance(kind, ArrayType):
        return [f"g{i % 13}"] if isinstance(kind.elementType, StringType) else []
    return None


def plan_table(n: int) -> pa.Table:
    fields = [f for f in schemas.PLAN.fields if not isinstance(f.dataType, TimestampType)]  # as plan.rows crosses (no timestamps)
    rows = [{f.name: value(f.name, f.dataType, i) for f in fields} for i in range(n)]
    for i, r in enumerate(rows):
        r["topic"], r["partition"], r["log_start_offset"], r["high_watermark"], r["cutoff"] = f"t{i // 50}", i % 50, 10, 50, 40
    return pa.Table.from_pylist(rows, schema=to_arrow_schema(StructType(fields)))


def rows_of(table: pa.Table) -> list[Row]:
    made = getattr(pipeline, "rows_of", None)  # the conversion on its own (stop 70); before: inside collect_rows
    return made(table) if made is not None else [Row(**row) for row in table.to_pylist()]


def main() -> int:
    table = plan_table(args.partitions)
    ctx = audit.BatchContext("run", "query", 7, NOW, False, "fp", 3)
    outcomes = {(r["topic"], r["partition"]): DeleteOutcome(r["topic"], r["partition"], 40, 1, 40, None, None, 0, False) for r in table.select(["topic", "partition"]).to_pylist()}
    seconds: dict[str, list[float]] = {"plan rows": [], "producers": [], "intents": [], "outcomes": [], "arrow table": []}
    no_transactions = Plan(rows=None, planned_at=NOW)  # type: ignore[arg-type]  # what with_producers reads of a plan
    # Since stop 83 the plan stays an Arrow table and the audit's rows are made column by column
    # (``audit.intent_table``); before, each was a list of ``Row``s.
    columnar = hasattr(audit, "intent_table")
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        plan: Any = table if columnar else rows_of(table)
        tp = time.perf_counter()
        plan = pipeline.with_producers(no_transactions, plan, lambda: None)  # type: ignore[arg-type]  # no client asked
        t1 = time.perf_counter()
        intents = audit.intent_table(plan, ctx) if columnar else audit.intent_rows(plan, ctx)
        t2 = time.perf_counter()
        done = audit.outcome_table(plan, outcomes, ctx, NOW) if columnar else audit.outcome_rows(plan, outcomes, ctx, NOW)
        t3 = time.perf_counter()
        if columnar:
            written = pa.concat_tables([arrow_table(intents, schemas.AUDIT), arrow_table(done, schemas.AUDIT)])
        else:
            written = arrow_table([*intents, *done], schemas.AUDIT)
        t4 = time.perf_counter()
        assert len(intents) == len(done) == written.num_rows // 2 == args.partitions
        for name, took in zip(seconds, (tp - t0, t1 - tp, t2 - t1, t3 - t2, t4 - t3)):
            seconds[name].append(took)
    print(f"{args.partitions} plan rows, {args.rounds} rounds, spark_purge from {Path(spark_purge.__file__).parent}")
    total = [sum(v[i] for v in seconds.values()) for i in range(args.rounds)]
    for name, values in [*seconds.items(), ("total", total)]:
        print(f"{name:<12} {min(values):6.3f} / {statistics.median(values):6.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
