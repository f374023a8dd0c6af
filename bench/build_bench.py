"""Building a batch's plan, interleaved in one process (issue 12, stop 60): what the driver spends
before any Spark job runs, and the plan with and without the vanished-rows skip.

    ./dev.sh py bench/build_bench.py [--partitions 1000] [--groups 1000] [--rounds 14]
    ./dev.sh py bench/build_bench.py --any-gone [--cycles 24]

Side-by-side runs of ``cycle_bench.py`` on a noisy machine can differ by more than a change
does (stop 60: both runs of the new code were the slower, and so were phases it does not
touch). This one compares within one process, switching between the variants every step, so
the machine's drift falls on all of them alike.

Default: a synthetic snapshot of the cycle bench's shape (``plan_bench.synthetic``), held as
the pipeline holds it, an empty progress store; the rules' collect made once beforehand. Then
``--rounds`` rounds, each building the plan once in each of 8 modes (the order reversed every
other round): PySpark's DataFrame debugging on / off, ``py4j_calls`` installed or PySpark's own
functions put back, Spark's DataFrame query context on / off. A build is ``Positions.match``,
``compute_plan`` and ``Positions.after``, analysed, not run. Prints each mode's min / median
seconds over the rounds after the first four, and its Py4J calls on the driver's
thread (Py4J's finalizer thread, freeing objects, left out).

``--any-gone``: ``plan_bench``'s loop (every commit advancing, a real Delta progress store kept
as the pipeline keeps it), alternating cycles with the planner's gone flag
(``Positions.staleness_table``: whether any remembered position vanished) and with it forced
true (vanished rows always joined, as before stop 60); prints each side's ``Planner.plan`` +
``collect_rows`` seconds (wall, and the Spark JVM's CPU) over the cycles from the fifth on.
``--toggle-conf KEY=VALUE``: the same loop, alternating a Spark SQL setting's session value
and VALUE. Not a test.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa
import yaml


def _config(tmp: Path) -> Any:
    from spark_purge.config import load
    from spark_purge.testing import workload

    config = workload.purge_config_dict(tmp, "127.0.0.1:9", "t.*", None)
    config["defaults"]["min_retention"] = "0s"
    (tmp / "purge.yaml").write_text(yaml.safe_dump(config))
    return load(tmp / "purge.yaml")


def _held_snapshot(spark: Any, partitions: int, groups: int, advance: int, now: datetime) -> Any:
    from plan_bench import synthetic

    from spark_purge.pipeline import kept
    from spark_purge.source_arrow import snapshot_batch

    snap = synthetic(partitions, groups, 50, advance, int(now.timestamp() * 1000))
    df = kept(spark.createDataFrame(pa.Table.from_batches([snapshot_batch(snap, "snapshot")])))
    df.count()
    return df


def build_modes(spark: Any, args: argparse.Namespace) -> None:
    import pyspark.errors.utils as debugging

    from spark_purge import py4j_calls
    from spark_purge.policy import compute_plan, split_snapshot
    from spark_purge.policy import plan as plan_module
    from spark_purge.policy.positions import Positions

    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp_s:
        cfg = _config(Path(tmp_s))
    now = datetime.now(timezone.utc)
    df = _held_snapshot(spark, args.partitions, args.groups, 0, now)
    parts, groups = split_snapshot(df)
    store = spark.createDataFrame(
        [], "group_id string, topic string, partition int, committed_offset long, last_progress_time timestamp, group_type string, topic_id string"
    )
    rules = plan_module._selected_topic_rules(parts, groups, cfg, now, {})
    plan_module._selected_topic_rules = lambda *a, **k: rules  # type: ignore[assignment]  # building only: no job

    def mode(debug: bool, calls: bool, context: bool) -> None:
        debugging._enable_debugging_cache = debug  # type: ignore[attr-defined]  # PySpark reads it once per process
        (py4j_calls.install if calls else py4j_calls.uninstall)()
        spark.conf.set("spark.sql.dataFrameQueryContext.enabled", str(context).lower())

    def build() -> None:
        positions = Positions.match(parts, groups, store, keep=False, at=now)
        rows = compute_plan(
            df.select(*[c for c in df.columns if c != "unreadable_groups"]), None, cfg, now=now, progress=store,
            staleness=positions.staleness([]),
        )
        rows._jdf.queryExecution().analyzed()
        positions.after(now)._jdf.queryExecution().analyzed()

    modes = list(itertools.product([True, False], [False, True], [True, False]))
    seconds: dict[tuple[bool, ...], list[float]] = {m: [] for m in modes}
    calls: dict[tuple[bool, ...], list[int]] = {m: [] for m in modes}
    try:
        # Not Py4J's finalizer thread's commands (freeing objects at random times).
        with py4j_calls.sent_commands(spark.sparkContext, threading.main_thread()) as sent:
            for r in range(args.rounds):
                for m in modes if r % 2 == 0 else modes[::-1]:
                    mode(*m)
                    sent.clear()
                    t0 = time.perf_counter()
                    build()
                    seconds[m].append(time.perf_counter() - t0)
                    calls[m].append(len(sent))
    finally:
        mode(False, True, False)  # as get_spark leaves a session
    on_off = {True: "on ", False: "off"}
    print(f"building a {args.partitions} x {args.groups} plan, {args.rounds} rounds (the last {args.rounds - 4})")
    for m in modes:
        v = seconds[m][4:]
        print(
            f"debugging {on_off[m[0]]} py4j_calls {on_off[m[1]]} query context {on_off[m[2]]}: "
            f"build min {min(v):.3f} median {statistics.median(v):.3f} s, {statistics.median(calls[m][4:]):.0f} Py4J calls"
        )


def alternating(spark: Any, args: argparse.Namespace, sides: list[tuple[str, Callable[[], None]]]) -> None:
    """``plan_bench``'s loop, each cycle on the next of ``sides`` (a name, and what puts that
    side in place before the cycle); prints each side's plan + rows seconds, wall and the Spark
    JVM's CPU (less moved by other load than wall time)."""
    from cycle_bench import _cpu_s

    from spark_purge.detach import cut, drop
    from spark_purge.pipeline import collect_rows, progress_store
    from spark_purge.planner import Planner
    from spark_purge.policy import split_snapshot

    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    seconds: dict[str, list[float]] = {name: [] for name, _ in sides}
    cpu: dict[str, list[float]] = {name: [] for name, _ in sides}
    with tempfile.TemporaryDirectory(prefix="build-bench-") as tmp_s:
        tmp = Path(tmp_s)
        store = progress_store(spark, str(tmp / "checkpoint"), app_id="build-bench")
        planner = Planner(_config(tmp), lambda _: {}, store.read_if_exists)
        for c in range(args.cycles):
            side, put = sides[c % len(sides)]
            put()
            df = _held_snapshot(spark, args.partitions, args.groups, c, datetime.now(timezone.utc))
            c0, t0 = _cpu_s(jvm_pid), time.perf_counter()
            plan = planner.plan(df)
            assert plan is not None
            collect_rows(plan.rows)
            took, used = time.perf_counter() - t0, _cpu_s(jvm_pid) - c0
            if plan.positions is not None:
                after = cut(plan.positions.after(plan.planned_at), serialized=True)
                plan.release()
                store.record(after, c)
            else:
                parts, groups = split_snapshot(df)
                store.update(groups, plan.planned_at, c, parts)
            plan.release()
            drop(df)
            if c >= 4:
                seconds[side].append(took)
                cpu[side].append(used)
            print(f"cycle {c} ({side}): plan + rows {took:.2f}s", flush=True)
    for side, v in seconds.items():
        print(
            f"{side}: plan + rows min {min(v):.3f} median {statistics.median(v):.3f} s, "
            f"JVM CPU min {min(cpu[side]):.2f} median {statistics.median(cpu[side]):.2f} s ({len(v)} cycles)"
        )


def any_gone(spark: Any, args: argparse.Namespace) -> None:
    from spark_purge.policy.positions import Positions

    real = Positions.staleness_table

    def always_gone(self: Positions, unreadable: Iterable[str] = ()) -> tuple[Any, bool]:
        return real(self, unreadable)[0], True

    def put(use: bool) -> Callable[[], None]:
        def side() -> None:
            Positions.staleness_table = real if use else always_gone  # type: ignore[method-assign]

        return side

    try:
        alternating(spark, args, [("always joined", put(False)), ("gone flag", put(True))])
    finally:
        Positions.staleness_table = real  # type: ignore[method-assign]


def toggle_conf(spark: Any, args: argparse.Namespace) -> None:
    key, _, value = args.toggle_conf.partition("=")
    before = spark.conf.get(key, None)

    def put(v: str | None) -> Callable[[], None]:
        def side() -> None:
            if v is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, v)

        return side

    try:
        alternating(spark, args, [(f"{key}={before}", put(before)), (args.toggle_conf, put(value))])
    finally:
        put(before)()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=14)
    ap.add_argument("--any-gone", action="store_true", help="plan cycles with the planner's gone flag (Positions.staleness_table) and with it forced true, alternating")
    ap.add_argument("--toggle-conf", metavar="KEY=VALUE", help="plan cycles with the session's value of a Spark SQL setting and with VALUE, alternating")
    ap.add_argument("--cycles", type=int, default=24)
    args = ap.parse_args(argv)
    if args.rounds <= 4 or args.cycles <= 5:
        ap.error("--rounds must be above 4 and --cycles above 5 (the first ones are left out)")
    from spark_purge.session import get_spark

    spark = get_spark("build-bench", master="local[2]")
    try:
        (any_gone if args.any_gone else toggle_conf if args.toggle_conf else build_modes)(spark, args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
