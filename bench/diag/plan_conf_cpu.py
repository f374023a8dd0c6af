"""A plan with and without a Spark SQL setting, alternating in one process: wall time and the
Spark JVM's CPU seconds of ``Planner.plan`` + its rows' collect.

    PYTHONPATH=. ./dev.sh py bench/diag/plan_conf_cpu.py [PARTITIONS] [KEY] [VALUE]

Defaults: 1000 (partitions and groups, ``plan_bench.synthetic``'s shape), the Types Framework
switch, ``false``. 40 rounds, the setting unset and set in turn, each on a new held synthetic
snapshot and no progress store; the first 10 left out. Prints each side's min / median wall
seconds and JVM CPU seconds (``/proc/<pid>/stat``: less moved by other load than wall time).
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import build_bench

from spark_purge.detach import drop
from spark_purge.pipeline import collect_rows
from spark_purge.planner import Planner
from spark_purge.session import TYPES_FRAMEWORK, get_spark

TICK = os.sysconf("SC_CLK_TCK")


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    key = sys.argv[2] if len(sys.argv) > 2 else TYPES_FRAMEWORK
    value = sys.argv[3] if len(sys.argv) > 3 else "false"
    spark = get_spark("plan-conf-cpu", master="local[2]")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]

    def cpu() -> float:
        fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    planner = Planner(build_bench._config(Path(tempfile.mkdtemp())), lambda _: {})
    sides: dict[str, tuple[list[float], list[float]]] = {"unset": ([], []), value: ([], [])}
    for r in range(40):
        side = value if r % 2 else "unset"
        if r % 2:
            spark.conf.set(key, value)
        else:
            spark.conf.unset(key)
        df = build_bench._held_snapshot(spark, size, size, r, datetime.now(timezone.utc))
        c0, t0 = cpu(), time.perf_counter()
        plan = planner.plan(df)
        assert plan is not None
        collect_rows(plan.rows)
        took, used = time.perf_counter() - t0, cpu() - c0
        plan.release()
        drop(df)
        if r >= 10:
            sides[side][0].append(took)
            sides[side][1].append(used)
    for side, (wall, jvm) in sides.items():
        print(
            f"{key}={side}: wall min {min(wall):.3f} median {statistics.median(wall):.3f}; "
            f"JVM CPU min {min(jvm):.2f} median {statistics.median(jvm):.2f} ({len(wall)} rounds)"
        )
    spark.stop()


if __name__ == "__main__":
    main()
