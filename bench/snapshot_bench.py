"""Snapshot benchmark: batched snapshot vs a naive per-partition / per-group loop, same broker.

    ./dev.sh py bench/snapshot_bench.py --partitions 10000 --groups 1000

Builds a real single-node KRaft broker (LocalKafka), ``--partitions`` partitions spread over
topics of ``--per-topic`` partitions (``--records`` records in each, default none), and ``--groups`` classic
groups; group i commits an offset on every partition of topic i mod #topics. Then it prints,
for the batched snapshot (``KafkaPythonClient.snapshot``) and for the naive loop (one
ListOffsets per partition and offset kind, one FindCoordinator + OffsetFetch + DescribeGroups
per group, sequentially, with metadata known up front):

    wall time, Kafka requests sent (by API), peak driver RSS, and naive/batched ratios.

``--spark`` also times ``spark.read.format("kafka_state")`` (view snapshot, count()) to show the
Spark overhead on top of the client. Not a test: numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka import KafkaProducer
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest, OffsetSpec
from kafka.protocol.metadata import FindCoordinatorRequest

from spark_purge.kafka import ClientConfig, ConnectionSettings, KafkaPythonClient, SnapshotRequest, TimeFloor
from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> None:
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM (peak RSS) of this process."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return peak_rss_mb()


def build(cluster: LocalKafka, partitions: int, per_topic: int, groups: int, run: str, records: int) -> list[str]:
    admin = workload.new_admin(cluster.bootstrap_servers, request_timeout_ms=120_000)
    n_topics = max(1, (partitions + per_topic - 1) // per_topic)
    topics = [f"bench-{run}-{i:04d}" for i in range(n_topics)]
    sizes = [min(per_topic, partitions - i * per_topic) for i in range(n_topics)]
    t0 = time.monotonic()
    workload.create_topics(admin, dict(zip(topics, sizes)), timeout_s=120)  # every partition has a leader
    print(f"created {partitions} partitions in {n_topics} topics: {time.monotonic() - t0:.1f}s", flush=True)

    if records:
        t0 = time.monotonic()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50, batch_size=1 << 20)
        try:
            for t, n in zip(topics, sizes):
                workload.produce(producer, t, [records] * n)
        finally:
            producer.close()
        print(f"produced {records} record(s) per partition: {time.monotonic() - t0:.1f}s", flush=True)

    t0 = time.monotonic()
    commits = 0
    for g in range(groups):
        topic, n = topics[g % n_topics], sizes[g % n_topics]
        workload.commit(admin, f"bench-{run}-g{g:04d}", {(topic, p): records for p in range(n)})
        commits += n
    print(f"committed {commits} offsets for {groups} groups: {time.monotonic() - t0:.1f}s", flush=True)
    admin.close()
    return topics


def naive(client: KafkaPythonClient, snapshot_tps: list[tuple[str, int]], group_ids: list[str], leader: dict[Any, int]) -> int:
    """One request per partition and offset kind, one FindCoordinator/OffsetFetch/DescribeGroups
    per group, one after another (what a straightforward loop over kafka-python does)."""
    _T = ListOffsetsRequest.ListOffsetsTopic
    _P = _T.ListOffsetsPartition
    answered = 0

    async def one(request: Any, node: Any) -> Any:
        return await client.wire.send(request, node_id=node)

    for topic, partition in snapshot_tps:
        for isolation, spec in ((0, OffsetSpec.EARLIEST), (0, OffsetSpec.LATEST), (1, OffsetSpec.LATEST)):
            req = ListOffsetsRequest(
                isolation_level=isolation,
                topics=[_T(name=topic, partitions=[_P(partition_index=partition, timestamp=int(spec))])],
                min_version=2 if isolation else 0,
            )
            client.wire.run_raw(one, req, leader[(topic, partition)])
            answered += 1
    _G = OffsetFetchRequest.OffsetFetchRequestGroup
    for g in group_ids:
        coord = client.wire.run_raw(one, FindCoordinatorRequest(key_type=0, coordinator_keys=[g], min_version=4), None)
        node = coord.coordinators[0].node_id
        client.wire.run_raw(one, OffsetFetchRequest(groups=[_G(group_id=g, topics=None)], min_version=8, max_version=8), node)
        client.wire.run_raw(one, DescribeGroupsRequest(groups=[g]), node)
        answered += 1
    return answered


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    ap.add_argument("--heap", default="4g", help="broker heap")
    ap.add_argument("--records", type=int, default=0, help="records per partition (kafka-python's producer is slow across thousands of partitions)")
    ap.add_argument("--repeat", type=int, default=3, help="batched snapshots to time (best and median shown)")
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--spark", action="store_true", help="also time spark.read.format('kafka_state')")
    args = ap.parse_args(argv)
    run = uuid.uuid4().hex[:4]

    broker_config = {"num.network.threads": "3", "num.io.threads": "4", "offsets.topic.num.partitions": "10"}
    with LocalKafka(nodes=1, heap=args.heap, broker_config=broker_config, start_timeout_s=180) as cluster:
        build(cluster, args.partitions, args.per_topic, args.groups, run, args.records)
        cfg = ClientConfig(
            ConnectionSettings(cluster.bootstrap_servers, request_timeout_ms=120_000),
            topic_include=f"bench-{run}-.*",
            group_include=f"bench-{run}-g.*",
        )
        request = SnapshotRequest(time_floors=(TimeFloor(f"bench-{run}-.*", min_retention_ms=3_600_000),))
        with KafkaPythonClient(cfg) as client:
            client.snapshot(SnapshotRequest(include_groups=False))  # warm connections
            times = []
            rss_before = rss_mb()
            reset_peak_rss()
            for _ in range(args.repeat):
                client.reset_request_counts()
                t0 = time.perf_counter()
                snap = client.snapshot(request)
                times.append(time.perf_counter() - t0)
            batched_peak = vm_hwm_mb()
            batched_counts = client.request_counts
            times.sort()
            batched_s = times[len(times) // 2]
            print()
            print(f"snapshot: {len(snap.partitions)} partitions, {len(snap.commits)} commits, {len(snap.groups)} groups, "
                  f"{len(snap.dropped_partitions)} dropped, {len(snap.issues)} issues")
            print(f"BATCHED  wall median {batched_s:.3f}s (best {times[0]:.3f}s of {args.repeat}); "
                  f"requests {sum(batched_counts.values())} {batched_counts}")
            print(f"         driver RSS {rss_before:.0f} MB before, peak {batched_peak:.0f} MB during snapshots")
            if not args.skip_naive:
                leader = {(p.topic, p.partition): p.leader for p in snap.partitions}
                tps = sorted(leader)
                group_ids = sorted(g.group_id for g in snap.groups)
                client.reset_request_counts()
                reset_peak_rss()
                t0 = time.perf_counter()
                naive(client, tps, group_ids, leader)
                naive_s = time.perf_counter() - t0
                naive_counts = client.request_counts
                naive_peak = vm_hwm_mb()
                print(f"NAIVE    wall {naive_s:.3f}s; requests {sum(naive_counts.values())} {naive_counts}; peak RSS {naive_peak:.0f} MB")
                print(f"RATIO    naive/batched: wall x{naive_s / batched_s:.1f}, "
                      f"requests x{sum(naive_counts.values()) / sum(batched_counts.values()):.0f}")
        if args.spark:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            from spark_purge.session import get_spark
            from spark_purge.source import register

            spark = get_spark("snapshot-bench", master="local[2]")
            register(spark)
            reader = (
                spark.read.format("kafka_state")
                .option("bootstrap.servers", cluster.bootstrap_servers)
                .option("topic.include", f"bench-{run}-.*")
                .option("group.include", f"bench-{run}-g.*")
                .option("request.timeout.ms", "120000")
                .option("view", "snapshot")
            )
            reader.load().count()  # first Python data-source batch pays worker start-up
            t0 = time.perf_counter()
            rows = reader.load().count()
            spark_s = time.perf_counter() - t0
            print(f"SPARK    spark.read kafka_state (snapshot view) count={rows}: {spark_s:.3f}s "
                  f"(client snapshot {batched_s:.3f}s; Spark overhead {spark_s - batched_s:.3f}s)")
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
