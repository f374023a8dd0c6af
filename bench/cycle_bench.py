"""Purge-cycle benchmark (issue 12): one steady-state purge cycle against its raw Kafka floor.

    ./dev.sh py bench/cycle_bench.py --partitions 1000 --groups 1000
    ./dev.sh py bench/cycle_bench.py --partitions 10000 --groups 10000 --cycles 4 --processes

Builds a real KRaft cluster (``--nodes``), ``--partitions`` partitions in topics of
``--per-topic`` partitions with ``--records`` records each, and ``--groups`` classic groups;
group *i* commits on ``--commits-per-group`` partitions (default: all) of topic *i* mod #topics.
One rule discovers the groups (``min_retention: 0s``, ``min_step: 1``). Then, ``--cycles``
times: every group advances its commits by two records (untimed), the raw floor is measured
(the Kafka client's snapshot alone, with Python's cyclic garbage collector paused; after the
cycle, DeleteRecords alone deleting one record of every partition, the work the cycle's own
DeleteRecords did), and one purge cycle runs in
process as ``foreachBatch`` runs it (``read_snapshot`` + ``PurgePipeline.process_batch``).
The setup, the commits and the floor run in a Python process of their own (``KafkaSide``), so
that the driver's peak RSS is the purge's alone.
The first ``--warmup`` cycles (default 1) warm up (JIT, Python workers, table creation) and are
left out of the summary. The JVM's JIT goes on compiling Spark's code for minutes (at 1k x 1k it
used more than one of the two cores in cycles 2-6): the summary's "its JIT" line shows how much
of the JVM's CPU in the summarised cycles was still compilation; a long ``--cycles`` with a
larger ``--warmup`` shows the cycle a continuous purge settles to.

Prints per phase min / median / mean seconds, the Spark jobs it ran, and the Delta commits per cycle;
the cycle's CPU time per part (Python driver, Spark JVM, Python workers, Kafka brokers: on a
2-core machine a cycle that uses more CPU seconds than twice its wall time waited for a core),
the Spark JVM's time collecting garbage in the cycle (its collectors' own count; each collection
stops the JVM's threads) and in how many cycles a full collection ran,
and the whole machine's (a worker that exits during the cycle takes its own CPU time with it);
with ``--stream``, Spark's own steps of each trigger (``StreamingQueryProgress.durationMs``: the
source's ``latestOffset``, which takes the snapshot, the offset log's write...), the time from
the cycle's start to its trigger, and ``toBatch``, from those steps to the batch's function (the
source's read planning, ``partitions()``, runs there);
the floor and the cycle / floor ratio; peak RSS of the Python driver, the Spark JVM and its
Python workers (sampled from /proc), and the peak PSS of the workers and of all together (the
workers are forked from one daemon: their RSS counts the pages they share once per worker),
and the workers' peak RSS by what they run (their ``-m`` module: Spark's worker daemon and its
forks, the data source's and the streaming source's runners...).
``--processes`` also times ``spark-purge plan`` and a one-shot ``spark-purge run`` as processes
(each starts its own JVM).

Phases: ``snapshot+source`` (the source's snapshot taken in its planning process, shipped
to Spark and cached), ``plan`` (``Planner.plan`` and the plan rows to the driver, plus the
batch's audit lookups; nested in it: ``plan: match``, the job that matches the commits with
the progress store (``NestedPositions.staleness_table``; it also gives the rules' discovery
pairs), ``plan: rules``, resolving the topics' rules (a job of its own only when no store was
matched), and ``plan: rows``, the plan's query), ``intents``/``outcomes`` (audit writes), ``delete`` (DeleteRecords),
``progress`` (``ProgressStore.update``), ``history`` (``AppendHistory.update``, only with a
``min_retention``). Not a test: figures depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from kafka import KafkaProducer

from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka

# The benches' brokers (this one, ``process_bench.py``, ``diag/snapshot_memory.py``).
BROKER_CONFIG = {"num.network.threads": "3", "num.io.threads": "4", "offsets.topic.num.partitions": "10"}
PHASES = ("snapshot+source", "lease", "plan", "plan: match", "plan: rules", "plan: rows", "intents", "delete", "outcomes", "progress", "history")


# ---- /proc ----------------------------------------------------------------------------------


def _proc_mb(pid: int, file: str, key: str) -> float:
    """``key``'s value (kB) in ``/proc/<pid>/<file>``, in MB; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _status_mb(pid: int, key: str) -> float:
    return _proc_mb(pid, "status", key)


def _pss_mb(pid: int) -> float:
    """Proportional set size: pages shared between processes (Spark's Python workers are forked
    from one daemon) counted once in all, split among their sharers."""
    return _proc_mb(pid, "smaps_rollup", "Pss")


def _children(root: int) -> dict[int, int]:
    """Every live descendant of ``root``, with its parent (from /proc's ppid fields)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found.update((c, p) for c in kids)
        frontier.extend(kids)
    return found


def _kind(pid: int, daemon: bool) -> str:
    """What a Python worker runs: its ``-m`` module and the module after it (Spark's worker
    daemons run ``pyspark.daemon <worker module>``: ``pyspark.worker`` for tasks,
    ``pyspark.sql.worker.plan_data_source_read`` for a data source's planning, ...), marked
    "daemon" for a daemon itself (``daemon``: a child of the JVM; its forks are the workers);
    else its program's name; "gone" when it exited."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    words = [a.decode(errors="replace") for a in args if a]
    if "-m" in words[:-1]:
        kind = " ".join(words[words.index("-m") + 1 : words.index("-m") + 3])
    else:
        kind = Path(words[0]).name if words else "gone"
    return f"{kind} (daemon)" if daemon else kind


def _exe(pid: int) -> str | None:
    """The program ``pid`` runs (None: gone)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _stat(path: str) -> tuple[str, float] | None:
    """(command name, user + system CPU seconds) of a process or thread from its /proc ``stat``
    file; None when it is gone."""
    try:
        text = Path(path).read_text()
        fields = text.rsplit(")", 1)[1].split()
        return text[text.index("(") + 1 : text.rindex(")")], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _cpu_s(pid: int) -> float:
    stat = _stat(f"/proc/{pid}/stat")
    return 0.0 if stat is None else stat[1]


CPU_PARTS = ("driver", "jvm", "workers", "brokers")
JIT_THREAD = re.compile(r"C[12] CompilerThre")  # HotSpot's JIT threads, as /proc names them (15 characters)


def cpu_seconds(jvm_pid: int, broker_pids: list[int]) -> tuple[dict[str, float], dict[int, float]]:
    """CPU time (user + system) used so far: per part, this process (the Python driver), the
    Spark JVM and the Kafka brokers — less sensitive to a loaded machine than wall time; and
    each live Python worker of the JVM's, by pid (``used`` sums them as the part "workers")."""
    return {
        "driver": _cpu_s(os.getpid()),
        "jvm": _cpu_s(jvm_pid),
        "brokers": sum(_cpu_s(p) for p in broker_pids),
        "jit": _jit_cpu_s(jvm_pid),
        "machine": _machine_cpu_s(),
    }, {p: _cpu_s(p) for p in _children(jvm_pid)}


def used(before: tuple[dict[str, float], dict[int, float]], after: tuple[dict[str, float], dict[int, float]]) -> dict[str, float]:
    """The CPU time each part used between two ``cpu_seconds``. The workers' is the sum over the
    workers alive at the end of what each used since the start (all of it, for one started
    since): a worker that exited meanwhile takes its time with it, rather than taking its whole
    past time off the sum (which made the cycle's CPU negative in a cycle whose worker exited)."""
    parts = {part: after[0][part] - before[0][part] for part in after[0]}
    parts["workers"] = sum(cpu - before[1].get(pid, 0.0) for pid, cpu in after[1].items())
    return parts


def _machine_cpu_s() -> float:
    """CPU time (user + system, all cores) the whole machine used so far (/proc/stat): it also
    counts a Python worker that exited during the cycle, whose own time left with it (Spark's
    worker daemons ignore SIGCHLD, so their forks' times never reach the daemon's)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _jit_cpu_s(pid: int) -> float:
    """CPU time of the JVM's JIT compiler threads (part of the JVM's own)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    stats = (_stat(f"/proc/{pid}/task/{tid}/stat") for tid in tasks)
    return sum(cpu for name, cpu in filter(None, stats) if JIT_THREAD.fullmatch(name))


class RssSampler:
    """Peak RSS (MB) of this process, the Spark JVM and the sum of the JVM's Python workers, and
    each kind of worker's (``_kind``)."""

    def __init__(self, jvm_pid: int, interval_s: float = 0.2, pss_every: int = 10, where: Callable[[], str] = lambda: "") -> None:
        self.jvm_pid = jvm_pid
        self.where = where  # the phase running (for the breakdown at the peak)
        self.jvm_exe = _exe(jvm_pid)
        self.interval_s = interval_s
        # PSS comes from smaps_rollup, which walks every mapping of the process (about 17 ms for
        # a 1 GB JVM, with its memory map locked meanwhile): sampled every ``pss_every``-th time
        # only, so that the sampler does not take a visible share of a 2-core machine from the
        # cycle it measures (at every 0.2 s it took about a quarter of one core).
        self.pss_every = pss_every
        self._n = 0
        self.peak: dict[str, float] = defaultdict(float)
        self.kinds: dict[str, tuple[float, int]] = {}  # worker kind -> (peak summed RSS MB, processes then)
        self.at_peak: dict[str, Any] = {}  # the PSS peak's parts: phase, driver, JVM, each worker kind
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self, final: bool = False) -> None:
        # A child still running the JVM's own program is the JVM forked for a command (Hadoop's
        # local file system runs chmod and readlink) and not exec'ed yet: its RSS is the JVM's
        # pages, shared, not a worker's.
        children = {p: pp for p, pp in _children(self.jvm_pid).items() if _exe(p) not in (None, self.jvm_exe)}
        kinds = {p: _kind(p, pp == self.jvm_pid) for p, pp in children.items()}  # before the RSS: a worker gone by then counts 0
        rss = {p: _status_mb(p, "VmRSS") for p in children}
        workers = sum(rss.values())
        by_kind: dict[str, list[float]] = defaultdict(list)
        for pid, mb in rss.items():
            if mb:
                by_kind[kinds[pid]].append(mb)
        for kind, sizes in by_kind.items():  # the peak of each kind's sum, and how many made it
            if sum(sizes) > self.kinds.get(kind, (0.0, 0))[0]:
                self.kinds[kind] = (sum(sizes), len(sizes))
        now = {"driver": _status_mb(os.getpid(), "VmHWM"), "jvm": _status_mb(self.jvm_pid, "VmHWM"), "workers": workers}
        for k, v in now.items():
            self.peak[k] = max(self.peak[k], v)
        self.peak["total"] = max(self.peak["total"], now["driver"] + _status_mb(self.jvm_pid, "VmRSS") + workers)
        self._n += 1
        if final or (self._n - 1) % self.pss_every == 0:  # the first sample, then every pss_every-th
            self._sample_pss(kinds)

    def _sample_pss(self, kinds: Mapping[int, str]) -> None:
        where = self.where()
        by_kind: dict[str, float] = defaultdict(float)
        for p, kind in kinds.items():
            by_kind[kind] += _pss_mb(p)
        workers_pss = sum(by_kind.values())
        self.peak["workers_pss"] = max(self.peak["workers_pss"], workers_pss)
        driver, jvm = _pss_mb(os.getpid()), _pss_mb(self.jvm_pid)
        total_pss = driver + jvm + workers_pss
        if total_pss > self.peak["total_pss"]:
            self.peak["total_pss"] = total_pss
            self.at_peak = {"phase": where, "driver": driver, "Spark JVM": jvm, **by_kind}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample(final=True)


# ---- setup ------------------------------------------------------------------------------------


def build_topics(bootstrap: str, partitions: int, per_topic: int, run: str, records: int) -> list[tuple[str, int]]:
    admin = workload.new_admin(bootstrap, request_timeout_ms=120_000)
    n_topics = max(1, (partitions + per_topic - 1) // per_topic)
    topics = [(f"cyc-{run}-{i:04d}", min(per_topic, partitions - i * per_topic)) for i in range(n_topics)]
    t0 = time.monotonic()
    workload.create_topics(admin, dict(topics), timeout_s=300)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20)
    try:
        for topic, n in topics:
            for p in range(n):
                for i in range(records):
                    producer.send(topic, value=b"v%d" % i, partition=p)
        producer.flush(timeout=600)
    finally:
        producer.close()
    print(f"setup: {partitions} partitions in {n_topics} topics, {records} records each: {time.monotonic() - t0:.1f}s", flush=True)
    return topics


def assign(topics: list[tuple[str, int]], groups: int, run: str, per_group: int = 0) -> dict[str, list[tuple[str, int]]]:
    """The benches' groups: group *i* commits on the first ``per_group`` (0: all) partitions of
    topic *i* mod #topics."""
    return {
        f"cyc-{run}-g{g:05d}": [(t, p) for p in range(min(n, per_group) if per_group else n)]
        for g in range(groups)
        for t, n in [topics[g % len(topics)]]
    }


def commit_all(bootstrap: str, assignments: dict[str, list[tuple[str, int]]], offset: int, threads: int = 8) -> float:
    """Every group commits ``offset`` on its partitions (one OffsetCommit per group, ``threads``
    admin clients in parallel). Returns the seconds it took."""
    local = threading.local()
    admins: list[Any] = []

    def one(item: tuple[str, list[tuple[str, int]]]) -> None:
        if not hasattr(local, "admin"):
            local.admin = workload.new_admin(bootstrap, request_timeout_ms=120_000)
            admins.append(local.admin)
        group, tps = item
        workload.commit(local.admin, group, {tp: offset for tp in tps}, timeout_s=120)

    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, assignments.items()))
    finally:
        for admin in admins:
            admin.close()
    return time.monotonic() - t0


class KafkaSide:
    """The bench's own Kafka work (the setup, the groups advancing their commits, the raw floor)
    in a Python process of its own, so that the driver's peak RSS is the purge's, not the bench's:
    in one 10k x 10k run the floor's snapshot and the 500,000 commits took this process from 230
    to 470 MB. Spoken to with one JSON line each way (``kafka_side_main``); stopped by its PID."""

    def __init__(self, bootstrap: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--kafka-side", bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def call(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the bench's Kafka process ended (exit {self.proc.wait()}) during {op!r}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the bench's Kafka process failed {op!r}: {answer['error']}")
        return answer["result"]

    def __enter__(self) -> KafkaSide:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # its loop ends at end of input
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def kafka_side_main(bootstrap: str) -> int:
    """``KafkaSide``'s process: one JSON request per input line, one JSON answer per output line
    (its prints go to stderr)."""
    from spark_purge.config import load
    from spark_purge.kafka import SnapshotRequest, open_client

    state: dict[str, Any] = {}
    out, sys.stdout = sys.stdout, sys.stderr

    def setup(partitions: int, per_topic: int, run: str, records: int, groups: int, per_group: int) -> int:
        state["assignments"] = assign(build_topics(bootstrap, partitions, per_topic, run, records), groups, run, per_group)
        n_commits = sum(len(v) for v in state["assignments"].values())
        took = commit_all(bootstrap, state["assignments"], 1)
        print(f"setup: {groups} groups, {n_commits} commits: {took:.1f}s", flush=True)
        return n_commits

    def commit(offset: int) -> None:
        commit_all(bootstrap, state["assignments"], offset)

    def open_(config_file: str) -> None:
        state["client"] = open_client(load(config_file))

    def snapshot() -> dict[str, float]:
        t0 = time.perf_counter()  # the client pauses the cyclic collector itself (``spark_purge._gc``)
        snap = state["client"].snapshot(SnapshotRequest())
        return {"seconds": time.perf_counter() - t0, "commits": len(snap.commits)}

    def delete(to: int | None = None) -> float:
        """DeleteRecords on every partition, timed: at offset ``to`` (None: at its log start,
        deleting nothing)."""
        client = state["client"]
        parts = client.snapshot(SnapshotRequest(include_groups=False)).partitions
        cuts = {(p.topic, p.partition): p.log_start_offset if to is None else to for p in parts}
        t0 = time.perf_counter()
        client.delete_records(cuts, timeout_ms=120_000)
        return time.perf_counter() - t0

    ops: dict[str, Callable[..., Any]] = {"setup": setup, "commit": commit, "open": open_, "snapshot": snapshot, "delete": delete}
    try:
        for line in sys.stdin:
            request = json.loads(line)
            try:
                answer = {"result": ops[request.pop("op")](**request)}
            except Exception as exc:  # said to the bench, which stops
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()
    finally:
        if "client" in state:
            state["client"].close()
    return 0


# ---- phase timing -----------------------------------------------------------------------------


class Phases:
    """Times named phases and counts the Spark jobs each ran (a job group per phase; a nested
    phase's jobs are its own, not its parent's)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.cycle = 0
        self.stack: list[str] = []
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.jobs: dict[str, list[int]] = defaultdict(list)
        self._inner: dict[str, float] = defaultdict(float)

    def _group(self, name: str) -> str:
        return f"bench-{self.cycle}-{name}"

    def _set(self, name: str | None) -> None:
        sc = self.spark.sparkContext
        if name is None:
            sc.setLocalProperty("spark.jobGroup.id", None)
        else:
            sc.setJobGroup(self._group(name), name)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        self._set(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t0
            self.stack.pop()
            self._set(self.stack[-1] if self.stack else None)
            self._record(name, took)
            if self.stack:
                self._inner[self.stack[-1]] += took

    def _record(self, name: str, took: float) -> None:
        own = took - self._inner.pop(name, 0.0)
        if len(self.seconds[name]) > self.cycle:  # a phase run twice in a cycle (nested writes)
            self.seconds[name][-1] += own
            return
        while len(self.seconds[name]) < self.cycle:
            self.seconds[name].append(0.0)
        self.seconds[name].append(own)

    def slowest(self, cycle: int, n: int = 3) -> str:
        """The cycle's ``n`` longest phases (their own seconds), e.g. "plan 1.02s, rows 0.67s"."""
        own = [(secs[cycle], name) for name, secs in self.seconds.items() if len(secs) > cycle and secs[cycle] > 0]
        return ", ".join(f"{name} {took:.2f}s" for took, name in sorted(own, reverse=True)[:n])

    def count_jobs(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        for name in PHASES:
            while len(self.jobs[name]) <= self.cycle:
                self.jobs[name].append(0)
            self.jobs[name][self.cycle] = len(tracker.getJobIdsForGroup(self._group(name)))

    def call_sites(self) -> dict[str, list[tuple[str, float]]]:
        """Per phase, (call site, seconds) of every Spark job of the current cycle (the call site
        is its first stage's name, with the job's description when it has one; the time is from
        Spark's status store)."""
        tracker = self.spark.sparkContext.statusTracker()
        store = self.spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
        found: dict[str, list[tuple[str, float]]] = {}
        for name in PHASES:
            sites = []
            for job in sorted(tracker.getJobIdsForGroup(self._group(name))):
                info = tracker.getJobInfo(job)
                stages = sorted(info.stageIds) if info is not None else []
                stage = tracker.getStageInfo(stages[0]) if stages else None
                data = store.job(job)
                start, end = data.submissionTime(), data.completionTime()
                took = (end.get().getTime() - start.get().getTime()) / 1000 if start.isDefined() and end.isDefined() else 0.0
                site = stage.name if stage is not None else f"job {job}"
                described = data.description()  # Delta names its own jobs ("Delta: ...")
                if described.isDefined():
                    site = f"{site} [{str(described.get())[:90]}]"
                sites.append((site, took))
            found[name] = sites
        return found

    def wrap(self, owner: Any, method: str, name: str | Callable[..., str]) -> None:
        original = getattr(owner, method, None)
        if original is None:  # older code (a baseline run of this script) lacks it
            return
        phases = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            with phases.phase(label):
                return original(*args, **kwargs)

        setattr(owner, method, timed)


def instrument(phases: Phases) -> None:
    from spark_purge import pipeline as pipeline_module
    from spark_purge.audit import AuditSink, ProgressStore
    from spark_purge.history import AppendHistory
    from spark_purge.kafka.client import KafkaPythonClient
    from spark_purge.lease import PurgerLease
    from spark_purge.pipeline import PurgePipeline
    from spark_purge.policy import plan as plan_module
    from spark_purge.policy.positions import NestedPositions

    # The batch itself is "plan": what its nested phases leave (planning, the plan rows to the
    # driver, the batch's audit lookups).
    phases.wrap(PurgePipeline, "process_batch", "plan")
    phases.wrap(AuditSink, "write", lambda self, rows, kind, batch_id, **_: {"intent": "intents", "lease": "lease"}.get(kind, "outcomes"))
    phases.wrap(KafkaPythonClient, "delete_records", "delete")
    phases.wrap(ProgressStore, "update", "progress")
    phases.wrap(ProgressStore, "apply", "progress")
    phases.wrap(ProgressStore, "record", "progress")  # the pipeline's since the store keeps its rows
    phases.wrap(PurgerLease, "keep", "lease")
    phases.wrap(PurgerLease, "renew", "lease")
    # Inside the plan: the commits' match with the progress store (its one job, which also gives
    # the rules' discovery pairs), resolving the topics' rules (a collect of topic and group
    # names only when no store was matched: the first batch) and the plan's rows to the driver
    # (the query that runs the policy).
    phases.wrap(NestedPositions, "staleness_table", "plan: match")
    phases.wrap(plan_module, "_selected_topic_rules", "plan: rules")
    phases.wrap(pipeline_module, "collect_rows", "plan: rows")  # before stop 83: the plan as Rows
    phases.wrap(pipeline_module, "collect_table", "plan: rows")
    phases.wrap(AppendHistory, "update", "history")


def delta_versions(path: Path) -> int:
    log = path / "_delta_log"
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


# ---- the run ----------------------------------------------------------------------------------


def _stats(values: list[float]) -> str:
    """min / median / mean: the mean shows what a cost every few cycles (the progress log's
    prune, a lease renewal) adds on average, which the median hides."""
    if not values:
        return "     - /      - /      -"
    return f"{min(values):6.2f} / {statistics.median(values):6.2f} / {statistics.fmean(values):6.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=50, help="partitions per topic")
    ap.add_argument("--commits-per-group", type=int, default=0, help="partitions each group commits on (0: all of its topic)")
    ap.add_argument("--records", type=int, default=30, help="records per partition (two are deleted per cycle: the floor's and the purge's)")
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--cycles", type=int, default=4, help="purge cycles (the first --warmup warm up and are not summarised)")
    ap.add_argument(
        "--warmup", type=int, default=1,
        help="leading cycles left out of the summary, unless no cycle would be left (JIT compilation of Spark's code goes on for minutes: see the JIT line)",
    )
    ap.add_argument("--min-retention", default="0s", help="the rule's min_retention (non-zero adds the append history)")
    ap.add_argument(
        "--gap", type=float, default=0.0, metavar="SECONDS",
        help="idle seconds before each cycle after the first, untimed (a long trigger_interval: Spark stops idle Python workers after a minute)",
    )
    ap.add_argument("--keep-warm", metavar="DURATION", help="the config's stream.keep_warm (--stream; 0s: off; default: the config's default)")
    ap.add_argument("--heap", default="3g", help="broker heap")
    ap.add_argument(
        "--broker-jit", choices=("c1", "full"), default="c1",
        help="the brokers' JIT: c1, the test cluster's start-fast setting (-XX:TieredStopAtLevel=1, the default here as in "
        "the issue's own figures), or full, the JVM's default tiered JIT a production broker runs",
    )
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the purge's session (repeatable)")
    ap.add_argument("--jobs", action="store_true", help="list the last cycle's Spark jobs by call site, per phase")
    ap.add_argument(
        "--stream", action="store_true",
        help="run the cycles as the continuous job runs them: batches of the real streaming query (1 s trigger), whose source keeps "
        "its Kafka client between snapshots (default: process_batch called on a batch read of the source, a new client each cycle)",
    )
    ap.add_argument(
        "--facts-task", action="store_true",
        help="with --stream: plan every batch's consumer facts in a task of their own, as before stop 80 (the pipeline keeps no "
        "discovery pairs, so the store match is never asked for them): the baseline for the facts made in the match's task",
    )
    ap.add_argument("--processes", action="store_true", help="also time `spark-purge plan` and a one-shot `spark-purge run`")
    ap.add_argument("--codegen-dump", type=Path, metavar="DIR", help="write the Java source of each class Spark generates to DIR, by cycle")
    args = ap.parse_args(argv)
    if args.warmup < 0:
        ap.error("--warmup must be at least 0")
    if args.records < 2 * args.cycles + 2:
        ap.error("--records must exceed 2 x --cycles + 1 (each cycle's floor and its purge delete one record each)")
    run = uuid.uuid4().hex[:4]
    with tempfile.TemporaryDirectory(prefix="cycle-bench-") as tmp_s, LocalKafka(
        nodes=args.nodes, heap=args.heap, broker_config=BROKER_CONFIG, start_timeout_s=300,
        extra_jvm_args=("-XX:TieredStopAtLevel=4",) if args.broker_jit == "full" else (),
    ) as cluster, KafkaSide(cluster.bootstrap_servers) as kafka:
        tmp = Path(tmp_s)
        n_commits = kafka.call(
            "setup", partitions=args.partitions, per_topic=args.per_topic, run=run, records=args.records,
            groups=args.groups, per_group=args.commits_per_group or args.per_topic,
        )
        config = workload.purge_config_dict(tmp, cluster.bootstrap_servers, f"cyc-{run}-.*", None, request_timeout="120s", delete_timeout="120s")
        config["defaults"]["min_retention"] = args.min_retention
        if args.keep_warm is not None:
            config["stream"]["keep_warm"] = args.keep_warm
        config_file = tmp / "purge.yaml"
        config_file.write_text(yaml.safe_dump(config))
        conf = dict(item.split("=", 1) for item in args.conf)
        kafka.call("open", config_file=str(config_file))
        if args.stream:
            figures = stream_cycles(cluster, kafka, config_file, args.cycles, tmp, conf, args.gap, args.facts_task)
        else:
            figures = cycles(cluster, kafka, config_file, args.cycles, tmp, conf, args.codegen_dump, args.gap)
        report(args, n_commits, figures)
        if args.jobs:
            print("\nSpark jobs of the last cycle, by call site:")
            for name, found in figures["sites"].items():
                count: Counter[str] = Counter()
                seconds: dict[str, float] = defaultdict(float)
                for site, took in found:
                    count[site] += 1
                    seconds[site] += took
                for site in sorted(count):
                    print(f"  {name:<16} {count[site]:>3} x {seconds[site]:5.2f}s  {site}")
        if args.processes:
            time_processes(config_file)
    return 0


class Recorder:
    """One run's figures, cycle by cycle (``cycles`` and ``stream_cycles`` alike): ``begin`` each
    cycle (untimed: every group advances two records, then the floor's snapshot; then its clock
    starts), ``end`` it once its batch is done (the cycle's time, CPU, classes, jobs and Delta
    commits, then the floor's DeleteRecords of one record a partition and its no-op one,
    untimed), ``figures`` at the end."""

    def __init__(self, spark: Any, cluster: LocalKafka, kafka: KafkaSide, phases: Phases, tmp: Path, gap_s: float = 0.0) -> None:
        self.spark, self.cluster, self.kafka, self.phases, self.tmp = spark, cluster, kafka, phases, tmp
        self.gap_s = gap_s  # idle seconds before each cycle after the first (``--gap``)
        self.jvm_pid: int = spark.sparkContext._gateway.proc.pid
        self.floor: dict[str, list[float]] = defaultdict(list)
        self.cycle_s: list[float] = []
        self.cpu_s: dict[str, list[float]] = defaultdict(list)
        self.delta_commits: list[int] = []
        self.compiled: list[int] = []
        self.sites: dict[str, list[tuple[str, float]]] = {}
        self.t0 = 0.0  # the current cycle's start
        self.wall0: list[float] = []  # each cycle's start, epoch seconds (set against Spark's trigger times)
        self._commits = 0
        self._before = 0
        self._classes0 = 0
        self._cpu0: tuple[dict[str, float], dict[int, float]] = ({}, {})
        self._gc0 = (0.0, 0)
        self.gc_s: list[float] = []  # the Spark JVM's time collecting garbage, each cycle (``gc_pauses``)
        self.gc_full: list[int] = []  # full collections among them

    def _versions(self) -> int:
        return sum(delta_versions(p) for p in self.tmp.rglob("*") if (p / "_delta_log").is_dir())

    def begin(self, c: int) -> None:
        self.phases.cycle = c
        self.kafka.call("commit", offset=2 + 2 * c)  # every group advances two records (untimed)
        snap = self.kafka.call("snapshot")
        self.floor["snapshot"].append(snap["seconds"])
        self._commits, self._before, self._classes0 = snap["commits"], self._versions(), generated_classes(self.spark)
        if c and self.gap_s:
            time.sleep(self.gap_s)
        self._gc0 = gc_pauses(self.spark)
        self._cpu0, self.t0 = cpu_seconds(self.jvm_pid, self.cluster.pids()), time.perf_counter()
        self.wall0.append(time.time())

    def end(self, label: str, dump: Path | None = None) -> None:
        c = self.phases.cycle
        self.cycle_s.append(time.perf_counter() - self.t0)
        cpu1 = cpu_seconds(self.jvm_pid, self.cluster.pids())
        gc1 = gc_pauses(self.spark)
        self.gc_s.append(gc1[0] - self._gc0[0])
        self.gc_full.append(gc1[1] - self._gc0[1])
        self.compiled.append(generated_classes(self.spark) - self._classes0)
        if dump is not None:
            dump_sources(self.spark, dump, c)
        for part, seconds in used(self._cpu0, cpu1).items():
            self.cpu_s[part].append(seconds)
        self.phases.count_jobs()
        self.sites = self.phases.call_sites()
        self.delta_commits.append(self._versions() - self._before)
        # The floor's DeleteRecords deletes one record a partition, as the cycle's did: the
        # first of the two the groups commit past next (the cycle after this deletes the
        # second). It runs here, before the groups advance, because a deletion keeps the broker
        # busy for a while after it answers: run before the floor's snapshot, it slowed that
        # snapshot (2.96 s median against 1.9-2.2 s in the day's other runs); run right before
        # the cycle, it slowed the cycle's snapshot (3.36 s against 2.3-2.6 s) and doubled the
        # broker's CPU in the cycle (stop 84). Until stop 84 the floor's DeleteRecords was sent
        # at each partition's log start, a request of the same size that deleted nothing; that
        # one is still timed after it ("floor: no-op delete").
        self.floor["delete"].append(self.kafka.call("delete", to=3 + 2 * c))
        self.floor["no-op delete"].append(self.kafka.call("delete"))
        cpu = self.cpu_s
        print(f"cycle {label}: {self.cycle_s[-1]:.2f}s, CPU {sum(cpu[part][-1] for part in CPU_PARTS):.2f}s of which JIT {cpu['jit'][-1]:.2f}s, JVM collecting {self.gc_s[-1]:.2f}s, "
              f"{self.compiled[-1]} classes generated (floor {self.floor['snapshot'][-1] + self.floor['delete'][-1]:.2f}s, "
              f"{self._commits} commits); {self.phases.slowest(c)}", flush=True)

    def sampler(self) -> RssSampler:
        phases = self.phases
        return RssSampler(self.jvm_pid, where=lambda: f"cycle {phases.cycle} {'/'.join(phases.stack) or 'between phases'}")

    def figures(self, rss: RssSampler) -> dict[str, Any]:
        return {"phases": self.phases, "floor": self.floor, "cycle": self.cycle_s, "cpu": self.cpu_s, "gc": (self.gc_s, self.gc_full), "delta": self.delta_commits,
                "compiled": self.compiled, "rss": dict(rss.peak), "kinds": dict(rss.kinds), "at_peak": rss.at_peak, "sites": self.sites}


def cycles(
    cluster: LocalKafka, kafka: KafkaSide, config_file: Path, n: int, tmp: Path, conf: dict[str, str], dump: Path | None = None,
    gap_s: float = 0.0,
) -> dict[str, Any]:
    from spark_purge.config import load
    from spark_purge.pipeline import read_snapshot

    try:  # as the pipeline holds a batch's snapshot (code before detach.held: Spark's cache)
        from spark_purge.detach import held as hold
    except ImportError:

        def hold(df: Any) -> Any:
            return df.persist()
    from spark_purge.session import get_spark

    cfg = load(config_file)
    spark = get_spark("cycle-bench", master="local[2]", conf=conf)
    phases = Phases(spark)
    instrument(phases)
    pipeline = workload.new_pipeline(spark, cfg)
    record = Recorder(spark, cluster, kafka, phases, tmp, gap_s)
    with record.sampler() as rss:
        try:
            for c in range(n):
                record.begin(c)
                with phases.phase("snapshot+source"):
                    snapshot = hold(read_snapshot(spark, cfg, packed=True))  # as the stream reads it
                    snapshot.count()
                pipeline.process_batch(snapshot, c)
                record.end(str(c), dump)
        finally:
            pipeline.close()
    spark.stop()
    return record.figures(rss)


def stream_cycles(
    cluster: LocalKafka,
    kafka: KafkaSide,
    config_file: Path,
    n: int,
    tmp: Path,
    conf: dict[str, str],
    gap_s: float = 0.0,
    facts_task: bool = False,
) -> dict[str, Any]:
    """``cycles`` as the continuous job runs them (``--stream``): ``n`` batches of the purge's own
    streaming query (``pipeline.start_stream``, 1 s trigger), whose source takes each snapshot in
    its streaming runner with the Kafka client it keeps. The bench's work between cycles (every
    group advances, the floor's snapshot and DeleteRecords) runs in the stream's thread after a
    batch, so the next trigger waits for it; a cycle is timed from the end of that work to the
    end of the next batch: the end of the last trigger (offsets committed), the snapshot, the
    batch's planning and its ``process_batch``. ``snapshot+source`` is the part before
    ``process_batch`` starts. ``facts_task``: the pipeline keeps no discovery pairs between
    batches, so every plan computes the consumer facts in their own task (``--facts-task``)."""
    import threading

    from spark_purge.config import load
    from spark_purge.pipeline import PurgePipeline, start_stream
    from spark_purge.session import get_spark

    cfg = load(config_file)
    spark = get_spark("cycle-bench", master="local[2]", conf=conf)
    phases = Phases(spark)
    instrument(phases)
    record = Recorder(spark, cluster, kafka, phases, tmp, gap_s)
    finished = threading.Event()
    timed_batch = PurgePipeline.process_batch

    def batch(self: PurgePipeline, snapshot: Any, batch_id: int) -> Any:
        c = phases.cycle
        if len(record.cycle_s) > c:  # a batch after the last cycle, while the query stops: not timed
            return timed_batch(self, snapshot, batch_id)
        phases._record("snapshot+source", time.perf_counter() - record.t0)
        batch_wall.append(time.time())
        if facts_task:
            self._last_pairs = None
        result = timed_batch(self, snapshot, batch_id)
        record.end(f"{c} (batch {batch_id})")
        if c + 1 < n:
            record.begin(c + 1)
        else:
            finished.set()
        return result

    batch_wall: list[float] = []  # when each batch's process_batch began, epoch seconds
    PurgePipeline.process_batch = batch  # type: ignore[method-assign]
    with record.sampler() as rss:
        record.begin(0)
        query, pipeline = start_stream(spark, cfg)
        try:
            while not finished.wait(1.0):
                if not query.isActive:
                    raise SystemExit(f"the purge's stream stopped before {n} cycles: {query.exception()}")
            triggers = {p.batchId: {**p.durationMs, "start": _epoch(p.timestamp)} for p in query.recentProgress}
        finally:
            query.stop()
            pipeline.close()
            PurgePipeline.process_batch = timed_batch  # type: ignore[method-assign]
    spark.stop()
    figures = record.figures(rss)
    figures["triggers"] = [triggers.get(b, {}) for b in range(n)]
    for c, t in enumerate(figures["triggers"]):
        if "start" in t and c < len(record.wall0) and c < len(batch_wall):
            # From the cycle's start (the bench's work done, in the last batch) to its trigger's
            # start: the last batch's end, its offsets committed, its progress reported.
            t["beforeTrigger"] = (t["start"] - record.wall0[c]) * 1000
            # From the trigger's start to the batch's function: what Spark's own steps leave.
            steps = sum(t.get(k, 0) for k in ("latestOffset", "walCommit", "queryPlanning", "getBatch"))
            t["toBatch"] = (batch_wall[c] - t["start"]) * 1000 - steps
    return figures


def _epoch(stamp: str) -> float:
    """A progress report's ISO timestamp (UTC, ``...Z``) as epoch seconds."""
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


_dumped: set[str] = set()


def dump_sources(spark: Any, into: Path, cycle: int) -> None:
    """Write the source of each class in Spark's codegen cache not written before to
    ``into/cycle<N>-<i>.java`` (the cache keys: one per compiled class still cached)."""
    jvm = spark.sparkContext._jvm
    owner = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$")
    field = owner.getDeclaredField("cache")
    field.setAccessible(True)
    cache = field.get(owner.getField("MODULE$").get(None)).loadingCache()
    into.mkdir(parents=True, exist_ok=True)
    fresh = [body for body in (_source_of(key) for key in cache.asMap().keySet()) if body not in _dumped]
    for i, body in enumerate(sorted(fresh)):
        (into / f"cycle{cycle}-{i:03d}.java").write_text(body)
    _dumped.update(fresh)
    print(f"  codegen: {len(fresh)} new source(s) in the cache written to {into}/cycle{cycle}-*.java", flush=True)


def _source_of(key: Any) -> str:
    """A codegen cache key's source: a ``CodeAndComment``, or (Spark 4.2) a pair holding one."""
    if key.getClass().getName() == "scala.Tuple2":
        parts = [key._1(), key._2()]
        key = next(p for p in parts if hasattr(p, "getClass") and p.getClass().getName().endswith("CodeAndComment"))
    return str(key.body())


def generated_classes(spark: Any) -> int:
    """Classes Spark's code generation has compiled in this JVM so far (its codegen metrics:
    one per compilation, cache hits not counted)."""
    from spark_purge.py4j_calls import jvm_class

    metrics = jvm_class(spark.sparkContext._jvm, "org.apache.spark.metrics.source.CodegenMetrics")  # no package walk (``gc_pauses``)
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def gc_pauses(spark: Any) -> tuple[float, int]:
    """The Spark JVM's collectors so far: seconds spent collecting (its young and full
    collections, which stop every thread of that JVM; the JVM's own count, ``GarbageCollectorMXBean``)
    and how many full (old generation) collections were among them (stop 92)."""
    from spark_purge.py4j_calls import jvm_class

    # The class named in full and the list read by index: ``jvm.java.lang...`` asks the JVM about
    # each package in turn, and a Python loop over a Java list ends on the iterator's exception,
    # which PySpark's error handler inspects with some thirty more lookups: each a failed class
    # lookup reading every jar's entries on the stream's thread (stop 92).
    seconds, full = 0.0, 0
    beans = jvm_class(spark.sparkContext._jvm, "java.lang.management.ManagementFactory").getGarbageCollectorMXBeans()
    for bean in (beans.get(i) for i in range(beans.size())):
        seconds += bean.getCollectionTime() / 1000
        if bean.getName() in ("MarkSweepCompact", "PS MarkSweep", "G1 Old Generation"):
            full += int(bean.getCollectionCount())
    return seconds, full


def report(args: argparse.Namespace, n_commits: int, figures: dict[str, Any]) -> None:
    phases: Phases = figures["phases"]
    keep = slice(args.warmup, None) if len(figures["cycle"]) > args.warmup else slice(None)
    print()
    print(f"{args.partitions} partitions x {args.groups} groups ({n_commits} commits), {args.nodes} node(s), brokers' JIT {args.broker_jit}; "
          f"steady-state cycles {len(figures['cycle'][keep])} (seconds, min / median / mean; Spark jobs per cycle, median)")
    print(f"{'phase':<18} {'seconds':>24}  jobs")
    for name in PHASES:
        secs = phases.seconds.get(name, [])[keep]
        jobs = phases.jobs.get(name, [])[keep]
        if any(secs) or any(jobs):
            print(f"{name:<18} {_stats(secs)}  {statistics.median(jobs) if jobs else 0:>4}")
    cycle = figures["cycle"][keep]
    floor = [s + d for s, d in zip(figures["floor"]["snapshot"][keep], figures["floor"]["delete"][keep])]
    print(f"{'cycle':<18} {_stats(cycle)}  {sum(statistics.median(phases.jobs[p][keep]) for p in PHASES if phases.jobs.get(p)):>4}")
    cpu = figures["cpu"]
    print(f"{'cycle CPU time':<18} {_stats([sum(v) for v in zip(*(cpu[part][keep] for part in CPU_PARTS))])}  (user+sys, all parts)")
    for part, label in zip(CPU_PARTS, ("Python driver", "Spark JVM", "Python workers", "Kafka brokers")):
        print(f"{'  ' + label:<18} {_stats(cpu[part][keep])}")
        if part == "jvm":
            print(f"{'    its JIT':<18} {_stats(cpu['jit'][keep])}  (compiler threads: the JVM still warming up)")
            if "gc" in figures:
                collecting, fulls = (values[keep] for values in figures["gc"])
                print(f"{'    its collector':<18} {_stats(collecting)}  (wall time collecting, every thread stopped; full collections "
                      f"in {sum(1 for n in fulls if n)} of {len(fulls)} cycles)")
    print(f"{'  whole machine':<18} {_stats(cpu['machine'][keep])}  (/proc/stat: also workers gone before the cycle ended, and anything else running)")
    print(f"{'floor: snapshot':<18} {_stats(figures['floor']['snapshot'][keep])}")
    print(f"{'floor: delete':<18} {_stats(figures['floor']['delete'][keep])}  (one record a partition, as the cycle's)")
    noop = figures["floor"].get("no-op delete", [])[keep]
    if noop:
        print(f"{'floor: no-op delete':<18} {_stats(noop)}  (at the log starts, deleting nothing: the floor's until stop 84)")
        before = [s + d for s, d in zip(figures["floor"]["snapshot"][keep], noop)]
        print(f"cycle / floor with the no-op delete (medians): x{statistics.median(cycle) / statistics.median(before):.2f}")
    print(f"cycle / floor (medians): x{statistics.median(cycle) / statistics.median(floor):.2f}; "
          f"Delta commits per cycle (median): {statistics.median(figures['delta'][keep])}; "
          f"generated classes compiled per cycle (Spark's code generation, median): {statistics.median(figures['compiled'][keep])}")
    triggers = figures.get("triggers", [])[keep]
    if triggers:
        # Spark's own split of each trigger (``StreamingQueryProgress.durationMs``); its
        # ``addBatch`` also holds the bench's untimed work between cycles, so it is left out.
        print("Spark's trigger steps (StreamingQueryProgress.durationMs, seconds, min / median / mean):")
        for step in ("beforeTrigger", "latestOffset", "walCommit", "queryPlanning", "getBatch", "toBatch", "commitOffsets"):
            secs = [t[step] / 1000 for t in triggers if step in t]
            if secs:
                print(f"  {step:<16} {_stats(secs)}")
    from spark_purge import audit

    ways = getattr(audit, "PROGRESS_APPENDS", None)  # a checkout before stop 67 has none
    if ways:
        print("progress log writes, the whole run (the match's files committed / Spark's writer): " + ", ".join(f"{k} {v}" for k, v in ways.items()))
    rss = figures["rss"]
    print(f"peak RSS MB: driver {rss.get('driver', 0):.0f}, Spark JVM {rss.get('jvm', 0):.0f}, "
          f"Python workers {rss.get('workers', 0):.0f}; together (sampled) {rss.get('total', 0):.0f}")
    print(f"peak PSS MB (shared pages split among their processes, sampled): Python workers "
          f"{rss.get('workers_pss', 0):.0f}; together {rss.get('total_pss', 0):.0f}")
    kinds = sorted(figures.get("kinds", {}).items(), key=lambda item: -item[1][0])
    if kinds:
        print("  Python workers by what they run (peak of the kind's summed RSS MB, processes then): "
              + ", ".join(f"{kind} {mb:.0f} ({n})" for kind, (mb, n) in kinds))
    at_peak = dict(figures.get("at_peak", {}))
    if at_peak:
        print(f"  at the PSS peak ({at_peak.pop('phase')}), PSS MB: "
              + ", ".join(f"{part} {mb:.0f}" for part, mb in sorted(at_peak.items(), key=lambda item: -item[1]) if mb >= 1))


# The commands a scheduler starts, as processes: (label, arguments before ``-c <config>``).
PROCESSES = (("spark-purge plan", ["plan"]), ("spark-purge run (one-shot)", ["run", "--once"]))


def run_process(args: list[str], config_file: Path, env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    """``spark-purge -q <args> -c <config_file>`` as a process: (wall seconds, its result)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spark_purge.cli", "-q", *args, "-c", str(config_file)], capture_output=True, text=True, env=env
    )
    return time.perf_counter() - t0, done


def time_processes(config_file: Path) -> None:
    for label, args in PROCESSES:
        took, done = run_process(args, config_file)
        print(f"{label:<28} {took:6.1f}s (exit {done.returncode})")
        if done.returncode != 0:
            print(done.stderr[-2000:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kafka-side"]:
        sys.exit(kafka_side_main(sys.argv[2]))
    sys.exit(main())
