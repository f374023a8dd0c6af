"""The newest version of a Delta table without a Spark job, and its state computed ahead of a write.

A Delta table at a version never changes, so a small table read again and again (the lease
table, read at every lease check) needs reading only when its version moved. Delta's own log
(``DeltaLog.update``) finds the newest version by listing the ``_delta_log`` from the last
checkpoint on: milliseconds, no Spark job, where a read of the table takes a snapshot and a job
or two (about 0.5 s locally).

This goes through Delta's JVM ``DeltaLog``, which is not a public API: when the installed Delta
lacks it, ``table_version`` answers None and callers read the table every time.

**Warming** (``warm``). A write with ``txnAppId`` (the audit's intents and outcomes, a lease
renewal, a retirement event) asks the table's newest snapshot for its set transactions, and
Delta 4.4 reconstructs the snapshot's whole state for that (three Spark jobs, about 0.6 s
locally), although the version's checksum file holds the same set. ``warm`` computes that state
in a background thread right after a commit, while the batch does other work (DeleteRecords,
the next batch's snapshot and plan): the next write then finds it ready and takes one job.
Warming only reads. The write still asks its own snapshot at commit time, so a commit by another
writer in between is seen as before (the warmed state is then simply not used).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_UNSUPPORTED: list[str] = []  # the reason, once DeltaLog could not be used in this process

# Warming: one daemon thread (one Py4J connection) takes paths in the order they were committed to.
_WARM = threading.Condition()
_PENDING: dict[str, SparkSession] = {}  # path -> the session that committed to it
_BUSY: list[str] = []  # the path being warmed now
_WORKER: list[threading.Thread] = []


def _newest_snapshot(spark: SparkSession, path: str) -> Any:
    jvm: Any = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    # update(stalenessAcceptable=false, checkIfUpdatedSinceTs=None, catalogTable=None)
    return delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())


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
    try:
        snapshot = _newest_snapshot(spark, path)
        version = int(snapshot.version())
        return ("" if version < 0 else str(snapshot.metadata().id())), version
    except Exception as exc:  # a Delta without this signature: read the table instead
        _UNSUPPORTED.append(str(exc))
        log.warning("cannot read Delta table versions through DeltaLog (%s): small tables are read at every use", exc)
        return None


def warm(spark: SparkSession, path: str) -> None:
    """Have the state of the newest snapshot of the Delta table at ``path`` computed in the
    background (see the module's docstring); returns at once. A path asked for again while it
    is being warmed is warmed once more after, for its newer version."""
    if _UNSUPPORTED:
        return
    with _WARM:
        _PENDING[path] = spark
        if not _WORKER or not _WORKER[0].is_alive():
            _WORKER[:] = [threading.Thread(target=_warm_worker, name="spark-purge delta warm", daemon=True)]
            _WORKER[0].start()
        _WARM.notify_all()


def _warm_worker() -> None:
    while True:
        with _WARM:
            _WARM.wait_for(lambda: bool(_PENDING))
            path = next(iter(_PENDING))
            spark = _PENDING.pop(path)
            _BUSY[:] = [path]
        try:
            snapshot = _newest_snapshot(spark, path)
            if int(snapshot.version()) >= 0:
                snapshot.setTransactions()  # the lazily reconstructed state a txn write reads
        except Exception as exc:  # only a head start: the write computes what it needs itself
            log.debug("warming the Delta state of %s failed: %s", path, exc)
        finally:
            with _WARM:
                _BUSY.clear()
                _WARM.notify_all()


def settle(timeout_s: float = 60.0) -> bool:
    """Wait until no warming is pending or running (a test counting Spark jobs, a caller
    about to stop Spark); False if some still was after ``timeout_s``."""
    with _WARM:
        return _WARM.wait_for(lambda: not _PENDING and not _BUSY, timeout_s)


__all__ = ["settle", "table_state", "table_version", "warm"]
