"""Is a consumer group missing from a spark-purge snapshot right after its coordinator dies?

The broker that leads a group's ``__consumer_offsets`` partition is the group's coordinator. When
that broker is SIGKILLed, another replica becomes leader and serves the partition's groups. This
script checks whether a snapshot taken in the seconds after the new leader shows up in Metadata
can lack a group that committed just before the kill: ListGroups does not list it, and no error
is raised. A purge planned from such a snapshot would ignore that group. The behaviour is
intermittent, and only the first snapshot after the move is likely to show it. The new leader
serves the partition as of its high watermark, which can lag the commits the old leader
acknowledged (``spark_purge/kafka/caught_up.py`` has the details). This is also why the kill
comes right after the commit's acknowledgement: a follower learns the new high watermark on its
next fetch, within about half a second.

    ./dev.sh py bench/diag/coordinator_move_repro.py [TRIALS] [--seed S] [--window 6]
        [--kill-delay 0] [--reuse-client] [--keep-logs] [--verbose]

It starts one 3-node KRaft cluster with the project's launcher (``LocalKafka``). The brokers run
with the launcher's config plus ``auto.leader.rebalance.enable=false``, as the invariant checker
sets it, so that no preferred-leader election moves a coordinator during a trial.
``__consumer_offsets`` has replication 3, and min ISR is the launcher's 1. The script creates a
topic with 3 partitions (replication 3) and produces 100 records to each. Then, for each trial:

1. It picks a fresh group id whose ``__consumer_offsets`` partition is led by a live broker. The
   partition is Kafka's ``Utils.abs(groupId.hashCode()) % partitions``. ``Utils.abs`` is
   ``Math.abs`` with ``MIN_VALUE`` mapped to 0. The partition count comes from Metadata; the
   launcher sets ``offsets.topic.num.partitions=5``, not Kafka's default of 50. The mapping is
   checked against FindCoordinator, and a note is printed when they differ.
2. The group commits offset 50 on partitions 0 and 1 of the topic (``workload.commit``: a real
   OffsetCommit, retried until acknowledged with no partition error). Right after the
   acknowledgement (``--kill-delay`` later), the script SIGKILLs the coordinator
   (``LocalKafka.kill_node``).
3. It polls Metadata every 50 ms until another broker leads the partition. That takes about the
   broker session timeout: about 9 s, and 11-13 s when the victim was also the KRaft controller.
4. From that moment it takes spark-purge snapshots of the topic and every group, in a tight loop
   for ``--window`` seconds. Each snapshot is ``open_client(ClientConfig(...)).snapshot()`` with
   a new client, as a batch read does. The client is bootstrapped from the live nodes: a dead
   bootstrap server costs a new client a third of its request timeout. With ``--reuse-client``,
   one client per trial is connected before the commit and reused, as the streaming source does.
   Each snapshot is judged as one of these outcomes:
   ``ok``          listed, with both commits
   ``MISSING``     not listed
   ``NO-COMMITS``  listed, but a commit lacking or wrong on a partition the snapshot kept
   ``unreadable``  listed, but named in ``unreadable_groups`` (the purge blocks on it)
   ``unsettled``   a retriable spark-purge error, e.g. ``GroupsUnsettled``
   ``error``       any other exception
   Every outcome other than ``ok`` is printed under the trial.
5. It restarts the node (``LocalKafka.start_node``) and waits until every partition of
   ``__consumer_offsets`` and of the topic has all 3 replicas in sync again.

A trial counts as MISSING when any of its snapshots was ``MISSING`` or ``NO-COMMITS``: in both
cases the group is left out without an error. The last line says ``MISSING in X of N trials``.
The exit status is 0 whatever X is. It is 1 when the setup or a trial step fails (traceback;
the cluster folder is kept) and 130 on Ctrl-C or SIGTERM. The brokers are stopped by their own
PIDs in every case: the launcher's context manager stops them, SIGTERM is turned into
KeyboardInterrupt so the context manager still runs, and the JVMs also have a parent-death
signal. ``--keep-logs`` keeps the cluster folder (``node-<id>/server.log``) and prints its path.

A trial takes 21-26 s: 8-13 s until the new leader shows, the 6 s window (about 100 snapshots),
and 5-7 s for the restart and the ISR wait. Cluster start and setup add about 25 s.
"""
from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kafka import KafkaAdminClient  # noqa: E402

from spark_purge.errors import SparkPurgeError  # noqa: E402
from spark_purge.kafka import ClientConfig, ClusterClient, ClusterSnapshot, ConnectionSettings, open_client  # noqa: E402
from spark_purge.kafka.groups import OFFSETS_TOPIC  # noqa: E402
from spark_purge.testing import workload  # noqa: E402
from spark_purge.testing.cluster import LocalKafka  # noqa: E402

NODES = 3
TOPIC_PARTITIONS = 3
RECORDS_PER_PARTITION = 100
COMMIT_OFFSET = 50
COMMITTED_PARTITIONS = (0, 1)
SNAPSHOT_TIMEOUT_MS = 10_000  # kafka.request_timeout of a snapshot (the invariant checker's 10 s)
NEW_LEADER_TIMEOUT_S = 90.0
REJOIN_TIMEOUT_S = 120.0
BROKER_CONFIG = {"auto.leader.rebalance.enable": "false"}
SILENT = ("MISSING", "NO-COMMITS")  # outcomes where the group is left out without an error


# ---- which __consumer_offsets partition a group lives on ----------------------------------------


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions``. ``Utils.abs`` is ``Math.abs``
    with ``Integer.MIN_VALUE`` mapped to 0; it is not ``x & 0x7fffffff``, which gives other
    partitions for negative hashes."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def offsets_leaders(admin: KafkaAdminClient) -> dict[int, int]:
    """``__consumer_offsets`` partition -> leader (-1: none), from a fresh Metadata request."""
    return workload.leaders(admin, OFFSETS_TOPIC)


def coordinator_of(admin: KafkaAdminClient, group_id: str) -> int:
    """FindCoordinator for ``group_id``, through a fresh admin client because kafka-python caches
    coordinators. It uses kafka-python internals, which is acceptable here: this only cross-checks
    ``offsets_partition``."""
    fresh = workload.fresh_admin(admin)
    try:
        return int(fresh._manager.run(fresh._find_coordinator_id, group_id))
    finally:
        fresh.close()


# ---- one snapshot and what it shows of the group ------------------------------------------------


@dataclass
class Seen:
    at_s: float  # when the snapshot started, seconds after the new leader showed
    took_s: float
    outcome: str  # ok | MISSING | NO-COMMITS | unreadable | unsettled | error
    listed: list[str] = field(default_factory=list)
    detail: str = ""


def judge(
    snap: ClusterSnapshot, group: str, expected: dict[tuple[str, int], int], known: dict[str, int]
) -> tuple[str, list[str], str]:
    """(outcome, groups listed, detail) of one snapshot for ``group`` and its ``expected`` commits.
    ``known``: every group this run committed, by ``__consumer_offsets`` partition (a silent miss
    names those absent besides ``group``: which coordinator partitions the listing lacked)."""
    listed = sorted(g.group_id for g in snap.groups)
    dropped = sorted((d.topic, d.partition) for d in snap.dropped_partitions)
    note = f"dropped partitions {dropped}" if dropped else ""
    if group in snap.unreadable_groups:
        return "unreadable", listed, f"{snap.unreadable_group_errors().get(group)} {note}".strip()
    if group not in listed:
        absent = sorted(f"{g}@p{p}" for g, p in known.items() if g != group and g not in listed)
        present = sorted({p for g, p in known.items() if g in listed})
        return "MISSING", listed, f"absent besides it: {absent or 'none'}; partitions seen: {present} {note}".strip()
    got = {(c.topic, c.partition): c.committed_offset for c in snap.commits if c.group_id == group}
    lacking = {tp: got.get(tp) for tp, offset in expected.items() if tp not in dropped and got.get(tp) != offset}
    if lacking:
        return "NO-COMMITS", listed, f"expected {expected}, read {got} {note}".strip()
    return "ok", listed, note


def snapshot_once(
    settings: ConnectionSettings, topic: str, group: str, expected: dict[tuple[str, int], int],
    known: dict[str, int], client: Optional[ClusterClient] = None,
) -> tuple[str, list[str], str]:
    """One snapshot of ``topic`` and every group (a new client unless ``client`` is given), judged."""
    try:
        if client is not None:
            snap = client.snapshot()
        else:
            with open_client(ClientConfig(settings, topics=(topic,))) as fresh:
                snap = fresh.snapshot()
    except SparkPurgeError as exc:
        kind = "unsettled" if exc.retriable else "error"
        return kind, [], f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    except Exception as exc:  # not one of spark-purge's own errors: worth seeing as such
        return "error", [], f"{type(exc).__module__}.{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return judge(snap, group, expected, known)


# ---- a trial ------------------------------------------------------------------------------------


@dataclass
class Trial:
    number: int
    group: str
    partition: int
    victim: int
    was_controller: bool
    led: list[int] = field(default_factory=list)  # the __consumer_offsets partitions the victim led
    new_leader: int = -1
    leader_after_s: float = 0.0
    seen: list[Seen] = field(default_factory=list)
    rejoin_s: float = 0.0
    took_s: float = 0.0

    @property
    def missing(self) -> list[Seen]:
        return [s for s in self.seen if s.outcome in SILENT]

    def _timing(self) -> str:
        took = sorted(s.took_s for s in self.seen)
        return f" ({took[0]:.2f}-{took[-1]:.2f}s each)" if took else ""

    def line(self) -> str:
        head = (
            f"trial {self.number}: group on p{self.partition}; killed node {self.victim} "
            f"(led p{','.join(map(str, self.led))}{'; the KRaft controller' if self.was_controller else ''}), "
            f"new leader {self.new_leader} after {self.leader_after_s:.1f}s; snapshots {len(self.seen)}{self._timing()}; "
        )
        counts = Counter(s.outcome for s in self.seen)
        others = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("ok", *SILENT))
        if self.missing:
            first = self.missing[0]
            body = f"MISSING in {len(self.missing)} (at +{first.at_s:.1f}s, {first.outcome}, listed={first.listed})"
        else:
            body = "all had the group" if not others else f"none silently missing, {counts.get('ok', 0)} ok"
        tail = f"; {others}" if others else ""
        return head + body + tail + f"  [trial {self.took_s:.0f}s, rejoin {self.rejoin_s:.0f}s]"


def pick_group(trial: int, rng: random.Random, leaders: dict[int, int], live: set[int]) -> tuple[str, int, int]:
    """A fresh group id whose ``__consumer_offsets`` partition is led by a live broker."""
    for _ in range(10_000):
        group = f"diag-t{trial}-{rng.getrandbits(32):08x}"
        partition = offsets_partition(group, len(leaders))
        if leaders.get(partition, -1) in live:
            return group, partition, leaders[partition]
    raise RuntimeError(f"no __consumer_offsets partition led by a live broker: leaders {leaders}, live {sorted(live)}")


def wait_new_leader(admin: KafkaAdminClient, partition: int, victim: int) -> int:
    """Poll Metadata (every 50 ms; errors from the dead node retried) until a broker other than
    ``victim`` leads ``__consumer_offsets-<partition>``."""
    deadline = time.monotonic() + NEW_LEADER_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            leader = offsets_leaders(admin).get(partition, -1)
            if leader not in (-1, victim):
                return leader
        except Exception:  # a request routed to the dead node: try again
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{OFFSETS_TOPIC}-{partition} still led by node {victim} (or nobody) after {NEW_LEADER_TIMEOUT_S:.0f}s")


def snapshot_settings(cluster: LocalKafka) -> ConnectionSettings:
    """The snapshots' connection: bootstrapped from the nodes running now. A fresh client given
    a dead bootstrap server spends its share of the request timeout on it (kafka-python retries
    a refused port until then), which would thin out the snapshots in the window."""
    live = tuple(cluster.node(n).address for n in cluster.node_ids if cluster.node(n).running)
    return ConnectionSettings(live, request_timeout_ms=SNAPSHOT_TIMEOUT_MS)


def run_trial(
    number: int, cluster: LocalKafka, admin: KafkaAdminClient, topic: str, rng: random.Random,
    window_s: float, kill_delay_s: float, reuse_client: bool, known: dict[str, int], out: Any,
) -> Trial:
    started = time.monotonic()
    live = {n for n in cluster.node_ids if cluster.node(n).running}
    leaders = workload.retry(lambda: offsets_leaders(admin), "__consumer_offsets leaders")
    group, partition, victim = pick_group(number, rng, leaders, live)
    # FindCoordinator works before the group exists: check the partition formula first, so that
    # nothing stands between the commit's acknowledgement and the kill.
    coordinator = workload.retry(lambda: coordinator_of(admin, group), f"FindCoordinator {group}")
    if coordinator != victim:
        out(f"  note: FindCoordinator says node {coordinator} coordinates {group}, Metadata says {OFFSETS_TOPIC}-{partition} "
            f"is led by {victim}: the partition formula is wrong, or the leader moved")
    trial = Trial(number, group, partition, victim, cluster.active_controller() == victim, sorted(p for p, n in leaders.items() if n == victim))
    known[group] = partition
    expected = {(topic, p): COMMIT_OFFSET for p in COMMITTED_PARTITIONS}
    client = open_client(ClientConfig(snapshot_settings(cluster), topics=(topic,))) if reuse_client else None
    try:
        if client is not None:
            client.snapshot()  # connected to every broker, coordinators cached, before the kill
        workload.commit(admin, group, expected)  # retried until acknowledged with no partition error
        if kill_delay_s > 0:
            time.sleep(kill_delay_s)
        killed_at = time.monotonic()
        cluster.kill_node(victim)
        trial.new_leader = wait_new_leader(admin, partition, victim)
        moved_at = time.monotonic()
        trial.leader_after_s = moved_at - killed_at
        settings = snapshot_settings(cluster)
        while time.monotonic() - moved_at < window_s:
            t0 = time.monotonic()
            outcome, listed, detail = snapshot_once(settings, topic, group, expected, known, client)
            trial.seen.append(Seen(t0 - moved_at, time.monotonic() - t0, outcome, listed, detail))
    finally:
        if client is not None:
            client.close()
    for s in trial.seen:
        if s.outcome != "ok":
            shown = f" listed={s.listed}" if s.outcome in SILENT else ""
            out(f"    +{s.at_s:.2f}s ({s.took_s:.2f}s): {s.outcome}{shown}{' ' + s.detail if s.detail else ''}")
    rejoin = time.monotonic()
    cluster.start_node(victim)
    partitions = len(leaders)
    workload.wait_for_leaders(admin, {OFFSETS_TOPIC: partitions, topic: TOPIC_PARTITIONS}, in_sync=NODES, timeout_s=REJOIN_TIMEOUT_S)
    trial.rejoin_s = time.monotonic() - rejoin
    trial.took_s = time.monotonic() - started
    return trial


# ---- the run ------------------------------------------------------------------------------------


def _sigterm(*_: object) -> NoReturn:
    raise KeyboardInterrupt  # leaves the cluster's `with` block: its nodes are stopped by PID


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("trials", nargs="?", type=int, default=5, help="number of kill trials (default 5)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the group ids (default: random, printed)")
    ap.add_argument("--window", type=float, default=6.0, help="seconds of snapshots after the new leader shows (default 6)")
    ap.add_argument("--kill-delay", type=float, default=0.0, help="seconds between the commit's acknowledgement and the kill (default 0)")
    ap.add_argument("--reuse-client", action="store_true", help="one snapshot client per trial, connected before the kill")
    ap.add_argument("--keep-logs", action="store_true", help="keep the cluster's folder (broker logs) and print its path")
    ap.add_argument("--verbose", action="store_true", help="show spark-purge's own warnings (dropped partitions, retries)")
    args = ap.parse_args(argv)
    if args.trials < 1 or args.window <= 0:
        ap.error("TRIALS must be >= 1 and --window > 0")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # connection errors to the killed node are expected
    if not args.verbose:
        logging.getLogger("spark_purge").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _sigterm)

    def out(line: str) -> None:
        print(line, flush=True)

    workdir = tempfile.mkdtemp(prefix="coordinator-move-") if args.keep_logs else None
    trials: list[Trial] = []
    interrupted = False
    try:
        with LocalKafka(nodes=NODES, broker_config=BROKER_CONFIG, workdir=workdir) as cluster:
            try:
                run_trials(cluster, args, rng, seed, trials, out)
            except KeyboardInterrupt:
                interrupted = True  # leave the `with` cleanly: nodes stopped by PID, temp folder removed
    except KeyboardInterrupt:  # during start-up or the stop itself (the launcher's atexit hook stops the rest)
        interrupted = True
    finally:
        if workdir is not None:
            out(f"cluster folder kept: {workdir}")
    if interrupted:
        out(f"interrupted after {len(trials)} trial(s); the cluster was stopped")
    missing = sum(1 for t in trials if t.missing)
    counts = Counter(s.outcome for t in trials for s in t.seen)
    out(f"snapshot outcomes: {dict(sorted(counts.items()))}")
    out(f"MISSING in {missing} of {len(trials)} trials")
    return 130 if interrupted else 0


def run_trials(cluster: LocalKafka, args: argparse.Namespace, rng: random.Random, seed: int, trials: list[Trial], out: Any) -> None:
    """Set up the topic and ``__consumer_offsets``, then run the trials, appending each to ``trials``."""
    admin = workload.new_admin(cluster.bootstrap_servers, **cluster.client_kwargs())
    try:
        topic = workload.create_topic(admin, "diag", partitions=TOPIC_PARTITIONS, replication=NODES)
        workload.produce(cluster.bootstrap_servers, topic, [RECORDS_PER_PARTITION] * TOPIC_PARTITIONS)
        # The first commit makes Kafka create __consumer_offsets; wait for all its replicas.
        workload.commit(admin, "diag-warmup", {(topic, 0): 1})
        partitions = len(workload.retry(lambda: offsets_leaders(admin), "__consumer_offsets leaders"))
        known = {"diag-warmup": offsets_partition("diag-warmup", partitions)}
        workload.wait_for_leaders(admin, {OFFSETS_TOPIC: partitions}, in_sync=NODES, timeout_s=REJOIN_TIMEOUT_S)
        mode = "one client per trial" if args.reuse_client else "a new client per snapshot"
        out(f"cluster {cluster.bootstrap_servers} ({NODES} nodes, pids {cluster.pids()}); topic {topic} "
            f"({TOPIC_PARTITIONS}x{RECORDS_PER_PARTITION} records); {OFFSETS_TOPIC}: {partitions} partitions, RF {NODES}; "
            f"seed {seed}; kill {args.kill_delay:g}s after the commit; window {args.window:g}s; {mode}")
        for n in range(1, args.trials + 1):
            trial = run_trial(n, cluster, admin, topic, rng, args.window, args.kill_delay, args.reuse_client, known, out)
            trials.append(trial)
            out(trial.line())
    finally:
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
