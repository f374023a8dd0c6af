"""The newest version of a Delta table, without a Spark job; a table's idempotent-write ids
worked out ahead of its next write.

A Delta table at a version never changes, so a small table read again and again (the lease
table, read at every lease check) needs reading only when its version moved. Delta's own log
(``DeltaLog.update``) finds the newest version by listing the ``_delta_log`` from the last
checkpoint on: milliseconds, no Spark job, where a read of the table takes a snapshot and a job
or two (about 0.5 s locally).

**Write ids ahead of time** (``warm_snapshot``). A Delta write with ``txnAppId``
/ ``txnVersion`` (every audit and lease write: exactly-once and fencing) first asks the table's
snapshot which version each app id last wrote (``Snapshot.transactions``). Delta 4.4.0 answers
that only from a full state reconstruction of the snapshot, a Spark job of its own, even though
the version's checksum file lists them: about 0.6 s of a 1.2 s 1000-row write locally
(``bench/delta_txn_bench.py``). It is computed once per snapshot and kept with it, and the
snapshot stays the table's current one until the next commit. So right after an audit or lease
commit of its own, the writer has it computed on a daemon thread: the next write finds it done,
or waits on the same computation (Delta locks the snapshot while it computes), never longer
than it would have. A commit by anyone else in between only means the next write computes it
itself, as before. Nothing is decided from it here: it is Delta's own check, done earlier.
``settle`` waits for the computations still running (before a session stops).

What it buys is latency where it matters, not CPU: the intent write sits between the plan and
DeleteRecords, and a lease renewal at the confirmation right before DeleteRecords, so the cut
goes out sooner after the snapshot it was planned on. The work itself is the same; on a
CPU-bound 2-core driver it moves to other phases (the README's figures).

This goes through Delta's JVM ``DeltaLog``, which is not a public API: when the installed Delta
lacks it, ``table_version`` answers None and callers read the table every time, and
``warm_snapshot`` does nothing.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_UNSUPPORTED: list[str] = []  # the reason, once DeltaLog could not be used in this process


def table_version(spark: SparkSession, path: str) -> int | None:
    """The newest committed version of the Delta table at ``path`` as of now (-1: no commit
    yet), or None when it cannot be known this way (then read the table)."""
    found = table_state(spark, path)
    return None if found is None else found[1]


def table_state(spark: SparkSession, path: str) -> tuple[str, int] | None:
    """(the table's id, its newest committed version) for the Delta table at ``path`` as of
    now, or None when it cannot be known this way (then read the table). The id (Delta's
    metadata id, from the version's checksum file) tells a table deleted and created again at
    the same path, whose versions start over, from the one read before. Version -1: no commit
    yet (the id is then empty)."""
    if _UNSUPPORTED:
        return None
    jvm: Any = spark.sparkContext._jvm
    try:
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
        # update(stalenessAcceptable=false, checkIfUpdatedSinceTs=None, catalogTable=None)
        snapshot = delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
        version = int(snapshot.version())
        return ("" if version < 0 else str(snapshot.metadata().id())), version
    except Exception as exc:  # a Delta without this signature: read the table instead
        _UNSUPPORTED.append(str(exc))
        log.warning("cannot read Delta table versions through DeltaLog (%s): small tables are read at every use", exc)
        return None


# The computations started and not yet seen finished (for ``settle``); guarded by _WARMING_LOCK.
_WARMING: set[threading.Thread] = set()
_WARMING_LOCK = threading.Lock()


def warm_snapshot(spark: SparkSession, path: str) -> threading.Thread | None:
    """Start working out, on a daemon thread, the idempotent-write ids (Delta's
    ``Snapshot.transactions``: a reconstruction of its state) of the current snapshot of the
    Delta table at ``path``, so that the table's next ``txnAppId`` write does not compute them
    itself (see the module docstring).
    Returns the thread (None when DeltaLog is unusable here). Two computations on one snapshot
    do the work once (the second waits on Delta's lock). Failures are logged at debug: the next
    write then computes them, as it always did."""
    if _UNSUPPORTED:
        return None
    thread = threading.Thread(target=_warm, args=(spark, path), name=f"delta-txn-warm {path}", daemon=True)
    with _WARMING_LOCK:
        for done in [t for t in _WARMING if not t.is_alive()]:
            _WARMING.discard(done)
        _WARMING.add(thread)
    thread.start()
    return thread


def _warm(spark: SparkSession, path: str) -> None:
    jvm: Any = spark.sparkContext._jvm
    try:
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
        delta_log.unsafeVolatileSnapshot().transactions()
    except Exception as exc:  # the session stopping, a table removed: the next write computes them
        log.debug("write ids of %s not computed ahead (%s)", path, exc)


def settle(timeout_s: float = 30.0) -> bool:
    """Wait for ``warm_snapshot`` computations still running (at most ``timeout_s`` in all),
    so that none is cut off by a session stopping. True when none is left running."""
    deadline = time.monotonic() + timeout_s
    with _WARMING_LOCK:
        threads = list(_WARMING)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


__all__ = ["settle", "table_state", "table_version", "warm_snapshot"]
