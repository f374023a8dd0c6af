"""``kafka_state``: Kafka partition state and consumer-group commits as a PySpark Python Data Source.

Batch::

    register(spark)
    spark.read.format("kafka_state").option("bootstrap.servers", "host:9092")
        .option("view", "partitions" | "groups" | "snapshot" | "packed").load()

gives ``schemas.PARTITION_STATE`` / ``GROUP_OFFSETS`` / ``SNAPSHOT`` / ``PACKED_SNAPSHOT`` (the
snapshot with its group rows packed as Arrow IPC: the pipeline's, ``spark_purge.snapshot_pack``).

Streaming (``SNAPSHOT``, or ``PACKED_SNAPSHOT`` with the ``packed`` view): one micro-batch per ``poll.interval``; with
``Trigger.AvailableNow`` exactly one snapshot, then the query stops. Offsets are ``{"seq": n}``;
snapshot ``n`` is taken by ``latestOffset`` and kept in memory until ``commit``. Nothing is
persisted: a batch replayed after a restart gets a **fresh** snapshot, and the pipeline executes
the intents that batch recorded in the audit, bounded by that fresh snapshot (never a new plan;
see ``pipeline``). So the source needs no storage, and no checkpoint I/O happens in this process.

Options (keys are case-insensitive):

- ``bootstrap.servers`` (required) host:port list
- ``view``: partitions | groups | snapshot | packed (default snapshot)
- ``topics``: comma list of explicit topics (missing ones are logged and left out), and/or
  ``topic.include`` / ``topic.exclude`` full-match regexes; ``include.internal`` (false)
- ``group.include`` / ``group.exclude`` full-match regexes
- ``request.timeout.ms`` (30000)
- ``time.floors``: JSON list of ``{"topic_regex", "floor_time_ms"}`` or
  ``{"topic_regex", "min_retention_ms"}`` (relative to snapshot time)
- ``poll.interval`` (streaming; "10s", "1m", ms integer; default 10s)
- ``rows.per.partition`` (50000, ``ROWS_PER_PARTITION``): rows per Spark input partition
- ``kafka.<setting>``: every other ``ConnectionSettings`` field (``kafka.client_id``,
  ``kafka.retries``, ``kafka.retry_backoff_ms``, ``kafka.security_protocol``,
  ``kafka.sasl_plain_password``, ``kafka.ssl_cafile``... dots or underscores);
  ``ConnectionSettings.to_options`` writes them, so the pipeline's connection is the source's

Where things run (see DESIGN.md pitfalls): ``partitions()`` / ``latestOffset()`` / ``commit()``
run in a driver-side Python process; ``read()`` on executors, on another reader instance that
sees only the pickled input partition. So the snapshot is taken on the driver side and its rows
travel inside the input partitions (``source_arrow``: Arrow, imported only by the processes that
plan or read, not by the ones that create the data source); nothing that holds a socket is pickled, and no secret:
what reaches executors (the readers, this data source inside the read function's closure)
pickles with the connection's passwords dropped, since ``read()`` never connects.
"""
from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark_purge import schemas
from spark_purge._time import parse_duration
from spark_purge.errors import ConfigError
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    SnapshotRequest,
    TimeFloor,
)
from spark_purge.kafka.settings import ConnectionSettings, is_secret_option

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_purge.kafka.client import ClusterClient
    from spark_purge.source_arrow import SnapshotChunk

log = logging.getLogger(__name__)

SOURCE_NAME = "kafka_state"
VIEWS = {
    "partitions": schemas.PARTITION_STATE,
    "groups": schemas.GROUP_OFFSETS,
    "snapshot": schemas.SNAPSHOT,
    # The pipeline's: the snapshot with its group rows packed (``spark_purge.snapshot_pack``).
    "packed": schemas.PACKED_SNAPSHOT,
}
# The views readStream emits: a whole snapshot a batch.
STREAM_VIEWS = ("snapshot", "packed")
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


# Snapshot rows an input partition carries (``rows.per.partition``). A partition is a Spark
# task, and a task a Python worker: a local session keeps one idle worker of a kind
# (``session.IDLE_PYTHON_WORKERS``), so a read in two tasks forked a new worker every batch
# (PySpark's worker, PyArrow and pandas imported anew, about 0.4 s). A read is only its chunk's
# Arrow bytes decompressed, and the pipeline spreads the rows over the task slots right after
# (``pipeline.kept``): in one task the snapshot view reads 50,000 Kafka partitions' rows.
ROWS_PER_PARTITION = 50_000


@dataclass(frozen=True)
class SourceOptions:
    """Validated source options (picklable: plain values only)."""

    client: ClientConfig
    view: str = "snapshot"
    time_floors: tuple[TimeFloor, ...] = ()
    poll_interval_ms: int = 10_000
    rows_per_partition: int = ROWS_PER_PARTITION

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
        rows_per_partition=_int_option(opts, "rows.per.partition", ROWS_PER_PARTITION),
    )


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
        from spark_purge.source_arrow import give_back_arrow_memory, plan_chunks

        if self._planned is None:
            self._planned = plan_chunks(take_snapshot(self.options), self.options.view, self.options.rows_per_partition)
            give_back_arrow_memory()  # the snapshot is gone, its chunks stay
        return self._planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from spark_purge.source_arrow import SnapshotChunk

        assert isinstance(partition, SnapshotChunk)
        return partition.batches()


class KafkaStateStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming: offset {"seq": n}; snapshot n taken before it is offered, kept in memory only."""

    # Tests swap this for a fake; it must return a context-managed client with snapshot().
    client_factory: Callable[[ClientConfig], ClusterClient] = staticmethod(lambda cfg: _open(cfg))
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, options: SourceOptions) -> None:
        if options.view not in STREAM_VIEWS:
            raise ConfigError(f"view: readStream emits a whole snapshot a batch: one of {list(STREAM_VIEWS)}, got {options.view!r}")
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
        from spark_purge.source_arrow import give_back_arrow_memory, plan_chunks

        snapshot = self._taken.get(stop) or self._snapshot_to(stop)
        chunks = plan_chunks(snapshot, self.options.view, self.options.rows_per_partition)
        give_back_arrow_memory()
        return chunks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from spark_purge.source_arrow import SnapshotChunk

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
    "SourceOptions",
    "parse_options",
    "register",
]
