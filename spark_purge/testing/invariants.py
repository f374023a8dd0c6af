"""Randomized, seeded safety check of the purge against a real Kafka cluster.

A workload of producers, consumer groups committing at their own random speeds and random
faults runs for many purge cycles (``PurgePipeline.process_batch`` on a fresh snapshot each
cycle, what one ``foreachBatch`` call does). After every cycle the checker reads the log start
offsets **from Kafka itself** and compares them with what it knows independently — the offsets
it committed for each group and the timestamps of the records it produced:

    log_start_after(p) <= max(log_start_before(p), safe(p))
    safe(p) = min(min over p's required groups of their commit on p   (missing commit: blocks),
                  the share group's position on p (topic B, once it consumed),
                  first offset of p produced at or after snapshot_time - min_retention,
                  high watermark)

It also checks the cycle's audit: one outcome per planned partition, no duplicates, every delete
preceded by an intent whose cutoff is at least its own, and no intent whose cutoff exceeds ``safe(p)``.
A DeleteRecords whose outcome is ``failed`` (timed out at a hung or deposed leader) may take
effect later, when the broker that got it leads again: later cycles allow the log start up to
that intent's cutoff, checked when it was planned, until it gets there (``_note_in_doubt``).
Faults (a seeded choice per cycle): a node SIGKILLed before a cycle or between the intent write
and DeleteRecords (restarted after the cycle), a group rewound to lower offsets, partitions added,
and ``backdated_records``: just before the cycle, records carrying CreateTimes two days in the
past are appended to topic B (which has a ``min_retention``) and B's groups commit past them, so
only the time floor stands between them and a delete. The oracle knows when each record of B
was appended (no earlier than the moment it was sent) and adds to ``safe(p)`` of B:

    first offset of p sent at or after snapshot_time - min_retention   (append time, any CreateTime)

And ``driver_kill_rewind``: the batch runs in a driver process of its own
(``testing.batch_driver``, the checker's config and query id), which is SIGKILLed at a drawn
step (after its intents, right after the lease check before DeleteRecords, or after
DeleteRecords before its outcomes; its lease is left unreleased), a required group of topic A
rewinds, and a restarted pipeline in the checker (same query id, same batch id: what Spark does
after a crash) replays the batch once the dead driver's lease expired; it must execute only the recorded intents and never cut past the rewound group. A batch
with nothing actionable never checks its lease: drawn that step, it ends whole, and the
restarted pipeline finds its outcomes recorded (``step_never_reached``; a note counts these). The
intents are checked against the commits they were planned on, before the rewind; every delete
must have an intent whose cutoff is at least its own (a replay may cut less, never more).

And ``overlap_job``: a second job with the same purger id (``lease.purger_id``, its own query
id) starts while the cycle's job has written its intents (an Airflow retry overlapping a slow
run); it waits for the first job's lease to expire (``lease.ttl`` 23 s here: two thirds of it
cover the 15 s ``kafka.delete_timeout``, which a lease caps), takes it over
(generation + 1), runs the same batch and shuts down cleanly; the first job must then stop with
``FencedError`` right before DeleteRecords. The oracle: the fenced generation has no outcome
in the batch, none of its rows landed in the audit after the takeover began (Delta time travel
to the version read just before), and the audit records generation + 1 as a ``takeover``; the
log start offsets are checked as in every cycle (both jobs cut only to what their own snapshot
allowed).

And ``retire`` (partition retirement, seed 002): B's last partition is retired once through the
registry (``retirement.enable``, ``retirement.delay`` of ``RETIRE_DELAY_MS``); the producer still
writes to it now and then (``RETIRED_WRITE_RATE``). Its safe point is that of any partition, and
it is never purged whole while a record was sent to it within the delay before the snapshot (a
record sent at s was appended at s or later; the checker's own send times, not the policy's
history). The summary notes how often it was purged whole.

Three hazards of what a snapshot shows of a consumer (their oracles, like every other, read only
what the checker itself did, never the product's policy):

- ``classic_rebalance``: a new classic-protocol group (real kafka-python ``KafkaConsumer``
  members, ``auto_offset_reset`` earliest, no commit) joins B right before the snapshot. Its
  first member, subscribed to A, is assigned A; a second, subscribed to A and B, joins, and its
  JoinGroup starts a rebalance that waits for the first to rejoin, which it does only in a poll,
  after the cycle: the group is PreparingRebalance through the purge, and DescribeGroups shows
  no subscription then (what a member held before says nothing of B). From that JoinGroup the
  oracle requires the group on every partition of B (``members``), with no commit: nothing of B
  past the log start before the cycle. After the checks its members leave without a commit and
  the checker deletes the group and forgets it, before a snapshot could see it again.
- ``leaderless_group`` (3 nodes): a topic of a third, discovering rule (``l``) with two
  one-replica partitions on two drawn nodes; ``inv-gm<cycle>`` commits on both,
  ``inv-gl<cycle>`` only on partition 0, whose node is then SIGKILLed (the checker waits until
  the partition has no leader). A group with a commit on any partition of a discovering topic is
  required on all of them, so partition 1, where ``inv-gl`` has none, may not be cut. After the
  cycle the node restarts, partition 0's log start is checked, the topic and the groups go.
- ``lease_wait_rewind``: the checker's job restarts (same query id); right when its batch asks
  for the lease, after its snapshot was read, another holder with the same purger id takes it, so
  the batch waits for that lease's expiry (``lease.ttl``); during the wait a required group of A
  rewinds. The oracle's commits are the rewound ones: no intent and no log start past them.

Consumer kinds beyond committing groups (``--faults`` chooses the kinds; default: every kind
whose product support exists, ``DEFAULT_KINDS``):

- ``share_consume``: a share group (KIP-932) on topic B, a real Java ``KafkaShareConsumer``
  (:mod:`spark_purge.testing.share`) that ACCEPTs a random number of records every
  ``SHARE_EVERY`` cycles (and on a scheduled ``share_consume``). Its oracle position on p is the
  first offset at or after p's log start when it first joined, or p's log start before the
  cycle if later (records gone from the log Kafka's share group skips: KIP-932 moves the share
  partition's start offset up to the log start), that none of its runs ACCEPTed;
  it is required on B from its first run on. (Kafka persists the share-partition start offset one
  acknowledgement round late: the purge sees less than the checker knows, the safe direction.)
  Kafka archives a record delivered ``share.delivery.count.limit`` times, which moves the start
  offset past a record nobody accepted: the group never gets it again. The checker counts the
  deliveries its consumer printed and stops running it before any unaccepted record reaches the
  limit, but Kafka counts more: records acquired for the consumer and never handed to it (released
  at its close) count too. Seen in the seed-35 run: a record the checker counted 3 deliveries of
  was archived at 10 (``__share_group_state``). So right before each purge the checker also reads
  the start offset Kafka persisted (Kafka's own Admin client, ``listShareGroupOffsets``, not the
  product's reader), and the share group's records begin at the latest of the three. Before the
  purge, only the share consumer's acknowledgements, Kafka's archiving and earlier (checked) log
  start moves can have moved it.
- ``group_expiry`` (opt-in): a new group commits low on B once and never again; the next cycle
  waits (polling, bounded) until Kafka expired its offsets (the cluster needs
  ``offsets.retention.minutes=1``, ``offsets.retention.check.interval.ms=1000``; the other
  groups re-commit meanwhile so only it expires). The oracle keeps holding its last commit, as
  the purge must (vanished groups).
- ``spark_stream``: a real Spark Structured Streaming query (Spark's Kafka connector, Kafka ->
  Delta) on topics A and B, configured as an ``external_consumers`` ``spark_checkpoint`` entry.
  It runs (``availableNow``, a random ``maxOffsetsPerTrigger``, so a few micro-batches, then it
  stops) before the first cycle and every ``STREAM_EVERY`` cycles (under a fixed schedule: where
  it is scheduled). Its oracle position on p is
  computed from what the query wrote, never from its checkpoint: the highest offset in its Delta
  sink + 1; where it wrote nothing, the log start when it first saw p (0 for a partition added
  after its last run: it will read that one from the start). A query run that fails (e.g. Kafka's
  data loss, had the purge deleted records it still needed) is a violation. Before a run, a
  partition whose log start passed the query's position (records it never read are gone; the
  purge's cuts are bounded by that position in every cycle, so Kafka deleted them itself, under
  ``tiering_disable``) makes the query start over, as its operator would (a note says so).
- ``topic_recreate``: topic A or topic B (drawn) is deleted and recreated under the same name
  (a new topic id, empty logs; Kafka drops the groups' commits on it), either before the
  cycle's snapshot or in the middle of it (after the intents, before DeleteRecords). The oracle
  forgets the old incarnation: its log starts from 0 again, no group has a commit on it until
  the workload's groups commit there, so records of the new topic nobody committed past are
  never deletable; a partition recreated mid-cycle must have its planned delete skipped
  (outcome ``skipped``, ``topic_recreated``), never ``deleted``. A new A gets fresh records
  nobody has read. A new B (the time-floor topic) is refilled past the old incarnation's high
  watermark with records stamped two days ago, and B's groups commit past them all: only the
  append-time floor stands between them and a delete, and the policy's append history still
  holds the old incarnation's rows, whose high watermarks the new offsets now pass (the hazard
  of ``policy.incarnation``). The share group starts over on the new B (the oracle requires it
  there again from its next run, as from its first), and the Spark query starts over. Under
  ``tiering_disable``, B is recreated only while no disablement is under way or left half
  (ENABLED: recreated tiered; DISABLED with ``delete``: recreated untiered); otherwise A is.
  Under a fixed schedule the recreated topic alternates, B first.

- ``tiering_disable`` (opt-in: the cluster needs tiered storage; ``main`` starts it tiered and
  B is created tiered, so its cuts reach remote storage): spark-purge's tiering state machine
  disables tiered storage on B and is killed after a drawn step, leaving B DISABLING for one
  cycle (started before the snapshot or at the batch's intents), then resumed to DISABLED. No
  cut of B in that cycle (:mod:`spark_purge.testing.tiering_fault`). With ``delete``, Kafka itself
  deletes B's remote data and moves its log starts up to its local log starts: in the cycle the
  job died after ``storage_disable``, those moves are judged by that oracle, not taken for the
  purge's cuts; records they removed no longer hold the share group (Kafka moves it past them)
  and make the Spark query start over.

    ./dev.sh py -m spark_purge.testing.invariants --cycles 200 --seed 7          # its own 3 nodes
    ./dev.sh py -m spark_purge.testing.invariants --cycles 20 --seed 1 --nodes 1 # no node faults
    ./dev.sh py -m spark_purge.testing.invariants --cycles 5 --nodes 1 --faults group_expiry,share_consume
    ./dev.sh py -m spark_purge.testing.invariants --cycles 8 --seed 3 --nodes 1 --faults spark_stream
    ./dev.sh py -m spark_purge.testing.invariants --cycles 8 --seed 3 --nodes 1 --faults overlap_job,group_rewind --fault-rate 0.6
    ./dev.sh py -m spark_purge.testing.invariants --cycles 8 --seed 3 --nodes 1 --faults retire --fault-rate 1
    ./dev.sh py -m spark_purge.testing.invariants --cycles 6 --seed 3 --nodes 1 --faults tiering_disable --fault-rate 1
    ./dev.sh py -m spark_purge.testing.invariants --cycles 4 --seed 3 --nodes 1 --faults classic_rebalance --fault-rate 1
    ./dev.sh py -m spark_purge.testing.invariants --cycles 3 --seed 3 --nodes 1 --faults lease_wait_rewind --fault-rate 1
    ./dev.sh py -m spark_purge.testing.invariants --cycles 2 --seed 3 --nodes 3 --faults leaderless_group --fault-rate 1

A run goes in parts when it must (``--workdir`` keeps the cluster's data and, after every whole
cycle, the checker's state; ``--minutes`` or SIGTERM stops it between cycles; ``--resume`` goes
on, on the same cluster started again; see ``InvariantWorkload.run``)::

    ./dev.sh py -m spark_purge.testing.invariants --cycles 1000 --seed 17 --workdir var/inv17 --minutes 150
    ./dev.sh py -m spark_purge.testing.invariants --workdir var/inv17 --resume --minutes 150

On a machine that keeps no files between sessions, keep a copy of ``checker-life.json`` (the
random draws and the tallies, written beside the state after every whole cycle) and go on in a
fresh workdir: the cluster, topics, audit and oracle start anew, the draws and tallies go on
(``--new-life``)::

    ./dev.sh py -m spark_purge.testing.invariants --workdir var/inv17b --new-life runs/inv17-life.json --minutes 150

It prints cycles, faults injected by kind, records produced, share records accepted, groups
expired, Spark query runs and records read, records deleted, audit rows checked and violations, and exits
0 only when there are no violations. ``tests/integration/faults/test_invariants.py`` runs a short
version on the fault suite's cluster. Producing, commits, log start offsets and audit rows go
through :mod:`spark_purge.testing.workload`, like every other harness.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import yaml
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewPartitions
from kafka.structs import TopicPartition
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig, from_dict
from spark_purge.errors import FencedError, from_spark_exception
from spark_purge.pipeline import PurgePipeline
from spark_purge.testing import batch_driver, processes, share, workload
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.errors import NotReadyError, WorkloadError
from spark_purge.testing.tiering_fault import ENABLED as ENABLED_TIERING
from spark_purge.testing.tiering_fault import TIERED_TOPIC_CONFIGS, TieringDisablement
from spark_purge.testing.workload import TopicPartitionKey

log = logging.getLogger(__name__)

# Rules of the workload: topic A needs two listed groups; topic B every group that commits on
# it, and never deletes records younger than FLOOR_MS.
FLOOR_MS = 3_000
MAX_PARTITIONS = 6
GROUP_SPEEDS = {"g0": 40, "g1": 20, "g2": 8}
FAULTS = (
    "node_kill", "leader_kill_mid_cycle", "group_rewind", "partitions_added", "backdated_records", "topic_recreate",
    "driver_kill_rewind", "overlap_job", "retire", "broker_pause", "controller_kill", "cluster_unreachable",
    "audit_maintenance", "classic_rebalance", "leaderless_group", "lease_wait_rewind",
)
CONSUMER_KINDS = ("share_consume", "group_expiry", "spark_stream")
# Opt-in faults that need a cluster started for them (main() does): tiering_disable a tiered one.
OPT_IN_FAULTS = ("tiering_disable",)
ALL_KINDS = FAULTS + OPT_IN_FAULTS + CONSUMER_KINDS
#: What runs unless ``--faults`` says otherwise: the kinds whose product support is in this build.
DEFAULT_KINDS = FAULTS + ("share_consume", "spark_stream")
# Faults that hang or kill nodes for 10-25 s a time: the long run draws them; the suite's short
# run (tests/integration/faults/test_invariants.py) leaves them out for its 30-minute budget.
SLOW_FAULTS = ("broker_pause", "controller_kill", "cluster_unreachable")
NODE_FAULTS = ("node_kill", "leader_kill_mid_cycle", "controller_kill", "leaderless_group")  # need 3 nodes
# driver_kill_rewind: the steps of a batch the driver may die at (the runner's fault-hook steps).
KILL_STEPS = ("intents_written", "lease_checked", "deletes_sent")
# driver_kill_rewind: a driver process (Spark start included) must die by then. It takes 1-2 min
# beside one other Spark job; on a 2-core machine loaded about 6 times over (a test suite, a
# benchmark and a long run at once) 4 of 4 drivers outlasted 300 s.
DRIVER_TIMEOUT_S = 600
REQUEST_TIMEOUT_S = 10  # kafka.request_timeout of the checked job

PAUSE_S = REQUEST_TIMEOUT_S + 3  # broker_pause: a node hangs longer than a request may take
UNREACHABLE_S = (4.0, 2.5 * REQUEST_TIMEOUT_S)  # cluster_unreachable: every node hangs this long (drawn)
SHARE_EVERY = 3  # the share consumer runs every SHARE_EVERY cycles (a JVM start costs seconds)
SHARE_MAX_ACCEPT = 120
SHARE_DELIVERY_LIMIT = 10  # share.delivery.count.limit asked of the share group (Kafka's maximum)
EXPIRY_TIMEOUT_S = 180.0
STREAM_EVERY = 2  # the Spark query runs every STREAM_EVERY cycles (a few micro-batches each)
STREAM_MAX_PER_BATCH = (60, 200)  # its maxOffsetsPerTrigger, drawn per run: 1-3 micro-batches
STREAM_TIMEOUT_S = 600.0  # one run; a run cut short is a note (the purge then holds more), not a violation
STREAM_NAME = "inv-query"  # its name under external_consumers
BACKDATE_MS = 2 * 86_400_000  # backdated_records: CreateTime two days before the append
BACKDATED_PER_PARTITION = (1, 25)
RETIRE_DELAY_MS = 2_000  # retirement.delay under the retire kind
RETIRED_WRITE_RATE = 0.2  # chance per cycle that the producer still writes to the retired partition
# classic_rebalance: how long the checker waits for its group's first assignment, then for the
# rebalance its second member starts; the first member's max.poll.interval.ms, which is the
# classic group's rebalance timeout: the group stays in PreparingRebalance that long unless the
# first member polls (it does only after the cycle).
CLASSIC_JOIN_TIMEOUT_S = 120.0
CLASSIC_REBALANCE_TIMEOUT_MS = 300_000
REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance")
# leaderless_group: records per partition of its topic; how long the checker waits for the killed
# node's partition to lose its leader (a broker's session must time out at the controller).
LEADERLESS_RECORDS = (5, 40)
LEADERLESS_TIMEOUT_S = 90.0
# A run's saved state (``InvariantWorkload.run``): written after every whole cycle; the marker
# names the cycle in progress (left behind by a run stopped in a cycle's middle, which cannot resume).
STATE_FILE = "checker-state.pickle"
# What a new life on a fresh cluster needs (``--new-life``): the random draws and the tallies, as
# JSON, small enough to keep in the repository between sessions.
LIFE_FILE = "checker-life.json"
RUNNING_FILE = "checker-cycle-running"
STATE_VERSION = 1
# The oracle's knowledge a resumed run needs (plain values; what a cycle only uses in passing is not kept).
SAVED_ORACLE = (
    "partitions", "timestamps", "sent_at", "commits", "share_joined", "share_accepted", "share_deliveries",
    "share_limit", "share_stopped", "log_floor", "in_doubt", "expiring", "stream_read", "stream_first_seen", "stream_records_before",
    "prechecked", "kill_steps", "unreached_steps", "overlaps", "retired", "retired_reclaims",
    "recreates", "hazards",
)
SAVED_TIERING = ("state", "policy", "stopped_at", "during", "mid_cycle", "pending", "runs", "remote_cuts")
EXPIRY_BROKER_CONFIG = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"}


def _lease_ttl_s(delete_timeout: str) -> int:
    """The shortest whole-second lease ttl whose delete window (two thirds) holds ``delete_timeout``."""
    from spark_purge._time import parse_duration

    return -(-parse_duration(delete_timeout, "kafka.delete_timeout") * 3 // 2000)


def parse_kinds(text: str) -> tuple[str, ...]:
    """``"node_kill,share_consume"`` -> the kinds, validated against ``ALL_KINDS``."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown}; expected some of {list(ALL_KINDS)}")
    return kinds


def spark_stream_refusal() -> Optional[str]:
    """Why the ``spark_stream`` kind cannot run here (None: it can): it needs Spark's Kafka
    connector."""
    if workload.spark_kafka_jars():
        return None
    return (
        f"spark_stream: Spark's Kafka connector is not in {workload.SPARK_KAFKA_JARS_ENV} "
        f"({os.environ.get(workload.SPARK_KAFKA_JARS_ENV)!r}): run `./dev.sh setup`, or leave spark_stream out of --faults"
    )


def _txn_writes() -> str:
    """How this process's Delta txn writes went (``txn_append.COUNTS``, ``DRIVER_FILES``; not kept
    across lives)."""
    from spark_purge.audit import PROGRESS_APPENDS
    from spark_purge.txn_append import COUNTS, DRIVER_FILES, REWRITE_LISTINGS

    return (
        f"{COUNTS['fast']} direct (id read from the checksum; {DRIVER_FILES['written']} of them with files the driver wrote, "
        f"{DRIVER_FILES['not']} driver rows written by Spark instead), {COUNTS['skipped']} skipped as written, "
        f"{COUNTS['writer']} through Delta's writer; progress rewrites listed from the state {REWRITE_LISTINGS['state']}, "
        f"from the log {REWRITE_LISTINGS['log']}; progress appends of the match's file {PROGRESS_APPENDS['file']}, "
        f"through Delta's writer {PROGRESS_APPENDS['writer']} (this process)"
    )


@dataclass
class InvariantReport:
    seed: int
    cycles: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    records_produced: int = 0
    share_accepted: int = 0
    share_runs_failed: int = 0
    groups_expired: int = 0
    stream_runs: int = 0
    stream_runs_failed: int = 0
    stream_records: int = 0
    notes: list[str] = field(default_factory=list)
    records_deleted: int = 0
    audit_rows_checked: int = 0
    cycle_errors: list[str] = field(default_factory=list)
    failed_cycles: set[int] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    fenced_jobs: int = 0  # overlap_job: first jobs fenced by a second one's takeover
    fenced_rows: int = 0  # audit rows a fenced generation committed after its takeover (must stay 0)
    seconds: float = 0.0
    interrupted: bool = False
    # A run stopped between cycles (``--minutes``, SIGTERM) and resumed later (``--resume``).
    paused: bool = False
    resumes: int = 0
    # Lives begun on a fresh cluster from an earlier life's saved state (``--new-life``): the RNG
    # and these tallies go on, the cluster, its topics, the audit and the oracle start anew.
    fresh_lives: int = 0
    # Wall seconds of each part of a cycle, one entry per cycle that ran it (``phase_table``).
    phase_seconds: dict[str, list[float]] = field(default_factory=dict)

    def timed(self, phase: str, seconds: float) -> None:
        self.phase_seconds.setdefault(phase, []).append(seconds)

    def phase_table(self) -> list[str]:
        """Per part of a cycle: how many cycles ran it, its median and its longest seconds."""
        return [
            f"  {name:<14} {len(values):>5} cycles, median {statistics.median(values):6.2f} s, max {max(values):7.2f} s"
            for name, values in self.phase_seconds.items()
        ]

    def _stopped(self) -> str:
        if self.interrupted:
            return " (interrupted: the cycle in progress is not counted, and the run cannot resume)"
        if self.paused:
            return " (paused between cycles: go on with --resume)"
        return ""

    def summary(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items())) or "none"
        lines = [
            f"seed:               {self.seed}",
            f"cycles:             {self.cycles}{self._stopped()}",
            f"faults injected:    {sum(self.faults.values())} ({faults})",
            f"records produced:   {self.records_produced}",
            f"share accepted:     {self.share_accepted} (failed share runs: {self.share_runs_failed})",
            f"groups expired:     {self.groups_expired}",
            f"spark query:        {self.stream_runs} runs ({self.stream_runs_failed} failed), {self.stream_records} records read",
            f"records deleted:    {self.records_deleted}",
            f"audit rows checked: {self.audit_rows_checked}",
            f"cycle errors:       {len(self.cycle_errors)}",
            f"fenced jobs:        {self.fenced_jobs} (audit rows from a fenced generation after its takeover: {self.fenced_rows})",
            f"violations:         {len(self.violations)}",
            f"seconds:            {self.seconds:.0f}",
            f"txn writes:         {_txn_writes()}",
        ]
        if self.resumes:
            lines.append(
                f"resumed:            {self.resumes} time(s): each time the checker and the whole cluster "
                "were stopped between cycles and started again from their disks"
            )
        if self.fresh_lives:
            lines.append(
                f"fresh lives:        {self.fresh_lives}: each began on a new cluster, topics, audit and oracle, going on "
                "with the saved random draws and tallies (a machine that keeps no files between sessions)"
            )
        if self.phase_seconds:
            lines += ["cycle parts:"] + self.phase_table()
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  violation: {v}" for v in self.violations[:20]]
        lines += [f"  cycle error: {e}" for e in self.cycle_errors[:10]]
        if self.cycle_errors:
            lines.append("  (full tracebacks: cycle_errors.log in the workdir)")
        return "\n".join(lines)


def step_never_reached(step: str, batch_rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a batch that ended without reaching ``step`` could not have reached it: a batch
    with nothing actionable (outcomes, not one intent) sends no DeleteRecords, so it never
    checks its lease (``BatchRunner``: ``lease_checked`` comes only before real deletes). Every
    other step every batch reaches, and a batch with intents reaches them all."""
    kinds = {row["record_type"] for row in batch_rows}
    return step == "lease_checked" and "outcome" in kinds and "intent" not in kinds


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
        kinds: Sequence[str] = DEFAULT_KINDS,
        out: Callable[[str], None] = print,
        progress_every: int = 10,
    ) -> None:
        self.progress_every = max(1, progress_every)
        unknown = sorted({f for f in [*(schedule or ()), *kinds] if f is not None and f not in ALL_KINDS})
        if unknown:
            raise ValueError(f"schedule/kinds: unknown kind(s) {unknown}; expected None or one of {list(ALL_KINDS)}")
        self.schedule = list(schedule) if schedule else None  # fault per cycle (cycled), instead of random
        self.kinds = tuple(kinds) + tuple(k for k in self.schedule or () if k is not None and k not in kinds)
        refusal = spark_stream_refusal() if "spark_stream" in self.kinds else None
        if refusal:
            raise ValueError(refusal)
        if "group_expiry" in self.kinds:
            missing = {k: v for k, v in EXPIRY_BROKER_CONFIG.items() if cluster.broker_config.get(k) != v}
            if missing:
                raise ValueError(f"group_expiry needs the cluster started with broker config {missing}")
        if "tiering_disable" in self.kinds and not cluster.tiered:
            raise ValueError("tiering_disable needs a cluster with tiered storage (LocalKafka(tiered=True); main() starts one)")
        # Drawn at random: the faults; the share consumer and the Spark query run on their own rhythm.
        self.drawn = tuple(k for k in self.kinds if k not in ("share_consume", "spark_stream"))

        self.spark = spark
        self.cluster = cluster
        # What a resumed run must share with the run it goes on (``_restore`` compares them).
        self.run_args: dict[str, Any] = {
            "seed": seed, "kinds": list(self.kinds), "fault_rate": fault_rate, "schedule": self.schedule,
            "nodes": len(cluster.node_ids), "delete_timeout": delete_timeout, "sabotage_cycle": sabotage_cycle,
        }
        self._stop_requested = False
        self._config_written = False
        self.rng = random.Random(seed)
        self.report = InvariantReport(seed=seed)
        self.fault_rate = fault_rate
        self.sabotage_cycle = sabotage_cycle  # test of the checker itself: one unsafe delete
        self.out = out
        # Absolute: the config names paths in it, and a killed batch's driver runs inside it.
        self.workdir = workdir.resolve()
        suffix = uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]
        self.topic_a, self.topic_b = f"inv-a-{suffix}", f"inv-b-{suffix}"
        # leaderless_group: the topics it creates for one cycle each (a discovering rule of their own).
        self.leaderless_prefix = f"inv-l-{suffix}-"
        self.partitions = {self.topic_a: 3, self.topic_b: 3}
        self.replication = min(3, len(cluster.node_ids))
        self.admin = workload.new_admin(cluster.bootstrap_servers, **cluster.client_kwargs())
        self.producer = self._new_producer()
        # offset -> CreateTime we set, per partition, from the producer's own acknowledgements
        self.timestamps: dict[TopicPartitionKey, list[int]] = {}
        # offset -> when we sent it (ms, driver clock), per partition: its append time is no earlier
        self.sent_at: dict[TopicPartitionKey, list[int]] = {}
        self.commits: dict[str, dict[TopicPartitionKey, int]] = {g: {} for g in GROUP_SPEEDS}
        self.required_a = ("g0", "g1")
        self.committers_b = ("g1", "g2")  # B's rule discovers its groups from commits
        self.down: list[int] = []
        self.config = self._config(delete_timeout)
        # The share consumer on B: what the checker's own runs did.
        self.share_group = f"inv-sq-{suffix}"
        self.share_joined: Optional[dict[TopicPartitionKey, int]] = None  # log starts at its first run
        # Log starts read before the cycle (its ``before``): the records under them are gone.
        self.log_floor: dict[TopicPartitionKey, int] = {}
        # Per partition, the highest cutoff of a DeleteRecords the purge sent whose outcome is
        # `failed` (a timeout, say), while the log start is below it: see ``_note_in_doubt``.
        self.in_doubt: dict[TopicPartitionKey, int] = {}
        self.share_accepted: dict[TopicPartitionKey, set[int]] = {}
        self.share_deliveries: Counter[tuple[str, int, int]] = Counter()
        # Per partition of B, the share-partition start offset Kafka persisted, read right before
        # this cycle's purge (``_read_share_starts``): the records under it are done for the group.
        self.share_kafka_start: dict[TopicPartitionKey, int] = {}
        self.share_limit = 5  # Kafka's default share.delivery.count.limit until the group config says more
        self.share_stopped = False
        # Expiring groups: the one committed last cycle, waiting for Kafka to forget it.
        self.expiring: Optional[str] = None
        # The Spark query on A and B: its oracle position per partition (see _stream_position).
        self.stream_sink = self.workdir / "stream-sink"
        self.stream_read: dict[TopicPartitionKey, int] = {}  # sink max offset + 1
        self.stream_first_seen: dict[TopicPartitionKey, int] = {}  # log start when it first saw p
        self.stream_records_before = 0  # records read by the query's earlier lives (see _reset_stream)
        # topic_recreate: the topic to recreate at the intent write of this cycle; what this cycle
        # recreated; how often each topic was recreated (saved).
        self._recreate_mid: Optional[str] = None
        self.recreated: set[TopicPartitionKey] = set()
        self.recreates: Counter[str] = Counter()
        # driver_kill_rewind: the batch's driver SIGKILLed at a step; cycles whose intents were checked
        # before the rewind (against the commits they were planned on).
        self.prechecked: set[int] = set()
        self.kill_steps: Counter[str] = Counter()
        self.unreached_steps: Counter[str] = Counter()  # drawn steps a whole batch never reached
        # broker_pause / cluster_unreachable: nodes SIGSTOPped now, and the timer that resumes
        # them; a pause planned for this cycle: (nodes, seconds, at the intents?).
        self.paused: list[int] = []
        self._resume_timer: Optional[threading.Timer] = None
        self._pause_lock = threading.Lock()
        self._pause_plan: Optional[tuple[list[int], float, bool]] = None
        # audit_maintenance: an operator's OPTIMIZE + VACUUM of the audit, racing the batch.
        self._maintain = False
        self._maintenance: Optional[threading.Thread] = None
        self._maintenance_error: Optional[BaseException] = None
        # overlap_job: a second job (same purger id) takes the lease over mid-cycle; per cycle,
        # (fenced generation, the audit's version before the takeover).
        self._overlap = False
        self.overlaps: dict[int, tuple[int, int]] = {}
        # retire: the partition of B retired (once), and how often it was reclaimed whole.
        self.retired: Optional[TopicPartitionKey] = None
        self.retired_reclaims = 0
        # tiering_disable: B is tiered; its disablement's state across cycles (tiering_fault).
        # classic_rebalance: groups with live classic members the checker started, and the topics
        # they subscribe to (required there, at their commits or, with none, at nothing past the
        # log start, for as long as they are members); the members themselves (closed after the cycle).
        self.members: dict[str, frozenset[str]] = {}
        self._classic: list[KafkaConsumer] = []
        self._classic_groups: list[str] = []  # this cycle's, deleted after it
        # leaderless_group: this cycle's topic and its partitions without a leader (not read by
        # the checker until their node is back), and the groups made for it.
        self._leaderless: Optional[tuple[str, list[str], dict[TopicPartitionKey, int]]] = None
        self.leaderless_tps: set[TopicPartitionKey] = set()
        # What the three hazard kinds saw, for the report's notes (saved).
        self.hazards: Counter[str] = Counter()
        self.tiering: Optional[TieringDisablement] = None
        if "tiering_disable" in self.kinds:
            self.tiering = TieringDisablement(self.spark, self.config, self.admin, self.topic_b, self.rng)

    # ---- setup ------------------------------------------------------------------------------
    def _config(self, delete_timeout: str) -> PurgeConfig:
        self.config_data = self._config_data(delete_timeout)
        return from_dict(self.config_data)

    def _config_data(self, delete_timeout: str) -> dict[str, Any]:
        return {
            "kafka": {
                "bootstrap_servers": self.cluster.bootstrap_servers,
                "request_timeout": f"{REQUEST_TIMEOUT_S}s",
                "delete_timeout": delete_timeout,
            },
            "defaults": {"min_retention": "0s", "min_step": 1, "stale_after": "1h"},
            "rules": [
                {"name": "a", "topics": self.topic_a, "required_groups": list(self.required_a)},
                {"name": "b", "topics": self.topic_b, "min_retention": f"{FLOOR_MS}ms"},
                *self._leaderless_rules(),
            ],
            "audit": {"path": str(self.workdir / "audit")},
            "stream": {"checkpoint_location": str(self.workdir / "checkpoint"), "trigger_interval": "1s"},
            "external_consumers": self._external_consumers(),
            # overlap_job's second job (and a restarted driver) waits for the lease to expire: as
            # short a ttl as lets DeleteRecords keep the whole delete_timeout (two thirds of ttl:
            # spark_purge.lease.delete_window_ms), so hung leaders' resends are still exercised.
            "lease": {"purger_id": "inv-purger", "ttl": f"{_lease_ttl_s(delete_timeout)}s", "wait": "120s"},
            **self._retirement_config(),
        }

    def _leaderless_rules(self) -> list[dict[str, Any]]:
        """leaderless_group: its one-cycle topics discover their groups, with no time floor."""
        if "leaderless_group" not in self.kinds:
            return []
        return [{"name": "l", "topics": f"{re.escape(self.leaderless_prefix)}[0-9]+"}]

    def _retirement_config(self) -> dict[str, Any]:
        if "retire" not in self.kinds:
            return {}
        return {"retirement": {"enable": True, "delay": f"{RETIRE_DELAY_MS}ms"}}

    def _external_consumers(self) -> list[dict[str, str]]:
        if "spark_stream" not in self.kinds:
            return []
        topics = f"{self.topic_a}|{self.topic_b}"
        return [{"name": STREAM_NAME, "spark_checkpoint": (self.workdir / "stream-checkpoint").as_uri(), "topics": topics}]

    def _new_producer(self) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=self.cluster.bootstrap_servers, acks="all", linger_ms=5, **self.cluster.client_kwargs()
        )

    def _create_topics(self) -> None:
        configs = {"min.insync.replicas": "2"} if self.replication >= 3 else {}
        if self.tiering is None:
            workload.create_topics(self.admin, self.partitions, self.replication, configs)
            return
        for topic, extra in ((self.topic_a, {}), (self.topic_b, TIERED_TOPIC_CONFIGS)):
            workload.create_topics(self.admin, {topic: self.partitions[topic]}, self.replication, {**configs, **extra})

    # ---- the run ----------------------------------------------------------------------------
    def run(
        self, cycles: int, *, resume: bool = False, minutes: Optional[float] = None,
        new_life: Optional[Mapping[str, Any]] = None,
    ) -> InvariantReport:
        """Run cycles up to ``cycles`` in all. The oracle's state is saved in the workdir after
        every whole cycle (``STATE_FILE``); ``resume``: go on from the state saved there, on a
        cluster started again on the run's own data. ``new_life``: a state an earlier life saved
        (``load_life``): go on with its random draws and tallies on this fresh cluster,
        with new topics, a new audit and an oracle that starts empty. ``minutes``: stop between
        cycles, after the first cycle that ends that long after the start (or once
        ``request_stop`` was called); the run can then resume."""
        started = time.monotonic()
        first = 0
        query_id: Optional[str] = None
        if resume:
            first, query_id = self._restore(load_state(self.workdir))
            self.report.resumes += 1
            self.report.paused = False
            self.out(f"resuming at cycle {first + 1}/{cycles} ({self.report.cycles} cycles checked before)")
        elif new_life is not None:
            first = self._restore_tallies(new_life)
            self.report.fresh_lives += 1
            self.report.paused = False
            self.out(f"a new life on a fresh cluster at cycle {first + 1}/{cycles} ({self.report.cycles} cycles checked before)")
            self._create_topics()
        else:
            self._create_topics()
        self.pipeline: PurgePipeline = self._new_pipeline(query_id)
        self._mid_cycle_kill = self._controller_mid = False
        seconds_before = self.report.seconds
        try:
            for cycle in range(first, cycles):
                running = self.workdir / RUNNING_FILE
                running.write_text(f"{cycle}\n", encoding="utf-8")
                try:
                    self._cycle(cycle)
                except KeyboardInterrupt:  # Ctrl-C / SIGINT: stop, report the cycles checked so far
                    self.report.interrupted = True
                    break
                self.report.cycles += 1
                self.report.seconds = seconds_before + time.monotonic() - started
                last = cycle == cycles - 1
                self.report.paused = not last and (
                    self._stop_requested or (minutes is not None and time.monotonic() - started >= minutes * 60)
                )
                self._save(cycle + 1, cycles)
                running.unlink()
                if cycle % self.progress_every == self.progress_every - 1 or last or self.report.paused:
                    r = self.report
                    self.out(
                        f"cycle {cycle + 1}/{cycles}: faults {sum(r.faults.values())}, deleted {r.records_deleted}, "
                        f"audit rows {r.audit_rows_checked}, errors {len(r.cycle_errors)}, violations {len(r.violations)}"
                    )
                if self.report.paused:
                    self.out(f"paused after cycle {cycle + 1}: state saved in {self.workdir / STATE_FILE}")
                    break
        finally:
            self._end_pause()
            self._end_maintenance(None)
            self._close_classic()
            self.pipeline.close()
            self._retire_note()
            if self.recreates:
                names = {self.topic_a: "A", self.topic_b: "B (refilled past its old high watermark, backdated)"}
                done = ", ".join(f"{names.get(t, t)} {n}" for t, n in sorted(self.recreates.items()))
                self.report.notes.append(f"topic_recreate: recreated {done}")
            if self.tiering is not None:
                self.report.notes.append(self.tiering.note())
            if self.kill_steps:
                steps = ", ".join(f"{k}={v}" for k, v in sorted(self.kill_steps.items()))
                self.report.notes.append(f"driver_kill_rewind: killed at {steps}")
            if self.unreached_steps:
                steps = ", ".join(f"{k}={v}" for k, v in sorted(self.unreached_steps.items()))
                self.report.notes.append(f"driver_kill_rewind: batch ended whole, nothing actionable, step not reached: {steps}")
            self.report.notes += [f"{what}: {n}" for what, n in sorted(self.hazards.items())]
            self._restart_down()
            self.producer.close()
            self.admin.close()
            self.report.seconds = seconds_before + time.monotonic() - started
        return self.report

    def request_stop(self) -> None:
        """Stop after the cycle in progress, its state saved (a SIGTERM handler's job)."""
        self._stop_requested = True

    # ---- the saved state (a run that stops between cycles and resumes) ----------------------
    def _save(self, next_cycle: int, cycles: int) -> None:
        """Write the oracle's state after a whole cycle: plain values only, atomically."""
        state = {
            "version": STATE_VERSION,
            "next_cycle": next_cycle,
            "cycles": cycles,
            "run": self.run_args,
            "rng": self.rng.getstate(),
            "query_id": self.pipeline.query_id,
            "report": {f.name: getattr(self.report, f.name) for f in fields(InvariantReport)},
            "oracle": {name: getattr(self, name) for name in SAVED_ORACLE},
            "tiering": None if self.tiering is None else {name: getattr(self.tiering, name) for name in SAVED_TIERING},
        }
        path = self.workdir / STATE_FILE
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        life = self.workdir / LIFE_FILE
        tmp = life.with_name(life.name + ".tmp")
        tmp.write_text(json.dumps(life_state(state), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, life)

    def _restore(self, state: Mapping[str, Any]) -> tuple[int, str]:
        """Take a saved state over; returns the next cycle and the job's query id."""
        self._restore_tallies(state, f"{self.workdir / STATE_FILE}")
        for name, value in state["oracle"].items():
            setattr(self, name, value)
        if self.tiering is not None and state["tiering"] is not None:
            for name, value in state["tiering"].items():
                setattr(self.tiering, name, value)
        return int(state["next_cycle"]), str(state["query_id"])

    def _restore_tallies(self, state: Mapping[str, Any], source: str = "--new-life") -> int:
        """Take an earlier life's random draws and tallies over, not its oracle (that knew another
        cluster; ``_restore`` adds it); returns the next cycle. ``source`` names the state in errors."""
        if state["run"] != self.run_args:
            raise WorkloadError(
                f"{source}: saved by a run of {state['run']}, not {self.run_args}: go on with the run's own settings"
            )
        self.rng.setstate(state["rng"])
        known = {f.name for f in fields(InvariantReport)}
        self.report = InvariantReport(**{k: v for k, v in state["report"].items() if k in known})
        self.stream_records_before = self.report.stream_records  # the Spark query's reads in earlier lives
        return int(state["next_cycle"])

    def _cycle(self, cycle: int) -> None:
        started = time.monotonic()
        self._lap = started
        self._run_cycle(cycle)
        self.report.timed("whole cycle", time.monotonic() - started)

    def _timed(self, phase: str) -> None:
        """Charge the time since the last lap to ``phase``."""
        now = time.monotonic()
        self.report.timed(phase, now - self._lap)
        self._lap = now

    def _run_cycle(self, cycle: int) -> None:
        self._restart_down()
        if self.tiering is not None:
            self.tiering.resume()  # left DISABLING last cycle: its job restarts and finishes
        if self.expiring is not None:
            self._wait_for_expiry(self.expiring)
        self._produce()
        self._consume()
        self._timed("workload")
        if self.schedule is not None:
            fault = self.schedule[cycle % len(self.schedule)]
        else:
            fault = self.rng.choice(self.drawn) if self.drawn and self.rng.random() < self.fault_rate else None
        if fault == "tiering_disable" and self.tiering is not None and self.tiering.spent:
            fault = None  # disabled for good already
        if fault in NODE_FAULTS and len(self.cluster.node_ids) < 3:
            others = [k for k in self.drawn if k not in NODE_FAULTS]  # one node: no node faults
            fault = self.rng.choice(others) if others else None
        periodic = self.schedule is None and cycle % STREAM_EVERY == 0  # a fixed schedule says where
        stream_due = "spark_stream" in self.kinds and (periodic or fault == "spark_stream")
        if stream_due:
            self._stream_run()
            self.report.faults["spark_stream"] += 1
            fault = None if fault == "spark_stream" else fault
            self._timed("spark query")
        share_due = "share_consume" in self.kinds and self.schedule is None and cycle % SHARE_EVERY == 0
        if fault == "share_consume" or share_due:
            if self._share_consume():
                self.report.faults["share_consume"] += 1
            fault = None if fault == "share_consume" else fault
            self._timed("share consumer")
        if fault == "group_expiry":
            self._start_expiring_group(cycle)
        elif fault == "group_rewind":
            self._rewind()
        elif fault == "partitions_added":
            self._add_partition()
        elif fault == "backdated_records":
            self._backdate()
        elif fault == "retire":
            self._retire()
        elif fault == "classic_rebalance":
            self._classic_join(cycle)
        elif fault == "leaderless_group":
            self._leaderless_group(cycle)
        elif fault == "tiering_disable" and self.tiering is not None:
            self.tiering.plan(cycle)  # now, or at the batch's intents
        elif fault == "topic_recreate":
            # A or B (drawn; a fixed schedule alternates, B first); half the time before the
            # snapshot, half between the intents and DeleteRecords.
            if not self._may_recreate_b():
                topic = self.topic_a
            elif self.schedule is not None:
                topic = self.topic_b if sum(self.recreates.values()) % 2 == 0 else self.topic_a
            else:
                topic = self.rng.choice([self.topic_a, self.topic_b])
            if self.rng.random() < 0.5:
                self._recreate_mid = topic
            else:
                self._recreate_and_refill(topic)
        elif fault == "node_kill":
            victim = self.rng.choice(self.cluster.node_ids)
            self.cluster.kill_node(victim)
            self.down.append(victim)
        elif fault == "controller_kill" and self.rng.random() < 0.5:
            self._kill_controller()  # else in the middle of the batch, after its intents
        elif fault == "broker_pause":  # half the time the leader of A-0, after the intents
            self._pause_plan = ([self.rng.choice(self.cluster.node_ids)], PAUSE_S, self.rng.random() < 0.5)
        elif fault == "cluster_unreachable":
            self._pause_plan = (list(self.cluster.node_ids), self.rng.uniform(*UNREACHABLE_S), False)
        self._mid_cycle_kill = fault == "leader_kill_mid_cycle"
        self._controller_mid = fault == "controller_kill" and not self.down
        self._overlap = fault == "overlap_job"
        self._maintain = fault == "audit_maintenance"
        if fault:
            self.report.faults[fault] += 1
        self._timed(f"fault: {fault}" if fault else "no fault")
        self._read_share_starts()
        before = self._log_starts()
        self.log_floor = dict(before)
        self.recreated = set()
        cycle_started = datetime.now(timezone.utc)
        if self._pause_plan is not None and not self._pause_plan[2]:
            self._pause(*self._pause_plan[:2])  # after the checker's own read of the log starts
        purged = False
        try:
            if fault == "driver_kill_rewind":
                self._driver_kill_rewind(cycle, before)
            elif fault == "lease_wait_rewind":
                self._lease_wait_rewind(cycle)
            else:
                workload.run_cycle(self.pipeline, cycle)
            self._timed("purge")
            purged = True
        except FencedError:  # overlap_job: the first job, fenced, must stop (checked in _check_fenced)
            if cycle not in self.overlaps:
                raise
            self.report.fenced_jobs += 1
            self.report.failed_cycles.add(cycle)
            self.pipeline.close()
        except Exception as exc:
            first_line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
            # Spark wraps a data-source or foreachBatch error: name spark-purge's own error inside.
            inner = from_spark_exception(exc)
            cause = f" ... {type(inner).__name__}: {str(inner)[:300]}" if inner is not exc else ""
            self.report.cycle_errors.append(f"cycle {cycle}: {type(exc).__name__}: {first_line[:200]}{cause}")
            self.report.failed_cycles.add(cycle)
            with open(self.workdir / "cycle_errors.log", "a", encoding="utf-8") as f:
                f.write(f"=== cycle {cycle} (fault: {fault})\n{traceback.format_exc()}\n")
            self.pipeline.close()  # a fresh client next cycle
        if not purged:
            self._timed("purge (failed)")
        self._recreate_mid = None
        self._overlap = False
        self._pause_plan = None
        self._end_pause()
        self._end_maintenance(cycle)
        for tp in self.recreated:  # a new log: it starts from 0 again
            before[tp] = 0
        if self.sabotage_cycle == cycle:
            self._sabotage(before)
        after = self._log_starts()
        if self.tiering is not None and self.tiering.kafka_moves(cycle):
            # Kafka's own delete of B's remote data is no cut of the purge's: the tiering oracle
            # judges this cycle on B (no `deleted` outcome; the log start no further than Kafka's).
            for tp, local in self.tiering.local_starts([tp for tp in after if tp[0] == self.tiering.topic]).items():
                before[tp] = max(before.get(tp, 0), local)
        self._check_retired(cycle, before, after)  # before this cycle's outcomes change in_doubt
        rows = self._check(cycle, before, after, cycle_started)
        if self.tiering is not None:
            self.report.violations += self.tiering.check(cycle, before, after, rows)
        self._end_classic(cycle)
        self._end_leaderless(cycle, before, snapshot_ms=self._snapshot_ms(rows))
        self._timed("checks")

    # ---- workload steps ---------------------------------------------------------------------
    def _tps(self, topic: str) -> list[TopicPartitionKey]:
        return [(topic, p) for p in range(self.partitions[topic])]

    def _produce(self) -> None:
        for topic in self.partitions:
            now_ms = int(time.time() * 1000)
            counts = self._retired_counts(topic, {p: self.rng.randint(0, 30) for _, p in self._tps(topic)})
            self._send(topic, counts, create_ms=now_ms, sent_ms=now_ms)

    def _send(self, topic: str, counts: dict[int, int], create_ms: int, sent_ms: int) -> None:
        """Produce ``counts[p]`` records to p stamped ``create_ms``; remember each one's CreateTime
        and ``sent_ms`` (no later than its append) by offset."""
        sent = {p: [create_ms] * n for p, n in counts.items()}
        for meta in workload.produce(self.producer, topic, counts, timestamps_ms=sent):
            tp = (topic, meta.partition)
            stamps = self.timestamps.setdefault(tp, [])
            if meta.offset != len(stamps):  # only our producer writes: offsets are contiguous
                raise WorkloadError(f"{tp}: acknowledged offset {meta.offset}, expected {len(stamps)}")
            stamps.append(create_ms)
            self.sent_at.setdefault(tp, []).append(sent_ms)
            self.report.records_produced += 1

    def _high_watermark(self, tp: TopicPartitionKey) -> int:
        return len(self.timestamps.get(tp, []))

    def _consume(self) -> None:
        """Each group moves forward at its own speed (sometimes not at all) and commits."""
        for group, speed in GROUP_SPEEDS.items():
            if self.rng.random() < 0.2:
                if "group_expiry" in self.kinds and self.commits[group]:
                    self._commit(group, dict(self.commits[group]))  # unchanged, but not expired
                continue
            topics = [t for t, groups in ((self.topic_a, self.required_a), (self.topic_b, self.committers_b)) if group in groups]
            wanted = {}
            for topic in topics:
                for tp in self._tps(topic):
                    old = self.commits[group].get(tp, 0)
                    wanted[tp] = min(self._high_watermark(tp), old + self.rng.randint(0, speed))
            self._commit(group, wanted)

    # ---- the share consumer (KIP-932) on topic B ----------------------------------------------
    def _share_start(self, tp: TopicPartitionKey) -> int:
        """Where the share group's records on p begin: the latest of p's log start when it first
        joined, p's log start before this cycle, and the start offset Kafka persisted right before
        this cycle's purge (``_read_share_starts``). Records under the log start are gone, and
        Kafka moves a share partition's start offset up to the log start (KIP-932), so the group
        never gets them again; every earlier move of the log start was checked when it happened
        (a purge's own unsafe cut is a violation of that cycle; Kafka's own delete of remote data
        under ``tiering_disable`` is allowed by that kind's oracle)."""
        assert self.share_joined is not None
        return max(self.share_joined.get(tp, 0), self.log_floor.get(tp, 0), self.share_kafka_start.get(tp, 0))

    def _read_share_starts(self) -> None:
        """Right before the purge: the share-partition start offsets Kafka persisted for the share
        group on B (see the module docstring); none when it has not joined yet, or when the read
        fails (then the checker's own count alone, the stricter oracle)."""
        self.share_kafka_start = {}
        if self.share_joined is None:
            return
        try:
            self.share_kafka_start = share.share_start_offsets(self.cluster.bootstrap_servers, self.share_group, self.topic_b)
        except (AssertionError, subprocess.TimeoutExpired) as err:
            self.report.notes.append(f"share start offsets not read ({str(err).splitlines()[0][:120]}): the checker's own count alone")

    def _share_position(self, tp: TopicPartitionKey) -> int:
        """The first offset at or after the share group's start on p (``_share_start``) that no
        run ACCEPTed."""
        pos = self._share_start(tp)
        accepted = self.share_accepted.get(tp, set())
        while pos in accepted:
            pos += 1
        return pos

    def _share_consume(self) -> bool:
        """One run of the real share consumer on B, ACCEPTing a random number of records; False
        when it did not run (nothing to accept, or stopped before the delivery limit)."""
        if self.share_stopped:
            return False
        tps = self._tps(self.topic_b)
        if self.share_joined is None:
            self.share_joined = workload.log_start_offsets(self.admin, tps)
            try:
                share.set_group_config(
                    self.admin, self.share_group,
                    {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": str(SHARE_DELIVERY_LIMIT)},
                )
                self.share_limit = SHARE_DELIVERY_LIMIT
            except AssertionError as err:  # the broker caps the limit lower: keep its default
                self.report.notes.append(f"share.delivery.count.limit {SHARE_DELIVERY_LIMIT} refused ({err}); limit 5")
                share.set_group_config(self.admin, self.share_group, {"share.auto.offset.reset": "earliest"})
        available = sum(
            self._high_watermark(tp) - start - sum(1 for o in self.share_accepted.get(tp, ()) if o >= start)
            for tp in tps
            for start in (self._share_start(tp),)
        )
        if available <= 0:
            return False
        accept = self.rng.randint(1, min(available, SHARE_MAX_ACCEPT))
        run = share.share_run(
            self.cluster.bootstrap_servers, self.share_group, self.topic_b, accept, timeout_s=60.0, check=False
        )
        if run.returncode != 0:  # what it printed was still done (each poll's acknowledgements commit)
            self.report.share_runs_failed += 1
        for t, p, o in run.accepted:
            self.share_accepted.setdefault((t, p), set()).add(o)
        self.share_deliveries.update(run.delivered)
        self.report.share_accepted += len(run.accepted)
        worst = max(  # records gone from the log are never delivered again
            (
                n for (t, p, o), n in self.share_deliveries.items()
                if o not in self.share_accepted.get((t, p), ()) and o >= self._share_start((t, p))
            ),
            default=0,
        )
        if worst >= self.share_limit - 2:
            self.share_stopped = True
            self.report.notes.append(
                f"share consumer stopped after an unaccepted record was delivered {worst} times "
                f"(Kafka archives at {self.share_limit}, which would move the share group past it)"
            )
        return True

    # ---- the Spark Structured Streaming query on A and B --------------------------------------
    def _stream_run(self) -> None:
        """One availableNow run of the real query (a few micro-batches); then the checker reads
        what it wrote. A failed run (data loss: records it needed were deleted) is a violation."""
        tps = [tp for topic in self.partitions for tp in self._tps(topic)]
        self._restart_stream_on_lost_records(tps)
        if not self.stream_first_seen:  # its first run starts from the earliest offsets: p's log start
            self.stream_first_seen = workload.log_start_offsets(self.admin, tps)
        # A partition added later it reads from offset 0 (Spark reports data loss otherwise).
        self.stream_first_seen.update({tp: 0 for tp in tps if tp not in self.stream_first_seen})
        try:
            workload.run_stream_query(
                self.spark, self.cluster.bootstrap_servers, [self.topic_a, self.topic_b],
                self.workdir / "stream-checkpoint", self.stream_sink, self.rng.randint(*STREAM_MAX_PER_BATCH),
                timeout_s=STREAM_TIMEOUT_S,
            )
        except WorkloadError as err:
            self.report.stream_runs_failed += 1
            if any(word in str(err).lower() for word in ("data loss", "lost", "out of range", "outofrange")):
                self.report.violations.append(f"spark query run {self.report.stream_runs}: {err}")
            else:
                self.report.notes.append(f"spark query run {self.report.stream_runs} failed: {err}")
        self.report.stream_runs += 1
        self.stream_read = workload.sink_positions(self.spark, self.stream_sink)
        self.report.stream_records = self.stream_records_before + sum(
            self.stream_read.get(tp, start) - start for tp, start in self.stream_first_seen.items()
        )

    def _restart_stream_on_lost_records(self, tps: Sequence[TopicPartitionKey]) -> None:
        """Records the query has not read are gone from the log: Spark would fail its run as data
        loss. The purge never cut them (the query's position bounds every cut, checked in every
        cycle: had it, that cycle has its violation), so Kafka itself deleted them (its delete of
        remote data under ``tiering_disable``): the query starts over, as its operator would."""
        if not self.stream_first_seen:
            return
        starts = workload.log_start_offsets(self.admin, list(tps))
        lost = []
        for tp in tps:
            position = self._stream_position(tp)
            if position is not None and starts.get(tp, 0) > position:
                lost.append(f"{tp[0]}-{tp[1]} {position} < log start {starts[tp]}")
        if lost:
            self.report.notes.append(
                f"spark query started over before run {self.report.stream_runs}: records it had not read were deleted "
                f"({', '.join(lost)}; a cut of the purge's there is a violation of its cycle)"
            )
            self._reset_stream()

    def _stream_position(self, tp: TopicPartitionKey) -> Optional[int]:
        """The query's position on ``tp`` as the checker knows it (None: it has not run yet, in
        this life: a query started over reads from the log start, whatever it is then)."""
        if not self.stream_first_seen:
            return None
        return self.stream_read.get(tp, self.stream_first_seen.get(tp, 0))

    # ---- expiring groups ------------------------------------------------------------------
    def _start_expiring_group(self, cycle: int) -> None:
        """A new group commits low on B once; the next cycle waits until Kafka forgot it."""
        if self.expiring is not None:
            return
        tps = self._tps(self.topic_b)
        starts = workload.log_start_offsets(self.admin, tps)
        group = f"inv-gx{cycle}"
        self.commits[group] = {}
        self._commit(group, {tp: min(self._high_watermark(tp), starts[tp] + self.rng.randint(0, 10)) for tp in tps})
        self.expiring = group

    def _wait_for_expiry(self, group: str) -> None:
        """Poll until Kafka lists no offsets for ``group`` (bounded); the workload's other groups
        re-commit meanwhile, so only this one expires."""
        deadline = time.monotonic() + EXPIRY_TIMEOUT_S
        refreshed = time.monotonic()
        while True:
            found = workload.retry(lambda: self.admin.list_group_offsets({group: None}), f"offsets of {group}")
            offsets = found.get(group) or {}
            if not offsets:
                break
            if time.monotonic() > deadline:
                raise WorkloadError(f"{group}: offsets not expired after {EXPIRY_TIMEOUT_S:.0f}s: {offsets}")
            if time.monotonic() - refreshed > 10:
                for g in GROUP_SPEEDS:
                    if self.commits[g]:
                        self._commit(g, dict(self.commits[g]))
                refreshed = time.monotonic()
            time.sleep(1.0)
        self.report.groups_expired += 1
        self.expiring = None

    def _commit(self, group: str, offsets: dict[TopicPartitionKey, int]) -> None:
        workload.commit(self.admin, group, offsets)
        self.commits[group].update(offsets)

    def _rewind(self, group: Optional[str] = None) -> None:
        group = group or self.rng.choice(list(GROUP_SPEEDS))
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

    # ---- retire: a partition of B retired (seed 002) -------------------------------------------
    def _retire(self) -> None:
        """Retire B's last partition (once) through the registry, as ``spark-purge retire`` does.
        The producer keeps writing to it now and then (``RETIRED_WRITE_RATE``): retirement is
        advisory, and writes must keep it from being reclaimed while recent."""
        if self.retired is not None:
            return
        from spark_purge.retirement import RetirementRegistry, TopicFacts, retire

        tp = (self.topic_b, self.partitions[self.topic_b] - 1)
        facts = {self.topic_b: TopicFacts(tuple(range(self.partitions[self.topic_b])), False, "delete")}
        registry = RetirementRegistry.beside(self.spark, self.config.audit.path)
        retire(registry, self.config, facts, [tp], "invariant checker", "checker", datetime.now(timezone.utc))
        self.retired = tp

    def _retired_counts(self, topic: str, counts: dict[int, int]) -> dict[int, int]:
        """The producer mostly stays off the retired partition."""
        if self.retired is None or self.retired[0] != topic:
            return counts
        partition = self.retired[1]
        return {**counts, partition: counts[partition] if self.rng.random() < RETIRED_WRITE_RATE else 0}

    def _check_retired(self, cycle: int, before: dict[TopicPartitionKey, int], after: dict[TopicPartitionKey, int]) -> None:
        """Besides ``safe(p)`` (checked for it as for every partition): the retired partition is
        never purged whole while written to within ``RETIRE_DELAY_MS`` of the cycle's snapshot.
        A record sent at s was appended at s or later, so s > snapshot - delay proves it recent."""
        tp = self.retired
        if tp is None:
            return
        prior, start, hw = before.get(tp, 0), after.get(tp, 0), self._high_watermark(tp)
        if not (start > prior and start >= hw > 0) or start <= self.in_doubt.get(tp, -1):
            return
        self.retired_reclaims += 1
        rows = self._audit_rows(cycle)
        if not rows:
            return
        snapshot_ms = self._snapshot_ms(rows)
        last_sent = self.sent_at[tp][-1]
        if last_sent > snapshot_ms - RETIRE_DELAY_MS:
            self.report.violations.append(
                f"cycle {cycle}: retired {tp[0]}-{tp[1]} purged whole to {start} though written {snapshot_ms - last_sent} ms "
                f"before the snapshot (retirement.delay {RETIRE_DELAY_MS} ms)"
            )

    def _retire_note(self) -> None:
        if self.retired is not None:
            tp = self.retired
            self.report.notes.append(
                f"retire: {tp[0]}-{tp[1]} retired, purged whole {self.retired_reclaims} time(s), high watermark {self._high_watermark(tp)}"
            )

    # ---- backdated records ------------------------------------------------------------------
    def _backdate(self, base: Optional[Mapping[int, int]] = None) -> None:
        """Append records stamped two days ago to every partition p of B (``base[p]`` plus a
        drawn few), then let B's groups consume everything: only the time floor (in append
        time) may keep them."""
        counts = {p: (base or {}).get(p, 0) + self.rng.randint(*BACKDATED_PER_PARTITION) for _, p in self._tps(self.topic_b)}
        sent_ms = int(time.time() * 1000)
        self._send(self.topic_b, counts, create_ms=sent_ms - BACKDATE_MS, sent_ms=sent_ms)
        for group in self.committers_b:
            self._commit(group, {tp: self._high_watermark(tp) for tp in self._tps(self.topic_b)})

    def _append_floor(self, tp: TopicPartitionKey, snapshot_ms: int) -> int:
        """The first offset of ``tp`` sent at or after ``snapshot_ms - FLOOR_MS`` (+1 ms for the
        snapshot time's rounding): it and every later one were appended within min_retention."""
        sent = self.sent_at.get(tp, [])
        return next((i for i, ms in enumerate(sent) if ms >= snapshot_ms - FLOOR_MS + 1), len(sent))

    def _may_recreate_b(self) -> bool:
        """Whether ``topic_recreate`` may draw B: not while its tiered storage's disablement is
        under way or left half-way (the tiering oracle follows one incarnation through it)."""
        return self.tiering is None or self.tiering.state in (ENABLED_TIERING, "DISABLED(delete)")

    def _recreate_and_refill(self, topic: str) -> None:
        """topic_recreate: recreate ``topic``; a new A gets fresh records (and B its own), a new B
        is refilled past the old incarnation's high watermark with records stamped two days ago,
        which B's groups then commit past: only the append-time floor keeps them."""
        old_hw = {p: self._high_watermark((t, p)) for t, p in self._tps(topic)}
        self._recreate_topic(topic)
        if topic == self.topic_b:
            self._backdate(base=old_hw)  # past the old high watermark on every partition
        else:
            self._produce()  # fresh records on the new incarnation, nobody has read them

    def _recreate_topic(self, topic: str) -> None:
        """Delete ``topic`` and create it again (same name, partitions, replication, and for a
        tiered B its tiering while ENABLED); the oracle forgets the old incarnation's records,
        every group's commits on it, the share group's progress on B and the Spark query's."""
        configs = {"min.insync.replicas": "2"} if self.replication >= 3 else {}
        if topic == self.topic_b and self.tiering is not None and self.tiering.state == ENABLED_TIERING:
            configs.update(TIERED_TOPIC_CONFIGS)
        workload.recreate_topic(self.admin, topic, self.partitions[topic], self.replication, configs)
        self.recreates[topic] += 1
        for tp in self._tps(topic):
            self.timestamps[tp] = []
            self.sent_at[tp] = []
            for commits in self.commits.values():
                commits.pop(tp, None)
            self.recreated.add(tp)
        if topic == self.topic_b:
            # Kafka drops the share group's state with the old topic; on the new one the group
            # starts at the log start when it next joins: required from that run on, as from its first.
            self.share_joined = None
            self.share_kafka_start = {}
            self.share_accepted = {tp: offs for tp, offs in self.share_accepted.items() if tp[0] != topic}
            self.share_deliveries = Counter({k: n for k, n in self.share_deliveries.items() if k[0] != topic})
            if self.share_stopped:  # stopped for an old record's deliveries: none are left
                self.share_stopped = False
                self.report.notes.append("share consumer runs again: the topic it had stopped on was recreated")
        # kafka-python's producer caches the old topic's metadata: a fresh one looks it up again.
        self.producer.close()
        self.producer = self._new_producer()
        if "spark_stream" in self.kinds:
            self._reset_stream()

    def _reset_stream(self) -> None:
        """A topic the Spark query reads was recreated: its checkpoint's offsets belong to the old
        incarnation (Spark itself then fails the query as data loss, whatever the purge does), so
        the query starts over, as its operator would: a fresh checkpoint and sink. Until its next
        run it needs nothing (it will start at the log start, whatever it is then) and the purge
        finds no checkpoint (it blocks A and B)."""
        for folder in (self.workdir / "stream-checkpoint", self.stream_sink):
            shutil.rmtree(folder, ignore_errors=True)
        self.stream_records_before = self.report.stream_records  # which already counts the lives before
        self.stream_read = {}
        self.stream_first_seen = {}

    def _driver_kill_rewind(self, cycle: int, before: dict[TopicPartitionKey, int]) -> None:
        """The batch runs in a driver process of its own (``batch_driver``), SIGKILLed at a
        drawn step (``KILL_STEPS``: after its intents, right before DeleteRecords, or after
        DeleteRecords and before its outcomes); a required group of A rewinds; a restarted
        pipeline (the same query id) replays the same batch id on a fresh snapshot, taking the
        dead driver's lease over once it expired. What the dying batch cut already is checked
        against the commits it was planned on, before the rewind, and becomes the replay's
        ``before``. A driver that failed before its step (a fault) fails the cycle."""
        step = self.rng.choice(KILL_STEPS)
        query_id = self.pipeline.query_id
        self.pipeline.close()  # the checker's job ends cleanly: the driver takes the lease at once
        output = self.workdir / f"batch_driver_{cycle}.log"  # kept: the driver's whole output
        driver = processes.spawn(
            [sys.executable, "-m", "spark_purge.testing.batch_driver", str(self._config_file()), query_id, str(cycle), step],
            cwd=self.workdir, env=processes.python_env(), log=output,
        )
        try:
            exit_code: Optional[int] = driver.wait(timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            exit_code = None  # still running: killed below
        finally:
            processes.kill_group(driver)  # by its own id: its Spark JVM too, if left
        said = output.read_text(encoding="utf-8", errors="replace")
        rows = self._audit_rows(cycle)
        if exit_code == batch_driver.NOT_REACHED and step_never_reached(step, rows):
            self.unreached_steps[step] += 1  # the batch ended whole: its rows are checked as any
        elif exit_code != -signal.SIGKILL or f"{batch_driver.KILLED_MARK} {step}" not in said:
            how = f"still running after {DRIVER_TIMEOUT_S} s" if exit_code is None else f"exit {exit_code}"
            tail = next((line for line in reversed(said.splitlines()) if line.strip()), "")
            raise WorkloadError(f"driver_kill_rewind: the driver was not killed at {step} ({how}; {output}): {tail[:300]}")
        else:
            self.kill_steps[step] += 1
        self._check_intents(cycle, rows)  # against the commits they were planned on
        self.prechecked.add(cycle)
        died_at = self._log_starts()
        self._check_starts(cycle, before, died_at, self._snapshot_ms(rows), f"batch killed at {step}: ")
        before.update(died_at)
        self.log_floor.update(died_at)
        self._rewind(self.rng.choice(self.required_a))
        self.pipeline = self._new_pipeline(query_id)
        workload.run_cycle(self.pipeline, cycle)

    # ---- classic_rebalance: a classic group mid-rebalance at the snapshot ----------------------
    def _classic_member(self, group: str, topics: list[str]) -> KafkaConsumer:
        """A real classic-protocol member of ``group`` subscribed to ``topics`` once its metadata
        lists them (``workload.classic_member``: after a ``topic_recreate`` a leader assigning
        from metadata without the topic would leave the group Stable with nothing assigned)."""
        consumer = workload.classic_member(
            self.cluster.bootstrap_servers, group, topics,
            {"max_poll_interval_ms": CLASSIC_REBALANCE_TIMEOUT_MS, "max_poll_records": 50, **self.cluster.client_kwargs()},
        )
        self._classic.append(consumer)
        return consumer

    def _classic_state(self, group: str) -> str:
        found = workload.retry(lambda: self.admin.describe_groups([group]), f"state of {group}")
        return str((found.get(group) or {}).get("group_state", ""))

    def _classic_join(self, cycle: int) -> None:
        """A new classic group joins B right before the snapshot: its first member, subscribed
        to A, is assigned A's partitions (Stable); then a second member subscribed to A and B
        joins, and its JoinGroup starts a rebalance that waits for the first to rejoin, which it
        does only in a poll (after the cycle): the group stays PreparingRebalance for the whole
        purge, and what the broker shows of it then (the first member's A) says nothing of B. It
        has committed nothing: from the second JoinGroup on the oracle requires it on every
        partition of B with no commit (it reads B from the log start), so nothing of B may be
        cut past the log start before the cycle. (A's rule lists its groups: not this one.)"""
        group = f"inv-cl{cycle}"
        self.commits.setdefault(group, {})
        self._classic_groups.append(group)
        first = self._classic_member(group, [self.topic_a])
        deadline = time.monotonic() + CLASSIC_JOIN_TIMEOUT_S
        while not first.assignment() and time.monotonic() < deadline:
            first.poll(timeout_ms=200)
        if not first.assignment():
            self.hazards["classic_rebalance: first member not assigned in time (joined, no snapshot mid-rebalance)"] += 1
            return
        self.members[group] = frozenset({self.topic_a, self.topic_b})
        second = self._classic_member(group, [self.topic_a, self.topic_b])
        deadline = time.monotonic() + CLASSIC_JOIN_TIMEOUT_S
        state = ""
        while state not in REBALANCING_STATES and time.monotonic() < deadline:
            second.poll(timeout_ms=200)  # its JoinGroup goes out (and is answered) only in poll()
            state = self._classic_state(group)
        if state not in REBALANCING_STATES:
            self.hazards[f"classic_rebalance: group {state or 'unknown'} before the snapshot, not rebalancing"] += 1

    def _end_classic(self, cycle: int) -> None:
        """After the cycle's checks: whether the group was still rebalancing (so through the
        whole purge, which the note counts), then its members leave without a commit and the
        checker deletes the group (Admin API) and forgets it, before the next snapshot: a group
        with no commits on a discovering topic would otherwise block it for good. The purge never
        saw a position of it (an unreadable group has no rows), so it remembers none either."""
        groups, self._classic_groups = self._classic_groups, []
        if not groups:
            return
        for group in sorted(self.members):
            state = self._classic_state(group)
            if state in REBALANCING_STATES:
                self.hazards["classic_rebalance: still rebalancing after the purge"] += 1
            else:
                self.hazards[f"classic_rebalance: {state or 'unknown'} after the purge"] += 1
        self._close_classic()
        self._delete_groups(groups, cycle)
        for group in groups:
            self.commits.pop(group, None)
            self.members.pop(group, None)

    def _close_classic(self) -> None:
        consumers, self._classic = self._classic, []
        for consumer in reversed(consumers):
            consumer.close(autocommit=False, timeout_ms=5_000)  # LeaveGroup; a rebalance it need not wait for

    def _delete_groups(self, groups: list[str], cycle: int) -> None:
        """Delete the checker's own groups (a member just left: retried while not empty yet). A
        classic group with no offsets is gone once its last member left (GroupIdNotFound)."""

        attempts = 0

        def once() -> None:
            nonlocal attempts
            attempts += 1
            # kafka-python caches a group's coordinator: after a node restart it may answer
            # NOT_COORDINATOR, so every attempt after the first asks through a fresh client.
            client = self.admin if attempts == 1 else workload.fresh_admin(self.admin)
            try:
                result = client.delete_groups(groups)  # group -> "OK" or the error's class name
            finally:
                if client is not self.admin:
                    client.close()
            refused = {g: err for g, err in result.items() if err not in ("OK", "GroupIdNotFoundError")}
            if refused:
                raise NotReadyError(f"cycle {cycle}: delete of {sorted(refused)}: {refused}")

        workload.retry(once, f"delete of groups {groups}")

    # ---- leaderless_group: a group seen only on a partition without a leader ------------------
    def _leaderless_group(self, cycle: int) -> None:
        """A topic of the discovering rule ``l`` with two partitions of one replica each, on two
        drawn nodes; ``inv-gm<cycle>`` commits on both, ``inv-gl<cycle>`` only on partition 0,
        whose node is then SIGKILLed: the snapshot has no leader for it (its rows go), and the
        purge must still hold ``inv-gl`` on partition 1, where it has no commit (it reads it
        from its reset position). The oracle: a group with a commit on any partition of a
        discovering topic is required on all of them (``_safe``), so partition 1 is blocked. The
        node is restarted, the topic and the groups deleted after the cycle (``_end_leaderless``)."""
        victim, other = self.rng.sample(list(self.cluster.node_ids), 2)
        topic = f"{self.leaderless_prefix}{cycle}"
        workload.create_topics(self.admin, {topic: 2}, assignments={topic: {0: [victim], 1: [other]}})
        self.partitions[topic] = 2
        now_ms = int(time.time() * 1000)
        self._send(topic, {p: self.rng.randint(*LEADERLESS_RECORDS) for p in (0, 1)}, create_ms=now_ms, sent_ms=now_ms)
        everywhere, lone = f"inv-gm{cycle}", f"inv-gl{cycle}"
        for group in (everywhere, lone):
            self.commits[group] = {}
        tps = self._tps(topic)
        self._commit(everywhere, {tp: self.rng.randint(1, self._high_watermark(tp)) for tp in tps})
        self._commit(lone, {tps[0]: self.rng.randint(0, self._high_watermark(tps[0]))})
        self._leaderless = (topic, [everywhere, lone], workload.log_start_offsets(self.admin, tps))
        self.cluster.kill_node(victim)
        self.down.append(victim)

        def leaderless() -> None:
            if workload.leaders(self.admin, topic).get(0, -1) != -1:
                raise NotReadyError(f"{topic}-0 still has a leader")

        workload.retry(leaderless, f"{topic}-0 without a leader", LEADERLESS_TIMEOUT_S)
        self.leaderless_tps = {tps[0]}

    def _end_leaderless(self, cycle: int, before: Mapping[TopicPartitionKey, int], snapshot_ms: int) -> None:
        """The node back, the leaderless partition's log start checked against what it was before
        the kill (nothing could cut it without a leader, and a cut later is none of this cycle's
        own: the oracle allows no more than ``safe`` either way); then the topic and its groups
        deleted, and forgotten by the oracle (the purge saw ``inv-gm``'s positions on partition 1:
        with the topic gone, no partition of it is left for a remembered position to hold)."""
        if self._leaderless is None:
            return
        topic, groups, started = self._leaderless
        self._restart_down()
        workload.wait_for_leaders(self.admin, {topic: self.partitions[topic]})
        down, self.leaderless_tps = sorted(self.leaderless_tps), set()
        self._check_starts(cycle, {**started, **before}, workload.log_start_offsets(self.admin, down), snapshot_ms, "back from no leader: ")
        self.hazards["leaderless_group: topics with a group seen only on a leaderless partition"] += 1
        workload.retry(lambda: self.admin.delete_topics([topic]), f"delete of {topic}")
        self._delete_groups(groups, cycle)
        for group in groups:
            self.commits.pop(group, None)
        for tp in self._tps(topic):
            for known in (self.timestamps, self.sent_at, self.log_floor, self.in_doubt):
                known.pop(tp, None)
        del self.partitions[topic]
        self._leaderless = None

    # ---- lease_wait_rewind: the batch waits for the lease while a group rewinds ----------------
    def _lease_wait_rewind(self, cycle: int) -> None:
        """The checker's job ends cleanly (its lease released) and starts again (same query
        id); right when its batch asks for the lease, after its snapshot was read, another holder
        with the same purger id takes it (a bare ``PurgerLease`` that then does nothing, as an
        overlapping job would), so the batch waits until that lease expires (``lease.ttl``) and
        takes it over. During the wait a required group of A rewinds. The oracle: the rewound
        commit is the group's position from then on (``_safe`` reads the checker's commits after
        the cycle): no cut past it, in the intents or in Kafka."""
        from spark_purge.lease import LeaseState, PurgerLease

        query_id = self.pipeline.query_id
        self.pipeline.close()
        self.pipeline = self._new_pipeline(query_id)
        lease = self.pipeline.lease
        if lease is None:
            workload.run_cycle(self.pipeline, cycle)
            return
        holder = PurgerLease.of(self.spark, self.config, f"inv-holder-{cycle}")
        own_acquire, own_sleep = lease.acquire, lease.sleep
        group = self.rng.choice(self.required_a)
        rewound: list[dict[TopicPartitionKey, int]] = []

        def acquire() -> LeaseState:
            holder.acquire()  # held when the batch asks for it: the batch waits for its expiry
            return own_acquire()

        def sleep(seconds: float) -> None:
            if not rewound:
                rewound.append(dict(self.commits[group]))
                self._rewind(group)  # recorded in the oracle's commits as soon as Kafka has it
            own_sleep(seconds)

        lease.acquire = acquire  # type: ignore[method-assign]
        lease.sleep = sleep
        try:
            workload.run_cycle(self.pipeline, cycle)
        finally:
            lease.acquire, lease.sleep = own_acquire, own_sleep  # type: ignore[method-assign]
        if not rewound:
            self.hazards["lease_wait_rewind: the batch did not wait for the lease"] += 1
            return
        lowered = sum(1 for tp, old in rewound[0].items() if self.commits[group].get(tp, old) < old)
        self.hazards["lease_wait_rewind: batches that waited for the lease while a group rewound"] += 1
        self.hazards["lease_wait_rewind: partitions rewound during a wait"] += lowered

    def _new_pipeline(self, query_id: Optional[str]) -> PurgePipeline:
        """The checker's job (again): its config, its mid-cycle fault hook, query ``query_id`` (None:
        a new one)."""
        return workload.new_pipeline(self.spark, self.config, fault_hook=self._mid_cycle_hook, query_id=query_id)

    def _config_file(self) -> Path:
        """The checker's config as YAML, for a driver process (written once per life of the
        checker: a resumed run's cluster listens on new ports)."""
        path = self.workdir / "purge.yaml"
        if not self._config_written:
            path.write_text(yaml.safe_dump(self.config_data, sort_keys=False), encoding="utf-8")
            self._config_written = True
        return path

    def _overlap_job(self, batch_id: int) -> None:
        """A second job with the same purger id starts while the first has written its intents:
        it waits for the first one's lease to expire, takes it over (generation + 1), runs the
        same batch under its own query id and shuts down cleanly. The first must then be fenced."""
        self._overlap = False
        lease = self.pipeline.lease
        if lease is None or lease.generation is None:
            return
        self.overlaps[batch_id] = (lease.generation, self._audit_version())
        second = workload.new_pipeline(self.spark, self.config)
        try:
            workload.run_cycle(second, batch_id)
        finally:
            second.close()

    def _audit_version(self) -> int:
        return int(self.spark.sql(f"DESCRIBE HISTORY delta.`{self.config.audit.path}` LIMIT 1").collect()[0]["version"])

    def _mid_cycle_hook(self, step: str, batch_id: int) -> None:
        if step == "intents_written" and self._overlap:
            self._overlap_job(batch_id)
        if step == "intents_written" and self._recreate_mid is not None:
            topic, self._recreate_mid = self._recreate_mid, None
            self._recreate_and_refill(topic)  # records the planned cutoffs would reach
        if step == "intents_written" and self._controller_mid:
            self._controller_mid = False
            self._kill_controller()
        if step == "intents_written" and self._mid_cycle_kill and not self.down:
            leader = workload.leaders(self.admin, self.topic_a).get(0, -1)
            if leader >= 0:
                self.cluster.kill_node(leader)
                self.down.append(leader)
        if step == "intents_written" and self._pause_plan is not None and self._pause_plan[2]:
            leader = workload.leaders(self.admin, self.topic_a).get(0, -1)
            if leader >= 0:
                self._pause([leader], self._pause_plan[1])
        if step == "intents_written" and self._maintain:
            self._start_maintenance()
        if step == "intents_written" and self.tiering is not None:
            self.tiering.start_mid_cycle()

    # ---- hung brokers, the controller, the audit's maintenance -----------------------------------
    def _kill_controller(self) -> None:
        """controller_kill: SIGKILL the active KRaft controller (a combined node: its broker dies too)."""
        leader = self.cluster.active_controller()
        if leader is not None and leader not in self.down:
            self.cluster.kill_node(leader)
            self.down.append(leader)

    def _pause(self, nodes: list[int], seconds: float) -> None:
        """SIGSTOP ``nodes`` (hung, not dead); a timer resumes them after ``seconds``."""
        with self._pause_lock:
            for node_id in nodes:
                self.cluster.pause_node(node_id)
            self.paused = list(nodes)
        self._resume_timer = threading.Timer(seconds, self._resume)
        self._resume_timer.daemon = True
        self._resume_timer.start()

    def _resume(self) -> None:
        with self._pause_lock:
            for node_id in self.paused:
                self.cluster.resume_node(node_id)
            self.paused = []

    def _end_pause(self) -> None:
        """After the cycle: nodes still hung go on now; wait until they answer again."""
        timer, self._resume_timer = self._resume_timer, None
        if timer is None:
            return
        timer.cancel()
        nodes = list(self.paused)
        self._resume()
        timer.join()
        self.cluster.wait_ready([self.cluster.node(n) for n in nodes if n not in self.down])

    def _start_maintenance(self) -> None:
        """audit_maintenance: an operator's OPTIMIZE and VACUUM (default retention) of the audit
        table, in another thread, while the batch goes on to DeleteRecords and its outcomes."""
        path = self.config.audit.path

        def maintain() -> None:
            try:
                self.spark.sql(f"OPTIMIZE delta.`{path}`").collect()
                self.spark.sql(f"VACUUM delta.`{path}`").collect()
            except BaseException as exc:  # reported by _end_maintenance
                self._maintenance_error = exc

        self._maintain = False
        self._maintenance_error = None
        self._maintenance = threading.Thread(target=maintain, name="audit-maintenance", daemon=True)
        self._maintenance.start()

    def _end_maintenance(self, cycle: Optional[int]) -> None:
        thread, self._maintenance = self._maintenance, None
        self._maintain = False
        if thread is None:
            return
        thread.join()
        if self._maintenance_error is not None:  # Delta refused the operator's job: worth knowing
            self.report.notes.append(f"cycle {cycle}: audit maintenance failed: {str(self._maintenance_error).splitlines()[0][:200]}")

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
        """Every partition's log start, but those leaderless_group left without a leader (no
        broker can answer for them; with no leader, nothing can cut them either)."""
        tps = [tp for topic in self.partitions for tp in self._tps(topic) if tp not in self.leaderless_tps]
        return workload.log_start_offsets(self.admin, tps)

    def _safe(self, tp: TopicPartitionKey, snapshot_ms: int) -> int:
        topic = tp[0]
        if topic == self.topic_a:
            required = list(self.required_a)
        else:
            # Discovered: every group that has committed on any partition of the topic, and every
            # group with live members subscribing to it (classic_rebalance); each is required on
            # every partition of the topic, so a partition where one has no commit is blocked.
            required = [g for g in self.commits if any(k[0] == topic for k in self.commits[g])]
            required += [g for g, topics in self.members.items() if topic in topics and g not in required]
        hw = self._high_watermark(tp)
        if not required or any(tp not in self.commits.get(g, {}) for g in required):
            return -1  # blocked: nothing may be deleted
        safe = min([self.commits[g][tp] for g in required] + [hw])
        if topic == self.topic_b and self.share_joined is not None:
            safe = min(safe, self._share_position(tp))  # required on B since its first run
        stream = self._stream_position(tp) if "spark_stream" in self.kinds and topic in (self.topic_a, self.topic_b) else None
        if stream is not None:
            safe = min(safe, stream)  # the Spark query reads A and B
        if topic == self.topic_b:
            # +1 ms of slack for the snapshot time's rounding; records stamped before the floor.
            floor_ms = snapshot_ms - FLOOR_MS + 1
            stamps = self.timestamps.get(tp, [])
            floor = next((i for i, ts in enumerate(stamps) if ts >= floor_ms), len(stamps))
            safe = min(safe, floor, self._append_floor(tp, snapshot_ms))
        return safe

    def _check(
        self, cycle: int, before: dict[TopicPartitionKey, int], after: dict[TopicPartitionKey, int], started: datetime
    ) -> list[dict[str, Any]]:
        """The cycle's log starts and audit rows against the oracle; returns the rows it read."""
        rows = self._audit_rows(cycle)
        self.report.audit_rows_checked += len(rows)
        snapshot_ms = self._snapshot_ms(rows)
        if rows and snapshot_ms < int(started.replace(microsecond=0).timestamp() * 1000):
            self.report.violations.append(f"cycle {cycle}: planned_at {snapshot_ms} ms before the cycle started {started}")
        self._check_starts(cycle, before, after, snapshot_ms)
        if cycle not in self.prechecked:
            self._check_intents(cycle, rows)
        if cycle in self.overlaps:
            self._check_fenced(cycle, rows)
        # Per query: an overlapping second job audits the same batch id under its own query id.
        intents = {(r["query_id"], r["topic"], r["partition"]): r for r in rows if r["record_type"] == "intent"}
        outcomes = [r for r in rows if r["record_type"] == "outcome"]
        counts = Counter((r["query_id"], r["record_type"], r["topic"], r["partition"]) for r in rows)
        for counted, n in counts.items():
            if n > 1:
                self.report.violations.append(f"cycle {cycle}: {n} audit rows for {counted[1:]}")
        outcome_keys = {(r["query_id"], r["topic"], r["partition"]) for r in outcomes}
        for intent_key in intents:
            if intent_key not in outcome_keys and not self._cycle_failed(cycle):
                self.report.violations.append(f"cycle {cycle}: intent without outcome for {intent_key[1:]}")
        self._note_in_doubt(after, intents, outcomes)
        for r in outcomes:
            key = (r["query_id"], r["topic"], r["partition"])
            tp = (r["topic"], r["partition"])
            # A replayed batch may cut less than its intent (a fresh check binds), never more.
            if r["status"] == "deleted" and (key not in intents or r["cutoff"] > intents[key]["cutoff"]):
                self.report.violations.append(f"cycle {cycle}: delete without a matching intent for {tp}")
            if tp in self.recreated and key in intents and r["status"] == "deleted":
                self.report.violations.append(f"cycle {cycle}: {tp} recreated after its intent, yet cut (status deleted)")
        return rows

    def _note_in_doubt(
        self, after: Mapping[TopicPartitionKey, int], intents: Mapping[tuple[str, str, int], dict[str, Any]], outcomes: Sequence[dict[str, Any]]
    ) -> None:
        """A DeleteRecords the purge sent may take effect later than its outcome says. A broker
        that got it while hung (``broker_pause``) or just before losing its leadership applies
        it to its own log after the request timed out (outcome ``failed``, the log start re-read
        from the new leader below the cutoff); when that broker leads again, the partition's log
        start rises to the cutoff, minutes later. Its intent was checked against ``safe(p)`` when
        planned (``_check_intents``), so such a rise is no new cut of the purge's: later cycles
        allow up to that cutoff until the log start reached it (or the topic was recreated)."""
        for r in outcomes:
            key = (r["query_id"], r["topic"], r["partition"])
            tp = (r["topic"], r["partition"])
            if r["status"] == "failed" and key in intents and r["cutoff"] is not None and tp not in self.recreated:
                self.in_doubt[tp] = max(self.in_doubt.get(tp, 0), int(r["cutoff"]))
        for tp in list(self.in_doubt):
            if tp in self.recreated or after.get(tp, 0) >= self.in_doubt[tp]:
                del self.in_doubt[tp]

    @staticmethod
    def _snapshot_ms(rows: Sequence[dict[str, Any]]) -> int:
        """When the batch's snapshot was taken: its earliest ``planned_at`` (now without rows)."""
        planned = [r["planned_at"] for r in rows]
        snapshot_at = min(planned) if planned else datetime.now(timezone.utc)
        snapshot_at = snapshot_at if snapshot_at.tzinfo else snapshot_at.replace(tzinfo=timezone.utc)
        return int(snapshot_at.timestamp() * 1000)

    def _check_starts(
        self, cycle: int, before: dict[TopicPartitionKey, int], after: dict[TopicPartitionKey, int], snapshot_ms: int, label: str = ""
    ) -> None:
        """The core invariant: no log start moved past ``max(before, safe)``; counts the deletes."""
        for tp, start in sorted(after.items()):
            prior = before.get(tp, 0)
            safe = self._safe(tp, snapshot_ms)
            allowed = max(prior, safe, self.in_doubt.get(tp, 0))
            if start > allowed:
                self.report.violations.append(
                    f"cycle {cycle}: {label}{tp[0]}-{tp[1]} log start {start} > allowed {allowed} (before {prior}, safe {safe})"
                )
            self.report.records_deleted += max(0, start - prior)

    def _check_fenced(self, cycle: int, rows: Sequence[dict[str, Any]]) -> None:
        """overlap_job: the fenced generation has no outcome in this batch, and no row of it
        landed in the audit after the version read just before the takeover began (Delta
        time travel: its rows then and now are the same)."""
        fenced, before = self.overlaps[cycle]
        path = self.config.audit.path
        late_outcomes = [r for r in rows if r["record_type"] == "outcome" and r["lease_generation"] == fenced]
        if late_outcomes:
            self.report.violations.append(f"cycle {cycle}: {len(late_outcomes)} outcome row(s) of fenced generation {fenced}")
        then = self.spark.read.format("delta").option("versionAsOf", before).load(path).where(f"lease_generation = {fenced}").count()
        now = self.spark.read.format("delta").load(path).where(f"lease_generation = {fenced}").count()
        if now != then:
            self.report.fenced_rows += now - then
            self.report.violations.append(f"cycle {cycle}: {now - then} audit row(s) of generation {fenced} landed after its takeover began")
        taken = [r for r in workload.audit_rows(self.spark, self.config, "lease") if r["lease_generation"] == fenced + 1]
        if [r["status"] for r in taken] != ["takeover"]:
            self.report.violations.append(f"cycle {cycle}: generation {fenced + 1} was not recorded as a takeover ({taken})")

    def _check_intents(self, cycle: int, rows: Sequence[dict[str, Any]]) -> None:
        """No intent cuts past what the checker's own commits and timestamps allow (an intent
        planned for a topic recreated since is checked by its outcome instead)."""
        intents = [r for r in rows if r["record_type"] == "intent"]
        if not intents:
            return
        snapshot_ms = self._snapshot_ms(intents)
        for intent in intents:
            tp = (intent["topic"], intent["partition"])
            if tp in self.recreated:
                continue
            safe = self._safe(tp, snapshot_ms)
            if intent["cutoff"] > max(safe, intent["prior_log_start_offset"]):
                self.report.violations.append(f"cycle {cycle}: intent cutoff {intent['cutoff']} > safe {safe} for {tp}")

    def _cycle_failed(self, cycle: int) -> bool:
        return cycle in self.report.failed_cycles

    def _audit_rows(self, batch_id: int) -> list[dict[str, Any]]:
        # No table before the first cycle that writes one: no rows to check.
        return workload.audit_rows(self.spark, self.config, None, batch_id=batch_id, missing_ok=True)


def load_state(workdir: Path) -> dict[str, Any]:
    """The state a run saved in ``workdir`` after its last whole cycle; refuses a run stopped in
    the middle of a cycle (what that cycle did to Kafka is not in the state)."""
    running = workdir / RUNNING_FILE
    if running.exists():
        cycle = running.read_text(encoding="utf-8").strip()
        raise WorkloadError(
            f"{running}: the run was stopped in the middle of cycle {int(cycle) + 1} (Ctrl-C or a kill), and what that "
            "cycle did to Kafka is not in its saved state: it cannot resume. Start a new run; stop one between "
            "cycles with --minutes or SIGTERM"
        )
    path = workdir / STATE_FILE
    if not path.exists():
        raise WorkloadError(f"{path}: no saved run to resume in {workdir}")
    with open(path, "rb") as f:
        state: dict[str, Any] = pickle.load(f)
    if state.get("version") != STATE_VERSION:
        raise WorkloadError(f"{path}: state version {state.get('version')!r}, this checker reads {STATE_VERSION}")
    return state


def life_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a saved state a new life needs, as plain JSON values."""
    version, internal, gauss = state["rng"]
    report = dict(state["report"])
    report["faults"] = dict(report["faults"])
    report["failed_cycles"] = sorted(report["failed_cycles"])
    return {
        "version": state["version"], "next_cycle": state["next_cycle"], "cycles": state["cycles"], "run": state["run"],
        "rng": [version, list(internal), gauss], "report": report,
    }


def load_life(path: Path) -> dict[str, Any]:
    """A ``LIFE_FILE`` (``--new-life``), back to the values ``_restore_tallies`` takes."""
    try:
        life: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        version, internal, gauss = life["rng"]
        life["rng"] = (version, tuple(internal), gauss)
        life["report"]["faults"] = Counter(life["report"]["faults"])
        life["report"]["failed_cycles"] = set(life["report"]["failed_cycles"])
    except (ValueError, KeyError, TypeError) as err:
        raise WorkloadError(f"{path}: not a checker life file ({LIFE_FILE}): {err}") from err
    if life.get("version") != STATE_VERSION:
        raise WorkloadError(f"{path}: state version {life.get('version')!r}, this checker reads {STATE_VERSION}")
    return life


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
    kinds: Sequence[str] = DEFAULT_KINDS,
    out: Callable[[str], None] = print,
    progress_every: int = 10,
    resume: bool = False,
    minutes: Optional[float] = None,
    new_life: Optional[Mapping[str, Any]] = None,
) -> InvariantReport:
    """Run the seeded workload for ``cycles`` purge cycles; returns the report (never raises
    for a violation: the caller decides). ``schedule`` fixes the fault of each cycle (cycled;
    ``None`` entries are quiet cycles) instead of drawing it at ``fault_rate`` among ``kinds``
    (the share consumer then runs only where the schedule says ``share_consume``). ``resume``
    ``minutes`` and ``new_life``: see ``InvariantWorkload.run`` (a resumed run, or a new life,
    passes the settings it was started with)."""
    workload = InvariantWorkload(
        spark, cluster, seed=seed, workdir=workdir, fault_rate=fault_rate, sabotage_cycle=sabotage_cycle,
        schedule=schedule, kinds=kinds, out=out, progress_every=progress_every,
    )
    return workload.run(cycles, resume=resume, minutes=minutes, new_life=new_life)


def checker_workdir(given: str | None) -> Path:
    """The run's folder, made if missing, as an absolute path: ``given`` (``--workdir``, maybe
    relative to the current folder) or a new temporary folder. The checker's config names files
    inside it (the audit, the Spark query's checkpoint as a ``file:`` URI), and a killed batch's
    driver runs with it as its current folder, so a relative path would point elsewhere."""
    workdir = Path(given).resolve() if given else Path(tempfile.mkdtemp(prefix="spark-purge-invariants-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def _take_saved_run(parser: argparse.ArgumentParser, args: argparse.Namespace, saved: Mapping[str, Any], flag: str) -> None:
    """A saved run's settings override the command line's; ``--cycles`` may only raise its target."""
    run = saved["run"]
    args.seed, args.nodes, args.fault_rate = run["seed"], run["nodes"], run["fault_rate"]
    args.faults = ",".join(run["kinds"])
    args.cycles = max(args.cycles or 0, saved["cycles"])
    if saved["next_cycle"] >= args.cycles:
        parser.error(f"{flag}: the saved run did all its {saved['cycles']} cycles; ask for more with --cycles")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_purge.testing.invariants", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, help="cycles in all (default 200; resumed: the saved run's, or more)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--fault-rate", type=float, default=0.35, help="probability of a fault per cycle")
    parser.add_argument(
        "--workdir",
        help="audit, checkpoints, the cluster's data and the run's saved state (default: a temporary folder, removed "
        "with the cluster's data at the end)",
    )
    parser.add_argument(
        "--faults", default=",".join(DEFAULT_KINDS),
        help=f"comma-separated kinds to run, of {', '.join(ALL_KINDS)} (default: %(default)s)",
    )
    parser.add_argument("--progress-every", type=int, default=10, help="print a progress line every N cycles")
    parser.add_argument(
        "--minutes", type=float,
        help="stop between cycles after this many minutes (SIGTERM too): the state is saved in --workdir, "
        "and --resume goes on with it",
    )
    parser.add_argument(
        "--resume", action="store_true",
        help="go on with the run saved in --workdir (its seed, nodes, kinds and fault rate; the cluster restarts on its data)",
    )
    parser.add_argument(
        "--new-life", metavar="LIFE",
        help=f"go on with the run LIFE was saved by (a copy of a workdir's {LIFE_FILE}), on a fresh "
        "cluster in a new --workdir: its seed, kinds, fault rate, random draws and tallies go on; the cluster, topics, "
        "audit and oracle start anew (for a machine that keeps no files between sessions)",
    )
    args = parser.parse_args(argv)
    new_life: Optional[dict[str, Any]] = None
    if args.new_life:
        if args.resume:
            parser.error("--new-life and --resume exclude each other")
        try:
            new_life = load_life(Path(args.new_life))
        except (OSError, WorkloadError) as err:
            parser.error(f"--new-life: {err}")
        _take_saved_run(parser, args, new_life, "--new-life")
    if (args.resume or args.minutes is not None or new_life is not None) and not args.workdir:
        parser.error("--resume, --minutes and --new-life need --workdir (where the run's state and the cluster's data are kept)")
    if args.resume:
        try:
            saved = load_state(Path(args.workdir))
        except WorkloadError as err:
            parser.error(f"--resume: {err}")
        _take_saved_run(parser, args, saved, "--resume")
    elif args.workdir and (Path(args.workdir) / STATE_FILE).exists():
        parser.error(f"--workdir {args.workdir} holds a saved run: --resume it, or choose another folder")
    args.cycles = 200 if args.cycles is None else args.cycles
    if args.cycles < 1 or not 0 <= args.fault_rate <= 1:
        parser.error("--cycles must be >= 1 and --fault-rate within [0, 1]")
    try:
        kinds = parse_kinds(args.faults)
    except ValueError as err:
        parser.error(f"--faults: {err}")
    refusal = spark_stream_refusal() if "spark_stream" in kinds else None
    if refusal:
        parser.error(refusal)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # node kills are expected here

    from spark_purge.session import get_spark

    workdir = checker_workdir(args.workdir)
    spark = get_spark(
        "spark-purge-invariants", master="local[2]", conf={"spark.sql.shuffle.partitions": "1"}, extra=workload.spark_kafka_jars()
    )
    spark.sparkContext.setLogLevel("ERROR")
    broker_config = {"auto.leader.rebalance.enable": "false", **(EXPIRY_BROKER_CONFIG if "group_expiry" in kinds else {})}
    # With --workdir the cluster keeps its data there, for a resumed run (new ports, same logs).
    kafka_dir = workdir / "kafka" if args.workdir else None
    with LocalKafka(nodes=args.nodes, broker_config=broker_config, tiered="tiering_disable" in kinds, workdir=kafka_dir) as cluster:
        print(f"cluster {cluster.bootstrap_servers} ({args.nodes} node(s)); workdir {workdir}", flush=True)
        checker = InvariantWorkload(
            spark, cluster, seed=args.seed, workdir=workdir, fault_rate=args.fault_rate, kinds=kinds,
            out=lambda s: print(s, flush=True), progress_every=args.progress_every,
        )
        previous = signal.signal(signal.SIGTERM, lambda *_: checker.request_stop())
        try:
            report = checker.run(args.cycles, resume=args.resume, minutes=args.minutes, new_life=new_life)
        finally:
            signal.signal(signal.SIGTERM, previous)
    spark.stop()
    print(report.summary(), flush=True)
    return 0 if not report.violations else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
