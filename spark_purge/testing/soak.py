"""Soak: the continuous purge for a long while against steady traffic, with flat memory.

A real cluster (3 KRaft nodes by default), the real continuous purge (``start_stream``: the
Python data source, ``foreachBatch``, the Delta audit) and, at a steady rate, producers and
consumers of every kind this harness can drive:

- ``soak-g0``: a classic group committing through the admin API, lagging a little (topics A, B);
- ``soak-live``: a real kafka-python ``KafkaConsumer`` in a group, polling and committing (A);
- a share group (KIP-932) on B: the real Java ``KafkaShareConsumer`` ACCEPTs what is there
  every ``--share-every`` seconds;
- a Spark Structured Streaming query (Spark's Kafka connector, Kafka -> Delta, a
  ``processingTime`` trigger) on A and B, declared as an ``external_consumers``
  ``spark_checkpoint`` entry.

Rules: A needs ``soak-g0`` and ``soak-live``; B every group that consumes it (discovered); both
also the Spark query. Every ``--sample-every`` seconds it samples the purge's batch durations
(Spark's own progress: ``triggerExecution``) and the resident memory (``VmRSS``) of every
driver-side process: this Python driver, the Spark JVM and the JVM's Python children (workers
and the data source's processes). The Kafka nodes and the share consumer are not driver-side.

It fails (exit 1) when, after the warm-up (the first fifth of the samples):

- the driver side's total RSS in the last third of the samples is above the first third's by
  more than ``max(15 %, 150 MiB)`` (memory that grows without bound);
- the median batch duration of the last third is above 1.5 x the first third's + 0.5 s (drift);
- a log start offset passed a position the soak's own consumers hold (their last commit, the
  Spark query's sink), or the purge or the Spark query stopped.

    ./dev.sh py -m spark_purge.testing.soak --minutes 60            # the documented hour (3 nodes)
    ./dev.sh py -m spark_purge.testing.soak --minutes 5 --nodes 1   # a quick look
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_purge.config import from_dict
from spark_purge.pipeline import PurgePipeline, start_stream
from spark_purge.testing import share, workload
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import TopicPartitionKey

log = logging.getLogger(__name__)

PARTITIONS = 3
RATE_PER_S = 20  # records per second per topic
COMMIT_LAG = 15  # soak-g0 commits this far behind the high watermark
STREAM_TRIGGER = "5 seconds"
WARMUP_FRACTION = 0.2
MEMORY_SLACK = (0.15, 150 * 2**20)  # fraction, bytes: whichever is larger
DRIFT = (1.5, 0.5)  # factor, seconds


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` from /proc (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (through /proc/<pid>/task/*/children)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", encoding="ascii") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def spark_jvm_pid(spark: SparkSession) -> Optional[int]:
    """The local Spark JVM PySpark started (None when it was not started by this process)."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return getattr(proc, "pid", None)


@dataclass
class Sample:
    minute: float
    batches: int  # purge batches so far
    batch_seconds: list[float]  # durations of the batches since the last sample
    rss: dict[str, int]  # process kind -> bytes

    @property
    def total(self) -> int:
        return sum(self.rss.values())


@dataclass
class SoakReport:
    samples: list[Sample] = field(default_factory=list)
    records_produced: int = 0
    records_deleted: int = 0
    share_accepted: int = 0
    failures: list[str] = field(default_factory=list)

    def _thirds(self) -> tuple[list[Sample], list[Sample]]:
        steady = self.samples[max(1, int(len(self.samples) * WARMUP_FRACTION)):]
        third = max(1, len(steady) // 3)
        return steady[:third], steady[-third:]

    def judge(self) -> None:
        """Add the memory and drift failures (needs at least 4 samples)."""
        if len(self.samples) < 4:
            self.failures.append(f"only {len(self.samples)} samples: run longer than 4 sample intervals")
            return
        first, last = self._thirds()
        mem_first = statistics.median(s.total for s in first)
        mem_last = statistics.median(s.total for s in last)
        allowed = max(MEMORY_SLACK[0] * mem_first, MEMORY_SLACK[1])
        if mem_last - mem_first > allowed:
            self.failures.append(
                f"driver-side RSS grew {_mib(mem_last - mem_first)} (from {_mib(mem_first)} to {_mib(mem_last)}; allowed {_mib(allowed)})"
            )
        t_first = [t for s in first for t in s.batch_seconds]
        t_last = [t for s in last for t in s.batch_seconds]
        if not t_first or not t_last:
            self.failures.append("no purge batch in the first or the last third of the samples")
            return
        m_first, m_last = statistics.median(t_first), statistics.median(t_last)
        if m_last > DRIFT[0] * m_first + DRIFT[1]:
            self.failures.append(f"batch time drifted from a median {m_first:.2f}s to {m_last:.2f}s")

    def summary(self) -> str:
        lines = ["minute  batches  batch s (min/median/max)  " + "  ".join(f"{k:>14}" for k in _KINDS) + "           total"]
        for s in self.samples:
            times = s.batch_seconds
            span = f"{min(times):.2f}/{statistics.median(times):.2f}/{max(times):.2f}" if times else "-"
            lines.append(
                f"{s.minute:6.1f}  {s.batches:7d}  {span:>24}  " + "  ".join(f"{_mib(s.rss.get(k, 0)):>14}" for k in _KINDS)
                + f"  {_mib(s.total):>14}"
            )
        lines += [
            f"records produced: {self.records_produced}, deleted: {self.records_deleted}, share accepted: {self.share_accepted}",
            f"result: {'FAILED' if self.failures else 'passed'}",
        ]
        lines += [f"  failure: {f}" for f in self.failures]
        return "\n".join(lines)


_KINDS = ("python driver", "spark jvm", "python workers")


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


class Soak:
    def __init__(self, spark: SparkSession, cluster: LocalKafka, workdir: Path, *, share_every_s: float, out: Callable[[str], None]) -> None:
        self.spark, self.cluster, self.workdir, self.out = spark, cluster, workdir, out
        self.share_every_s = share_every_s
        self.topics = ("soak-a", "soak-b")
        self.admin = workload.new_admin(cluster.bootstrap_servers)
        self.report = SoakReport()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.g0: dict[TopicPartitionKey, int] = {}
        self.hw: dict[TopicPartitionKey, int] = {}
        self.lock = threading.Lock()

    def config(self) -> Any:
        a, b = self.topics
        return from_dict({
            "kafka": {"bootstrap_servers": self.cluster.bootstrap_servers, "request_timeout": "10s"},
            "defaults": {"min_retention": "0s", "min_step": 1},
            "rules": [{"name": "a", "topics": a, "required_groups": ["soak-g0", "soak-live"]}, {"name": "b", "topics": b}],
            "audit": {"path": str(self.workdir / "audit")},
            "stream": {"checkpoint_location": str(self.workdir / "checkpoint"), "trigger_interval": "2s"},
            "external_consumers": [
                {"name": "soak-query", "spark_checkpoint": (self.workdir / "query-checkpoint").as_uri(), "topics": f"{a}|{b}"}
            ],
        })

    # ---- traffic ----------------------------------------------------------------------------
    def _loop(self, name: str, every_s: float, step: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            while not self.stop.wait(every_s):
                try:
                    step()
                except Exception as exc:  # a traffic thread must not die silently
                    self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                    log.warning("soak %s: %s", name, exc)

        thread = threading.Thread(target=run, name=f"soak-{name}", daemon=True)
        thread.start()
        return thread

    def _produce(self, producer: KafkaProducer) -> None:
        counts = {p: RATE_PER_S // PARTITIONS for p in range(PARTITIONS)}
        for topic in self.topics:
            for meta in workload.produce(producer, topic, counts):
                with self.lock:
                    tp = (topic, meta.partition)
                    self.hw[tp] = max(self.hw.get(tp, 0), meta.offset + 1)
                    self.report.records_produced += 1

    def _commit_g0(self) -> None:
        with self.lock:
            wanted = {tp: max(self.g0.get(tp, 0), hw - COMMIT_LAG) for tp, hw in self.hw.items()}
        wanted = {tp: o for tp, o in wanted.items() if o > self.g0.get(tp, 0)}
        if wanted:
            workload.commit(self.admin, "soak-g0", wanted)
            self.g0.update(wanted)

    def _live_consumer(self) -> threading.Thread:
        def run() -> None:
            consumer = KafkaConsumer(
                self.topics[0], bootstrap_servers=self.cluster.bootstrap_servers, group_id="soak-live",
                auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=50,
            )
            try:
                while not self.stop.is_set():
                    if consumer.poll(timeout_ms=1000):
                        consumer.commit()
                    time.sleep(1.0)
            except Exception as exc:
                self.errors.append(f"live consumer: {type(exc).__name__}: {exc}")
            finally:
                consumer.close()

        thread = threading.Thread(target=run, name="soak-live", daemon=True)
        thread.start()
        return thread

    def _share(self) -> None:
        run = share.share_run(self.cluster.bootstrap_servers, "soak-share", self.topics[1], RATE_PER_S * 5, timeout_s=40.0, check=False)
        self.report.share_accepted += len(run.accepted)

    def _query(self) -> StreamingQuery:
        frames = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.cluster.bootstrap_servers)
            .option("subscribe", ",".join(self.topics))
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("topic", "partition", "offset")
        )
        return (
            frames.writeStream.format("delta").queryName("soak-query")
            .option("checkpointLocation", str(self.workdir / "query-checkpoint"))
            .trigger(processingTime=STREAM_TRIGGER)
            .start(str(self.workdir / "query-sink"))
        )

    # ---- the run ----------------------------------------------------------------------------
    def run(self, minutes: float, sample_every_s: float) -> SoakReport:
        workload.create_topics(self.admin, {t: PARTITIONS for t in self.topics}, min(3, len(self.cluster.node_ids)))
        share.set_group_config(self.admin, "soak-share", {"share.auto.offset.reset": "earliest"})
        producer = KafkaProducer(bootstrap_servers=self.cluster.bootstrap_servers, acks="all", linger_ms=5)
        self._produce(producer)
        self._commit_g0()
        consumer_query = self._query()
        threads = [
            self._loop("producer", 1.0, lambda: self._produce(producer)),
            self._loop("commits", 2.0, self._commit_g0),
            self._loop("share", self.share_every_s, self._share),
            self._live_consumer(),
        ]
        purge, pipeline = start_stream(self.spark, self.config())
        jvm = spark_jvm_pid(self.spark)
        started = time.monotonic()
        seen: set[int] = set()
        try:
            while time.monotonic() - started < minutes * 60:
                time.sleep(min(sample_every_s, max(0.0, minutes * 60 - (time.monotonic() - started))))
                for name, query in (("purge", purge), ("spark query", consumer_query)):
                    if not query.isActive:
                        self.report.failures.append(f"the {name} stopped: {query.exception()}")
                if self.report.failures:
                    break
                self.report.samples.append(self._sample(started, purge, pipeline, jvm, seen))
                lines = self.report.summary().splitlines()
                if len(self.report.samples) == 1:
                    self.out(lines[0])
                self.out(lines[len(self.report.samples)])
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=120)
            for query in (purge, consumer_query):  # let a batch in flight finish (bounded), then stop
                deadline = time.monotonic() + 180
                while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
                    time.sleep(0.5)
                query.stop()
            producer.close()
        self._check_positions()
        self.report.records_deleted = pipeline.totals.records_deleted
        self.report.failures.extend(self.errors[:10])
        self.report.judge()
        self.admin.close()
        return self.report

    def _sample(self, started: float, purge: StreamingQuery, pipeline: PurgePipeline, jvm: Optional[int], seen: set[int]) -> Sample:
        times = []
        for progress in purge.recentProgress:
            batch = int(progress["batchId"])
            duration = progress.get("durationMs", {}).get("triggerExecution")
            if batch not in seen and duration is not None and progress.get("numInputRows", 0) > 0:
                seen.add(batch)
                times.append(duration / 1000)
        rss = {"python driver": rss_bytes(os.getpid())}
        if jvm is not None:
            rss["spark jvm"] = rss_bytes(jvm)
            rss["python workers"] = sum(rss_bytes(pid) for pid in children(jvm))
        return Sample((time.monotonic() - started) / 60, pipeline.totals.batches, times, rss)

    def _check_positions(self) -> None:
        """No log start passed what the soak's own consumers hold (read after everything stopped)."""
        tps = sorted(self.hw)
        starts = workload.log_start_offsets(self.admin, tps)
        live = self.admin.list_group_offsets({"soak-live": None}).get("soak-live") or {}
        sink = workload.sink_positions(self.spark, self.workdir / "query-sink")
        for tp in tps:
            holds = {"spark query": sink.get(tp, 0)}
            if tp[0] == self.topics[0]:
                holds["soak-g0"] = self.g0.get(tp, 0)
                meta = live.get(TopicPartition(*tp))
                holds["soak-live"] = meta.offset if meta is not None else 0
            for who, at in holds.items():
                if starts[tp] > at:
                    self.report.failures.append(f"{tp[0]}-{tp[1]}: log start {starts[tp]} past {who} at {at}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_purge.testing.soak", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--share-every", type=float, default=60.0, help="seconds between share-consumer runs")
    parser.add_argument("--workdir", help="audit, checkpoints and sink (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.sample_every <= 0:
        parser.error("--minutes and --sample-every must be > 0")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)

    from spark_purge.session import get_spark

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="spark-purge-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    spark = get_spark("spark-purge-soak", master="local[2]", conf={"spark.sql.shuffle.partitions": "1"}, extra=workload.spark_kafka_jars())
    spark.sparkContext.setLogLevel("ERROR")
    with LocalKafka(nodes=args.nodes) as cluster:
        print(f"cluster {cluster.bootstrap_servers} ({args.nodes} node(s)); workdir {workdir}; {args.minutes:g} min", flush=True)
        soak = Soak(spark, cluster, workdir, share_every_s=args.share_every, out=lambda s: print(s, flush=True))
        report = soak.run(args.minutes, args.sample_every)
    spark.stop()
    print(report.summary(), flush=True)
    return 1 if report.failures else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
