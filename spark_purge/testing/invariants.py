"""Randomized, seeded safety check of the purge against a real Kafka cluster.

A workload of producers, consumer groups committing at their own random speeds and random
faults runs for many purge cycles (``PurgePipeline.process_batch`` on a fresh snapshot each
cycle, what one ``foreachBatch`` call does). After every cycle the checker reads the log start
offsets **from Kafka itself** and compares them with what it knows independently — the offsets
it committed for each group and the timestamps of the records it produced:

    log_start_after(p) <= max(log_start_before(p), safe(p))
    safe(p) = min(min over p's required groups of their commit on p   (missing commit: blocks),
                  first offset of p produced at or after snapshot_time - min_retention,
                  high watermark)

It also checks the cycle's audit: one outcome per planned partition, no duplicates, every delete
preceded by an intent with the same cutoff, and no intent whose cutoff exceeds ``safe(p)``.
Faults (a seeded choice per cycle): a node SIGKILLed before a cycle or between the intent write
and DeleteRecords (restarted after the cycle), a group rewound to lower offsets, partitions added.

    ./dev.sh py -m spark_purge.testing.invariants --cycles 200 --seed 7          # its own 3 nodes
    ./dev.sh py -m spark_purge.testing.invariants --cycles 20 --seed 1 --nodes 1 # no node faults

It prints cycles, faults injected, records deleted, audit rows checked and violations, and exits
0 only when there are no violations. ``tests/integration/faults/test_invariants.py`` runs a short
version on the fault suite's cluster. Producing, commits, log start offsets and audit rows go
through :mod:`spark_purge.testing.workload`, like every other harness.
"""
from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from kafka import KafkaProducer
from kafka.admin import NewPartitions
from kafka.structs import TopicPartition
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig, from_dict
from spark_purge.errors import from_spark_exception
from spark_purge.pipeline import PurgePipeline
from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.errors import WorkloadError
from spark_purge.testing.workload import TopicPartitionKey

log = logging.getLogger(__name__)

# Rules of the workload: topic A needs two listed groups; topic B every group that commits on
# it, and never deletes records younger than FLOOR_MS.
FLOOR_MS = 3_000
MAX_PARTITIONS = 6
GROUP_SPEEDS = {"g0": 40, "g1": 20, "g2": 8}
FAULTS = ("node_kill", "leader_kill_mid_cycle", "group_rewind", "partitions_added")


@dataclass
class InvariantReport:
    seed: int
    cycles: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    records_produced: int = 0
    records_deleted: int = 0
    audit_rows_checked: int = 0
    cycle_errors: list[str] = field(default_factory=list)
    failed_cycles: set[int] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items())) or "none"
        lines = [
            f"seed:               {self.seed}",
            f"cycles:             {self.cycles}",
            f"faults injected:    {sum(self.faults.values())} ({faults})",
            f"records produced:   {self.records_produced}",
            f"records deleted:    {self.records_deleted}",
            f"audit rows checked: {self.audit_rows_checked}",
            f"cycle errors:       {len(self.cycle_errors)}",
            f"violations:         {len(self.violations)}",
            f"seconds:            {self.seconds:.0f}",
        ]
        lines += [f"  violation: {v}" for v in self.violations[:20]]
        lines += [f"  cycle error: {e}" for e in self.cycle_errors[:10]]
        if self.cycle_errors:
            lines.append("  (full tracebacks: cycle_errors.log in the workdir)")
        return "\n".join(lines)


class InvariantWorkload:
    """The workload and its checker. ``cluster`` is a ``LocalKafka`` (node faults need it)."""

    def __init__(
        self,
        spark: SparkSession,
        cluster: LocalKafka,
        *,
        seed: int,
        workdir: Path,
        fault_rate: float = 0.35,
        delete_timeout: str = "15s",
        sabotage_cycle: Optional[int] = None,
        schedule: Optional[Sequence[Optional[str]]] = None,
        out: Callable[[str], None] = print,
    ) -> None:
        unknown = sorted({f for f in schedule or () if f is not None and f not in FAULTS})
        if unknown:
            raise ValueError(f"schedule: unknown fault(s) {unknown}; expected None or one of {list(FAULTS)}")
        self.schedule = list(schedule) if schedule else None  # fault per cycle (cycled), instead of random

        self.spark = spark
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.report = InvariantReport(seed=seed)
        self.fault_rate = fault_rate
        self.sabotage_cycle = sabotage_cycle  # test of the checker itself: one unsafe delete
        self.out = out
        self.workdir = workdir
        suffix = uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]
        self.topic_a, self.topic_b = f"inv-a-{suffix}", f"inv-b-{suffix}"
        self.partitions = {self.topic_a: 3, self.topic_b: 3}
        self.replication = min(3, len(cluster.node_ids))
        self.admin = workload.new_admin(cluster.bootstrap_servers, **cluster.client_kwargs())
        self.producer = self._new_producer()
        # offset -> CreateTime we set, per partition, from the producer's own acknowledgements
        self.timestamps: dict[TopicPartitionKey, list[int]] = {}
        self.commits: dict[str, dict[TopicPartitionKey, int]] = {g: {} for g in GROUP_SPEEDS}
        self.required_a = ("g0", "g1")
        self.committers_b = ("g1", "g2")  # B's rule discovers its groups from commits
        self.down: list[int] = []
        self.config = self._config(delete_timeout)

    # ---- setup ------------------------------------------------------------------------------
    def _config(self, delete_timeout: str) -> PurgeConfig:
        return from_dict(
            {
                "kafka": {
                    "bootstrap_servers": self.cluster.bootstrap_servers,
                    "request_timeout": "10s",
                    "delete_timeout": delete_timeout,
                },
                "defaults": {"min_retention": "0s", "min_step": 1, "stale_after": "1h"},
                "rules": [
                    {"name": "a", "topics": self.topic_a, "required_groups": list(self.required_a)},
                    {"name": "b", "topics": self.topic_b, "min_retention": f"{FLOOR_MS}ms"},
                ],
                "audit": {"path": str(self.workdir / "audit")},
                "stream": {"checkpoint_location": str(self.workdir / "checkpoint"), "trigger_interval": "1s"},
            }
        )

    def _new_producer(self) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=self.cluster.bootstrap_servers, acks="all", linger_ms=5, **self.cluster.client_kwargs()
        )

    def _create_topics(self) -> None:
        configs = {"min.insync.replicas": "2"} if self.replication >= 3 else {}
        workload.create_topics(self.admin, self.partitions, self.replication, configs)

    # ---- the run ----------------------------------------------------------------------------
    def run(self, cycles: int) -> InvariantReport:
        started = time.monotonic()
        self._create_topics()
        pipeline = workload.new_pipeline(self.spark, self.config, fault_hook=self._mid_cycle_hook)
        self._mid_cycle_kill = False
        try:
            for cycle in range(cycles):
                self._cycle(pipeline, cycle)
                self.report.cycles += 1
                if cycle % 10 == 9 or cycle == cycles - 1:
                    r = self.report
                    self.out(
                        f"cycle {cycle + 1}/{cycles}: faults {sum(r.faults.values())}, deleted {r.records_deleted}, "
                        f"audit rows {r.audit_rows_checked}, errors {len(r.cycle_errors)}, violations {len(r.violations)}"
                    )
        finally:
            pipeline.close()
            self._restart_down()
            self.producer.close()
            self.admin.close()
            self.report.seconds = time.monotonic() - started
        return self.report

    def _cycle(self, pipeline: PurgePipeline, cycle: int) -> None:
        self._restart_down()
        self._produce()
        self._consume()
        if self.schedule is not None:
            fault = self.schedule[cycle % len(self.schedule)]
        else:
            fault = self.rng.choice(FAULTS) if self.rng.random() < self.fault_rate else None
        if fault in ("node_kill", "leader_kill_mid_cycle") and len(self.cluster.node_ids) < 3:
            fault = self.rng.choice(("group_rewind", "partitions_added"))  # one node: no node faults
        if fault == "group_rewind":
            self._rewind()
        elif fault == "partitions_added":
            self._add_partition()
        elif fault == "node_kill":
            victim = self.rng.choice(self.cluster.node_ids)
            self.cluster.kill_node(victim)
            self.down.append(victim)
        self._mid_cycle_kill = fault == "leader_kill_mid_cycle"
        if fault:
            self.report.faults[fault] += 1
        before = self._log_starts()
        cycle_started = datetime.now(timezone.utc)
        try:
            workload.run_cycle(pipeline, cycle)
        except Exception as exc:
            first_line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
            # Spark wraps a data-source or foreachBatch error: name spark-purge's own error inside.
            inner = from_spark_exception(exc)
            cause = f" ... {type(inner).__name__}: {str(inner)[:300]}" if inner is not exc else ""
            self.report.cycle_errors.append(f"cycle {cycle}: {type(exc).__name__}: {first_line[:200]}{cause}")
            self.report.failed_cycles.add(cycle)
            with open(self.workdir / "cycle_errors.log", "a", encoding="utf-8") as f:
                f.write(f"=== cycle {cycle} (fault: {fault})\n{traceback.format_exc()}\n")
            pipeline.close()  # a fresh client next cycle
        if self.sabotage_cycle == cycle:
            self._sabotage(before)
        after = self._log_starts()
        self._check(cycle, before, after, cycle_started)

    # ---- workload steps ---------------------------------------------------------------------
    def _tps(self, topic: str) -> list[TopicPartitionKey]:
        return [(topic, p) for p in range(self.partitions[topic])]

    def _produce(self) -> None:
        for topic in self.partitions:
            now_ms = int(time.time() * 1000)
            counts = {p: self.rng.randint(0, 30) for _, p in self._tps(topic)}
            sent = {p: [now_ms] * n for p, n in counts.items()}
            for meta in workload.produce(self.producer, topic, counts, timestamps_ms=sent):
                tp = (topic, meta.partition)
                stamps = self.timestamps.setdefault(tp, [])
                if meta.offset != len(stamps):  # only our producer writes: offsets are contiguous
                    raise WorkloadError(f"{tp}: acknowledged offset {meta.offset}, expected {len(stamps)}")
                stamps.append(now_ms)
                self.report.records_produced += 1

    def _high_watermark(self, tp: TopicPartitionKey) -> int:
        return len(self.timestamps.get(tp, []))

    def _consume(self) -> None:
        """Each group moves forward at its own speed (sometimes not at all) and commits."""
        for group, speed in GROUP_SPEEDS.items():
            if self.rng.random() < 0.2:
                continue
            topics = [t for t, groups in ((self.topic_a, self.required_a), (self.topic_b, self.committers_b)) if group in groups]
            wanted = {}
            for topic in topics:
                for tp in self._tps(topic):
                    old = self.commits[group].get(tp, 0)
                    wanted[tp] = min(self._high_watermark(tp), old + self.rng.randint(0, speed))
            self._commit(group, wanted)

    def _commit(self, group: str, offsets: dict[TopicPartitionKey, int]) -> None:
        workload.commit(self.admin, group, offsets)
        self.commits[group].update(offsets)

    def _rewind(self) -> None:
        group = self.rng.choice(list(GROUP_SPEEDS))
        mine = self.commits[group]
        if not mine:
            return
        self._commit(group, {tp: self.rng.randint(0, off) for tp, off in mine.items()})

    def _add_partition(self) -> None:
        topic = self.rng.choice(list(self.partitions))
        if self.partitions[topic] >= MAX_PARTITIONS:
            return
        self.partitions[topic] += 1
        workload.retry(lambda: self.admin.create_partitions({topic: NewPartitions(self.partitions[topic])}), "add partition")
        workload.wait_for_leaders(self.admin, {topic: self.partitions[topic]})
        # kafka-python's producer rejects a partition its cached metadata does not list yet
        # ("Unrecognized partition"): a fresh producer reads the new count on its first send.
        self.producer.close()
        self.producer = self._new_producer()

    def _mid_cycle_hook(self, step: str, batch_id: int) -> None:
        if step == "intents_written" and self._mid_cycle_kill and not self.down:
            leader = workload.leaders(self.admin, self.topic_a).get(0, -1)
            if leader >= 0:
                self.cluster.kill_node(leader)
                self.down.append(leader)

    def _restart_down(self) -> None:
        for node_id in self.down:
            self.cluster.start_node(node_id, wait=False)
        if self.down:
            self.cluster.wait_ready()
        self.down = []

    def _sabotage(self, before: dict[TopicPartitionKey, int]) -> None:
        """Checker self-test: delete one record past the safe point behind the purge's back."""
        tp = (self.topic_a, 0)
        target = self._high_watermark(tp)
        if target > before[tp]:
            self.admin.delete_records({TopicPartition(*tp): target})

    # ---- the checker ------------------------------------------------------------------------
    def _log_starts(self) -> dict[TopicPartitionKey, int]:
        return workload.log_start_offsets(self.admin, [tp for topic in self.partitions for tp in self._tps(topic)])

    def _safe(self, tp: TopicPartitionKey, snapshot_ms: int) -> int:
        topic = tp[0]
        if topic == self.topic_a:
            required = list(self.required_a)
        else:  # discovered: every group that has committed on the topic
            required = [g for g in GROUP_SPEEDS if any(k[0] == topic for k in self.commits[g])]
        hw = self._high_watermark(tp)
        if not required or any(tp not in self.commits[g] for g in required):
            return -1  # blocked: nothing may be deleted
        safe = min([self.commits[g][tp] for g in required] + [hw])
        if topic == self.topic_b:
            # +1 ms of slack for the snapshot time's rounding; records stamped before the floor.
            floor_ms = snapshot_ms - FLOOR_MS + 1
            stamps = self.timestamps.get(tp, [])
            floor = next((i for i, ts in enumerate(stamps) if ts >= floor_ms), len(stamps))
            safe = min(safe, floor)
        return safe

    def _check(self, cycle: int, before: dict[TopicPartitionKey, int], after: dict[TopicPartitionKey, int], started: datetime) -> None:
        rows = self._audit_rows(cycle)
        self.report.audit_rows_checked += len(rows)
        planned = [r["planned_at"] for r in rows]
        snapshot_at = min(planned) if planned else datetime.now(timezone.utc)
        snapshot_at = snapshot_at if snapshot_at.tzinfo else snapshot_at.replace(tzinfo=timezone.utc)
        if planned and snapshot_at < started.replace(microsecond=0):
            self.report.violations.append(f"cycle {cycle}: planned_at {snapshot_at} before the cycle started {started}")
        snapshot_ms = int(snapshot_at.timestamp() * 1000)
        for tp, start in sorted(after.items()):
            prior = before.get(tp, 0)
            safe = self._safe(tp, snapshot_ms)
            allowed = max(prior, safe)
            if start > allowed:
                self.report.violations.append(
                    f"cycle {cycle}: {tp[0]}-{tp[1]} log start {start} > allowed {allowed} (before {prior}, safe {safe})"
                )
            self.report.records_deleted += max(0, start - prior)
        intents = {(r["topic"], r["partition"]): r for r in rows if r["record_type"] == "intent"}
        outcomes = [r for r in rows if r["record_type"] == "outcome"]
        keys = Counter((r["record_type"], r["topic"], r["partition"]) for r in rows)
        for key, n in keys.items():
            if n > 1:
                self.report.violations.append(f"cycle {cycle}: {n} audit rows for {key}")
        outcome_keys = {(r["topic"], r["partition"]) for r in outcomes}
        for tp, intent in intents.items():
            if tp not in outcome_keys and not self._cycle_failed(cycle):
                self.report.violations.append(f"cycle {cycle}: intent without outcome for {tp}")
            safe = self._safe(tp, snapshot_ms)
            if intent["cutoff"] > max(safe, intent["prior_log_start_offset"]):
                self.report.violations.append(f"cycle {cycle}: intent cutoff {intent['cutoff']} > safe {safe} for {tp}")
        for r in outcomes:
            tp = (r["topic"], r["partition"])
            if r["status"] == "deleted" and (tp not in intents or intents[tp]["cutoff"] != r["cutoff"]):
                self.report.violations.append(f"cycle {cycle}: delete without a matching intent for {tp}")

    def _cycle_failed(self, cycle: int) -> bool:
        return cycle in self.report.failed_cycles

    def _audit_rows(self, batch_id: int) -> list[dict[str, Any]]:
        # No table before the first cycle that writes one: no rows to check.
        return workload.audit_rows(self.spark, self.config, None, batch_id=batch_id, missing_ok=True)


def run_invariants(
    spark: SparkSession,
    cluster: LocalKafka,
    *,
    cycles: int,
    seed: int,
    workdir: Path,
    fault_rate: float = 0.35,
    sabotage_cycle: Optional[int] = None,
    schedule: Optional[Sequence[Optional[str]]] = None,
    out: Callable[[str], None] = print,
) -> InvariantReport:
    """Run the seeded workload for ``cycles`` purge cycles; returns the report (never raises
    for a violation: the caller decides). ``schedule`` fixes the fault of each cycle (cycled;
    ``None`` entries are quiet cycles) instead of drawing it at ``fault_rate``."""
    workload = InvariantWorkload(
        spark, cluster, seed=seed, workdir=workdir, fault_rate=fault_rate, sabotage_cycle=sabotage_cycle,
        schedule=schedule, out=out,
    )
    return workload.run(cycles)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_purge.testing.invariants", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--fault-rate", type=float, default=0.35, help="probability of a fault per cycle")
    parser.add_argument("--workdir", help="audit + checkpoint folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.cycles < 1 or not 0 <= args.fault_rate <= 1:
        parser.error("--cycles must be >= 1 and --fault-rate within [0, 1]")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # node kills are expected here

    from spark_purge.session import get_spark

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="spark-purge-invariants-"))
    spark = get_spark("spark-purge-invariants", master="local[2]", conf={"spark.sql.shuffle.partitions": "1"})
    spark.sparkContext.setLogLevel("ERROR")
    with LocalKafka(nodes=args.nodes, broker_config={"auto.leader.rebalance.enable": "false"}) as cluster:
        print(f"cluster {cluster.bootstrap_servers} ({args.nodes} node(s)); workdir {workdir}", flush=True)
        report = run_invariants(
            spark, cluster, cycles=args.cycles, seed=args.seed, workdir=workdir, fault_rate=args.fault_rate,
            out=lambda s: print(s, flush=True),
        )
    spark.stop()
    print(report.summary(), flush=True)
    return 0 if not report.violations else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
