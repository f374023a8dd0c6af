"""Plan-only benchmark (issue 12): the planner and the progress store at scale, without Kafka.

    ./dev.sh py bench/plan_bench.py --partitions 1000 --groups 1000
    ./dev.sh py bench/plan_bench.py --partitions 30000 --groups 30000 --cycles 3

``bench/cycle_bench.py`` measures a whole cycle on a real broker; this one isolates the Spark
side so it can go further than a local broker holds (30k x 30k) and be run in a loop while the
plan changes. A synthetic ``ClusterSnapshot`` of the cycle bench's shape (topics of
``--per-topic`` partitions; group *i* commits on every partition of topic *i* mod #topics, all
classic groups with members) is built with the ``kafka_state`` source's own Arrow builder
(``source_arrow.snapshot_batch``, its group rows packed as the pipeline reads them) and cached in Spark as the pipeline caches a batch's snapshot
(``pipeline.kept``); each cycle every commit advances by one (as
the cycle bench's consumers do), then it runs what a batch runs of the plan: ``Planner.plan``
against a real Delta progress store, the plan rows to the driver (``pipeline.collect_rows``),
and the store's update from the plan (``ProgressStore.apply``). The first cycle creates the
store and is left out of the summary.

Prints per step min / median seconds and Spark jobs (``--py4j``: and the Py4J commands the
driver's thread sent), and the plan rows per second. ``--parts``
also times the planner's parts inside ``plan``, each forced on its own: the store match (counted
as soon as it is made), the rules' collect and ``compute_plan``. Not a test.
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import yaml


def synthetic(partitions: int, groups: int, per_topic: int, advance: int, now_ms: int):  # type: ignore[no-untyped-def]
    from spark_purge.kafka.model import ClusterSnapshot, GroupCommit, PartitionState

    topics = [f"t{t:05d}" for t in range((partitions + per_topic - 1) // per_topic)]
    parts = tuple(
        PartitionState(topic, p, 1, (1,), (1,), 0, 1_000_000, 1_000_000, False, "delete", None, None, topic_id=f"id-{topic}")
        for i, topic in enumerate(topics)
        for p in range(min(per_topic, partitions - i * per_topic))
    )
    counts = {t: min(per_topic, partitions - i * per_topic) for i, t in enumerate(topics)}
    commits = tuple(
        GroupCommit(f"g{g:05d}", "Stable", "classic", 1, topic, p, 1000 + advance + g % 97, None)
        for g in range(groups)
        for topic in [topics[g % len(topics)]]
        for p in range(counts[topic])
    )
    return ClusterSnapshot(f"snap-{advance}", now_ms, parts, commits)


def bench_config(tmp: Path):  # type: ignore[no-untyped-def]
    """The planner's config for a synthetic snapshot (topics ``t.*``, no Kafka reached, no
    ``min_retention``), written to and loaded from ``tmp``."""
    from spark_purge.config import load
    from spark_purge.testing import workload

    config = workload.purge_config_dict(tmp, "127.0.0.1:9", "t.*", None)
    config["defaults"]["min_retention"] = "0s"
    config_file = tmp / "purge.yaml"
    config_file.write_text(yaml.safe_dump(config))
    return load(config_file)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument(
        "--log-file", choices=("on", "off", "alternate"), default="on",
        help="the store match's task writes the progress log's files, committed as they are (stop 67; a checkout without it: off); "
        "alternate: on in odd cycles only, each way summarised apart (an A/B in one process)",
    )
    ap.add_argument(
        "--packed", choices=("on", "off"), default="on",
        help="the store held packed between batches, as Arrow IPC in binary rows (stop 68; off: nested rows, as before; "
        "a checkout without it ignores this). Run it both ways in turn for an A/B",
    )
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    ap.add_argument(
        "--py4j", action="store_true",
        help="also count the Py4J commands each step sends from the driver's thread (each a round trip to the JVM)",
    )
    ap.add_argument(
        "--parts", action="store_true",
        help="also time the planner's parts, each forced on its own inside `plan`: the store match, the rules' collect, compute_plan",
    )
    ap.add_argument(
        "--catalyst", action="store_true",
        help="also sum Catalyst's phases (analysis, optimization, planning: the query's QueryPlanningTracker) of every "
        "collect and toArrow each step runs (stop 87)",
    )
    ap.add_argument(
        "--rules", type=int, default=0, metavar="N",
        help="also print the N Catalyst rules that took the most time over the steady cycles (every query the cycles "
        "ran; Spark's RuleExecutor metrics, reset after the first cycle) (stop 88)",
    )
    args = ap.parse_args(argv)

    from spark_purge import pipeline
    from spark_purge.pipeline import collect_rows, progress_store
    from spark_purge.planner import Planner
    from spark_purge.py4j_calls import sent_commands
    from spark_purge.session import get_spark
    from spark_purge.source_arrow import snapshot_batch

    part_seconds: dict[str, list[float]] = {}
    if args.parts:
        _time_parts(part_seconds)
    catalyst: dict[str, float] = {}  # --catalyst: Catalyst's phases of the current step, seconds
    if args.catalyst:
        _track_catalyst(catalyst)
    detached = getattr(pipeline, "detached", None)  # None on code before the store's changes were cut (a baseline)
    keep = getattr(pipeline, "kept", None)  # None on code before the snapshot was cut and hashed (a baseline)
    try:  # held rows are freed by detach.drop; Spark's cache (code before detach.held) by unpersist
        from spark_purge.detach import drop as free
    except ImportError:

        def free(df: object) -> None:
            df.unpersist()  # type: ignore[attr-defined]

    spark = get_spark("plan-bench", master="local[2]", conf=dict(c.split("=", 1) for c in args.conf))
    if args.packed == "off":
        _unpacked()
    seconds: dict[str, list[float]] = {"snapshot": [], "plan": [], "rows": [], "progress": []}
    calls: dict[str, list[int]] = {k: [] for k in seconds}  # --py4j
    phases: dict[str, dict[str, list[float]]] = {k: {p: [] for p in CATALYST_PHASES} for k in seconds}  # --catalyst
    jobs: dict[str, list[int]] = {k: [] for k in seconds}
    tracker = spark.sparkContext.statusTracker()
    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp_s:
        tmp = Path(tmp_s)
        cfg = bench_config(tmp)
        store = progress_store(spark, str(tmp / "checkpoint"), app_id="plan-bench")
        # The store's rows nested by partition where the code has it (as the pipeline reads them).
        has_files = hasattr(store, "rewrite_above")  # stop 67: the match's task writes the log's files
        extra = {"rewrite_above": store.rewrite_above} if has_files else {}
        try:  # the pipeline keeps the last batch's discovery pairs (stop 80: the match makes the facts)
            from spark_purge.planner import LastPairs

            extra["last_pairs"] = LastPairs()
        except ImportError:
            pass
        planner = Planner(cfg, lambda _: {}, getattr(store, "read_nested_if_exists", store.read_if_exists), **extra)
        way: list[str] = []  # per cycle: "files" or "spark"
        # As the pipeline reads a snapshot: its group rows packed (stop 82), where the code has it.
        view = "packed" if "packed" in getattr(importlib.import_module("spark_purge.source"), "VIEWS", {}) else "snapshot"
        n_commits = 0

        def step(name: str, cycle: int):  # type: ignore[no-untyped-def]
            class Step:
                def __enter__(self) -> None:
                    spark.sparkContext.setJobGroup(f"plan-bench-{cycle}-{name}", name)
                    if args.py4j:
                        self.counting = sent_commands(spark.sparkContext, threading.current_thread())
                        self.sent = self.counting.__enter__()
                    catalyst.clear()
                    self.t0 = time.perf_counter()

                def __exit__(self, *exc: object) -> None:
                    seconds[name].append(time.perf_counter() - self.t0)
                    for phase in CATALYST_PHASES:
                        phases[name][phase].append(catalyst.get(phase, 0.0))
                    if args.py4j:
                        calls[name].append(len(self.sent))
                        self.counting.__exit__(None, None, None)
                    jobs[name].append(len(tracker.getJobIdsForGroup(f"plan-bench-{cycle}-{name}")))

            return Step()

        rule_executor = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor  # type: ignore[union-attr]
        rule_times = ""
        for c in range(args.cycles):
            if args.rules and c == min(1, args.cycles - 1):
                rule_executor.resetMetrics()
            now = datetime.now(timezone.utc)
            snap = synthetic(args.partitions, args.groups, args.per_topic, c, int(now.timestamp() * 1000))
            n_commits = len(snap.commits)
            with step("snapshot", c):
                batch = snapshot_batch(snap, view)
                df = spark.createDataFrame(pa.Table.from_batches([batch]))
                df = keep(df) if keep is not None else df.persist()  # as the pipeline holds a batch's snapshot
                df.count()
            files = has_files and (args.log_file == "on" or (args.log_file == "alternate" and c % 2 == 1))
            way.append("files" if files else "spark")
            with step("plan", c):
                plan = planner.plan(df, c) if files else planner.plan(df)
                assert plan is not None
            with step("rows", c):
                rows = collect_rows(plan.rows)
            with step("progress", c):
                positions = getattr(plan, "positions", None)  # None on code before Positions (a baseline)
                if positions is not None and hasattr(positions, "hand_over"):  # as the pipeline does (the store keeps the match's rows)
                    log_file = positions.log_file() if files else None
                    after, holder = positions.hand_over(plan.planned_at)
                    plan.release()
                    if files:
                        store.record(after, c, holder=holder, log_file=log_file)
                    else:
                        store.record(after, c, holder=holder)
                elif positions is not None and hasattr(store, "record"):  # as the pipeline did (the store kept a copy)
                    from spark_purge.detach import cut

                    after = cut(positions.after(plan.planned_at))
                    plan.release()
                    store.record(after, c)
                elif positions is not None and detached is not None:  # as the pipeline did before
                    with detached(positions.changed(plan.planned_at)) as changed:
                        plan.release()
                        store.apply(changed, c)
                elif positions is not None:
                    store.apply(positions.changed(plan.planned_at), c)
                else:
                    from spark_purge.policy import split_snapshot

                    parts, groups = split_snapshot(df)
                    store.update(groups, plan.planned_at, c, parts)
            if hasattr(plan, "release"):
                plan.release()
            free(df)
            took = sum(seconds[k][-1] for k in seconds)
            print(f"cycle {c}: {took:.2f}s ({len(rows)} plan rows, {sum(r['actionable'] for r in rows)} actionable)", flush=True)
        if args.rules:
            rule_times = str(rule_executor.dumpTimeSpent())
    spark.stop()
    keep = slice(1, None) if args.cycles > 1 else slice(None)
    print(f"\n{args.partitions} partitions x {args.groups} groups ({n_commits} commits), steady-state cycles {len(seconds['plan'][keep])}")
    print(f"{'step':<10} {'min / median s':>16}  jobs" + ("  Py4J commands (median)" if args.py4j else ""))
    for name, values in seconds.items():
        v = values[keep]
        count = f"  {statistics.median(calls[name][keep]):8}" if args.py4j else ""
        print(f"{name:<10} {min(v):7.2f} / {statistics.median(v):6.2f}  {statistics.median(jobs[name][keep]):4}{count}")
    total = [sum(seconds[k][i] for k in seconds) for i in range(len(seconds["plan"]))][keep]
    print(f"{'total':<10} {min(total):7.2f} / {statistics.median(total):6.2f}")
    if args.catalyst:
        print("Catalyst's phases of the step's collects and toArrow calls, median s: " + ", ".join(CATALYST_PHASES))
        for name in seconds:
            print(f"  {name:<10} " + "  ".join(f"{statistics.median(phases[name][p][keep]):6.3f}" for p in CATALYST_PHASES))
    if args.log_file == "alternate" and len(set(way[keep])) == 2:
        print("each way apart (the log's files made by the match's task and committed / Spark's writer), min / median s:")
        for name in [*seconds, "total"]:
            values = total if name == "total" else seconds[name][keep]
            cells = []
            for kind in ("files", "spark"):
                v = [x for x, w in zip(values, way[keep]) if w == kind]
                cells.append(f"{kind} {min(v):6.2f} / {statistics.median(v):6.2f}")
            print(f"  {name:<10} " + "   ".join(cells))
    if rule_times:
        print(_top_rules(rule_times, args.rules, len(seconds["plan"][keep])))
    if part_seconds:
        print("inside plan, each part forced on its own (min / median s):")
        for name, values in part_seconds.items():
            v = values[1:] if len(values) > 1 else values
            print(f"  {name:<26} {min(v):6.2f} / {statistics.median(v):6.2f}")
    return 0


def _top_rules(dump: str, n: int, cycles: int) -> str:
    """The ``n`` costliest rules of ``RuleExecutor.dumpTimeSpent``'s text (a line per rule: its
    name, effective / total time in ns, effective / total runs), per cycle."""
    import re

    rows = []
    for line in dump.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s*/\s*(\d+)\s+(\d+)\s*/\s*(\d+)\s*$", line)
        if m:
            rows.append((int(m[3]), int(m[2]), m[1], f"{m[4]} / {m[5]}"))
    head = [line.strip() for line in dump.splitlines() if line.strip().startswith("Total")]
    rows.sort(reverse=True)
    lines = [f"Catalyst rules over the {cycles} steady cycles (ms a cycle: total, of it effective; runs effective / total):", *("  " + h for h in head)]
    lines += [f"  {name.rsplit('.', 1)[-1]:<52} {total / 1e6 / cycles:8.2f} {effective / 1e6 / cycles:8.2f}   {runs}" for total, effective, name, runs in rows[:n]]
    return "\n".join(lines)


# Spark's QueryPlanningTracker phases (``--catalyst``).
CATALYST_PHASES = ("analysis", "optimization", "planning")


def _track_catalyst(into: dict[str, float]) -> None:
    """Wrap ``DataFrame.collect`` and ``toArrow`` to add, after each, the phases Catalyst spent
    on its query (``QueryExecution.tracker``) to ``into`` (seconds by phase). Analysis is counted
    where a DataFrame made by the step is collected: a DataFrame analysed earlier and collected
    now counts its analysis again (none of the steps does)."""
    from pyspark.sql.classic.dataframe import DataFrame

    def tracked(method):  # type: ignore[no-untyped-def]
        def run(self, *a, **k):  # type: ignore[no-untyped-def]
            result = method(self, *a, **k)
            summaries = self._jdf.queryExecution().tracker().phases()
            for phase in CATALYST_PHASES:
                found = summaries.get(phase)
                if found.isDefined():
                    into[phase] = into.get(phase, 0.0) + found.get().durationMs() / 1000
            return result

        return run

    DataFrame.collect = tracked(DataFrame.collect)  # type: ignore[method-assign]
    DataFrame.toArrow = tracked(DataFrame.toArrow)  # type: ignore[method-assign]


def _unpacked() -> None:
    """``--packed off``: the nested match holds the store as nested rows (a checkout before stop
    68 has no choice: nothing to change)."""
    import inspect

    from spark_purge.policy import positions

    kind = getattr(positions, "NestedPositions", None)
    if kind is None or "packed" not in inspect.signature(kind.match).parameters:
        return
    match = kind.match.__func__
    kind.match = classmethod(lambda cls, *a, **k: match(cls, *a, **{**k, "packed": False}))


def _time_parts(parts: dict[str, list[float]]) -> None:
    """Wrap the planner's parts so each is timed (``--parts``): the store match is materialized
    (counted) as soon as it is made, so its cost is its own and not the first action's after it."""
    from spark_purge import planner as planner_module
    from spark_purge.policy import plan as plan_module
    from spark_purge.policy.positions import Positions

    def timed(name: str, call):  # type: ignore[no-untyped-def]
        def run(*a, **k):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return call(*a, **k)
            finally:
                parts.setdefault(name, []).append(time.perf_counter() - t0)

        return run

    def materialized(kind, rows: str) -> None:  # type: ignore[no-untyped-def]
        """``kind.match`` counting its held ``rows`` (an attribute) as soon as it is made."""
        match = kind.match.__func__

        def matched(cls, *a, **k):  # type: ignore[no-untyped-def]
            positions = match(cls, *a, **k)
            timed("store match (materialized)", getattr(positions, rows).count)()
            return positions

        kind.match = classmethod(matched)

    materialized(Positions, "matched")
    try:
        from spark_purge.policy.positions import NestedPositions
    except ImportError:  # code before it (a baseline)
        pass
    else:
        materialized(NestedPositions, "out")
    plan_module._selected_topic_rules = timed("rules' collect", plan_module._selected_topic_rules)
    planner_module.compute_plan = timed("compute_plan (with rules)", planner_module.compute_plan)


if __name__ == "__main__":
    sys.exit(main())
