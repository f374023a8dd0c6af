"""Purger leases: one job at a time acts for a purger id; an older generation is fenced.

A job acquires the lease of its ``lease.purger_id`` before its first batch: generation + 1, a
holder identity (``user@host pid=N``, the pipeline's run id, the config fingerprint) and an
expiry (``lease.ttl``). Right before every DeleteRecords the lease is confirmed (``confirm``):
renewed once a third of the TTL has passed since the last renewal, otherwise read back (no
write: at least two thirds of the TTL remain); at the start of a batch it is renewed on the same
rule (``keep``: an idle stream keeps its lease without two Delta commits per batch). A job
that finds the lease held and unexpired waits for it to expire (at most ``lease.wait``), then
takes it over; the holder's next confirmation finds a newer generation and raises
``FencedError``: it sends no DeleteRecords.

**Store.** A Delta table beside the audit (``<audit.path>_leases``, ``schemas.LEASES``),
appended to: one row per acquisition, renewal and release. Every ``TIDY_EVERY``-th commit marks
it due for a tidy, which the holder runs at the start of its next batch (``keep``) or right after
an acquisition: its purger's superseded rows are deleted (``superseded``: older renewals, and
the rows of generations ``KEEP_GENERATIONS`` back) and the small files compacted, so the table
stays small however long a job runs. Every write is a compare-and-set
through Delta's idempotent-write ids: app id ``lease:<purger id>``, version
``generation * 2**32 + n`` (``txn_version``; ``n`` counts the holder's writes). Delta skips a
write whose version is not above the table's latest for that app id, and fails one racing
another write with that app id (``ConcurrentTransactionException``, retried), so after each
write the holder reads the newest row back: its own, or ``FencedError``. A read lists the
table's Delta log first (``deltalog.table_state``, no Spark job) and reads rows only when the
version (or the table itself) changed since this process last read it. Its own write needs no
read either: when the table's newest commit file carries that write's own mark (a token in its
user metadata) and txn, Delta accepted it above every other row of the purger id, so that row
is the newest. (The txn alone would not do: two jobs racing for one generation write the same
txn version, and Delta skips the second.)

**Audit fence.** The audit table carries the same app id: a new generation's first audit
commit is a ``lease`` row at version ``generation * 2**32``; every later audit write of the
holder takes the next version (``PurgerLease.audit_txn``). From the takeover's commit on, Delta
itself skips every audit write of an older generation (inside the commit: no window), and
``FencedAudit`` reads the lease after each outcome write, so a refused write raises
``FencedError`` instead of passing unnoticed.
"""
from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from spark_purge import txn_append
from spark_purge._time import Backoff, Deadline
from spark_purge.audit import AuditSink, absolute_location, retry_conflicts
from spark_purge.config import PurgeConfig, config_fingerprint, purger_id_of
from spark_purge.deltalog import table_state, with_own_properties
from spark_purge.errors import AuditError, ConfigError, FencedError
from spark_purge.fs import HadoopFiles, join
from spark_purge.schemas import LEASES

log = logging.getLogger(__name__)

GENERATION_BITS = 32  # a holder's writes per generation fit below this bit
# Every TIDY_EVERY-th commit of the lease table marks it due for a tidy, which the holder runs at
# the start of its next batch: its purger's superseded rows deleted (``superseded``), the small
# files compacted. The table otherwise grows by a row and a file per renewal (one every third of
# ``lease.ttl``: 4,320 a day at the default 60 s), and every lease write's txn check reads them all.
TIDY_EVERY = 500
KEEP_GENERATIONS = 20  # a tidy keeps every row of the newest generations but their older renewals


def txn_version(generation: int, n: int) -> int:
    """The Delta txnVersion of a holder's ``n``-th write in ``generation``: every write of a
    newer generation sorts above every write of an older one."""
    return (generation << GENERATION_BITS) + n


S3_SCHEMES = ("s3", "s3a", "s3n")
# Delta's log store for S3 that serializes commits across drivers (through a DynamoDB table).
SERIALIZING_S3_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"


def _spark_conf(spark: SparkSession) -> Callable[[str], str | None]:
    return lambda key: spark.conf.get(key, None)


def check_log_store(
    path: str, conf: Callable[[str], str | None], key: str = "lease.path", environ: Mapping[str, str] = os.environ
) -> None:
    """``ConfigError`` when the lease table ``path`` is on S3 with a Delta log store that
    serializes commits within one driver only (Delta's default there).

    The lease is a compare-and-set on Delta's commit protocol: two jobs writing the same next
    version must not both succeed. On S3 that holds across drivers only with
    ``S3DynamoDBLogStore`` (``spark.delta.logStore.<scheme>.impl``, or
    ``spark.delta.logStore.class``); Databricks serializes S3 commits itself (within a
    workspace). ``conf`` reads a Spark setting (None: unset); ``key`` names the setting at fault."""
    scheme = path.split("://", 1)[0].lower() if "://" in path else ""
    if scheme not in S3_SCHEMES or environ.get("DATABRICKS_RUNTIME_VERSION"):
        return
    chosen = [conf(f"spark.delta.logStore.{scheme}.impl"), conf("spark.delta.logStore.class")]
    if any(v is not None and v.strip() == SERIALIZING_S3_LOG_STORE for v in chosen):
        return
    raise ConfigError(
        f"{key}: the lease table {path} is on S3, where Delta's log store serializes commits within one "
        "driver only: two purge jobs on different drivers could both take the lease. Set "
        f"spark.delta.logStore.{scheme}.impl={SERIALIZING_S3_LOG_STORE} (Delta's multi-cluster S3 setup, with its "
        "DynamoDB table), or set lease.enabled: false if only one purge job ever runs for this purger id"
    )


def lease_app_id(purger_id: str) -> str:
    """The Delta txnAppId shared by the lease table and the audit's fenced writes."""
    return f"lease:{purger_id}"


def user_at_host() -> str:
    """user@host of this process, as far as the OS says."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    try:
        return f"{user}@{socket.gethostname()}"
    except OSError:
        return user


def holder_identity() -> str:
    return f"{user_at_host()} pid={os.getpid()}"


def delete_window_ms(ttl_ms: int) -> int:
    """How long after its confirmation (``PurgerLease.confirm``) a lease is still certainly this
    job's: two thirds of ``ttl`` (it is renewed once a third has passed). DeleteRecords, resends
    included, gets no longer than this (``PurgePipeline.delete_timeout_ms``)."""
    return ttl_ms * 2 // 3


@dataclass(frozen=True)
class LeaseState:
    """One row of the lease table (``schemas.LEASES``)."""

    purger_id: str
    generation: int
    run_id: str
    holder: str
    config_fingerprint: str
    event: str  # schemas.LEASE_EVENTS
    at: datetime
    expires_at: datetime
    version: int

    def live(self, now: datetime) -> bool:
        """Held by its run at ``now`` (not released, not expired)."""
        return self.event != "released" and self.expires_at > now

    def describe(self) -> str:
        until = "released" if self.event == "released" else f"expires {self.expires_at.isoformat()}"
        return f"generation {self.generation} held by {self.holder} run {self.run_id} ({self.event} {self.at.isoformat()}, {until})"


def superseded(row: LeaseState, newest: LeaseState) -> bool:
    """Whether a tidy deletes ``row`` once ``newest`` (the holder's own, just confirmed) is the
    purger's newest row: an older row of the same purger that is a renewal, or of a generation
    ``KEEP_GENERATIONS`` or more before the newest one. The newest row, and any newer one (a
    takeover racing the tidy), is never superseded; the lease's compare-and-set lives in Delta's
    txn ids, not in the rows, so deleting old rows changes no fencing decision."""
    return (
        row.purger_id == newest.purger_id
        and row.version < newest.version
        and (row.event == "renewed" or row.generation <= newest.generation - KEEP_GENERATIONS)
    )


def _state(row: Row) -> LeaseState:
    values = row.asDict()
    for key in ("at", "expires_at"):
        values[key] = values[key].replace(tzinfo=timezone.utc) if values[key].tzinfo is None else values[key]
    return LeaseState(**values)


class LeaseStore(Protocol):
    """Where leases live (``LeaseTable``; a unit test may pass an in-memory fake)."""

    @property
    def path(self) -> str: ...

    def current(self, purger_id: str) -> LeaseState | None: ...

    def newest_of(self, purger_id: str, generation: int) -> LeaseState | None: ...

    def append(self, state: LeaseState) -> None: ...

    def tidy_due(self) -> bool: ...

    def tidy(self, newest: LeaseState) -> None: ...


_LEASE_TABLES_READY: set[str] = set()  # lease tables created in this process
_LEASE_TIDY_DUE: set[str] = set()  # lease tables one of this process's writes found due for a tidy
# (table path, purger id) -> ((table id, table version), the newest row at that version): a lease
# check reads the table only when its id or version moved (``deltalog.table_state``).
_LEASE_READS: dict[tuple[str, str], tuple[tuple[str, int], LeaseState | None]] = {}


@dataclass(frozen=True)
class LeaseTable:
    """The lease table: a Delta table, by default ``<audit.path>_leases``."""

    spark: SparkSession
    path: str

    @classmethod
    def of(cls, spark: SparkSession, config: PurgeConfig) -> LeaseTable:
        path = config.lease.path or absolute_location(config.audit.path).rstrip("/") + "_leases"
        return cls(spark, absolute_location(path))

    def exists(self) -> bool:
        # Through the filesystem, not DeltaTable.isDeltaTable: a session that looked before
        # another job created the table keeps a cached "no table" answer for it.
        return HadoopFiles(self.spark).exists(join(self.path, "_delta_log"))

    def current(self, purger_id: str) -> LeaseState | None:
        """The newest row of ``purger_id`` (highest version), or None: never leased.

        Read at the table's newest Delta version, and only when that version or the table's
        Delta id moved since the last read in this process (a version's content never changes)."""
        if not self.exists():
            return None
        state = table_state(self.spark, self.path)
        if state is not None and state[1] < 0:
            return None  # created, no commit yet
        key = (self.path, purger_id)
        known = _LEASE_READS.get(key)
        if state is not None and known is not None and known[0] == state:
            return known[1]
        reader = self.spark.read.format("delta")
        if state is not None:
            reader = reader.option("versionAsOf", state[1])
        try:
            newest = _newest_row(reader.load(self.path), F.col("purger_id") == purger_id)
        except AnalysisException as exc:
            # Another job is creating the table: its _delta_log exists, its first commit not yet.
            if "DELTA_TABLE_NOT_FOUND" in str(exc) or "DELTA_EMPTY_DIRECTORY" in str(exc):
                return None
            raise
        if state is not None:
            _LEASE_READS[key] = (state, newest)
        return newest

    def newest_of(self, purger_id: str, generation: int) -> LeaseState | None:
        """The newest row of ``purger_id``'s ``generation`` at the table's newest version (one
        read; only after a takeover)."""
        if not self.exists():
            return None
        lease_rows = self.spark.read.format("delta").load(self.path)
        return _newest_row(lease_rows, (F.col("purger_id") == purger_id) & (F.col("generation") == generation))

    def append(self, state: LeaseState) -> None:
        """Write ``state`` under txn (``lease:<purger id>``, ``state.version``): Delta skips it
        when a higher version is recorded (read the newest row back to know who won)."""
        from delta.tables import DeltaTable

        row = tuple(getattr(state, f.name) for f in LEASES.fields)
        # This very write's mark in its commit (commitInfo.userMetadata): the txn alone does not
        # tell it from another job's write of the same generation and n (an acquisition race).
        token = f"lease {state.event} {state.run_id} {uuid.uuid4().hex}"

        def write() -> None:
            if self.path not in _LEASE_TABLES_READY:
                with_own_properties(DeltaTable.createIfNotExists(self.spark)).location(self.path).addColumns(LEASES).execute()
                _LEASE_TABLES_READY.add(self.path)
            df = txn_append.DriverRows([row], LEASES)
            txn_append.append(self.spark, self.path, df, lease_app_id(state.purger_id), state.version, token)
            self._remember_own(state, token)

        try:
            retry_conflicts(f"lease {state.event} of {state.purger_id} generation {state.generation}", write)
        except AuditError:
            raise
        except Exception as exc:  # Py4J errors carry the JVM message
            raise AuditError(f"cannot write the lease table at {self.path}: {exc}") from exc

    def _remember_own(self, state: LeaseState, token: str) -> None:
        """After a write of ``state``: when the newest commit is that very write (its commit
        file carries the write's ``token`` as its user metadata, and the txn ``lease:<purger
        id>`` / ``state.version``), ``state`` is the purger's newest row at that version (Delta
        took it because no row of the purger id had a version as high), so ``current`` answers
        it without reading the table. Otherwise (the write was skipped, another commit came
        after, the log cannot be read) nothing is remembered, and the next check reads."""
        found = table_state(self.spark, self.path)
        if found is None or found[1] < 0:
            return
        try:
            text = HadoopFiles(self.spark).read_text(join(join(self.path, "_delta_log"), f"{found[1]:020d}.json"))
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        except Exception as exc:  # Py4J errors, a log not in this layout: read the table instead
            log.debug("lease table %s: commit %d not read (%s); the next check reads the table", self.path, found[1], exc)
            return
        own = {"appId": lease_app_id(state.purger_id), "version": state.version}
        ours = any((a.get("commitInfo") or {}).get("userMetadata") == token for a in actions)
        if ours and any({k: (a.get("txn") or {}).get(k) for k in own} == own for a in actions):
            _LEASE_READS[(self.path, state.purger_id)] = (found, state)
            if found[1] > 0 and found[1] % TIDY_EVERY == 0:
                _LEASE_TIDY_DUE.add(self.path)

    def tidy_due(self) -> bool:
        """One of this process's writes landed on a multiple of ``TIDY_EVERY`` (see ``tidy``)."""
        return self.path in _LEASE_TIDY_DUE

    def tidy(self, newest: LeaseState) -> None:
        """Delete the rows ``newest`` supersedes (``superseded``), then compact the table's small
        files. Maintenance only: a failure (a conflicting commit retried to the end, say) is
        logged, and the next due write tries again."""
        from delta.tables import DeltaTable

        _LEASE_TIDY_DUE.discard(self.path)
        old = (F.col("purger_id") == newest.purger_id) & (F.col("version") < newest.version)
        doomed = old & ((F.col("event") == "renewed") | (F.col("generation") <= newest.generation - KEEP_GENERATIONS))
        started = time.monotonic()
        try:
            table = DeltaTable.forPath(self.spark, self.path)
            retry_conflicts(f"tidying the lease table of {newest.purger_id}", lambda: table.delete(doomed))
            table.optimize().executeCompaction()
        except Exception as exc:  # AuditError after the retries, Py4J errors
            log.warning("lease table %s: tidying failed (%s); the next due write tries again", self.path, exc)
            return
        log.info("lease table %s: superseded rows of %s deleted, files compacted (%.1fs)", self.path, newest.purger_id, time.monotonic() - started)


def _newest_row(lease_rows: DataFrame, which: Column) -> LeaseState | None:
    """The row of ``lease_rows`` matching ``which`` with the highest version (None: none)."""
    rows = lease_rows.where(which).orderBy(F.col("version").desc()).limit(1).collect()
    return _state(rows[0]) if rows else None


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class PurgerLease:
    """One job's lease on ``purger_id`` (see the module docstring)."""

    table: LeaseStore
    purger_id: str
    run_id: str
    config_fingerprint: str
    ttl_ms: int
    wait_ms: int
    holder: str = field(default_factory=holder_identity)
    clock: Callable[[], datetime] = _utcnow
    sleep: Callable[[float], None] = time.sleep
    generation: int | None = None
    taken_over: LeaseState | None = None  # the live-or-expired lease this one superseded
    _writes: int = 0
    _audit_writes: int = 0
    _renewed_at: datetime | None = None  # this holder's last acquisition or renewal (its clock)
    waited_s: float = 0.0  # how long the last ``acquire`` slept (for a live lease, a lost race, ``_outlast``)

    @classmethod
    def of(cls, spark: SparkSession, config: PurgeConfig, run_id: str) -> PurgerLease:
        """The lease of ``config``'s purger id, in its table; ``ConfigError`` when the table is
        where Delta cannot make its compare-and-set hold across drivers (``check_log_store``)."""
        lease = config.lease
        table = LeaseTable.of(spark, config)
        check_log_store(table.path, _spark_conf(spark), "lease.path" if lease.path else "audit.path (the lease table beside it)")
        return cls(table, purger_id_of(config), run_id, config_fingerprint(config), lease.ttl, lease.wait)

    @property
    def held(self) -> bool:
        return self.generation is not None

    def _row(self, generation: int, event: str, n: int) -> LeaseState:
        now = self.clock()
        expires = now if event == "released" else now + timedelta(milliseconds=self.ttl_ms)
        return LeaseState(
            self.purger_id, generation, self.run_id, self.holder, self.config_fingerprint, event, now, expires, txn_version(generation, n)
        )

    def acquire(self) -> LeaseState:
        """Take the lease: generation + 1 once the current one is released or expired (waiting
        up to ``wait_ms`` for that); ``FencedError`` when another holder keeps it longer."""
        deadline = Deadline(self.wait_ms / 1000, clock=lambda: self.clock().timestamp())  # the lease's own clock
        backoff = Backoff(first=0.2, cap=2.0)
        self.waited_s = 0.0
        return self._acquire(deadline, backoff)

    def _nap(self, seconds: float) -> None:
        """``sleep``, counted in ``waited_s``."""
        self.waited_s += seconds
        self.sleep(seconds)

    def _acquire(self, deadline: Deadline, backoff: Backoff) -> LeaseState:
        while True:
            current = self.table.current(self.purger_id)
            now = self.clock()
            if current is None or not current.live(now) or current.run_id == self.run_id:
                generation = (current.generation if current is not None else 0) + 1
                event = "acquired" if current is None or current.event == "released" or current.run_id == self.run_id else "takeover"
                self.table.append(self._row(generation, event, 0))
                won = self.table.current(self.purger_id)
                if won is not None and won.generation == generation and won.run_id == self.run_id:
                    self.generation, self._writes, self._audit_writes = generation, 0, 0
                    self._renewed_at = won.at
                    self.taken_over = current if event == "takeover" else None
                    log.log(
                        logging.WARNING if event == "takeover" else logging.INFO,
                        "lease %s: %s generation %d (%s)%s", self.purger_id, event, generation, self.holder,
                        f"; took over from the expired {current.describe()}" if event == "takeover" and current else "",
                    )
                    if event == "takeover" and current is not None:
                        won = self._outlast(current, won)  # before a tidy deletes that generation's rows
                    if self.table.tidy_due():
                        self.table.tidy(won)
                    return won
                self._nap(backoff.next())  # another job won this generation: look again
                continue
            if deadline.expired():
                raise FencedError(
                    f"lease.purger_id {self.purger_id}: {current.describe()}; still held after waiting lease.wait "
                    f"({self.wait_ms} ms): another purge job is acting for this purger id"
                )
            pause = min((current.expires_at - now).total_seconds() + 0.05, deadline.remaining())
            log.info("lease %s: %s; waiting %.1fs", self.purger_id, current.describe(), pause)
            self._nap(max(pause, 0.01))

    def _outlast(self, seen: LeaseState, won: LeaseState) -> LeaseState:
        """After taking over ``seen`` (read expired): when its holder's renewal landed between
        that read and this job's write, the holder's checks passed on it, and it may act until
        that renewal expires; wait until then (renewing this lease meanwhile). A renewal landing
        after this job's write is refused (a lower txn version), and its holder is fenced."""
        newest = self.table.newest_of(self.purger_id, seen.generation)
        if newest is None or newest.version <= seen.version:
            return won
        log.warning(
            "lease %s: generation %d was renewed after this job read it expired (%s); waiting until that renewal expires at %s",
            self.purger_id, seen.generation, newest.describe(), newest.expires_at.isoformat(),
        )
        state = won
        while (left := (newest.expires_at - self.clock()).total_seconds()) > 0:
            self._nap(min(left, self.ttl_ms / 3000))
            state = self.renew("while the generation taken over may still act")
        return state

    def _generation(self, why: str) -> int:
        if self.generation is None:
            raise FencedError(f"lease.purger_id {self.purger_id}: no lease held {why}")
        return self.generation

    def renew(self, why: str) -> LeaseState:
        """Extend the lease by ``ttl`` (a compare-and-set write); ``FencedError`` when a newer
        generation holds it (the write was refused)."""
        generation = self._generation(why)
        self._writes += 1
        row = self._row(generation, "renewed", self._writes)
        self.table.append(row)
        state = self.check(why)
        self._renewed_at = row.at
        return state

    def keep(self, why: str) -> int:
        """The generation held, renewed (``renew``) once a third of ``ttl`` has passed since
        the last renewal; ``FencedError`` when not held. Not a fence: what must not run under a
        lost lease (DeleteRecords) confirms it right before (``confirm``)."""
        generation = self._generation(why)
        if self._renewal_due():
            generation = self.renew(why).generation
        if self.table.tidy_due():  # at a batch's start, never right before DeleteRecords
            self.table.tidy(self.check(f"before tidying the lease table {why}"))
        return generation

    def _renewal_due(self) -> bool:
        """A third of ``ttl`` has passed since this holder's last acquisition or renewal."""
        last = self._renewed_at
        return last is None or (self.clock() - last) >= timedelta(milliseconds=self.ttl_ms / 3)

    def confirm(self, why: str) -> LeaseState:
        """The lease confirmed for what must not run under a lost lease (DeleteRecords): renewed
        (``renew``) once a third of ``ttl`` has passed since the last renewal, otherwise checked
        (``check``: a read, answered from the last one while the table's Delta version has not
        moved). Either way it was this job's a moment ago and at least two thirds of ``ttl``
        remain before anyone may take it over; ``FencedError`` when it was superseded."""
        self._generation(why)
        return self.renew(why) if self._renewal_due() else self.check(why)

    def check(self, why: str) -> LeaseState:
        """The newest lease row, which must be this job's; else ``FencedError`` naming the holder."""
        generation = self._generation(why)
        current = self.table.current(self.purger_id)
        if current is None or current.generation != generation or current.run_id != self.run_id or current.event == "released":
            now_held = current.describe() if current is not None else "no lease row"
            self.generation = None
            raise FencedError(
                f"lease.purger_id {self.purger_id}: this job's generation {generation} (run {self.run_id}) is fenced {why}: "
                f"now {now_held}; nothing more is deleted or audited by this job"
            )
        return current

    def audit_txn(self) -> tuple[str, int]:
        """(app id, version) for the holder's next audit write: above every older generation's."""
        generation = self._generation("before an audit write")
        self._audit_writes += 1
        return lease_app_id(self.purger_id), txn_version(generation, self._audit_writes)

    def fence_txn(self) -> tuple[str, int]:
        """(app id, version) of the generation's first audit commit (its ``lease`` row)."""
        return lease_app_id(self.purger_id), txn_version(self._generation("before the audit fence"), 0)

    def release(self) -> None:
        """End this job's lease (clean shutdown): the next job takes over at once. A fenced
        job's release is refused by Delta (an older version) and changes nothing."""
        if self.generation is None:
            return
        generation, self.generation = self.generation, None
        try:
            self.table.append(self._row(generation, "released", self._writes + 1))
            log.info("lease %s: generation %d released", self.purger_id, generation)
        except AuditError as exc:
            log.warning("lease %s: releasing generation %d failed (%s); it expires in %d ms", self.purger_id, generation, exc, self.ttl_ms)


def lease_status(table: LeaseStore, purger_id: str, now: datetime) -> str:
    """One line: the purger's lease as the table has it (``spark-purge lease``, under ``plan``)."""
    current = table.current(purger_id)
    if current is None:
        return f"purger {purger_id}: never leased ({table.path})"
    state = "released" if current.event == "released" else "live" if current.live(now) else "expired"
    return (
        f"purger {purger_id}: generation {current.generation} {state}; holder {current.holder} run {current.run_id}; "
        f"{current.event} at {current.at.isoformat()}; expires {current.expires_at.isoformat()}; config {current.config_fingerprint[:12]}"
    )


def release_current(table: LeaseStore, purger_id: str, clock: Callable[[], datetime] = _utcnow) -> LeaseState | None:
    """An operator's release (``spark-purge lease --release``): a ``released`` row at the
    current generation's last version, so the next job takes over at once and the holder, if
    it still runs, is fenced at its next renewal (refused by Delta: a lower version). Returns
    the lease released, or None when none was live."""
    current = table.current(purger_id)
    now = clock()
    if current is None or not current.live(now):
        return None
    last = txn_version(current.generation, (1 << GENERATION_BITS) - 1)
    table.append(LeaseState(purger_id, current.generation, current.run_id, user_at_host(), current.config_fingerprint, "released", now, now, last))
    log.warning("lease %s: %s released by %s", purger_id, current.describe(), user_at_host())
    return current


@dataclass
class FencedAudit:
    """The audit as a lease holder writes it: every write under the lease's txn ids, so Delta
    skips it once a newer generation wrote; each outcome (and lease) write is followed by a
    lease check, so a skipped write raises ``FencedError``. (Intent writes are checked by the
    confirmation right before DeleteRecords.)"""

    sink: AuditSink
    lease: PurgerLease

    def ensure_table(self) -> None:
        self.sink.ensure_table()

    def write(self, rows: Sequence[Row] | pa.Table, kind: str, batch_id: int) -> bool:
        wrote = self.sink.write(rows, kind, batch_id, txn=self.lease.audit_txn())
        if wrote and kind != "intent":
            self.lease.check(f"after its audit {kind} write for batch {batch_id} (an older generation's write is refused)")
        return wrote


__all__ = [
    "FencedAudit",
    "LeaseState",
    "LeaseStore",
    "LeaseTable",
    "PurgerLease",
    "check_log_store",
    "delete_window_ms",
    "holder_identity",
    "lease_app_id",
    "lease_status",
    "release_current",
    "txn_version",
    "user_at_host",
]
