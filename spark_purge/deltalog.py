"""The newest version of a Delta table, without a Spark job.

A Delta table at a version never changes, so a small table read again and again (the lease
table, read at every lease check) needs reading only when its version moved. Delta's own log
(``DeltaLog.update``) finds the newest version by listing the ``_delta_log`` from the last
checkpoint on: milliseconds, no Spark job, where a read of the table takes a snapshot and a job
or two (about 0.5 s locally).

This goes through Delta's JVM ``DeltaLog``, which is not a public API: when the installed Delta
lacks it, ``table_version`` answers None and callers read the table every time. Any other
failure of a call (an I/O error, a thread interrupted by a streaming query's stop) answers None
for that call only: the next call tries again.
"""
from __future__ import annotations

import logging
import re
from typing import Any

from pyspark.sql import SparkSession

from spark_purge.py4j_calls import static

log = logging.getLogger(__name__)

_UNSUPPORTED: list[str] = []  # the reason, once this Delta turned out to lack the DeltaLog API used here
_FAILED_CALLS = [0]  # calls that failed for another reason in this process (each answered None)

# What a JVM without the class or method called raises (Py4J's own message, or the Java error
# a call with a changed signature throws): the API is missing, not the call unlucky.
_MISSING_API = re.compile(
    r"does not exist in the JVM|Method \w+\(.*\) does not exist|NoSuchMethodError|NoSuchMethodException|ClassNotFoundException|NoClassDefFoundError"
)


# Delta writes a checkpoint of a table every ``delta.checkpointInterval`` commits (10 unless
# set), inside the commit that reaches it: its state is reconstructed and written as Parquet,
# two or three Spark jobs, 1-8 s here. The audit table takes two or three commits a batch, the
# progress store one, so a purge paid one every four or five batches. Every 100 commits instead
# (``bench/delta_checkpoint_bench.py``: 0.29 s a write less on average); a fresh read of the
# table replays at most 99 small JSON commits after the last checkpoint, no slower here than 9.
CHECKPOINT_INTERVAL = 100
OWN_TABLE_PROPERTIES = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}


def with_own_properties(builder: Any) -> Any:
    """A ``DeltaTableBuilder`` creating one of the purge's own often-written tables, given
    ``OWN_TABLE_PROPERTIES`` (they apply when it creates the table; an existing table keeps
    its own, see the README's audit-table section)."""
    for key, value in OWN_TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    return builder


def table_version(spark: SparkSession, path: str) -> int | None:
    """The newest committed version of the Delta table at ``path`` as of now (-1: no commit
    yet), or None when it cannot be known this way (then read the table)."""
    found = table_state(spark, path)
    return None if found is None else found[1]


def latest_snapshot(spark: SparkSession, path: str) -> Any:
    """The JVM snapshot of the Delta table at ``path`` at its newest commit (its log read again);
    raises what the JVM raises (``missing_api`` tells a Delta without this API)."""
    jvm: Any = spark.sparkContext._jvm
    delta_log = static(jvm, "org.apache.spark.sql.delta.DeltaLog", "forTable")(spark._jsparkSession, path)
    # update(stalenessAcceptable=false, checkIfUpdatedSinceTs=None, catalogTable=None)
    none = static(jvm, "scala.Option", "empty")()
    return delta_log.update(False, none, none)


def table_state(spark: SparkSession, path: str) -> tuple[str, int] | None:
    """(the table's id, its newest committed version) for the Delta table at ``path`` as of
    now, or None when it cannot be known this way (then read the table). The id (Delta's
    metadata id, from the version's checksum file) tells a table deleted and created again at
    the same path, whose versions start over, from the one read before. Version -1: no commit
    yet (the id is then empty)."""
    if _UNSUPPORTED:
        return None
    try:
        snapshot = latest_snapshot(spark, path)
        version = int(snapshot.version())
        return ("" if version < 0 else str(snapshot.metadata().id())), version
    except Exception as exc:
        if not missing_api(exc):  # this call failed, not the API: the caller reads the table this time
            _FAILED_CALLS[0] += 1
            log.debug("cannot read the Delta version of %s this time (%s): the table is read", path, exc)
            return None
        _UNSUPPORTED.append(str(exc))
        log.warning("cannot read Delta table versions through DeltaLog (%s): small tables are read at every use", exc)
        return None


def failed_calls() -> int:
    """How many ``table_state`` calls of this process failed and answered None while the API
    was there (an I/O error, an interrupted thread): each made its caller read the table."""
    return _FAILED_CALLS[0]


def missing_api(exc: BaseException) -> bool:
    """Whether ``exc`` says the JVM lacks the Delta class or method called (a Delta without this
    API: give up for the process), rather than that one call failed (try again next time)."""
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, (AttributeError, TypeError)) or _MISSING_API.search(text) is not None


__all__ = ["CHECKPOINT_INTERVAL", "OWN_TABLE_PROPERTIES", "failed_calls", "latest_snapshot", "missing_api", "table_state", "table_version", "with_own_properties"]
