"""``kafka_state``: Kafka partition state and consumer-group commits as a PySpark Python Data Source.

Batch::

    register(spark)
    spark.read.format("kafka_state").option("bootstrap.servers", "host:9092")
        .option("view", "partitions" | "groups" | "snapshot").load()

gives ``schemas.PARTITION_STATE`` / ``GROUP_OFFSETS`` / ``SNAPSHOT``.

Streaming (always ``SNAPSHOT``): one micro-batch per ``poll.interval``; with
``Trigger.AvailableNow`` exactly one snapshot, then the query stops. Offsets are ``{"seq": n}``;
snapshot ``n`` is taken by ``latestOffset`` and kept in memory until ``commit``. Nothing is
persisted: a batch replayed after a restart gets a **fresh** snapshot, and the pipeline executes
the intents that batch recorded in the audit, bounded by that fresh snapshot (never a new plan;
see ``pipeline``). So the source needs no storage, and no checkpoint I/O happens in this process.

Options (keys are case-insensitive):

- ``bootstrap.servers`` (required) host:port list
- ``view``: partitions | groups | snapshot (default snapshot)
- ``topics``: comma list of explicit topics (missing ones are logged and left out), and/or
  ``topic.include`` / ``topic.exclude`` full-match regexes; ``include.internal`` (false)
- ``group.include`` / ``group.exclude`` full-match regexes
- ``request.timeout.ms`` (30000)
- ``time.floors``: JSON list of ``{"topic_regex", "floor_time_ms"}`` or
  ``{"topic_regex", "min_retention_ms"}`` (relative to snapshot time)
- ``poll.interval`` (streaming; "10s", "1m", ms integer; default 10s)
- ``rows.per.partition`` (5000): rows per Spark input partition
- ``kafka.<setting>``: every other ``ConnectionSettings`` field (``kafka.client_id``,
  ``kafka.retries``, ``kafka.retry_backoff_ms``, ``kafka.security_protocol``,
  ``kafka.sasl_plain_password``, ``kafka.ssl_cafile``... dots or underscores);
  ``ConnectionSettings.to_options`` writes them, so the pipeline's connection is the source's

Where things run (see DESIGN.md pitfalls): ``partitions()`` / ``latestOffset()`` / ``commit()``
run in a driver-side Python process; ``read()`` on executors, on another reader instance that
sees only the pickled input partition. So the snapshot is taken on the driver side and its rows
travel inside the input partitions; nothing that holds a socket is pickled, and no secret:
what reaches executors (the readers, this data source inside the read function's closure)
pickles with the connection's passwords dropped, since ``read()`` never connects.
"""
from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark_purge import schemas
from spark_purge._gc import gc_paused
from spark_purge._time import parse_duration
from spark_purge.errors import ConfigError
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    CommitColumns,
    GroupCommit,
    SnapshotRequest,
    TimeFloor,
)
from spark_purge.kafka.settings import ConnectionSettings, is_secret_option

if TYPE_CHECKING:
    from spark_purge.kafka.client import ClusterClient

log = logging.getLogger(__name__)

SOURCE_NAME = "kafka_state"
VIEWS = {"partitions": schemas.PARTITION_STATE, "groups": schemas.GROUP_OFFSETS, "snapshot": schemas.SNAPSHOT}
_KNOWN = {
    "bootstrap.servers",
    "view",
    "topics",
    "topic.include",
    "topic.exclude",
    "group.include",
    "group.exclude",
    "include.internal",
    "request.timeout.ms",
    "poll.interval",
    "time.floors",
    "rows.per.partition",
    "path",  # Spark's own, unused
}


# ---- options ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceOptions:
    """Validated source options (picklable: plain values only)."""

    client: ClientConfig
    view: str = "snapshot"
    time_floors: tuple[TimeFloor, ...] = ()
    poll_interval_ms: int = 10_000
    rows_per_partition: int = 5_000

    def without_secrets(self) -> SourceOptions:
        """These options with the connection's secrets dropped (what a pickled reader carries)."""
        client = replace(self.client, connection=self.client.connection.without_secrets())
        return replace(self, client=client)

    def snapshot_request(self, snapshot_time_ms: Optional[int] = None) -> SnapshotRequest:
        return SnapshotRequest(
            time_floors=self.time_floors,
            snapshot_time_ms=snapshot_time_ms,
            include_groups=self.view != "partitions",
        )


def _int_option(opts: Mapping[str, str], key: str, default: int, minimum: int = 1) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    text = str(raw).strip()
    if not text.isdigit() or int(text) < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {raw!r}")
    return int(text)


def _bool_option(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key}: expected true or false, got {raw!r}")
    return text == "true"


def parse_time_floors(raw: Optional[str]) -> tuple[TimeFloor, ...]:
    if raw is None or not str(raw).strip():
        return ()
    hint = 'a JSON list like [{"topic_regex": "orders.*", "min_retention_ms": 3600000}]'
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"time.floors: expected {hint}, got invalid JSON ({exc.msg})") from None
    if not isinstance(items, list):
        raise ConfigError(f"time.floors: expected {hint}, got {type(items).__name__}")
    floors = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("topic_regex"), str):
            raise ConfigError(f"time.floors[{i}]: expected an object with a string topic_regex, got {item!r}")
        unknown = set(item) - {"topic_regex", "floor_time_ms", "min_retention_ms"}
        if unknown:
            raise ConfigError(f"time.floors[{i}]: unknown key(s) {sorted(unknown)}; expected floor_time_ms or min_retention_ms")
        floors.append(
            TimeFloor(item["topic_regex"], floor_time_ms=item.get("floor_time_ms"), min_retention_ms=item.get("min_retention_ms"))
        )
    return tuple(floors)


def parse_options(options: Mapping[str, Any]) -> SourceOptions:
    """Validate the data-source options; ConfigError names the option at fault."""
    opts = {str(k).lower(): v for k, v in options.items()}
    for key in opts:
        if not key.startswith("kafka.") and key not in _KNOWN:
            raise ConfigError(f"{key}: unknown kafka_state option; expected one of {sorted(_KNOWN - {'path'})} or kafka.<setting>")
    connection = ConnectionSettings.from_options(opts)
    view = str(opts.get("view", "snapshot")).strip().lower()
    if view not in VIEWS:
        raise ConfigError(f"view: expected one of {sorted(VIEWS)}, got {opts.get('view')!r}")
    topics = None
    if opts.get("topics") is not None:
        topics = tuple(t.strip() for t in str(opts["topics"]).split(",") if t.strip())
    client = ClientConfig(
        connection=connection,
        topics=topics,
        topic_include=opts.get("topic.include") or None,
        topic_exclude=opts.get("topic.exclude") or None,
        group_include=opts.get("group.include") or None,
        group_exclude=opts.get("group.exclude") or None,
        include_internal=_bool_option(opts, "include.internal", False),
    )
    poll = parse_duration(opts.get("poll.interval", "10s"), "poll.interval")
    if poll <= 0:
        raise ConfigError(f"poll.interval: expected a positive duration, got {opts.get('poll.interval')!r}")
    return SourceOptions(
        client=client,
        view=view,
        time_floors=parse_time_floors(opts.get("time.floors")),
        poll_interval_ms=poll,
        rows_per_partition=_int_option(opts, "rows.per.partition", 5_000),
    )


# ---- columnar batches ------------------------------------------------------------------------
#
# A snapshot crosses into Spark as Arrow, column by column: ``read()`` yields record batches
# (PySpark 4's Python data sources take ``pyarrow.RecordBatch``), and the input partitions carry
# Arrow IPC bytes. Nothing is built or pickled one Python tuple per commit.

_ARROW_SCHEMAS: dict[str, pa.Schema] = {}


def arrow_schema(view: str) -> pa.Schema:
    """The Arrow schema PySpark expects for the view (``to_arrow_schema``, UTC, as its reader)."""
    if view not in _ARROW_SCHEMAS:
        _ARROW_SCHEMAS[view] = to_arrow_schema(VIEWS[view], timezone="UTC")
    return _ARROW_SCHEMAS[view]


def _micros(ms: Optional[int]) -> Optional[int]:
    return None if ms is None else ms * 1000


def _attribute_columns(items: Sequence[Any], names: Iterable[str]) -> dict[str, list[Any]]:
    """One column per schema field name: that attribute of every item (the model's fields are
    named as the schema's, so a column added to both needs no line here)."""
    return {name: list(map(attrgetter(name), items)) for name in names}


def _commit_fields(commits: Sequence[GroupCommit], names: Iterable[str]) -> dict[str, list[Any]]:
    """Those fields of the commits as columns: as they are when the client returned them column
    by column, else read off each commit."""
    if isinstance(commits, CommitColumns):
        return {name: commits.column(name) for name in names}
    return _attribute_columns(commits, names)


def _commit_columns(commits: Sequence[GroupCommit], with_partition: bool) -> dict[str, list[Any]]:
    """The commits' fields as columns (``GROUP_COMMIT`` names; topic/partition when asked)."""
    return _commit_fields(commits, schemas.GROUP_COMMIT.fieldNames() + (["topic", "partition"] if with_partition else []))


def _struct(columns: Mapping[str, Any], element: pa.Field, order: Optional[pa.Array] = None) -> pa.StructArray:
    """The columns as one struct array; with ``order``, their rows in that order (taken column
    by column: a whole struct array taken would be built twice over)."""
    fields = list(element.type)
    arrays = []
    for f in fields:
        array = pa.array(columns[f.name], type=f.type)
        arrays.append(array if order is None else array.take(order))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _list(offsets: Sequence[int], values: pa.Array, field: pa.Field) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, type=field.type)


# PARTITION_STATE columns not read straight off a PartitionState attribute of the same name.
_DERIVED_PARTITION_COLUMNS = ("snapshot_id", "snapshot_time", "replicas", "isr", "time_floor_time")


def _partition_columns(snapshot: ClusterSnapshot) -> dict[str, Any]:
    parts = snapshot.partitions
    n = len(parts)
    columns: dict[str, Any] = _attribute_columns(
        parts, [f for f in schemas.PARTITION_STATE.fieldNames() if f not in _DERIVED_PARTITION_COLUMNS]
    )
    columns.update(
        snapshot_id=[snapshot.snapshot_id] * n,
        snapshot_time=[snapshot.snapshot_time_ms * 1000] * n,
        replicas=[list(p.replicas) for p in parts],
        isr=[list(p.isr) for p in parts],
        time_floor_time=[_micros(p.time_floor_time_ms) for p in parts],
    )
    return columns


def _nested_groups(snapshot: ClusterSnapshot, field: pa.Field) -> pa.ListArray:
    """``SNAPSHOT.groups``: each partition's commits (snapshot order kept), as one list column;
    commits on partitions the snapshot left out are dropped."""
    n = len(snapshot.partitions)
    index = {(p.topic, p.partition): i for i, p in enumerate(snapshot.partitions)}
    at = _commit_fields(snapshot.commits, ("topic", "partition"))
    owners = [index.get(tp, n) for tp in zip(at["topic"], at["partition"])]  # n: left out
    counts = [0] * (n + 1)
    for i in owners:
        counts[i] += 1
    offsets = [0]
    for count in counts[:n]:
        offsets.append(offsets[-1] + count)
    # A stable sort by owning partition (the left-out commits last, and cut off).
    order = pc.sort_indices(pa.array(owners, type=pa.int32())).slice(0, offsets[-1])
    values = _struct(_commit_columns(snapshot.commits, with_partition=False), field.type.value_field, order)
    return _list(offsets, values, field)


def _unreadable(snapshot: ClusterSnapshot, field: pa.Field) -> pa.ListArray:
    """``SNAPSHOT.unreadable_groups``: the same list on every row."""
    errors = sorted(snapshot.unreadable_group_errors().items())
    n, k = len(snapshot.partitions), len(errors)
    columns = {"group_id": [g for g, _ in errors] * n, "error": [e for _, e in errors] * n}
    return _list([i * k for i in range(n + 1)], _struct(columns, field.type.value_field), field)


def snapshot_batch(snapshot: ClusterSnapshot, view: str) -> pa.RecordBatch:
    """The whole snapshot as one Arrow record batch of the view's schema, built column-wise."""
    schema = arrow_schema(view)
    if view == "groups":
        columns: dict[str, Any] = _commit_columns(snapshot.commits, with_partition=True)
        columns["snapshot_id"] = [snapshot.snapshot_id] * len(snapshot.commits)
        columns["snapshot_time"] = [snapshot.snapshot_time_ms * 1000] * len(snapshot.commits)
    else:
        columns = _partition_columns(snapshot)
        if view == "snapshot":
            columns["groups"] = _nested_groups(snapshot, schema.field("groups"))
            columns["unreadable_groups"] = _unreadable(snapshot, schema.field("unreadable_groups"))
    arrays = [c if isinstance(c, pa.Array) else pa.array(c, type=f.type) for f, c in ((f, columns[f.name]) for f in schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# A commit's group fields repeat in every commit of the group: compressed, the 10k x 10k
# benchmark's input partitions are 6.5 MB instead of 36 MB, in the read-planning worker, in
# the driver's JVM (which keeps them with the plan) and on their way to the reading task.
# Writing them LZ4-compressed took less time there than writing them plain (0.2-0.5 s against
# 0.35-1.3 s for ``plan_chunks``); ``read()`` decompresses as it reads.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


@dataclass(frozen=True)
class SnapshotChunk(InputPartition):
    """One Spark input partition: ``rows`` rows of one snapshot as Arrow IPC stream bytes
    (picklable, compact; empty for an empty snapshot)."""

    snapshot_id: str
    index: int
    rows: int
    payload: bytes = field(repr=False)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The chunk's record batches (what ``read()`` yields)."""
        if self.payload:
            yield from pa.ipc.open_stream(self.payload)
            give_back_arrow_memory()


def give_back_arrow_memory() -> None:
    """Hand the pages PyArrow's allocator keeps after a snapshot was planned or read back to the
    system. Its pool (mimalloc in PyArrow's wheels) keeps freed pages for reuse, and Spark keeps
    a worker alive between cycles: at 10k x 10k the read-planning worker held 310 MB idle where
    it needs 193 MB (``bench/diag/snapshot_memory.py``)."""
    pa.default_memory_pool().release_unused()


def plan_chunks(snapshot: ClusterSnapshot, view: str, rows_per_partition: int) -> list[SnapshotChunk]:
    with gc_paused():  # column lists of O(commits) objects (``spark_purge._gc``)
        batch = snapshot_batch(snapshot, view)
    if batch.num_rows == 0:
        return [SnapshotChunk(snapshot.snapshot_id, 0, 0, b"")]
    return [
        SnapshotChunk(snapshot.snapshot_id, i, part.num_rows, _ipc(part))
        for i, part in enumerate(batch.slice(start, rows_per_partition) for start in range(0, batch.num_rows, rows_per_partition))
    ]


def _log_snapshot(snapshot: ClusterSnapshot) -> None:
    if snapshot.missing_topics:
        log.warning("kafka_state: topics not found: %s", ", ".join(snapshot.missing_topics))
    for d in snapshot.dropped_partitions:
        log.warning("kafka_state: partition %s-%d left out: %s", d.topic, d.partition, d.reason)
    for issue in snapshot.issues:
        log.warning("kafka_state: %s", issue.message)
    if snapshot.unreadable_groups:
        log.warning(
            "kafka_state: commits of %d group(s) could not be read, partitions they may be required for "
            "are not purged: %s", len(snapshot.unreadable_groups), ", ".join(snapshot.unreadable_groups[:20])
        )


def take_snapshot(options: SourceOptions, snapshot_time_ms: Optional[int] = None) -> ClusterSnapshot:
    """Connect, read one snapshot, close (used by the batch reader)."""
    from spark_purge.kafka import open_client

    with open_client(options.client) as client:
        snapshot = client.snapshot(options.snapshot_request(snapshot_time_ms))
    _log_snapshot(snapshot)
    return snapshot


# ---- readers -----------------------------------------------------------------------------------


class KafkaStateReader(DataSourceReader):
    """Batch: one snapshot per reader, taken at planning time, rows shipped in the partitions."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planned: Optional[list[SnapshotChunk]] = None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for read() on executors: the rows travel in the partitions, secrets not at all.
        return {"options": self.options.without_secrets(), "_planned": None}

    def partitions(self) -> Sequence[InputPartition]:
        # Planning may run more than once: the same reader answers with the same snapshot.
        if self._planned is None:
            self._planned = plan_chunks(take_snapshot(self.options), self.options.view, self.options.rows_per_partition)
            give_back_arrow_memory()  # the snapshot is gone, its chunks stay
        return self._planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SnapshotChunk)
        return partition.batches()


class KafkaStateStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming: offset {"seq": n}; snapshot n taken before it is offered, kept in memory only."""

    # Tests swap this for a fake; it must return a context-managed client with snapshot().
    client_factory: Callable[[ClientConfig], ClusterClient] = staticmethod(lambda cfg: _open(cfg))
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, options: SourceOptions) -> None:
        if options.view != "snapshot":
            raise ConfigError(f"view: readStream always emits the snapshot view, got {options.view!r}")
        self.options = options
        # Snapshots taken and not yet committed, by seq (one or two at a time).
        self._taken: dict[int, ClusterSnapshot] = {}
        self._client: Optional[ClusterClient] = None
        self._last_taken: Optional[float] = None
        self._available_now = False
        self._target: Optional[int] = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # sockets never travel
        state["_taken"] = {}  # nor snapshots: read() gets its rows from the input partitions
        state["options"] = self.options.without_secrets()  # read() never connects
        return state

    def initialOffset(self) -> dict[str, int]:
        return {"seq": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True
        self._target = None

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, int]:
        seq = int((start or {}).get("seq", 0))
        if self._available_now:
            if self._target is None:
                self._target = seq + 1
                self._snapshot_to(self._target)
            return {"seq": max(seq, self._target)}
        now = self.clock()
        if self._last_taken is not None and now - self._last_taken < self.options.poll_interval_ms / 1000:
            return {"seq": seq}
        self._snapshot_to(seq + 1)
        self._last_taken = now
        return {"seq": seq + 1}

    def _snapshot_to(self, seq: int) -> ClusterSnapshot:
        try:
            if self._client is None:
                self._client = self.client_factory(self.options.client)
            snapshot = self._client.snapshot(self.options.snapshot_request())
        except Exception:
            self._close_client()  # reconnect next time
            raise
        _log_snapshot(snapshot)
        self._taken[seq] = snapshot
        return snapshot

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = int((start or {}).get("seq", 0)), int((end or {}).get("seq", 0))
        if stop <= begin:
            return []
        # The batch's data is snapshot `stop`, taken by latestOffset. A batch Spark replays after
        # a restart finds none here and gets a fresh one (kept, as planning may run twice): the
        # pipeline executes that batch's recorded intents, bounded by it.
        snapshot = self._taken.get(stop) or self._snapshot_to(stop)
        chunks = plan_chunks(snapshot, "snapshot", self.options.rows_per_partition)
        give_back_arrow_memory()
        return chunks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SnapshotChunk)
        return partition.batches()

    def commit(self, end: dict[str, Any]) -> None:
        done = int((end or {}).get("seq", 0))
        self._taken = {seq: snap for seq, snap in self._taken.items() if seq > done}

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken client must not hide the original error
                log.debug("kafka_state: closing the Kafka client failed", exc_info=True)

    def stop(self) -> None:
        self._close_client()


def _open(cfg: ClientConfig) -> ClusterClient:
    from spark_purge.kafka import open_client

    return open_client(cfg)


class KafkaStateDataSource(DataSource):
    """The ``kafka_state`` data source; options are validated when it is created.

    Spark pickles this object twice: from where it is created to the driver-side Python
    processes that plan reads (they connect, so the secrets must come along), and from there,
    inside the read function's closure, to every executor. The second happens only after that
    process asked for a reader, so from then on this object pickles without secrets.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = parse_options(options)
        self._reader_made = False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._reader_made:
            state["options"] = {k: v for k, v in self.options.items() if not is_secret_option(str(k))}
            state["parsed"] = self.parsed.without_secrets()
        return state

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return VIEWS[self.parsed.view]

    def reader(self, schema: StructType) -> DataSourceReader:
        self._reader_made = True
        return KafkaStateReader(self.parsed)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._reader_made = True
        return KafkaStateStreamReader(self.parsed)


_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()


def register(spark: Any) -> None:
    """Register ``kafka_state`` with ``spark`` (idempotent: once per session)."""
    if spark in _REGISTERED:
        return
    spark.dataSource.register(KafkaStateDataSource)
    _REGISTERED.add(spark)


__all__ = [
    "KafkaStateDataSource",
    "KafkaStateReader",
    "KafkaStateStreamReader",
    "SnapshotChunk",
    "SourceOptions",
    "arrow_schema",
    "parse_options",
    "plan_chunks",
    "register",
    "snapshot_batch",
]
