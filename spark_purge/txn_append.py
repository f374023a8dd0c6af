"""Delta appends kept exactly once by a txn id (``txnAppId`` / ``txnVersion``), without Delta
reconstructing the table's whole state to check the id.

Every audit, lease and retirement write carries a txn id: Delta skips the write when the table
already records that app id at that version or above (a replayed batch; a fenced lease
generation), and a write whose snapshot is overtaken by another commit of the same app id fails
with a conflict. Delta 4.4's writer answers "which version does this app id have" only from the
snapshot's reconstructed state (``Snapshot.transactions``): a Spark job of three stages over the
table's checkpoint and log, about 0.6-1 s of a 1-1.4 s write here, where a plain append takes
0.3-0.4 s. Delta also keeps the same answer in the version's checksum (``.crc``: its
``setTransactions``, written on every commit while the table has at most 100 app ids), which
the snapshot has already read.

``append`` makes the same commit as the writer, through Delta's own transaction: it starts a
transaction (the table's newest snapshot), reads the app id's version from that snapshot's
checksum, registers the app id as read by the transaction (so a commit of the same app id after
the snapshot makes this one fail with ``ConcurrentTransactionException``, as the writer's does),
skips when the version is recorded already, else writes the files and commits them with the
``SetTransaction`` action and the user metadata. Rows the driver holds (``DriverRows``) get
their files from the driver itself, with no Spark job (``_driver_files``, ``spark_purge.delta_files``),
where the table and the rows allow it; other data through Delta's ``writeFiles``. When any of that is not available it writes
through ``DataFrameWriter`` with the txn options, as before: no checksum, or one without the app
ids (more than 100 of them: Delta then leaves them out entirely, never a part of them; a test
checks that on the installed Delta), a schema not the table's (the writer merges schemas), a
table with no commit yet, a Delta release this was not checked on (``TESTED_DELTA``), or a Delta
without these classes (``deltalog.missing_api``). A write
that fails on the fast path for another reason than a conflict is written the writer's way too:
the same txn id makes that safe (a commit that did land is skipped).

This goes through Delta's JVM classes (``DeltaLog``, ``OptimisticTransaction``,
``SetTransaction``, ``DeltaOperations.Write``), which are not a public API; only for tables this
package creates (no identity or generated columns).
"""
from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_purge.delta_files import INDEXED_COLUMNS, DataFile, Unsupported, arrow_table, data_files
from spark_purge.deltalog import missing_api
from spark_purge.py4j_calls import jvm_class, static

log = logging.getLogger(__name__)

_UNSUPPORTED: list[str] = []  # why, once this Delta turned out to lack the classes used here
# The Delta releases whose internals this was checked against (``tests/integration/test_txn_append.py``:
# the checksum's ids, the conflict a registered id gives); any other goes the writer's way.
TESTED_DELTA = ("4.4.",)
# Writes of this process by the way they went (the tests and the benches read them).
COUNTS = {"fast": 0, "skipped": 0, "writer": 0}
# Direct commits whose files the driver wrote itself (``DriverRows``, ``delta_files``), a part of
# ``COUNTS["fast"]``; why the last ``DriverRows`` went through Spark's writer instead; and files
# made by the caller committed (``append_file``).
DRIVER_FILES = {"written": 0, "not": 0, "committed": 0}
_NOT_DRIVER_FILES: list[str] = []
# Called with the path right before a direct commit (tests: another writer's commit in between).
BEFORE_COMMIT: list[Callable[[str], None]] = []


def driver_rows(spark: SparkSession, rows: Iterable[Any] | pa.Table, schema: StructType) -> DataFrame:
    """Rows the driver holds (a batch's audit rows, a lease row: O(partitions) at most; Python
    rows or an Arrow table) as a DataFrame of one piece, so that a write of them is one task and
    one file. Spark would slice them into ``defaultParallelism`` pieces: two tasks here, where
    one writes 1,000 audit rows in about 0.2 s less (``bench/delta_txn_bench.py``), and half the
    files for the table to list and compact."""
    return spark.createDataFrame(rows if isinstance(rows, pa.Table) else list(rows), schema).coalesce(1)


@dataclass
class DriverRows:
    """Rows the driver holds for an ``append`` (as ``createDataFrame`` reads them: a tuple or a
    ``Row`` by position in ``schema``'s order, a dict by name; or an Arrow table of ``schema``'s
    columns, taken as it is): the direct path writes them as Parquet itself, with no
    Spark job (``spark_purge.delta_files``); any other way gets them as ``frame`` (one piece,
    ``driver_rows``), made once."""

    rows: Sequence[Any] | pa.Table
    schema: StructType
    _frame: DataFrame | None = field(default=None, repr=False)

    def frame(self, spark: SparkSession) -> DataFrame:
        if self._frame is None:
            self._frame = driver_rows(spark, self.rows, self.schema)
        return self._frame


def _frame(spark: SparkSession, data: DataFrame | DriverRows) -> DataFrame:
    return data.frame(spark) if isinstance(data, DriverRows) else data


def append(
    spark: SparkSession,
    path: str,
    df: DataFrame | DriverRows,
    app_id: str,
    version: int,
    user_metadata: str | None = None,
    merge_schema: bool = False,
) -> None:
    """Append ``df`` to the Delta table at ``path`` under txn (``app_id``, ``version``): nothing
    when the table records ``app_id`` at ``version`` or above (module docstring). Rows the driver
    holds (``DriverRows``) are written as files by the driver where it can. Conflicts raise
    Delta's exceptions (``delta.exceptions``) as the writer's do; the caller retries."""
    done = _fast(spark, path, df, app_id, version, user_metadata)
    if done is not None:
        COUNTS["fast" if done else "skipped"] += 1
        return
    COUNTS["writer"] += 1
    writer = _frame(spark, df).write.format("delta").mode("append")
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    writer = writer.option("txnAppId", app_id).option("txnVersion", str(version))
    if user_metadata is not None:
        writer = writer.option("userMetadata", user_metadata)
    writer.save(path)


def checksum_version(snapshot: Any, app_id: str) -> int | None:
    """The version ``app_id`` has in a Delta snapshot's checksum (-1: none recorded), or None when
    the checksum does not list the table's app ids (no checksum, or too many ids to list)."""
    checksum = snapshot.checksumOpt()
    if checksum.isEmpty():
        return None
    listed = checksum.get().setTransactions()
    if listed.isEmpty():
        return None
    found = -1
    ids = listed.get()
    for i in range(ids.size()):
        txn = ids.apply(i)
        if txn.appId() == app_id:
            found = max(found, int(txn.version()))
    return found


def _same_columns(table: StructType, data: StructType) -> bool:
    return [(f.name, f.dataType) for f in table.fields] == [(f.name, f.dataType) for f in data.fields]


def _same_names_and_types(table: StructType, data: StructType) -> bool:
    """``_same_columns`` in any order (a Parquet file's columns are read by name)."""
    return {f.name: f.dataType for f in table.fields} == {f.name: f.dataType for f in data.fields} and len(table.fields) == len(data.fields)


def _fast(spark: SparkSession, path: str, df: DataFrame | DriverRows, app_id: str, version: int, user_metadata: str | None) -> bool | None:
    """True: committed; False: skipped (recorded already); None: write it the writer's way."""
    with _direct(path, "txn append", "written through the DataFrame writer"):
        started = _start(spark, path)
        if started is None:
            return None
        jvm, none, txn = started
        snapshot = txn.snapshot()
        if int(snapshot.version()) < 0:
            return None
        recorded = checksum_version(snapshot, app_id)
        if recorded is None:
            return None
        metadata = _table_metadata(txn)
        schema = _metadata_schema(metadata)
        if not _same_columns(schema, df.schema):
            return None
        # What the writer's check does besides looking the id up: a commit of this app id after
        # the snapshot now fails this one (ConcurrentTransactionException).
        getattr(txn.readTxn(), "$plus$eq")(app_id)
        if recorded >= version:
            return False
        files = _driver_files(jvm, txn, df, schema, metadata) if isinstance(df, DriverRows) else None
        if files is None:
            files = txn.writeFiles(_frame(spark, df)._jdf)
        mark = jvm_class(jvm, "org.apache.spark.sql.delta.actions.SetTransaction")(app_id, version, jvm_class(jvm, "scala.Some")(int(time.time() * 1000)))
        metadata = jvm_class(jvm, "scala.Some")(user_metadata) if user_metadata is not None else none
        _commit(jvm, txn, path, getattr(files, "$colon$plus")(mark), "Append", metadata)
        return True
    return None


# Tables a driver-written file is checked against: Delta's writer versions 1-2 (append-only,
# NOT NULL columns, SQL invariants). A later version's features (CHECK constraints, generated
# or identity columns, column mapping, deletion vectors, row tracking, ...) each change what a
# file or its add action must carry, so such a table gets its files from Spark's writer.
DRIVER_FILES_WRITER_VERSION = 2


def append_file(spark: SparkSession, path: str, body: bytes, rows: int, schema: StructType) -> bool | None:
    """Commit one Parquet file made by the caller (``body``: ``rows`` rows of ``schema``'s
    columns, none null where ``schema`` says not nullable) to the Delta table at ``path`` as a
    plain append (no txn id): True when committed; None when it cannot go this way, and the
    caller writes the rows through Delta's writer: the table's columns are not ``schema``'s (by
    name and type, in any order), it keeps a column not null that ``schema`` lets be null, it is
    partitioned, its files carry per-column statistics (``delta.dataSkippingNumIndexedCols`` not
    0: only the row count is known here), a writer feature past ``DRIVER_FILES_WRITER_VERSION``,
    or the direct path not available. Conflicts raise Delta's exceptions, as the writer's do.
    The progress log's changed positions, written by the store match's task (issue 12)."""
    with _direct(path, "file append", "written through the DataFrame writer"):
        started = _start(spark, path)
        if started is None:
            return None
        jvm, none, txn = started
        if int(txn.snapshot().version()) < 0:
            return None
        metadata = _table_metadata(txn)
        table = _metadata_schema(metadata)
        if not _same_names_and_types(table, schema) or not _fits(txn, path, table, schema, metadata):
            return None
        _commit(jvm, txn, path, _written(jvm, txn, [_made_file(body, rows)]), "Append", none)
        DRIVER_FILES["committed"] += 1
        return True
    return None


def _fits(txn: Any, path: str, table: StructType, schema: StructType, metadata: dict[str, Any]) -> bool:
    """Whether files of ``schema``'s columns, made by the caller with their row counts only, fit
    the table (of ``table``'s columns; ``append_file``)."""
    if any(not f.nullable and schema[f.name].nullable for f in table.fields):
        return False
    try:
        indexed, partition_columns = _driver_files_settings(txn, table, metadata)
    except Unsupported as why:
        log.debug("files made for %s not committed directly (%s)", path, why)
        return False
    return not partition_columns and indexed == 0


def _made_file(body: bytes, rows: int) -> DataFile:
    """A file the caller made, at the table's top (no partitions), with its row count as its statistics."""
    return DataFile(f"part-00000-{uuid.uuid4()}.c000.snappy.parquet", {}, body, json.dumps({"numRecords": int(rows)}, separators=(",", ":")))


def _driver_files(jvm: Any, txn: Any, rows: DriverRows, schema: StructType, metadata: dict[str, Any]) -> Any | None:
    """``rows`` written as Parquet by the driver into the transaction's table (of ``schema``, its
    ``metadata`` as ``_table_metadata`` reads it) and returned as
    Delta add actions (a Scala ``Seq``), or None when they cannot be (``delta_files.Unsupported``;
    said once a process, then at debug): the caller writes them through Spark."""
    try:
        files = _driver_data_files(txn, rows, schema, metadata)
    except Unsupported as why:
        DRIVER_FILES["not"] += 1
        (log.debug if _NOT_DRIVER_FILES else log.info)("rows not written by the driver (%s): Spark's writer writes them", why)
        _NOT_DRIVER_FILES[:] = [str(why)]
        return None
    finally:
        # The rows' Arrow tables are gone: give their memory back rather than keep it in Arrow's
        # allocator (mimalloc keeps about 20 MB after a 10,000-row write, 6 MB once released).
        pa.default_memory_pool().release_unused()
    actions = _written(jvm, txn, files)
    DRIVER_FILES["written"] += 1
    return actions


def _written(jvm: Any, txn: Any, files: Sequence[DataFile]) -> Any:
    """``files`` written into the transaction's table through Hadoop's FileSystem (a file there
    already is an error), as Delta add actions (a Scala ``Seq``)."""
    log_ = txn.deltaLog()
    base = log_.dataPath()
    fs = base.getFileSystem(log_.newDeltaHadoopConf())
    written_ms = int(time.time() * 1000)
    actions = jvm_class(jvm, "java.util.ArrayList")()
    parse = _action_parser(jvm)
    for file in files:
        out = fs.create(jvm_class(jvm, "org.apache.hadoop.fs.Path")(base, file.path), False)
        try:
            out.write(bytearray(file.body))
        finally:
            out.close()
        actions.add(parse.fromJson(file.add_action(written_ms)))
    return static(jvm, "scala.jdk.javaapi.CollectionConverters", "asScala")(actions).toSeq()


def _driver_data_files(txn: Any, rows: DriverRows, schema: StructType, metadata: dict[str, Any]) -> list[DataFile]:
    indexed, partition_columns = _driver_files_settings(txn, schema, metadata)
    return data_files(arrow_table(rows.rows, schema), schema, partition_columns, indexed)


def _driver_files_settings(txn: Any, schema: StructType, metadata: dict[str, Any]) -> tuple[int, list[str]]:
    """How many leading columns a file's statistics cover, and the partition columns, of a table
    the driver may write files for (``Unsupported``: one it may not)."""
    protocol = txn.protocol()
    if int(protocol.minWriterVersion()) > DRIVER_FILES_WRITER_VERSION:
        raise Unsupported(f"the table's Delta writer version is {protocol.minWriterVersion()} (above {DRIVER_FILES_WRITER_VERSION})")
    if any("delta.invariants" in f.metadata for f in schema.fields):
        raise Unsupported("the table has SQL invariants")
    config = metadata.get("configuration") or {}
    if "delta.dataSkippingStatsColumns" in config:
        raise Unsupported("the table names its statistics columns (delta.dataSkippingStatsColumns)")
    try:
        indexed = int(config.get("delta.dataSkippingNumIndexedCols", INDEXED_COLUMNS))
    except ValueError as exc:
        raise Unsupported(f"delta.dataSkippingNumIndexedCols: {exc}") from exc
    return indexed, [str(c) for c in metadata.get("partitionColumns") or []]


def rewrite(spark: SparkSession, path: str, df: DataFrame, version: int) -> int | None:
    """Replace every row of the Delta table at ``path`` with ``df``'s in one commit (an
    overwrite), only while the table is at ``version``; returns how many rows were written, or
    None when nothing was: the table is at another version, its columns are not ``df``'s (by name
    and type, in any order), or the direct path is not available (as for ``append``).

    The transaction reads the whole table (every file it removes), so any other commit after
    ``version`` makes this one fail with Delta's conflict (raised, as the writer's are): what the
    caller computed ``df`` from is never overwritten after someone else changed it. The files it
    removes come from the table's state the first time a process rewrites the table, and from
    the files that rewrite left plus the log's commits since after that (``_files_since_rewrite``)."""

    def write(jvm: Any, txn: Any, table: StructType, metadata: dict[str, Any]) -> tuple[Any, int]:
        files = txn.writeFiles(df.select(*table.fieldNames())._jdf)
        written = _records(files)
        return files, written if written is not None else int(df.count())

    return _replace(spark, path, df.schema, version, write)


def rewrite_files(spark: SparkSession, path: str, files: Sequence[tuple[bytes, int]], schema: StructType, version: int) -> int | None:
    """``rewrite`` with Parquet files made by the caller (each its bytes and rows, of
    ``schema``'s columns, none null where ``schema`` says not nullable) as the table's new rows;
    None also where ``append_file`` would not commit them (the caller then rewrites its rows the
    writer's way)."""

    def write(jvm: Any, txn: Any, table: StructType, metadata: dict[str, Any]) -> tuple[Any, int]:
        made = [_made_file(body, rows) for body, rows in files]
        return _written(jvm, txn, made), sum(rows for _, rows in files)

    return _replace(spark, path, schema, version, write, fits=lambda txn, table, metadata: _fits(txn, path, table, schema, metadata))


def _replace(
    spark: SparkSession,
    path: str,
    schema: StructType,
    version: int,
    write: Callable[[Any, Any, StructType, dict[str, Any]], tuple[Any, int]],
    fits: Callable[[Any, StructType, dict[str, Any]], bool] | None = None,
) -> int | None:
    """``rewrite``'s commit, the new files from ``write`` (the JVM, the transaction, the table's
    schema and metadata -> Delta add actions and their rows); ``fits`` (the transaction, the
    table's schema and metadata): whether the table takes them, asked before its files are
    listed (None from here when not)."""
    with _direct(path, "rewrite", "the caller writes it its own way"):
        started = _start(spark, path)
        if started is None:
            return None
        jvm, none, txn = started
        if int(txn.snapshot().version()) != version:
            return None
        metadata = _table_metadata(txn)
        table = _metadata_schema(metadata)
        if not _same_names_and_types(table, schema) or (fits is not None and not fits(txn, table, metadata)):
            return None
        table_id = str(metadata["id"])
        existing = _files_since_rewrite(jvm, txn, path, table_id)
        if existing is None:
            listed = txn.filterFiles()  # the table's reconstructed state: a Spark job
            existing = [listed.apply(i) for i in range(listed.size())]
            REWRITE_LISTINGS["state"] += 1
        else:
            REWRITE_LISTINGS["log"] += 1
        # The whole table read, either way: any other commit after ``version`` conflicts.
        txn.readWholeTable()
        files, written = write(jvm, txn, table, metadata)
        added = [files.apply(i) for i in range(files.size())]
        for action in existing:
            files = getattr(files, "$colon$plus")(action.remove())
        committed = _commit(jvm, txn, path, files, "Overwrite", none)
        _AFTER_REWRITE[path] = (table_id, committed, {str(a.path()): str(a.json()) for a in added})
        return written
    return None


# The files each table's last rewrite by this process left: (the table's id, the version that
# rewrite committed, each file's add action as JSON by path). The next rewrite of the table
# replays the commits made since from the log (``DeltaLog.getChanges``: the JSON commits, no
# Spark job) instead of listing its files through its reconstructed state (``filterFiles``: a
# Spark job, 0.2-0.6 s here).
_AFTER_REWRITE: dict[str, tuple[str, int, dict[str, str]]] = {}
# How rewrites found the files they remove (the tests and the benches read it).
REWRITE_LISTINGS = {"state": 0, "log": 0}


def _files_since_rewrite(jvm: Any, txn: Any, path: str, table_id: str) -> list[Any] | None:
    """The table's files at the transaction's snapshot as Delta add actions: those its last
    rewrite by this process left, then the adds and removes of every commit since, read from
    the log. None when not known that way: no rewrite by this process yet, another table at
    the path, a commit since that the log no longer holds, or one whose files are not told by
    their paths alone (deletion vectors; a path both removed and added); then the caller lists
    them from the table's state."""
    known = _AFTER_REWRITE.get(path)
    if known is None or known[0] != table_id:
        return None
    since, files = known[1], dict(known[2])
    at = int(txn.snapshot().version())
    if at < since:
        return None
    try:
        if at > since:
            changes = txn.deltaLog().getChanges(since + 1, at, static(jvm, "scala.Option", "empty")(), True)
            expected = since + 1
            while changes.hasNext():
                commit = changes.next()
                if int(commit._1()) != expected:
                    return None
                expected += 1
                added: dict[str, str] = {}
                removed: set[str] = set()
                actions = commit._2()
                for i in range(actions.size()):
                    action = actions.apply(i)
                    kind = action.getClass().getSimpleName()
                    if kind == "AddFile":
                        if action.deletionVector() is not None:
                            return None
                        added[str(action.path())] = str(action.json())
                    elif kind == "RemoveFile":
                        removed.add(str(action.path()))
                if removed & added.keys():
                    return None
                for gone in removed:
                    files.pop(gone, None)
                files.update(added)
            if expected != at + 1:
                return None
        parse = _action_parser(jvm)
        return [parse.fromJson(line) for line in files.values()]
    except Exception as exc:  # the log no longer holds a commit, an I/O error: list the state instead
        if missing_api(exc):
            raise
        log.debug("the files of %s since its last rewrite are not known from the log (%s): its state lists them", path, exc)
        return None


def _table_metadata(txn: Any) -> dict[str, Any]:
    """The metadata of the table a Delta transaction writes (its snapshot's), as its commit
    would write it: its id, schema (``schemaString``), partition columns and configuration.
    Read as one JSON document: its configuration map read entry by entry through Py4J was
    about a hundred round trips."""
    metadata: dict[str, Any] = json.loads(txn.metadata().json())["metaData"]
    return metadata


def _metadata_schema(metadata: dict[str, Any]) -> StructType:
    """The table's schema from its metadata (``_table_metadata``): Delta's ``schemaString``, the
    same JSON ``Metadata.schema`` parses."""
    return StructType.fromJson(json.loads(metadata["schemaString"]))


def _action_parser(jvm: Any) -> Any:
    """Delta's ``Action`` object, whose ``fromJson`` reads one line of a commit as its action."""
    return getattr(jvm_class(jvm, "org.apache.spark.sql.delta.actions.Action$"), "MODULE$")


def _start(spark: SparkSession, path: str) -> tuple[Any, Any, Any] | None:
    """(the JVM, Scala's None, a Delta transaction on the table's newest snapshot), or None when
    the direct path is not available (a Delta this was not checked on, or one without the API)."""
    if _UNSUPPORTED:
        return None
    jvm: Any = spark.sparkContext._jvm
    if not _tested(jvm):
        return None
    none = static(jvm, "scala.Option", "empty")()
    return jvm, none, static(jvm, "org.apache.spark.sql.delta.DeltaLog", "forTable")(spark._jsparkSession, path).startTransaction(none, none)


def _commit(jvm: Any, txn: Any, path: str, actions: Any, mode: str, user_metadata: Any) -> int:
    """Commit ``actions`` as a Delta write of SaveMode ``mode`` (``BEFORE_COMMIT`` first); the
    version committed."""
    none = static(jvm, "scala.Option", "empty")()
    save_mode = getattr(jvm_class(jvm, "org.apache.spark.sql.SaveMode"), mode)
    operation = jvm_class(jvm, "org.apache.spark.sql.delta.DeltaOperations$Write")(save_mode, none, none, user_metadata, none, none, none, none, none)
    for hook in BEFORE_COMMIT:
        hook(path)
    return int(txn.commit(actions, operation))


@contextlib.contextmanager
def _direct(path: str, what: str, otherwise: str) -> Iterator[None]:
    """Around a direct Delta write: a conflict is raised as PySpark raises Delta's (the caller
    retries or falls back); any other failure ends the block, and the caller's result is then
    None (``otherwise``, said once a process, then at debug; for appends ``COUNTS["writer"]``
    shows how often). A Delta without the classes used is remembered: later writes do not try."""
    try:
        yield
    except Exception as exc:
        converted = _converted(exc)
        if _is_conflict(converted):
            raise converted from None
        if missing_api(exc):
            _UNSUPPORTED.append(str(exc))
            log.warning("Delta's direct writes are not available (%s): each %s is %s", exc, what, otherwise)
        else:
            (log.debug if _FELL_BACK else log.warning)("%s of %s not done directly (%s): %s", what, path, exc, otherwise)
            _FELL_BACK[:] = [path]


def _records(files: Any) -> int | None:
    """The rows in a write's added files, from their statistics (None: a file without them)."""
    total = 0
    for i in range(files.size()):
        stats = files.apply(i).stats()
        if stats is None or "numRecords" not in stats:
            return None
        total += int(json.loads(stats)["numRecords"])
    return total


_DELTA_VERSION: list[str] = []
_FELL_BACK: list[str] = []  # the last path whose direct write failed for another reason than a conflict


def _tested(jvm: Any) -> bool:
    """Whether the Delta on the JVM is a release in ``TESTED_DELTA`` (asked once per process)."""
    if not _DELTA_VERSION:
        _DELTA_VERSION.append(str(jvm.io.delta.package.VERSION()))
        if not _DELTA_VERSION[0].startswith(TESTED_DELTA):
            _UNSUPPORTED.append(f"Delta {_DELTA_VERSION[0]} is not one of {TESTED_DELTA}")
            log.info("Delta %s: txn appends go through the DataFrame writer (direct writes are checked on %s)", _DELTA_VERSION[0], TESTED_DELTA)
    return _DELTA_VERSION[0].startswith(TESTED_DELTA)


def _converted(exc: Exception) -> BaseException:
    """A Py4J error as PySpark (and Delta's Python package) would raise it from a DataFrame call."""
    from py4j.protocol import Py4JJavaError

    if isinstance(exc, Py4JJavaError):
        from pyspark.errors.exceptions.captured import UnknownException, convert_exception

        converted = convert_exception(exc.java_exception)
        if not isinstance(converted, UnknownException):
            return converted
    return exc


def _is_conflict(exc: BaseException) -> bool:
    from spark_purge.audit import DELTA_CONFLICTS

    return isinstance(exc, DELTA_CONFLICTS)


__all__ = [
    "BEFORE_COMMIT", "COUNTS", "DRIVER_FILES", "DRIVER_FILES_WRITER_VERSION", "REWRITE_LISTINGS", "TESTED_DELTA", "DriverRows", "append", "append_file",
    "checksum_version", "driver_rows", "rewrite", "rewrite_files",
]
