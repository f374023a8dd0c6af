"""The workload helpers every harness shares — integration and fault tests, the demo, the
benchmarks and the invariant checker — each written once::

    admin = new_admin(cluster.bootstrap_servers, **cluster.client_kwargs())
    topic = create_topic(admin, "orders", partitions=3)              # unique name, leaders up
    produce(cluster.bootstrap_servers, topic, [100, 100, 100])      # acks=all, acknowledged
    commit_topic(admin, "billing", topic, [60, 80, None])           # a real OffsetCommit
    log_starts(admin, topic, 3)                                     # [60, 80, 0], from Kafka
    run_cycle(new_pipeline(spark, cfg), batch_id=0)                 # one foreachBatch, in-process
    audit_rows(spark, cfg)                                          # outcome rows, ordered

Every helper that talks to Kafka goes through :func:`retry`: kafka-python errors (a node just
restarted, a coordinator still loading) and the harness's retriable ``NotReadyError`` are tried
again until a deadline, then reported as ``WorkloadError`` naming the step.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

from delta.tables import DeltaTable
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic, OffsetSpec
from kafka.errors import KafkaError as KafkaPythonError
from kafka.errors import NoError, TopicAlreadyExistsError
from kafka.producer.future import RecordMetadata
from kafka.structs import OffsetAndMetadata, TopicPartition
from pyspark.sql import Row, SparkSession

from spark_purge._time import Backoff, Deadline
from spark_purge.config import PurgeConfig, from_dict
from spark_purge.detach import drop, held
from spark_purge.pipeline import BatchResult, PurgePipeline, default_client_factory, read_snapshot, start_stream
from spark_purge.schemas import AUDIT
from spark_purge.testing.errors import HarnessError, NotReadyError, WorkloadError

T = TypeVar("T")
TopicPartitionKey = tuple[str, int]
#: A config, or the path of its audit table.
AuditSource = Union[PurgeConfig, str]

ADMIN_REQUEST_TIMEOUT_MS = 15_000


# ---- retry -----------------------------------------------------------------------------------


def retry(
    fn: Callable[[], T], what: str, timeout_s: float = 60.0, *, also: tuple[type[BaseException], ...] = ()
) -> T:
    """Call ``fn`` until it returns; raise WorkloadError naming ``what`` once ``timeout_s`` passed.

    Tried again: any kafka-python error (right after a node kill kafka-python raises
    non-retriable ones too, e.g. NoBrokersAvailable), a retriable harness error (NotReadyError),
    and the types in ``also`` (tests pass AssertionError to wait for a state they assert).
    Anything else propagates at once.
    """
    deadline = Deadline(timeout_s)
    backoff = Backoff(first=0.5, cap=0.5)
    while True:
        try:
            return fn()
        except Exception as exc:
            worth_retrying = (
                isinstance(exc, (KafkaPythonError, *also)) or (isinstance(exc, HarnessError) and exc.retriable)
            )
            if not worth_retrying:
                raise
            if deadline.expired():
                raise WorkloadError(f"{what}: still failing after {timeout_s:.0f}s: {exc!r}") from exc
            time.sleep(backoff.within(deadline))


# ---- clients and topics ----------------------------------------------------------------------


def new_admin(bootstrap_servers: str, **config: Any) -> KafkaAdminClient:
    """An admin client (15 s request timeout unless ``config`` says otherwise; security kwargs
    from ``LocalKafka.client_kwargs()`` pass through ``config``)."""
    return KafkaAdminClient(bootstrap_servers=bootstrap_servers, **{"request_timeout_ms": ADMIN_REQUEST_TIMEOUT_MS, **config})


def fresh_admin(admin: KafkaAdminClient) -> KafkaAdminClient:
    """A new admin client with ``admin``'s settings (security included), and nothing cached."""
    defaults = KafkaAdminClient.DEFAULT_CONFIG
    settings = {k: v for k, v in admin.config.items() if k in defaults and v != defaults[k]}
    return KafkaAdminClient(**settings)


def create_topics(
    admin: KafkaAdminClient,
    partitions: Mapping[str, int],
    replication: int = 1,
    configs: Optional[Mapping[str, str]] = None,
    *,
    in_sync: int = 1,
    timeout_s: float = 60.0,
    assignments: Optional[Mapping[str, Mapping[int, Sequence[int]]]] = None,
) -> None:
    """Create each topic with its partition count (20 topics a request: thousands of partitions
    go in slices); return once every partition has a leader and ``in_sync`` in-sync replicas.

    ``assignments`` places a topic's replicas itself (partition -> broker ids, the first one its
    preferred leader, which leads it once created); such a topic's count and ``replication``
    come from its assignment, which must name every partition in ``partitions``."""
    placed = dict(assignments or {})
    for topic, assignment in placed.items():
        if sorted(assignment) != list(range(partitions[topic])):
            raise ValueError(f"assignments[{topic!r}] names partitions {sorted(assignment)}, not 0..{partitions[topic] - 1}")
    new = [
        NewTopic(t, replica_assignments={p: list(r) for p, r in placed[t].items()}, topic_configs=dict(configs or {}))
        if t in placed
        else NewTopic(t, n, replication, topic_configs=dict(configs or {}))
        for t, n in partitions.items()
    ]
    for start in range(0, len(new), 20):
        admin.create_topics(new[start : start + 20], timeout_ms=int(timeout_s * 1000))
    wait_for_leaders(admin, partitions, in_sync=in_sync, timeout_s=timeout_s)


def create_topic(
    admin: KafkaAdminClient,
    prefix: str = "t",
    partitions: int = 1,
    replication: int = 1,
    configs: Optional[Mapping[str, str]] = None,
    assignment: Optional[Mapping[int, Sequence[int]]] = None,
) -> str:
    """Create ``<prefix>-<8 hex>`` (unique per call); returns its name once it has leaders.
    ``assignment``: its replicas placed as ``create_topics``' ``assignments`` say."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topics(admin, {name: partitions}, replication, configs, assignments=None if assignment is None else {name: assignment})
    return name


def recreate_topic(
    admin: KafkaAdminClient,
    topic: str,
    partitions: int,
    replication: int = 1,
    configs: Optional[Mapping[str, str]] = None,
    timeout_s: float = 60.0,
) -> None:
    """Delete ``topic`` and create it again under the same name (a new topic id, empty logs,
    the groups' commits on it gone); returns once the new incarnation's partitions have leaders.
    Kafka deletes asynchronously: the create is retried while the old topic is still going."""
    old = topic_id(admin, topic)
    retry(lambda: admin.delete_topics([topic], timeout_ms=int(timeout_s * 1000)), f"delete of {topic}", timeout_s)

    def create() -> None:
        try:
            admin.create_topics(
                [NewTopic(topic, partitions, replication, topic_configs=dict(configs or {}))], timeout_ms=int(timeout_s * 1000)
            )
        except TopicAlreadyExistsError:
            pass  # the old one still being deleted, or our own create already through
        if topic_id(admin, topic) in (None, old):
            raise NotReadyError(f"{topic} not recreated yet")

    retry(create, f"re-creation of {topic}", timeout_s)
    wait_for_leaders(admin, {topic: partitions}, timeout_s=timeout_s)


def topic_id(admin: KafkaAdminClient, topic: str) -> Optional[str]:
    """The topic's id now (None: no such topic)."""
    found = [t for t in admin.describe_topics([topic]) if t.get("name") == topic and not t.get("error_code")]
    return str(found[0].get("topic_id")) if found else None


def describe_partitions(admin: KafkaAdminClient, topic: str) -> list[dict[str, Any]]:
    """The topic's partitions as a fresh metadata request lists them (kafka-python's dicts)."""
    meta = admin.describe_topics([topic])
    return list(meta[0]["partitions"])


def leaders(admin: KafkaAdminClient, topic: str) -> dict[int, int]:
    """partition -> leader broker id (-1: none), from a fresh metadata request."""
    return {p["partition_index"]: p["leader_id"] for p in describe_partitions(admin, topic)}


def replicas(admin: KafkaAdminClient, topic: str) -> dict[int, list[int]]:
    """partition -> replica broker ids, from a fresh metadata request."""
    return {p["partition_index"]: list(p["replica_nodes"]) for p in describe_partitions(admin, topic)}


def wait_for_leaders(
    admin: KafkaAdminClient, partitions: Mapping[str, int], *, in_sync: int = 1, timeout_s: float = 60.0
) -> None:
    """Wait until each topic lists exactly its partition count, each with a leader and at least
    ``in_sync`` replicas in sync (a new partition or a restarted node takes a moment)."""

    def check() -> None:
        described = admin.describe_topics(list(partitions))
        unlisted = set(partitions) - {topic["name"] for topic in described}
        if unlisted:
            raise NotReadyError(f"{sorted(unlisted)}: not in the metadata yet")
        for topic in described:
            parts = topic["partitions"]
            wanted = partitions[topic["name"]]
            ready = [p for p in parts if p["leader_id"] >= 0 and len(p["isr_nodes"]) >= in_sync]
            if len(parts) != wanted or len(ready) != wanted:
                raise NotReadyError(
                    f"{topic['name']}: {len(ready)} of {wanted} partition(s) have a leader and {in_sync}+ in-sync replica(s)"
                )

    retry(check, f"leaders of {', '.join(sorted(partitions))}", timeout_s)


# ---- records and commits ---------------------------------------------------------------------


def produce(
    target: Union[str, KafkaProducer],
    topic: str,
    counts: Union[Mapping[int, int], Sequence[int]],
    *,
    timestamps_ms: Optional[Mapping[int, Sequence[int]]] = None,
    flush_timeout_s: float = 60.0,
    value_bytes: int = 0,
    **config: Any,
) -> list[RecordMetadata]:
    """Write ``counts[p]`` records to partition ``p`` (record ``i``: key ``k<i>``, value ``v<i>``
    padded with ``.`` to ``value_bytes``, CreateTime ``timestamps_ms[p][i]`` when given) and wait
    for every acknowledgement.

    ``target`` is bootstrap servers (a producer with ``acks=all`` plus ``config`` is opened and
    closed) or an open producer (kept open). Returns the acknowledgements in send order.
    """
    by_partition = dict(counts) if isinstance(counts, Mapping) else dict(enumerate(counts))
    producer = target if isinstance(target, KafkaProducer) else KafkaProducer(
        bootstrap_servers=target, **{"acks": "all", "linger_ms": 5, **config}
    )
    try:
        futures = []
        for partition, n in by_partition.items():
            stamps = (timestamps_ms or {}).get(partition)
            for i in range(n):
                futures.append(
                    producer.send(
                        topic,
                        key=b"k%d" % i,
                        value=(b"v%d" % i).ljust(value_bytes, b"."),
                        partition=partition,
                        timestamp_ms=stamps[i] if stamps else None,
                    )
                )
        producer.flush(timeout=flush_timeout_s)
        return [f.get(timeout=flush_timeout_s) for f in futures]
    finally:
        if producer is not target:
            producer.close()


def commit(
    admin: KafkaAdminClient,
    group: str,
    offsets: Mapping[TopicPartitionKey, Optional[int]],
    *,
    metadata: str = "",
    leader_epoch: int = -1,
    timeout_s: float = 60.0,
) -> None:
    """A real OffsetCommit for an (empty) group, as a consumer's commit would be (``None``
    offsets are left out); ``leader_epoch`` >= 0 commits with that leader epoch (KIP-320).

    kafka-python caches a group's coordinator for good: after a node kill the stale one answers
    NOT_COORDINATOR (or nothing), so every attempt after the first goes through a fresh client
    with ``admin``'s settings. A retriable per-partition error is retried; any other is raised.
    """
    wanted = {TopicPartition(t, p): OffsetAndMetadata(o, metadata, leader_epoch) for (t, p), o in offsets.items() if o is not None}
    if not wanted:
        return
    attempts = 0

    def once() -> None:
        nonlocal attempts
        attempts += 1
        client = admin if attempts == 1 else fresh_admin(admin)
        try:
            # Per-partition errors come back in the result, not as exceptions.
            result = client.alter_group_offsets(group, wanted)
        finally:
            if client is not admin:
                client.close()
        refused = {f"{tp.topic}-{tp.partition}": err for tp, err in result.items() if err is not NoError}
        if not refused:
            return
        names = {tp: err.__name__ for tp, err in refused.items()}
        if all(err.retriable for err in refused.values()):
            raise NotReadyError(f"commit of {group} refused: {names}")
        raise WorkloadError(f"commit of {group} refused: {names}")

    retry(once, f"commit of {group}", timeout_s)


def commit_topic(admin: KafkaAdminClient, group: str, topic: str, offsets: Sequence[Optional[int]]) -> None:
    """:func:`commit` of ``offsets[p]`` on partition ``p`` of ``topic`` (``None``: no commit)."""
    commit(admin, group, {(topic, p): o for p, o in enumerate(offsets)})


def classic_member(
    bootstrap_servers: str, group: str, topics: Sequence[str], config: Optional[Mapping[str, Any]] = None, timeout_s: float = 60
) -> KafkaConsumer:
    """A kafka-python classic-protocol member of ``group`` (no auto commit, reading from the log
    start, a generous session: a loaded machine can starve its heartbeat thread), subscribed to
    ``topics`` only once its metadata lists each of their partitions; ``config`` adds to or
    overrides the consumer's settings (a cluster's security settings, poll limits).

    kafka-python 3.0.12 elects the first member leader and assigns from the metadata it holds at
    that moment. Right after a topic is created (or recreated) that metadata may not list it
    yet: the leader then assigns nothing ("No partition metadata for topic ..."), the group goes
    Stable with an empty assignment, and the client rejoins only when its periodic metadata
    refresh (``metadata_max_age_ms``, 5 minutes) shows the partitions. ``WorkloadError`` when
    the metadata does not list them in ``timeout_s``."""
    settings: dict[str, Any] = {
        "enable_auto_commit": False, "auto_offset_reset": "earliest", "session_timeout_ms": 45_000, "heartbeat_interval_ms": 3_000,
    }
    settings.update(config or {})
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, **settings)
    deadline = Deadline(timeout_s)
    while not all(consumer.partitions_for_topic(t) for t in topics):
        if deadline.expired():
            consumer.close()
            raise WorkloadError(f"classic member of {group}: the consumer's metadata did not list {sorted(topics)} in {timeout_s:.0f}s")
        time.sleep(0.1)
    consumer.subscribe(list(topics))
    return consumer


def list_offsets(
    admin: KafkaAdminClient, tps: Iterable[TopicPartitionKey], spec: OffsetSpec = OffsetSpec.EARLIEST, timeout_s: float = 90.0
) -> dict[TopicPartitionKey, int]:
    """ListOffsets (EARLIEST: the log start offset; LATEST: the high watermark), from Kafka."""
    wanted = [TopicPartition(t, p) for t, p in tps]

    def once() -> dict[TopicPartitionKey, int]:
        found = admin.list_partition_offsets({tp: spec for tp in wanted})
        return {(tp.topic, tp.partition): int(found[tp].offset) for tp in wanted}

    return retry(once, "list offsets", timeout_s)


def log_start_offsets(admin: KafkaAdminClient, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
    """Each partition's log start offset as Kafka reports it now."""
    return list_offsets(admin, tps, OffsetSpec.EARLIEST)


def log_starts(admin: KafkaAdminClient, topic: str, partitions: int) -> list[int]:
    """The log start offsets of partitions ``0..partitions-1`` of ``topic``, in order."""
    found = log_start_offsets(admin, [(topic, p) for p in range(partitions)])
    return [found[(topic, p)] for p in range(partitions)]


# ---- configs, purge cycles and the audit --------------------------------------------------------------


def purge_config_dict(
    tmp: Path, bootstrap: str, topics_regex: str, groups: Optional[list[str]], **kafka: Any
) -> dict[str, Any]:
    """A test config as a plain dict (YAML for a CLI subprocess): one rule ``r`` on
    ``topics_regex`` requiring ``groups`` (None: discovered), no time floor, audit and
    checkpoint under ``tmp``; ``kafka`` overrides keys of the kafka section."""
    rule: dict[str, Any] = {"name": "r", "topics": topics_regex}
    if groups is not None:
        rule["required_groups"] = groups
    return {
        "kafka": {"bootstrap_servers": bootstrap, "request_timeout": "10s", "delete_timeout": "10s", **kafka},
        "defaults": {"min_retention": "0s", "min_step": 1},
        "rules": [rule],
        "audit": {"path": str(tmp / "audit")},
        "stream": {"checkpoint_location": str(tmp / "checkpoint"), "trigger_interval": "1s"},
    }


def purge_config(
    tmp: Path, bootstrap: str, topics_regex: str, groups: Optional[list[str]], **sections: Any
) -> PurgeConfig:
    """:func:`purge_config_dict` loaded; ``sections`` replace top-level sections (``kafka`` is
    merged into the kafka section instead)."""
    data = purge_config_dict(tmp, bootstrap, topics_regex, groups, **sections.pop("kafka", {}))
    data.update(sections)
    return from_dict(data)


def new_pipeline(
    spark: SparkSession,
    cfg: PurgeConfig,
    fault_hook: Optional[Callable[[str, int], None]] = None,
    query_id: Optional[str] = None,
) -> PurgePipeline:
    """A pipeline as the stream builds it, checkpointing under ``stream.checkpoint_location``,
    for ``process_batch`` calls without a stream: ``query_id`` (default: a new one) stands in
    for the query id a stream reads from its checkpoint; pass the same one to restart it."""
    if cfg.stream is None:
        raise WorkloadError("new_pipeline: the config has no stream section (stream.checkpoint_location)")
    return PurgePipeline(
        spark,
        cfg,
        default_client_factory(cfg),
        checkpoint_location=cfg.stream.checkpoint_location,
        fault_hook=fault_hook,
        query_id_override=query_id or f"harness-{uuid.uuid4().hex}",
    )


def run_available_now(spark: SparkSession, cfg: PurgeConfig, *, dry_run: bool = False, timeout_s: int = 180) -> PurgePipeline:
    """One-shot run of the real purge stream (``availableNow``, as ``spark-purge run``): it must
    end within ``timeout_s`` without an error; returns its (closed) pipeline."""
    query, pipeline = start_stream(spark, cfg, available_now=True, dry_run=dry_run)
    try:
        if not query.awaitTermination(timeout_s):
            query.stop()
            raise WorkloadError(f"the purge stream did not finish within {timeout_s}s")
        if query.exception() is not None:
            raise WorkloadError(f"the purge stream failed: {query.exception()}")
    finally:
        pipeline.close()
    return pipeline


def run_cycle(pipeline: PurgePipeline, batch_id: int) -> BatchResult:
    """One purge cycle on a fresh snapshot, read as the stream reads it (its group rows packed:
    what one foreachBatch call does)."""
    snapshot = held(read_snapshot(pipeline.spark, pipeline.config, packed=True))
    try:
        snapshot.count()
        return pipeline.process_batch(snapshot, batch_id)
    finally:
        drop(snapshot)


def _audit_path(source: AuditSource) -> str:
    return source if isinstance(source, str) else source.audit.path


def audit_rows(
    spark: SparkSession,
    source: AuditSource,
    record_type: Optional[str] = "outcome",
    *,
    batch_id: Optional[int] = None,
    missing_ok: bool = False,
) -> list[dict[str, Any]]:
    """The audit's rows of ``record_type`` (None: every type), optionally of one batch, ordered
    by batch, type, topic and partition. ``missing_ok``: no table yet reads as no rows."""
    path = _audit_path(source)
    if missing_ok and not DeltaTable.isDeltaTable(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    if record_type is not None:
        df = df.where(df.record_type == record_type)
    if batch_id is not None:
        df = df.where(df.batch_id == batch_id)
    return [r.asDict() for r in df.orderBy("batch_id", "record_type", "topic", "partition").collect()]


def audit_commit_versions(spark: SparkSession, source: AuditSource) -> dict[str, int]:
    """Delta commit version per ``userMetadata`` (``intent:<batch>`` / ``outcome:<batch>``)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{_audit_path(source)}`").collect()
    return {h["userMetadata"]: h["version"] for h in history if h["userMetadata"]}


# ---- a real Spark Structured Streaming consumer ----------------------------------------------

SPARK_KAFKA_JARS_ENV = "SPARK_PURGE_SPARK_KAFKA_JARS"


def spark_kafka_jars() -> list[str]:
    """Spark's Kafka connector folder (``$SPARK_PURGE_SPARK_KAFKA_JARS``), when it holds jars
    (``./dev.sh setup`` fills it): what ``get_spark(extra=...)`` needs to run a Kafka query."""
    named = os.environ.get(SPARK_KAFKA_JARS_ENV)
    folder = Path(named) if named else None
    return [str(folder)] if folder is not None and folder.is_dir() and any(folder.glob("*.jar")) else []


def run_stream_query(
    spark: SparkSession,
    bootstrap: str,
    topics: Sequence[str],
    checkpoint: Union[str, Path],
    sink: Union[str, Path],
    max_per_batch: int = 30,
    timeout_s: float = 180.0,
) -> None:
    """A real Structured Streaming consumer (Spark's Kafka connector): Kafka -> Delta (topic,
    partition, offset, value), from the earliest offsets, at most ``max_per_batch`` records per
    micro-batch, until what is available now has been read (``availableNow``); then it stops.
    Its position is in ``checkpoint``. Raises ``WorkloadError`` naming the query's error (e.g.
    the data loss Kafka reports when records it still needed were deleted)."""
    frames = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_batch)
        .load()
        .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
    )
    query = frames.writeStream.format("delta").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(str(sink))
    try:
        if not query.awaitTermination(int(timeout_s)):
            raise WorkloadError(f"the Spark query on {list(topics)} did not finish in {timeout_s:.0f}s")
    except WorkloadError:
        raise
    except Exception as exc:  # StreamingQueryException: name the query's own error
        raise WorkloadError(f"the Spark query on {list(topics)} failed: {str(exc).splitlines()[0][:300]}") from exc
    finally:
        query.stop()


def sink_positions(spark: SparkSession, sink: Union[str, Path]) -> dict[TopicPartitionKey, int]:
    """(topic, partition) -> the highest offset a query wrote to its Delta ``sink``, plus 1 (the
    next record it will read), for every partition it wrote a record of; {} before its first."""
    if not DeltaTable.isDeltaTable(spark, str(sink)):
        return {}
    rows = spark.read.format("delta").load(str(sink)).groupBy("topic", "partition").max("offset").collect()
    return {(r[0], int(r[1])): int(r[2]) + 1 for r in rows}


def outcome_rows(batch: int, n: int, at: datetime) -> list[Row]:
    """``n`` audit outcome rows (``schemas.AUDIT``) of batch ``batch``, one per partition of topic
    ``t``, planned and executed at ``at``: a batch's audit write as the benches and tests make one."""
    given = dict(
        run_id="bench", query_id="bench", batch_id=batch, record_type="outcome", planned_at=at, executed_at=at,
        snapshot_id="s", topic="t", stale_groups=[], status="deleted", dry_run=False, config_fingerprint="f",
        event_date=at.strftime("%Y-%m-%d"), prior_log_start_offset=0, high_watermark=10, binding_constraint="group",
    )
    return [Row(**{f.name: {**given, "partition": i}.get(f.name) for f in AUDIT.fields}) for i in range(n)]
