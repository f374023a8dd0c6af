"""DeleteRecords benchmark: batched per leader vs per-partition loop vs kafka-python vs Spark tasks vs kafka-delete-records.sh.

    ./dev.sh py bench/delete_bench.py --partitions 600

Starts a real local KRaft cluster (LocalKafka, ``--nodes`` 3 by default, or 1), creates
``--partitions`` partitions spread over topics of ``--per-topic`` partitions (replication
min(3, nodes)), produces ``--records`` records into each partition, then deletes records
round by round on the same partitions with the strategies taking turns; every turn asks for a
cutoff one offset above the previous turn's, so every turn really moves the log start offsets
(a warm-up round first, not timed, then ``--repeat`` timed rounds; the order of the strategies
rotates each round):

    batched       KafkaPythonClient.delete_records: one request per partition leader, leaders in
                  parallel driver threads (the product's path);
    naive         one DeleteRecordsRequest per partition, one after another, to its leader (what
                  a per-partition operator script does), on a KafkaPythonClient's connections;
                  with replicas each request waits for the followers' next fetch (~0.3 s with the
                  broker default replica.fetch.wait.max.ms=500), so it runs on ``--naive-partitions``
                  evenly spread partitions (default 50; 0 = all) and its per-round time and request
                  count are extrapolated linearly to all partitions, marked ``~`` (it is sequential);
    kafka-python  KafkaAdminClient.delete_records: one Metadata request, then one request per
                  leader, leaders one after another (raises on the first partition error);
    spark-tasks   the same per-leader grouping run as Spark tasks (local[2], one task per leader);
                  each task opens its own KafkaPythonClient from the picklable ClientConfig and
                  sends its leader's request (``--no-spark`` skips it);
    kafka-delete-records.sh
                  Kafka's own operator tool: each turn writes the offset JSON file it reads
                  (``{"partitions":[{"topic":..,"partition":..,"offset":..}],"version":1}``) and runs
                  ``java -cp '.cache/jars/tools/*' org.apache.kafka.tools.DeleteRecordsCommand
                  --bootstrap-server .. --offset-json-file ..`` (the class the script runs) as a
                  subprocess; the time is the whole run as an operator sees it, JVM start included.
                  Its admin client sends Metadata, then one DeleteRecords per leader, but the tool
                  reports no request counts, so none are shown: only its wall time. Its own output
                  must list every partition at the cutoff (exit 0 alone proves nothing: it exits 0
                  on partition errors). kafka-tools 4.4.0 is not on Maven Central, so the jars are
                  kafka-tools 4.3.1 (its admin client talks to the 4.4.0 brokers), resolved into
                  .cache/jars/tools by ``./dev.sh bench`` only; without them the strategy is
                  skipped with a message (``--no-tools`` skips it too).

For each strategy it prints the wall time per round (best and median), the Kafka requests sent
per round (by API; not counted for kafka-delete-records.sh), and the ratio of its median to
batched's (``naive / batched: 14.2x``, ``kafka-delete-records.sh / batched: ...x``).
After every turn the log start offsets (ListOffsets EARLIEST) of the partitions it deleted on
are read back: if any is not exactly at the cutoff, the benchmark says so and exits 1 without
reporting a speed. Not a test: numbers depend on the machine (cores, disk, what else is running).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.protocol.admin import DeleteRecordsRequest  # noqa: E402
from kafka.structs import TopicPartition  # noqa: E402

from spark_purge.kafka import ClientConfig, ConnectionSettings, KafkaPythonClient, LeaderRequestError, error_name  # noqa: E402
from spark_purge.testing import workload  # noqa: E402
from spark_purge.testing.cluster import LocalKafka  # noqa: E402
from spark_purge.testing.errors import HarnessError  # noqa: E402

TOOLS = "kafka-delete-records.sh"
STRATEGIES = ("batched", "naive", "kafka-python", "spark-tasks", TOOLS)
DELETE_TIMEOUT_MS = 30_000
TOOLS_JARS = ROOT / ".cache/jars/tools"  # kafka-tools 4.3.1 + runtime jars (./dev.sh bench)
TOOLS_MAIN = "org.apache.kafka.tools.DeleteRecordsCommand"
TOOLS_NOT_COUNTED = "1 JVM + its admin client's Metadata and per-leader DeleteRecords (not counted)"

TP = tuple[str, int]
Cutoffs = dict[TP, int]


class BenchFailure(Exception):
    """A strategy did not delete what it was asked to: no speed may be reported."""


# ---- cluster set-up ----------------------------------------------------------------------------


def build(cluster: LocalKafka, partitions: int, per_topic: int, replication: int, records: int, run: str) -> list[TP]:
    """Create the topics, produce ``records`` records into every partition; returns the partitions."""
    admin = workload.new_admin(cluster.bootstrap_servers, request_timeout_ms=120_000)
    try:
        n_topics = max(1, (partitions + per_topic - 1) // per_topic)
        topics = [f"delbench-{run}-{i:04d}" for i in range(n_topics)]
        sizes = [min(per_topic, partitions - i * per_topic) for i in range(n_topics)]
        t0 = time.monotonic()
        # every partition has a leader and its full ISR
        workload.create_topics(admin, dict(zip(topics, sizes)), replication, in_sync=replication, timeout_s=120)
        print(f"created {partitions} partitions in {n_topics} topics (replication {replication}): "
              f"{time.monotonic() - t0:.1f}s", flush=True)
    finally:
        admin.close()

    t0 = time.monotonic()
    # acks=all: the high watermark covers every record once flush() returns.
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=50, batch_size=1 << 20)
    try:
        for t, n in zip(topics, sizes):
            workload.produce(producer, t, [records] * n, flush_timeout_s=120)
    finally:
        producer.close()
    print(f"produced {records} records per partition ({records * partitions} in all): {time.monotonic() - t0:.1f}s", flush=True)
    return [(t, p) for t, n in zip(topics, sizes) for p in range(n)]


def wait_high_watermarks(client: KafkaPythonClient, tps: list[TP], records: int) -> dict[TP, int]:
    """Leader of every partition, once every high watermark is at ``records`` (DeleteRecords
    refuses offsets above it)."""
    deadline = time.monotonic() + 60
    wanted = set(tps)
    while True:
        snap = client.snapshot()
        states = {(p.topic, p.partition): p for p in snap.partitions if (p.topic, p.partition) in wanted}
        behind = [tp for tp in tps if tp not in states or states[tp].high_watermark < records or states[tp].leader is None]
        if not behind:
            return {tp: int(states[tp].leader) for tp in tps}  # type: ignore[arg-type]
        if time.monotonic() > deadline:
            t, p = behind[0]
            raise BenchFailure(f"{len(behind)} partition(s) below high watermark {records} after 60 s, e.g. {t}-{p}")
        time.sleep(0.5)


# ---- the strategies (each returns the requests it sent, by API) --------------------------------


def run_batched(client: KafkaPythonClient, cutoffs: Cutoffs) -> Counter[str]:
    client.reset_request_counts()
    outcomes = client.delete_records(cutoffs, timeout_ms=DELETE_TIMEOUT_MS)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        o = failed[0]
        raise BenchFailure(f"{len(failed)} partition(s) failed, e.g. {o.topic}-{o.partition}: {o.error} ({o.error_message})")
    return Counter(client.request_counts)


def run_naive(client: KafkaPythonClient, cutoffs: Cutoffs, leaders: Mapping[TP, int]) -> Counter[str]:
    """One DeleteRecordsRequest per partition to its leader, waiting for each answer."""
    _Topic = DeleteRecordsRequest.DeleteRecordsTopic
    _Partition = _Topic.DeleteRecordsPartition

    async def one(request: Any, node: int) -> Any:
        return await client.wire.send(request, node_id=node, timeout_ms=DELETE_TIMEOUT_MS + 5_000)

    client.reset_request_counts()
    failed: list[str] = []
    for (topic, partition), offset in sorted(cutoffs.items()):
        request = DeleteRecordsRequest(
            topics=[_Topic(name=topic, partitions=[_Partition(partition_index=partition, offset=offset)])],
            timeout_ms=DELETE_TIMEOUT_MS,
        )
        response = client.wire.run_raw(one, request, leaders[(topic, partition)])
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    failed.append(f"{t.name}-{p.partition_index}: {error_name(p.error_code)}")
    if failed:
        raise BenchFailure(f"{len(failed)} partition(s) failed, e.g. {failed[0]}")
    return Counter(client.request_counts)


class CountingSend:
    """Counts every request a kafka-python client sends through its connection manager."""

    def __init__(self, manager: Any) -> None:
        self.counts: Counter[str] = Counter()
        self._send = manager.send
        manager.send = self  # instance attribute: shadows the class's method for this manager only

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.counts[str(request.name)] += 1
        return self._send(request, *args, **kwargs)


def run_kafka_python(admin: KafkaAdminClient, counter: CountingSend, cutoffs: Cutoffs) -> Counter[str]:
    counter.counts.clear()
    try:
        admin.delete_records({TopicPartition(t, p): off for (t, p), off in cutoffs.items()}, timeout_ms=DELETE_TIMEOUT_MS)
    except Exception as exc:  # kafka-python raises on the first partition error
        raise BenchFailure(f"KafkaAdminClient.delete_records raised {type(exc).__name__}: {exc}") from None
    return Counter(counter.counts)


def spark_task(item: tuple[ClientConfig, int, dict[TP, int], int]) -> tuple[int, list[str], dict[str, int], float, float]:
    """Runs in a Spark Python worker: open a client, send one leader's DeleteRecords, close."""
    config, leader, offsets, timeout_ms = item
    from spark_purge.kafka import KafkaPythonClient as Client
    from spark_purge.kafka.delete import send_delete_records

    t0 = time.perf_counter()
    with Client(config) as client:
        t1 = time.perf_counter()
        try:
            results = send_delete_records(client.wire, leader, offsets, timeout_ms)
            errors = [r.message or str(r.error) for r in results.values() if r.error is not None]
            errors += [f"{t}-{p}: no answer" for t, p in offsets if (t, p) not in results]
        except LeaderRequestError as exc:
            errors = [str(exc)]
        t2 = time.perf_counter()
        counts = client.request_counts
    return leader, errors, counts, t1 - t0, t2 - t1


def run_spark_tasks(sc: Any, config: ClientConfig, cutoffs: Cutoffs, leaders: Mapping[TP, int], task_times: list[tuple[float, float]]) -> Counter[str]:
    by_leader: dict[int, dict[TP, int]] = defaultdict(dict)
    for tp, offset in cutoffs.items():
        by_leader[leaders[tp]][tp] = offset
    items = [(config, leader, offsets, DELETE_TIMEOUT_MS) for leader, offsets in sorted(by_leader.items())]
    answers = sc.parallelize(items, len(items)).map(spark_task).collect()
    counts: Counter[str] = Counter()
    failed: list[str] = []
    for _, errors, task_counts, open_s, send_s in answers:
        counts.update(task_counts)
        failed += errors
        task_times.append((open_s, send_s))
    if failed:
        raise BenchFailure(f"{len(failed)} error(s), e.g. {failed[0]}")
    return counts


def run_delete_records_sh(bootstrap_servers: str, json_file: Path, cutoffs: Cutoffs) -> Counter[str]:
    """kafka-delete-records.sh as an operator runs it: write the offset JSON file, start one JVM
    running DeleteRecordsCommand, wait for it. Returns no request counts (the tool gives none)."""
    json_file.write_text(json.dumps({
        "partitions": [{"topic": t, "partition": p, "offset": off} for (t, p), off in sorted(cutoffs.items())],
        "version": 1,
    }))
    cmd = ["java", "-cp", str(TOOLS_JARS / "*"), TOOLS_MAIN,
           "--bootstrap-server", bootstrap_servers, "--offset-json-file", str(json_file)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=DELETE_TIMEOUT_MS / 1000 + 60)
    except subprocess.TimeoutExpired:
        proc.kill()  # this JVM only, by its PID
        proc.communicate()
        raise BenchFailure(f"{TOOLS_MAIN} still running after {DELETE_TIMEOUT_MS / 1000 + 60:.0f} s: killed") from None
    except BaseException:  # Ctrl-C: do not leave the JVM behind
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        tail = (err.strip() or out.strip()).splitlines()[-3:]
        raise BenchFailure(f"{TOOLS_MAIN} exited {proc.returncode}: {' | '.join(tail) or 'no output'}")
    # "partition: <topic>-<p>\tlow_watermark: <n>" or "partition: <topic>-<p>\terror: <message>"
    results = [line.removeprefix("partition: ").partition("\t")[::2] for line in out.splitlines() if line.startswith("partition: ")]
    errors = [f"{tp}: {rest}" for tp, rest in results if not rest.startswith("low_watermark: ")]
    wanted = {f"{t}-{p}": off for (t, p), off in cutoffs.items()}
    wrong = [f"{tp} {rest}" for tp, rest in results
             if rest.startswith("low_watermark: ") and (tp not in wanted or int(rest.split(": ", 1)[1]) != wanted[tp])]
    if errors or wrong or len(results) != len(cutoffs):
        example = (errors or wrong or [""])[0]
        raise BenchFailure(f"{TOOLS_MAIN} reported {len(results)} of {len(cutoffs)} partition(s), {len(errors)} error(s), "
                           f"{len(wrong)} low watermark(s) off the cutoff{', e.g. ' + example if example else ''}")
    return Counter()


def tools_jars_present() -> bool:
    return any(TOOLS_JARS.glob("kafka-tools-*.jar"))


# ---- verification ------------------------------------------------------------------------------


def verify(verifier: KafkaPythonClient, tps: list[TP], cutoff: int) -> None:
    starts = verifier.log_start_offsets(tps)
    unread = [tp for tp in tps if tp not in starts]
    wrong = [tp for tp in tps if tp in starts and starts[tp] != cutoff]
    if unread or wrong:
        example = ", ".join(f"{t}-{p} at {starts[(t, p)]}" for t, p in wrong[:3])
        raise BenchFailure(
            f"after the delete, {len(wrong)} of {len(tps)} partition(s) have a log start offset other than "
            f"the cutoff {cutoff}{' (e.g. ' + example + ')' if example else ''}; "
            f"{len(unread)} could not be read"
        )


# ---- report ------------------------------------------------------------------------------------


def per_round(counts: list[Counter[str]], scale: float = 1.0) -> str:
    """Mean requests per round, by API (scaled for a strategy run on a subset of partitions)."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    n = len(counts) / scale

    def fmt(v: float) -> str:
        return f"{v:.0f}" if v == int(v) else f"{v:.1f}"

    by_api = ", ".join(f"{api.removesuffix('Request')} {fmt(v / n)}" for api, v in sorted(total.items()))
    return f"{'~' if scale != 1 else ''}{fmt(sum(total.values()) / n)} ({by_api})"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, choices=(1, 3), default=3, help="KRaft nodes (replication = min(3, nodes))")
    ap.add_argument("--partitions", type=int, default=600)
    ap.add_argument("--per-topic", type=int, default=50, help="partitions per topic")
    ap.add_argument("--records", type=int, default=20, help="records per partition (each turn deletes one)")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (best and median shown), after one warm-up round")
    ap.add_argument("--heap", default="512m", help="broker heap")
    ap.add_argument("--skip-naive", action="store_true", help="leave out the per-partition loop")
    ap.add_argument("--naive-partitions", type=int, default=50,
                    help="partitions the sequential per-partition loop deletes on (0 = all); its time is extrapolated")
    ap.add_argument("--spark", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the spark-tasks strategy (local[2]); --no-spark skips it")
    ap.add_argument("--tools", action=argparse.BooleanOptionalAction, default=True,
                    help=f"also time {TOOLS} (kafka-tools 4.3.1's DeleteRecordsCommand, one JVM per turn); "
                         "--no-tools skips it")
    args = ap.parse_args(argv)
    if args.partitions < 1 or args.per_topic < 1 or args.repeat < 1 or args.naive_partitions < 0:
        ap.error("--partitions, --per-topic and --repeat must be >= 1, --naive-partitions >= 0")
    if args.tools and not tools_jars_present():
        print(f"{TOOLS} skipped: no kafka-tools jars in {TOOLS_JARS} (run `./dev.sh bench`, which resolves them)",
              file=sys.stderr, flush=True)
        args.tools = False
    strategies = [s for s in STRATEGIES if not (s == "naive" and args.skip_naive)
                  and not (s == "spark-tasks" and not args.spark) and not (s == TOOLS and not args.tools)]
    turns = (args.repeat + 1) * len(strategies)
    if args.records < turns:
        ap.error(f"--records {args.records} is too few: {args.repeat} + 1 rounds x {len(strategies)} strategies "
                 f"need {turns} (each turn deletes one more record per partition)")
    try:
        return bench(args, strategies)
    except (BenchFailure, HarnessError) as exc:
        print(f"\nERROR: {exc}\nno timings reported: a benchmark that did not delete must not report a speed",
              file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: clients closed, local Kafka stopped", file=sys.stderr, flush=True)
        return 130


def bench(args: argparse.Namespace, strategies: list[str]) -> int:
    run = uuid.uuid4().hex[:4]
    replication = min(3, args.nodes)
    print(f"delete bench: {args.nodes} node(s), {args.partitions} partitions, {args.records} records each, "
          f"{args.repeat} timed round(s), strategies {', '.join(strategies)}; {os.cpu_count()} CPU(s)", flush=True)
    t0 = time.monotonic()
    with LocalKafka(nodes=args.nodes, heap=args.heap, start_timeout_s=180) as cluster:
        print(f"local Kafka up ({cluster.bootstrap_servers}): {time.monotonic() - t0:.1f}s", flush=True)
        try:
            return run_rounds(args, strategies, cluster, run, replication)
        except KeyboardInterrupt:
            cluster.keep_logs_on_failure = False  # broker logs are kept for failures, not for Ctrl-C
            raise


def run_rounds(args: argparse.Namespace, strategies: list[str], cluster: LocalKafka, run: str, replication: int) -> int:
    with ExitStack() as stack:  # closes every client (and stops Spark) before the cluster stops
        tps = build(cluster, args.partitions, args.per_topic, replication, args.records, run)
        config = ClientConfig(ConnectionSettings(cluster.bootstrap_servers, request_timeout_ms=60_000), topic_include=f"delbench-{run}-.*")
        verifier = stack.enter_context(KafkaPythonClient(config))
        leaders = wait_high_watermarks(verifier, tps, args.records)
        per_leader = Counter(leaders.values())
        print(f"partitions per leader: {dict(sorted(per_leader.items()))}", flush=True)
        # The partitions each strategy deletes on; naive may use an evenly spread subset.
        targets = {s: tps for s in strategies}
        if "naive" in strategies and 0 < args.naive_partitions < len(tps):
            step = len(tps) / args.naive_partitions
            targets["naive"] = [tps[int(i * step)] for i in range(args.naive_partitions)]
            print(f"naive runs on {len(targets['naive'])} of {len(tps)} partitions (--naive-partitions); "
                  f"its time and requests are extrapolated to all {len(tps)}", flush=True)
        scale = {s: len(tps) / len(targets[s]) for s in strategies}

        runners: dict[str, Callable[[Cutoffs], Counter[str]]] = {}
        batched_client = stack.enter_context(KafkaPythonClient(config))
        runners["batched"] = lambda c: run_batched(batched_client, c)
        if "naive" in strategies:
            naive_client = stack.enter_context(KafkaPythonClient(config))
            runners["naive"] = lambda c: run_naive(naive_client, c, leaders)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=60_000)
        stack.callback(admin.close)
        counter = CountingSend(admin._manager)
        runners["kafka-python"] = lambda c: run_kafka_python(admin, counter, c)
        task_times: list[tuple[float, float]] = []
        if "spark-tasks" in strategies:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            from spark_purge.session import get_spark

            t0 = time.monotonic()
            spark = get_spark("delete-bench", master="local[2]")
            stack.callback(spark.stop)
            sc = spark.sparkContext
            sc.setLogLevel("ERROR")
            print(f"Spark local[2] up: {time.monotonic() - t0:.1f}s", flush=True)
            runners["spark-tasks"] = lambda c: run_spark_tasks(sc, config, c, leaders, task_times)
        if TOOLS in strategies:
            json_file = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="delbench-tools-"))) / "offsets.json"
            runners[TOOLS] = lambda c: run_delete_records_sh(cluster.bootstrap_servers, json_file, c)

        times: dict[str, list[float]] = {s: [] for s in strategies}
        counts: dict[str, list[Counter[str]]] = {s: [] for s in strategies}
        cutoff = 0
        print(flush=True)
        for rnd in range(args.repeat + 1):
            order = strategies[rnd % len(strategies):] + strategies[: rnd % len(strategies)]
            line: list[str] = []
            for name in order:
                cutoff += 1
                cutoffs = {tp: cutoff for tp in targets[name]}
                t_start = time.perf_counter()
                try:
                    sent = runners[name](cutoffs)
                except BenchFailure as exc:
                    raise BenchFailure(f"{name}, {'warm-up' if rnd == 0 else f'round {rnd}'}, cutoff {cutoff}: {exc}") from None
                elapsed = time.perf_counter() - t_start
                try:
                    verify(verifier, targets[name], cutoff)
                except BenchFailure as exc:
                    raise BenchFailure(f"{name}, {'warm-up' if rnd == 0 else f'round {rnd}'}: {exc}") from None
                extrapolated = f" (~{elapsed * scale[name]:.1f}s for all)" if scale[name] != 1 else ""
                line.append(f"{name} {elapsed:.3f}s{extrapolated}")
                if rnd > 0:
                    times[name].append(elapsed)
                    counts[name].append(sent)
                elif name == "spark-tasks":
                    task_times.clear()  # the warm-up pays Python worker start-up
            label = "warm-up" if rnd == 0 else f"round {rnd}"
            print(f"{label:>8}: " + "  ".join(line) + f"   (log start now {cutoff})", flush=True)

        base = statistics.median(times["batched"])
        print()
        print(f"DeleteRecords on {len(tps)} partitions ({args.nodes} node(s), {len(per_leader)} leader(s)), "
              f"{args.repeat} timed round(s) each, every round verified by ListOffsets EARLIEST:")
        width = max(13, *(len(s) for s in strategies))
        print(f"  {'strategy':<{width}} {'best':>10} {'median':>10}   requests per round")
        for name in strategies:
            ts = [t * scale[name] for t in times[name]]
            mark = "~" if scale[name] != 1 else ""
            note = " + each task's client bootstrap" if name == "spark-tasks" else ""
            requests = TOOLS_NOT_COUNTED if name == TOOLS else per_round(counts[name], scale[name])
            best, median = f"{mark}{min(ts):.3f}s", f"{mark}{statistics.median(ts):.3f}s"
            print(f"  {name:<{width}} {best:>10} {median:>10}   {requests}{note}")
        if "naive" in strategies and scale["naive"] != 1:
            n = len(targets["naive"])
            med = statistics.median(times["naive"])
            print(f"  ~ naive measured on {n} partitions: median {med:.3f}s ({med / n * 1000:.1f} ms per partition), "
                  f"x{scale['naive']:.1f} for all {len(tps)}")
        if task_times:
            opens = statistics.median(t[0] for t in task_times)
            sends = statistics.median(t[1] for t in task_times)
            print(f"  spark-tasks, per task (median): client open {opens:.3f}s, DeleteRecords {sends:.3f}s")
        if TOOLS in strategies:
            print(f"  {TOOLS}: wall time of the whole java process (JVM start included; kafka-tools 4.3.1)")
        print()
        for name in strategies:
            if name != "batched":
                mark = " (extrapolated)" if scale[name] != 1 else ""
                print(f"  {name} / batched: {statistics.median(times[name]) * scale[name] / base:.1f}x{mark}")
        print("\nNot a test: numbers depend on the machine.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
