"""The progress store's append with and without per-column statistics (issue 12).

    ./dev.sh py bench/progress_append_bench.py [--rows 500000] [--rounds 6]

Appends the same held rows of the progress log's columns (``audit.PROGRESS_LOG``; 200 topics of
50 partitions, as the cycle bench's 500,000 commits at 10k x 10k) to two Delta tables, one with
Delta's default statistics (min / max / null counts of the first 32 columns) and one with
``delta.dataSkippingNumIndexedCols = 0`` (``audit.PROGRESS_PROPERTIES``: the row count only),
alternating, and prints min / median seconds of each (the first round left out) and the
statistics the second table's last file carries. Not a test.
"""
from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from spark_purge.audit import PROGRESS_PROPERTIES
    from spark_purge.session import get_spark

    spark = get_spark("progress-append-bench")
    rows = spark.range(args.rows).select(
        F.concat(F.lit("t"), F.lpad((F.col("id") % 200).cast("string"), 5, "0")).alias("topic"),
        ((F.col("id") / 200) % 50).cast("int").alias("partition"),
        F.concat(F.lit("g"), F.lpad((F.col("id") / 50).cast("long").cast("string"), 5, "0")).alias("group_id"),
        (F.col("id") % 97 + 1000).alias("committed_offset"),
        F.current_timestamp().alias("last_progress_time"),
        F.lit("classic").alias("group_type"),
        F.concat(F.lit("id-"), (F.col("id") % 200).cast("string")).alias("topic_id"),
        F.lit(7).cast("long").alias("batch_id"),
    ).coalesce(1).localCheckpoint(eager=True)  # one task, as the store's append from the match's held rows
    times: dict[str, list[float]] = {"default statistics": [], "row count only": []}
    with tempfile.TemporaryDirectory(prefix="progress-append-") as tmp:
        paths = dict(zip(times, (f"{tmp}/stats", f"{tmp}/count")))
        for kind, path in paths.items():
            rows.limit(1).write.format("delta").save(path)
            if kind == "row count only":
                pairs = ", ".join(f"'{k}' = '{v}'" for k, v in PROGRESS_PROPERTIES.items())
                spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({pairs})")
        for _ in range(args.rounds):
            for kind, path in paths.items():
                start = time.perf_counter()
                rows.write.format("delta").mode("append").save(path)
                times[kind].append(time.perf_counter() - start)
        print(f"{args.rows} rows appended, {args.rounds} rounds alternating (the first left out): seconds")
        for kind, values in times.items():
            kept = values[1:] or values
            print(f"  {kind:20s} min {min(kept):.2f}  median {statistics.median(kept):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
        newest = sorted(glob.glob(f"{paths['row count only']}/_delta_log/*.json"))[-1]
        stats = [json.loads(line)["add"]["stats"] for line in Path(newest).read_text().splitlines() if '"add"' in line]
        print(f"  a file's statistics with {PROGRESS_PROPERTIES}: {stats[0] if stats else None}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
