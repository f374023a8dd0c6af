"""Columnar commits benchmark: the snapshot's commits held column by column against one
``GroupCommit`` object per commit (the code before), same broker, same process, interleaved.

    ./dev.sh py bench/commit_columns_bench.py --partitions 4000 --groups 4000 --repeat 10

Builds a real single-node KRaft broker with the snapshot bench's shape (``--partitions`` in
topics of 50, group i committing on every partition of topic i mod #topics), then takes
snapshots with ``KafkaPythonClient.snapshot`` and turns each into the data source's Arrow batch
(``source_arrow.snapshot_batch``, view ``snapshot``), alternating the two ways of holding the commits
(the baseline is swapped in for the client's ``_commit_columns``). Prints min / median seconds
of the client's snapshot, of the Arrow batch and of both, and the ratio new / baseline.
Not a test: numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from snapshot_bench import build

from spark_purge.kafka import ClientConfig, ConnectionSettings, KafkaPythonClient, SnapshotRequest, TimeFloor
from spark_purge.kafka import snapshot as snapshot_module
from spark_purge.kafka.lineage import EpochEnds
from spark_purge.kafka.members import RawCommit
from spark_purge.kafka.model import GroupCommit
from spark_purge.source_arrow import snapshot_batch
from spark_purge.testing.cluster import LocalKafka


def objects(raw: list[RawCommit], ends: EpochEnds) -> Any:
    """The baseline: a GroupCommit per commit, as the client built them before."""
    return tuple(
        GroupCommit(info.group_id, info.group_state, info.group_type, info.member_count, tp[0], tp[1], offset, metadata, epoch,
                    None if epoch is None else ends.get((tp, epoch)))
        for info, tp, offset, metadata, epoch in raw
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=6, help="snapshots of each kind (interleaved)")
    args = ap.parse_args(argv)
    run = uuid.uuid4().hex[:4]
    ways = {"columns": snapshot_module._commit_columns, "objects": objects}
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in ways}
    broker_config = {"num.network.threads": "3", "num.io.threads": "4", "offsets.topic.num.partitions": "10"}
    with LocalKafka(nodes=1, heap="2g", broker_config=broker_config, start_timeout_s=180) as cluster:
        build(cluster, args.partitions, 50, args.groups, run, 0)
        cfg = ClientConfig(
            ConnectionSettings(cluster.bootstrap_servers, request_timeout_ms=120_000),
            topic_include=f"bench-{run}-.*",
            group_include=f"bench-{run}-g.*",
        )
        request = SnapshotRequest(time_floors=(TimeFloor(f"bench-{run}-.*", min_retention_ms=3_600_000),))
        rows: dict[str, Any] = {}
        try:
            with KafkaPythonClient(cfg) as client:
                client.snapshot(request)  # warm connections
                for i in range(args.repeat):
                    for name in (("objects", "columns") if i % 2 == 0 else ("columns", "objects")):
                        snapshot_module._commit_columns = ways[name]  # type: ignore[assignment]
                        t0 = time.perf_counter()
                        snap = client.snapshot(request)
                        t1 = time.perf_counter()
                        batch = snapshot_batch(snap, "snapshot")
                        times[name][0].append(t1 - t0)
                        times[name][1].append(time.perf_counter() - t1)
                        rows[name] = batch
        finally:
            snapshot_module._commit_columns = ways["columns"]  # type: ignore[assignment]
    same = [n for n in rows["columns"].schema.names if n not in ("snapshot_id", "snapshot_time", "time_floor_time")]  # each snapshot's own
    if not rows["columns"].select(same).equals(rows["objects"].select(same)):
        print("the two ways made different batches", file=sys.stderr)
        return 1
    print(f"{len(snap.commits)} commits on {len(snap.partitions)} partitions; {args.repeat} snapshots each way, interleaved")
    medians = {}
    for name, (client_s, arrow_s) in times.items():
        both = [a + b for a, b in zip(client_s, arrow_s)]
        medians[name] = statistics.median(both)
        print(f"{name:8s} client snapshot {min(client_s):.3f} / {statistics.median(client_s):.3f} s; Arrow batch "
              f"{min(arrow_s):.3f} / {statistics.median(arrow_s):.3f} s; both {min(both):.3f} / {medians[name]:.3f} s (min / median)")
    print(f"RATIO    columns / objects (both, medians): x{medians['columns'] / medians['objects']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
