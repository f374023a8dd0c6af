"""The kafka-python adapter: cluster snapshots and per-leader DeleteRecords.

This module is the only place in spark-purge that knows kafka-python (3.0.x). It borrows
``KafkaAdminClient`` for bootstrap, security and its connection manager, and speaks the wire
protocol itself so requests grow with brokers and coordinators, not with partitions or groups:

- Metadata: 1 request (explicit topics or all topics);
- ListOffsets: per leader, EARLIEST + LATEST + LATEST/READ_COMMITTED (+ timestamps for floors),
  all leaders in parallel;
- DescribeConfigs: 1 request for every selected topic, with only the keys we need (the broker
  answers with defaults included — kafka-python's ``describe_configs`` filters to "modified");
- ListGroups: per broker, in parallel; FindCoordinator: 1 batched request (v4);
- OffsetFetch v8 (all groups of a coordinator in one request) and DescribeGroups (classic
  groups), per coordinator, in parallel; NOT_COORDINATOR drops our coordinator entry and
  looks it up again (kafka-python's own cache is never invalidated, so we keep our own);
- DeleteRecords: per leader via ``DeleteExecutor`` (see ``delete.py``).

``request_counts`` counts every request this adapter sends, by API name (kafka-python's own
bootstrap/ApiVersions/periodic-metadata traffic is not included).

Secrets: the SASL/SSL passwords are redacted from every ``kafka.*`` log record (kafka-python
logs its whole configuration at DEBUG) and never appear in our messages.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Optional, Protocol

import kafka.errors as Errors
from kafka import KafkaAdminClient
from kafka.protocol.admin import (
    DeleteRecordsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import IsolationLevel, ListOffsetsRequest, OffsetFetchRequest, OffsetSpec
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from spark_purge.errors import AuthorizationError, ClusterUnreachable, GroupsUnsettled, KafkaError
from spark_purge.kafka.delete import DeleteExecutor, LeaderRequestError, PartitionResult
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    DeleteOutcome,
    DroppedPartition,
    GroupCommit,
    GroupInfo,
    PartitionState,
    SnapshotIssue,
    SnapshotRequest,
    TopicPartitionKey,
)

log = logging.getLogger(__name__)

_TOPIC_RESOURCE = 2
_CONFIG_KEYS = ["cleanup.policy", "retention.ms", "remote.storage.enable"]
_AUTH_ERRORS = {
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
_COORDINATOR_RETRY = {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"}
_METADATA_RETRY = {
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_UNREACHABLE",
    "REQUEST_TIMED_OUT",
    "OFFSET_NOT_AVAILABLE",  # a new leader whose high watermark has not caught up yet (KIP-207)
}
_RETRY_ROUNDS = 5
_OFFSETS_TOPIC = "__consumer_offsets"
_ACL_DESCRIBE = 8  # AclOperation DESCRIBE: its bit in the authorized-operations bitfield


class ClusterClient(Protocol):
    """What spark-purge needs from a Kafka cluster."""

    def snapshot(self, request: Optional[SnapshotRequest] = None) -> ClusterSnapshot: ...

    def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]: ...

    def log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]: ...

    def delete_records(self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int = 30_000) -> list[DeleteOutcome]: ...

    @property
    def request_counts(self) -> Mapping[str, int]: ...

    def close(self) -> None: ...

    def __enter__(self) -> ClusterClient: ...

    def __exit__(self, *exc: object) -> None: ...


# ---- secrets never reach a log line ------------------------------------------------------------


class _RedactSecrets(logging.Filter):
    secrets: set[str] = set()
    _lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let logging report it as usual
            return True
        hit = False
        for secret in self.secrets:
            if secret and secret in message:
                message = message.replace(secret, "***")
                hit = True
        if hit:
            record.msg, record.args = message, ()
        return True


_REDACTOR = _RedactSecrets()


def _install_redaction(secrets: Iterable[str]) -> None:
    with _RedactSecrets._lock:
        _RedactSecrets.secrets.update(s for s in secrets if s)
        names = [n for n in list(logging.Logger.manager.loggerDict) if n == "kafka" or n.startswith("kafka.")]
        for name in names + [__name__]:
            logger = logging.getLogger(name)
            if _REDACTOR not in logger.filters:
                logger.addFilter(_REDACTOR)


# ---- errors ----------------------------------------------------------------------------------


def error_name(code: int) -> Optional[str]:
    """Broker error name for a wire error code (None for 0), modern spelling."""
    if code == 0:
        return None
    cls = Errors.for_code(code)
    name = getattr(cls, "message", None) or cls.__name__
    return "NOT_LEADER_OR_FOLLOWER" if name == "NOT_LEADER_FOR_PARTITION" else str(name)


def _error_retriable(code: int) -> bool:
    return bool(getattr(Errors.for_code(code), "retriable", False))


def _exc_name(exc: BaseException) -> str:
    name = getattr(exc, "message", None)
    if isinstance(name, str) and name.isupper():
        return "NOT_LEADER_OR_FOLLOWER" if name == "NOT_LEADER_FOR_PARTITION" else name
    if isinstance(exc, (Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
        return "REQUEST_TIMED_OUT"
    if isinstance(exc, (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.UnknownBrokerIdError)):
        return "LEADER_UNREACHABLE"
    return type(exc).__name__


class _Requests:
    """Thread-safe request counter by API name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, api: str) -> None:
        with self._lock:
            self._counts[api] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


class _Meta:
    """One Metadata answer, parsed."""

    def __init__(self) -> None:
        self.brokers: dict[int, str] = {}
        self.internal: dict[str, bool] = {}
        self.partitions: dict[TopicPartitionKey, tuple[Optional[int], tuple[int, ...], tuple[int, ...]]] = {}
        self.topic_errors: dict[str, str] = {}


class KafkaPythonClient:
    """``ClusterClient`` over kafka-python 3.0.x. Thread-safe; use as a context manager."""

    # DeleteRecords re-sends per partition after a leader move (None: until the timeout).
    delete_max_retries: Optional[int] = None

    def __init__(self, config: ClientConfig, admin_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient) -> None:
        self.config = config
        self._requests = _Requests()
        self._leaders: dict[TopicPartitionKey, Optional[int]] = {}
        self._coordinators: dict[str, int] = {}
        self._warned_offsets_acl = False
        self._lock = threading.Lock()
        self._closed = False
        _install_redaction(config.secrets)
        self._admin = self._connect(admin_factory)
        _install_redaction(config.secrets)  # loggers kafka-python created while connecting
        self._manager = self._admin._manager

    # ---- lifecycle ---------------------------------------------------------------------------
    def _connect(self, admin_factory: Callable[..., KafkaAdminClient]) -> KafkaAdminClient:
        cfg = self.config
        servers = cfg.bootstrap_servers
        kwargs: dict[str, Any] = {
            "client_id": "spark-purge",
            "max_in_flight_requests_per_connection": 16,
            **cfg.security,
            "bootstrap_servers": [s.strip() for s in servers.split(",")],
            "request_timeout_ms": cfg.request_timeout_ms,
            "bootstrap_timeout_ms": cfg.request_timeout_ms,
        }
        admin = object.__new__(KafkaAdminClient) if admin_factory is KafkaAdminClient else None
        try:
            if admin is not None:
                admin.__init__(**kwargs)  # type: ignore[misc]
                return admin
            return admin_factory(**kwargs)
        except Errors.SaslAuthenticationFailedError as exc:
            self._abandon(admin)
            user = cfg.security.get("sasl_plain_username")
            raise AuthorizationError(
                f"authentication ({cfg.security.get('sasl_mechanism') or 'SSL'}) as {user!r} to {servers} failed: "
                f"{type(exc).__name__}"
            ) from None
        except Errors.AuthorizationError as exc:
            self._abandon(admin)
            raise AuthorizationError(f"Describe on cluster {servers} denied during bootstrap ({_exc_name(exc)})") from None
        except Errors.KafkaConfigurationError as exc:
            self._abandon(admin)
            from spark_purge.errors import ConfigError

            raise ConfigError(f"kafka settings: {exc}") from None
        except Exception as exc:
            self._abandon(admin)
            raise ClusterUnreachable(
                f"no Kafka broker answered at {servers} within {cfg.request_timeout_ms} ms ({type(exc).__name__})"
            ) from None

    @staticmethod
    def _abandon(admin: Optional[KafkaAdminClient]) -> None:
        """Stop the IO thread of an admin client whose constructor failed half-way."""
        if admin is None:
            return
        for attr in ("_client", "_net"):
            part = getattr(admin, attr, None)
            try:
                if attr == "_client" and part is not None:
                    part.close()
                elif part is not None:
                    part.stop()
            except Exception:  # best effort on an already broken client
                pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._admin.close()

    def __enter__(self) -> KafkaPythonClient:
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    @property
    def request_counts(self) -> dict[str, int]:
        return self._requests.snapshot()

    @property
    def request_count(self) -> int:
        return sum(self._requests.snapshot().values())

    def reset_request_counts(self) -> None:
        self._requests.reset()

    # ---- plumbing ----------------------------------------------------------------------------
    def _run(self, coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        if self._closed:
            raise KafkaError("the Kafka client is closed")
        try:
            return self._manager.run(coro_fn, *args)
        except (KafkaError, AuthorizationError):
            raise
        except Errors.AuthorizationError as exc:
            raise AuthorizationError(f"{_exc_name(exc)} from {self.config.bootstrap_servers}: {exc}") from None
        except Errors.KafkaError as exc:
            raise KafkaError(f"Kafka request failed ({_exc_name(exc)}): {exc}") from None

    def _send(self, request: Any, node_id: Optional[int] = None, timeout_ms: Optional[int] = None) -> Any:
        """Send on the IO thread (call from a coroutine); returns a kafka Future."""
        self._requests.add(str(request.name))
        return self._manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)

    async def _send_any(self, request: Any, attempts: int = 4) -> Any:
        """Send a request any broker can answer (Metadata, DescribeConfigs, FindCoordinator).

        kafka-python picks the least loaded node, which may be one that just died; it then backs
        that node off, so the next attempt goes to another broker instead of failing the snapshot.
        """
        for attempt in range(attempts):
            try:
                return await self._send(request)
            except (Errors.KafkaConnectionError, Errors.NodeNotReadyError) as exc:
                if attempt == attempts - 1:
                    raise
                log.info("%s to an unreachable broker (%s); trying another", request.name, _exc_name(exc))
                await self._sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _gather(self, futures: Sequence[Any]) -> list[Any]:
        """Await futures already in flight; each result is the value or the exception."""
        out: list[Any] = []
        for fut in futures:
            try:
                out.append(await fut)
            except Exception as exc:  # collected per request: one slow leader must not hide the rest
                out.append(exc)
        return out

    def _spawn(self, coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return self._manager.call_soon(coro_fn, *args)

    async def _sleep(self, seconds: float) -> None:
        await self._admin._net.sleep(seconds)

    # ---- metadata ----------------------------------------------------------------------------
    async def _metadata(self, topics: Optional[Collection[str]]) -> _Meta:
        _Topic = MetadataRequest.MetadataRequestTopic
        request = MetadataRequest(
            topics=None if topics is None else [_Topic(name=t) for t in sorted(topics)],
            allow_auto_topic_creation=False,
        )
        response = await self._send_any(request)
        meta = _Meta()
        for b in response.brokers:
            meta.brokers[b.node_id] = f"{b.host}:{b.port}"
        for t in response.topics:
            err = error_name(t.error_code)
            if err is not None:
                meta.topic_errors[t.name] = err
                continue
            meta.internal[t.name] = bool(t.is_internal)
            for p in t.partitions:
                leader = p.leader_id if p.leader_id is not None and p.leader_id >= 0 else None
                meta.partitions[(t.name, p.partition_index)] = (leader, tuple(p.replica_nodes), tuple(p.isr_nodes))
        with self._lock:
            for tp, (leader, _, _) in meta.partitions.items():
                self._leaders[tp] = leader
        return meta

    async def _leaders_for(self, tps: Collection[TopicPartitionKey], refresh: bool) -> dict[TopicPartitionKey, Optional[int]]:
        with self._lock:
            known = {tp: self._leaders[tp] for tp in tps if tp in self._leaders}
        if refresh or len(known) < len(tps):
            meta = await self._metadata({tp[0] for tp in tps})
            return {tp: meta.partitions[tp][0] for tp in tps if tp in meta.partitions}
        return known

    # ---- ListOffsets -------------------------------------------------------------------------
    async def _list_offsets(
        self,
        queries: Mapping[str, tuple[int, Mapping[TopicPartitionKey, int]]],
        leaders: dict[TopicPartitionKey, Optional[int]],
        deadline: float,
    ) -> tuple[dict[str, dict[TopicPartitionKey, tuple[int, int]]], dict[TopicPartitionKey, str]]:
        """Several ListOffsets queries (name -> (isolation, {tp: spec})) at once, per leader.

        Returns ({name: {tp: (offset, timestamp)}}, {tp: error name} for partitions given up on).
        Partitions with a stale leader are retried after a metadata refresh until the deadline.
        """
        results: dict[str, dict[TopicPartitionKey, tuple[int, int]]] = {name: {} for name in queries}
        todo: dict[str, dict[TopicPartitionKey, int]] = {name: dict(specs) for name, (_, specs) in queries.items()}
        failed: dict[TopicPartitionKey, str] = {}
        _Topic = ListOffsetsRequest.ListOffsetsTopic
        _Partition = _Topic.ListOffsetsPartition
        for round_ in range(_RETRY_ROUNDS):
            sends: list[tuple[str, list[TopicPartitionKey], Any]] = []
            retry: dict[str, set[TopicPartitionKey]] = defaultdict(set)
            for name, specs in todo.items():
                isolation = queries[name][0]
                by_leader: dict[int, list[TopicPartitionKey]] = defaultdict(list)
                for tp in specs:
                    leader = leaders.get(tp)
                    if leader is None:
                        retry[name].add(tp)
                        failed.setdefault(tp, "LEADER_NOT_AVAILABLE")
                    else:
                        by_leader[leader].append(tp)
                for leader, tps in by_leader.items():
                    per_topic: dict[str, list[Any]] = defaultdict(list)
                    min_version = 2 if isolation else 0
                    for tp in tps:
                        per_topic[tp[0]].append(_Partition(partition_index=tp[1], timestamp=int(specs[tp])))
                        if specs[tp] < -2:
                            min_version = max(min_version, ListOffsetsRequest.min_version_for_timestamp(specs[tp]))
                    request = ListOffsetsRequest(
                        isolation_level=isolation,
                        topics=[_Topic(name=t, partitions=ps) for t, ps in per_topic.items()],
                        min_version=min_version,
                    )
                    remaining = max(1, int((deadline - time.monotonic()) * 1000))
                    sends.append((name, tps, self._send(request, node_id=leader, timeout_ms=remaining)))
            answers = await self._gather([f for _, _, f in sends])
            for (name, tps, _), answer in zip(sends, answers):
                if isinstance(answer, Exception):
                    for tp in tps:
                        failed[tp] = _exc_name(answer)
                        retry[name].add(tp)
                    continue
                for topic in answer.topics:
                    for p in topic.partitions:
                        tp = (topic.name, p.partition_index)
                        err = error_name(p.error_code)
                        if err is None:
                            offset = p.offset
                            if offset is None or (offset == -1 and p.old_style_offsets):
                                offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                            results[name][tp] = (int(offset), int(p.timestamp if p.timestamp is not None else -1))
                        elif err in _AUTH_ERRORS:
                            raise AuthorizationError(f"Describe on topic {topic.name!r} denied ({err}, ListOffsets)")
                        elif err in _METADATA_RETRY:
                            failed[tp] = err
                            retry[name].add(tp)
                        else:
                            failed[tp] = err
            todo = {name: {tp: todo[name][tp] for tp in tps} for name, tps in retry.items() if tps}
            if not todo or time.monotonic() >= deadline or round_ == _RETRY_ROUNDS - 1:
                break
            await self._sleep(min(0.1 * 2**round_, max(0.0, deadline - time.monotonic())))
            meta = await self._metadata({tp[0] for specs in todo.values() for tp in specs})
            for tp in {tp for specs in todo.values() for tp in specs}:
                if tp in meta.partitions:
                    leaders[tp] = meta.partitions[tp][0]
                else:  # the topic (or partition) is gone: nothing to retry
                    leaders[tp] = None
                    failed[tp] = meta.topic_errors.get(tp[0], "UNKNOWN_TOPIC_OR_PARTITION") + " (topic deleted?)"
                    for specs in todo.values():
                        specs.pop(tp, None)
            todo = {n: s for n, s in todo.items() if s}
            if not todo:
                break
        got_all = {tp for tp in failed if all(tp in results[n] for n in queries if tp in queries[n][1])}
        for tp in got_all:
            failed.pop(tp)
        return results, failed

    # ---- configs -----------------------------------------------------------------------------
    async def _topic_configs(self, topics: Collection[str]) -> tuple[dict[str, dict[str, Optional[str]]], dict[str, str]]:
        if not topics:
            return {}, {}
        _Res = DescribeConfigsRequest.DescribeConfigsResource
        request = DescribeConfigsRequest(
            resources=[_Res(resource_type=_TOPIC_RESOURCE, resource_name=t, configuration_keys=list(_CONFIG_KEYS)) for t in sorted(topics)],
            include_synonyms=False,
        )
        response = await self._send_any(request)
        configs: dict[str, dict[str, Optional[str]]] = {}
        errors: dict[str, str] = {}
        for result in response.results:
            err = error_name(result.error_code)
            if err is not None:  # kafka-python's describe_configs ignores this; we do not
                errors[result.resource_name] = f"{err}: {result.error_message or ''}".rstrip(": ")
                continue
            configs[result.resource_name] = {c.name: c.value for c in result.configs}
        return configs, errors

    # ---- groups ------------------------------------------------------------------------------
    async def _find_coordinators(self, group_ids: Collection[str], issues: list[SnapshotIssue]) -> dict[str, int]:
        with self._lock:
            out = {g: self._coordinators[g] for g in group_ids if g in self._coordinators}
        unknown = sorted(g for g in group_ids if g not in out)
        for round_ in range(_RETRY_ROUNDS):
            if not unknown:
                break
            if self._manager.broker_version_data.api_version(FindCoordinatorRequest) >= 4:
                answer = await self._send_any(FindCoordinatorRequest(key_type=0, coordinator_keys=unknown, min_version=4))
                rows = [(c.key, c.error_code, c.node_id, c.error_message) for c in answer.coordinators]
            else:
                futures = [self._send(FindCoordinatorRequest(key=g, key_type=0, max_version=3)) for g in unknown]
                answers = await self._gather(futures)
                rows = []
                for g, a in zip(unknown, answers):
                    if isinstance(a, Exception):
                        rows.append((g, 15, -1, str(a)))
                    else:
                        rows.append((g, a.error_code, a.node_id, a.error_message))
            retry = []
            for key, code, node_id, message in rows:
                err = error_name(code)
                if err is None:
                    out[key] = node_id
                elif err in _COORDINATOR_RETRY:
                    retry.append(key)
                else:
                    issues.append(SnapshotIssue("coordinator", key, err, f"FindCoordinator for group {key!r}: {message or err}"))
            unknown = retry
            if unknown:
                await self._sleep(0.1 * 2**round_)
        for g in unknown:
            issues.append(SnapshotIssue("coordinator", g, "COORDINATOR_NOT_AVAILABLE", f"no coordinator for group {g!r}"))
        with self._lock:
            self._coordinators.update(out)
        return out

    def _forget_coordinators(self, group_ids: Iterable[str]) -> None:
        with self._lock:
            for g in group_ids:
                self._coordinators.pop(g, None)
        cache = getattr(self._manager.cluster, "_coordinators", None)
        if isinstance(cache, dict):  # kafka-python never invalidates its own cache
            for g in group_ids:
                for key in [k for k in cache if isinstance(k, tuple) and k[-1] == g]:
                    cache.pop(key, None)

    async def _check_cluster_describe(self) -> None:
        """Raise unless the principal has Describe on the cluster.

        Without it the broker answers ListGroups with only the groups the principal may describe,
        silently: a consumer group the purge cannot see could then never hold a topic back.
        """
        try:
            self._manager.broker_version_data.api_version(DescribeClusterRequest)
        except Errors.IncompatibleBrokerVersion:  # brokers before 2.8
            log.warning("broker has no DescribeCluster API: cannot check the Cluster Describe ACL")
            return
        answer = await self._send_any(DescribeClusterRequest(include_cluster_authorized_operations=True))
        err = error_name(answer.error_code)
        if err in _AUTH_ERRORS:
            raise AuthorizationError(f"Describe on the cluster denied ({err}, DescribeCluster)")
        # kafka-python decodes the bitfield into a set of AclOperation codes (None: not computed).
        ops = answer.authorized_operations
        if err is None and ops is not None and _ACL_DESCRIBE not in ops:
            raise AuthorizationError(
                "Describe on the cluster denied to the purge principal: ListGroups would then silently hide "
                "every consumer group it may not describe, and a hidden group could not hold its topics back; "
                "grant it Cluster Describe (kafka-acls --operation Describe --cluster)"
            )

    async def _list_groups(
        self, brokers: Collection[int], deadline: float
    ) -> dict[str, tuple[Optional[str], Optional[str], str]]:
        """group id -> (state, type, protocol_type): a group list known to be complete.

        ListGroups answers only for the ``__consumer_offsets`` partitions a broker leads *and*
        knows it leads. While coordinators move (a broker died, leaders re-elected), a broker
        that already left the metadata and its successor that has not yet taken over both miss
        the groups of that partition — silently. So each broker gets Metadata(__consumer_offsets),
        ListGroups, Metadata(__consumer_offsets) on one connection (a broker handles a
        connection's requests in order): a partition counts as covered only when the same broker
        led it, at the same leader epoch, before and after its ListGroups. Until every partition
        is covered (and while a broker is unreachable or still loading), the listing is retried
        with fresh metadata until the deadline; then the snapshot fails rather than plan from a
        list that may lack a group.
        """
        order = sorted(brokers)
        last_problem = "no attempt"
        for attempt in range(1_000):
            if attempt:
                if time.monotonic() >= deadline:
                    break
                await self._sleep(min(0.5 * attempt, 2.0, max(0.0, deadline - time.monotonic())))
                order = sorted((await self._metadata(())).brokers)
            groups, last_problem = await self._list_groups_once(order)
            if groups is not None:
                return groups
            log.info("group listing not trustworthy yet (%s); retrying", last_problem)
        raise GroupsUnsettled(f"could not list consumer groups completely before the deadline: {last_problem}")

    async def _list_groups_once(
        self, order: Sequence[int]
    ) -> tuple[Optional[dict[str, tuple[Optional[str], Optional[str], str]]], str]:
        """One round; (groups, "") when complete, else (None, what is wrong). Raises on denial."""
        _Topic = MetadataRequest.MetadataRequestTopic

        def offsets_metadata() -> MetadataRequest:
            return MetadataRequest(topics=[_Topic(name=_OFFSETS_TOPIC)], allow_auto_topic_creation=False)

        sends = []
        for b in order:
            sends += [
                self._send(offsets_metadata(), node_id=b),
                self._send(ListGroupsRequest(min_version=0), node_id=b),
                self._send(offsets_metadata(), node_id=b),
            ]
        answers = await self._gather(sends)
        groups: dict[str, tuple[Optional[str], Optional[str], str]] = {}
        covered: set[int] = set()
        all_partitions: set[int] = set()
        check_leaders = True
        for i, broker in enumerate(order):
            before, answer, after = answers[3 * i : 3 * i + 3]
            for reply in (before, answer, after):
                if isinstance(reply, Exception):
                    return None, f"broker {broker} did not answer ({_exc_name(reply)})"
            err = error_name(answer.error_code)
            if err in _AUTH_ERRORS:
                raise AuthorizationError(f"Describe on cluster denied ({err}, ListGroups on broker {broker})")
            if err is not None:  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ...
                return None, f"ListGroups on broker {broker}: {err}"
            for g in answer.groups:
                gtype = (getattr(g, "group_type", None) or "").lower() or ("classic" if answer.API_VERSION < 5 else "unknown")
                state = getattr(g, "group_state", None) or None
                groups[g.group_id] = (state, gtype, g.protocol_type or "")
            led = []
            for meta in (before, after):
                topic = next((t for t in meta.topics if t.name == _OFFSETS_TOPIC), None)
                t_err = error_name(topic.error_code) if topic is not None else "UNKNOWN_TOPIC_OR_PARTITION"
                if t_err == "UNKNOWN_TOPIC_OR_PARTITION":
                    led.append({})  # no group has ever committed: nothing to miss
                    continue
                if t_err in _AUTH_ERRORS:
                    check_leaders = False  # cannot see who leads: say so below, do not guess
                    led.append({})
                    continue
                if t_err is not None:
                    return None, f"Metadata for {_OFFSETS_TOPIC} from broker {broker}: {t_err}"
                all_partitions.update(p.partition_index for p in topic.partitions)
                led.append({p.partition_index: p.leader_epoch for p in topic.partitions if p.leader_id == broker})
            covered.update(p for p, epoch in led[0].items() if led[1].get(p) == epoch)
        if not check_leaders:
            if not self._warned_offsets_acl:
                self._warned_offsets_acl = True
                log.warning(
                    "no Describe on topic %s: cannot verify that group coordinators were stable during "
                    "ListGroups (a group could be missed while coordinators move); grant it to the purge principal",
                    _OFFSETS_TOPIC,
                )
            return groups, ""
        moving = sorted(all_partitions - covered)
        if moving:
            shown = ", ".join(map(str, moving[:10])) + (" ..." if len(moving) > 10 else "")
            return None, f"group coordinators moving: {_OFFSETS_TOPIC} partitions {shown} had no stable leader during ListGroups"
        return groups, ""

    async def _fetch_group_state(
        self, group_ids: Sequence[str], listed: Mapping[str, tuple[Optional[str], Optional[str], str]],
        issues: list[SnapshotIssue], deadline: float,
    ) -> tuple[dict[str, dict[TopicPartitionKey, tuple[int, Optional[str]]]], dict[str, tuple[Optional[str], Optional[int]]]]:
        """Committed offsets (OffsetFetch v8) and classic-group descriptions, per coordinator."""
        offsets: dict[str, dict[TopicPartitionKey, tuple[int, Optional[str]]]] = {}
        described: dict[str, tuple[Optional[str], Optional[int]]] = {}
        todo = list(group_ids)
        v8 = self._manager.broker_version_data.api_version(OffsetFetchRequest) >= 8
        _Group = OffsetFetchRequest.OffsetFetchRequestGroup
        for round_ in range(_RETRY_ROUNDS):
            coords = await self._find_coordinators(todo, issues)
            by_coord: dict[int, list[str]] = defaultdict(list)
            for g in todo:
                if g in coords:
                    by_coord[coords[g]].append(g)
            sends: list[tuple[str, list[str], Any]] = []
            for coord, gs in sorted(by_coord.items()):
                remaining = max(1, int((deadline - time.monotonic()) * 1000))
                if v8:
                    req = OffsetFetchRequest(groups=[_Group(group_id=g, topics=None) for g in gs], min_version=8, max_version=8)
                    sends.append(("fetch", gs, self._send(req, node_id=coord, timeout_ms=remaining)))
                else:
                    for g in gs:
                        req = OffsetFetchRequest(group_id=g, topics=None, min_version=2, max_version=7)
                        sends.append(("fetch", [g], self._send(req, node_id=coord, timeout_ms=remaining)))
                classic = [g for g in gs if (listed.get(g, (None, None, ""))[1] or "classic") == "classic"]
                if classic:
                    req = DescribeGroupsRequest(groups=classic, include_authorized_operations=False)
                    sends.append(("describe", classic, self._send(req, node_id=coord, timeout_ms=remaining)))
            answers = await self._gather([f for _, _, f in sends])
            retry: set[str] = set()
            for (kind, gs, _), answer in zip(sends, answers):
                if isinstance(answer, Exception):
                    name = _exc_name(answer)
                    retry.update(gs)
                    self._forget_coordinators(gs)
                    for g in gs:
                        issues.append(SnapshotIssue("group", g, name, f"{kind} for group {g!r} failed: {name}"))
                    continue
                if kind == "describe":
                    for d in answer.groups:
                        err = error_name(d.error_code)
                        if err in _COORDINATOR_RETRY:
                            retry.add(d.group_id)
                            self._forget_coordinators([d.group_id])
                        elif err is None:
                            described[d.group_id] = (d.group_state or None, len(d.members))
                    continue
                groups_answer = answer.groups if v8 else [answer]
                for g_id, ga in zip(gs, groups_answer) if not v8 else ((ga.group_id, ga) for ga in groups_answer):
                    err = error_name(ga.error_code) or (error_name(answer.error_code) if not v8 else None)
                    if err in _COORDINATOR_RETRY:
                        retry.add(g_id)
                        self._forget_coordinators([g_id])
                        continue
                    if err is not None:
                        what = "Describe on group" if err in _AUTH_ERRORS else "OffsetFetch for group"
                        issues.append(SnapshotIssue("group", g_id, err, f"{what} {g_id!r} failed: {err}"))
                        continue
                    commits: dict[TopicPartitionKey, tuple[int, Optional[str]]] = {}
                    for t in ga.topics:
                        for p in t.partitions:
                            if error_name(p.error_code) is None and p.committed_offset is not None and p.committed_offset >= 0:
                                commits[(t.name, p.partition_index)] = (int(p.committed_offset), p.metadata)
                    offsets[g_id] = commits
            todo = sorted(retry - set(offsets))
            if not todo or time.monotonic() >= deadline:
                break
            await self._sleep(0.1 * 2**round_)
        # A group read in a later round is fine: drop the transient issues of earlier rounds.
        transient = _COORDINATOR_RETRY | {"LEADER_UNREACHABLE", "REQUEST_TIMED_OUT"}
        issues[:] = [i for i in issues if not (i.resource in offsets and i.error in transient)]
        return offsets, described

    async def _groups(
        self, brokers: Collection[int], topics: Collection[str], issues: list[SnapshotIssue], deadline: float
    ) -> tuple[list[GroupInfo], list[tuple[GroupInfo, TopicPartitionKey, int, Optional[str]]], list[str]]:
        """(groups, their commits on ``topics``, groups whose commits could not be read)."""
        await self._check_cluster_describe()
        listed = await self._list_groups(brokers, deadline)
        selected = sorted(
            g for g, (_, gtype, _) in listed.items() if gtype != "share" and self.config.selects_group(g)
        )
        if not selected:
            return [], [], []
        offsets, described = await self._fetch_group_state(selected, listed, issues, deadline)
        unreadable = [g for g in selected if g not in offsets]
        topic_set = set(topics)
        infos: list[GroupInfo] = []
        commits: list[tuple[GroupInfo, TopicPartitionKey, int, Optional[str]]] = []
        for g in selected:
            state, gtype, _ = listed[g]
            members: Optional[int] = None
            if g in described:
                d_state, d_members = described[g]
                # DescribeGroups answers "Dead" for KIP-848 groups: keep ListGroups' word then.
                if gtype == "classic" or d_state not in (None, "Dead"):
                    state, members = d_state or state, d_members
            info = GroupInfo(g, state, gtype, members)
            infos.append(info)
            for tp, (offset, metadata) in sorted(offsets.get(g, {}).items()):
                if tp[0] in topic_set:
                    commits.append((info, tp, offset, metadata))
        return infos, commits, unreadable

    # ---- snapshot ----------------------------------------------------------------------------
    def snapshot(self, request: Optional[SnapshotRequest] = None) -> ClusterSnapshot:
        """One consistent read of partition state and group commits for the selected topics."""
        return self._run(self._snapshot_async, request or SnapshotRequest())  # type: ignore[no-any-return]

    async def _snapshot_async(self, req: SnapshotRequest) -> ClusterSnapshot:
        cfg = self.config
        now_ms = req.snapshot_time_ms if req.snapshot_time_ms is not None else int(time.time() * 1000)
        snapshot_id = req.snapshot_id or str(uuid.uuid4())
        deadline = time.monotonic() + cfg.request_timeout_ms / 1000
        issues: list[SnapshotIssue] = []
        dropped: list[DroppedPartition] = []

        explicit_only = cfg.topics is not None and cfg.topic_include is None
        meta = await self._metadata(cfg.topics if explicit_only else None)
        missing: list[str] = []
        for t in cfg.topics or ():
            err = meta.topic_errors.get(t)
            if err in _AUTH_ERRORS:
                raise AuthorizationError(f"Describe on topic {t!r} denied ({err}, Metadata)")
            if t not in meta.internal:
                missing.append(t)
        topics = sorted(t for t, internal in meta.internal.items() if cfg.selects_topic(t, internal))
        topic_set = set(topics)
        tps = sorted(tp for tp in meta.partitions if tp[0] in topic_set)
        leaders = {tp: meta.partitions[tp][0] for tp in tps}

        groups_future = None
        if req.include_groups:
            groups_future = self._spawn(self._groups, sorted(meta.brokers), topics, issues, deadline)
        configs_future = self._spawn(self._topic_configs, topics)

        floors: dict[str, int] = {}
        for t in topics:
            matched = [f.resolve(now_ms) for f in req.time_floors if f.matches(t)]
            if matched:
                floors[t] = min(matched)  # the earliest floor protects the most
        queries: dict[str, tuple[int, Mapping[TopicPartitionKey, int]]] = {
            "earliest": (0, {tp: int(OffsetSpec.EARLIEST) for tp in tps}),
            "latest": (0, {tp: int(OffsetSpec.LATEST) for tp in tps}),
            "stable": (int(IsolationLevel.READ_COMMITTED), {tp: int(OffsetSpec.LATEST) for tp in tps}),
        }
        floor_tps = {tp: max(0, floors[tp[0]]) for tp in tps if tp[0] in floors}
        if floor_tps:
            queries["floor"] = (0, floor_tps)
        offsets, failed = await self._list_offsets(queries, leaders, deadline) if tps else ({n: {} for n in queries}, {})

        configs, config_errors = await configs_future
        for t, err in config_errors.items():
            if err.startswith("UNKNOWN_TOPIC_OR_PARTITION"):
                for tp in tps:
                    if tp[0] == t and tp not in failed:
                        failed[tp] = "UNKNOWN_TOPIC_OR_PARTITION (topic deleted during the snapshot)"
            else:
                issues.append(SnapshotIssue("topic_config", t, err.split(":")[0], f"DescribeConfigs on topic {t!r}: {err}"))

        partitions: list[PartitionState] = []
        for tp in tps:
            need = [n for n in ("earliest", "latest", "stable") if tp not in offsets[n]]
            if tp in failed or need or (tp in floor_tps and tp not in offsets["floor"]):
                reason = failed.get(tp) or f"no answer for {', '.join(need) or 'floor'} offset"
                dropped.append(DroppedPartition(tp[0], tp[1], reason))
                continue
            leader, replicas, isr = meta.partitions[tp]
            hw = offsets["latest"][tp][0]
            floor_time = floors.get(tp[0])
            floor_offset = None
            if tp in floor_tps:
                floor_offset = offsets["floor"][tp][0]
                if floor_offset < 0:  # every record is older than the floor
                    floor_offset = hw
            conf = configs.get(tp[0], {})
            partitions.append(
                PartitionState(
                    topic=tp[0],
                    partition=tp[1],
                    leader=leader,
                    replicas=replicas,
                    isr=isr,
                    log_start_offset=offsets["earliest"][tp][0],
                    high_watermark=hw,
                    last_stable_offset=offsets["stable"][tp][0],
                    internal=meta.internal[tp[0]],
                    cleanup_policy=conf.get("cleanup.policy"),
                    retention_ms=_int_or_none(conf.get("retention.ms")),
                    remote_storage_enable=_bool_or_none(conf.get("remote.storage.enable")),
                    time_floor_time_ms=floor_time,
                    time_floor_offset=floor_offset,
                )
            )
        kept = {(p.topic, p.partition) for p in partitions}
        infos: list[GroupInfo] = []
        commits: list[GroupCommit] = []
        unreadable: list[str] = []
        if groups_future is not None:
            infos, raw, unreadable = await groups_future
            for info, tp, offset, metadata in raw:
                if tp in kept:
                    commits.append(
                        GroupCommit(info.group_id, info.group_state, info.group_type, info.member_count, tp[0], tp[1], offset, metadata)
                    )
        if dropped:
            log.warning("snapshot %s dropped %d partition(s), e.g. %s", snapshot_id, len(dropped), dropped[0])
        return ClusterSnapshot(
            snapshot_id=snapshot_id,
            snapshot_time_ms=now_ms,
            partitions=tuple(partitions),
            commits=tuple(commits),
            groups=tuple(infos),
            missing_topics=tuple(missing),
            dropped_partitions=tuple(dropped),
            issues=tuple(issues),
            unreadable_groups=tuple(unreadable),
        )

    # ---- offsets by time / log start ----------------------------------------------------------
    def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Offset of the first record at/after each timestamp (ms); the high watermark when every
        record is older. Partitions that could not be read raise KafkaError naming them."""
        return self._run(self._offsets_for_times_async, dict(timestamps))  # type: ignore[no-any-return]

    async def _offsets_for_times_async(self, timestamps: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        if not timestamps:
            return {}
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        leaders = await self._leaders_for(list(timestamps), refresh=False)
        queries = {
            "time": (0, {tp: max(0, int(ts)) for tp, ts in timestamps.items()}),
            "latest": (0, {tp: int(OffsetSpec.LATEST) for tp in timestamps}),
        }
        res, failed = await self._list_offsets(queries, dict(leaders), deadline)
        if failed:
            raise KafkaError(f"ListOffsets by timestamp failed for {_describe_failed(failed)}")
        return {tp: (res["time"][tp][0] if res["time"][tp][0] >= 0 else res["latest"][tp][0]) for tp in timestamps}

    def log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Current log start offsets; partitions that could not be read are left out."""
        return self._run(self._log_start_async, [(str(t), int(p)) for t, p in tps])  # type: ignore[no-any-return]

    async def _log_start_async(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        if not tps:
            return {}
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        leaders = await self._leaders_for(tps, refresh=False)
        res, _ = await self._list_offsets({"earliest": (0, {tp: int(OffsetSpec.EARLIEST) for tp in tps})}, dict(leaders), deadline)
        return {tp: v[0] for tp, v in res["earliest"].items()}

    # ---- DeleteRecords -----------------------------------------------------------------------
    def delete_records(self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int = 30_000) -> list[DeleteOutcome]:
        """Delete records below each cutoff: one request per leader, leaders in parallel, one
        ``DeleteOutcome`` per partition (in input order). Never raises for a partition error."""
        if not cutoffs:
            return []
        return DeleteExecutor(_Transport(self), max_retries=self.delete_max_retries).run(cutoffs, timeout_ms)

    def _send_delete_records(self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int) -> dict[TopicPartitionKey, PartitionResult]:
        _Topic = DeleteRecordsRequest.DeleteRecordsTopic
        _Partition = _Topic.DeleteRecordsPartition
        per_topic: dict[str, list[Any]] = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            per_topic[topic].append(_Partition(partition_index=partition, offset=int(offset)))
        request = DeleteRecordsRequest(
            topics=[_Topic(name=t, partitions=ps) for t, ps in per_topic.items()], timeout_ms=int(timeout_ms)
        )

        async def send() -> Any:
            # The broker waits up to timeout_ms for followers; give the wire a little more.
            return await self._send(request, node_id=leader, timeout_ms=int(timeout_ms) + 5_000)

        try:
            response = self._manager.run(send)
        except Exception as exc:
            name = _exc_name(exc)
            raise LeaderRequestError(f"DeleteRecords to leader {leader} failed: {name}", timed_out=name == "REQUEST_TIMED_OUT") from None
        out: dict[TopicPartitionKey, PartitionResult] = {}
        for t in response.topics:
            for p in t.partitions:
                err = error_name(p.error_code)
                message = None
                if err is not None:
                    message = f"DeleteRecords on {t.name}-{p.partition_index} at offset {offsets.get((t.name, p.partition_index))}: {err}"
                    if err == "TOPIC_AUTHORIZATION_FAILED":
                        message = f"Delete on topic {t.name!r} denied (TOPIC_AUTHORIZATION_FAILED)"
                out[(t.name, p.partition_index)] = PartitionResult(err, int(p.low_watermark), _error_retriable(p.error_code), message)
        return out


class _Transport:
    """DeleteTransport over the adapter (blocking calls, safe from several threads)."""

    def __init__(self, client: KafkaPythonClient) -> None:
        self._client = client

    def leaders(self, tps: Collection[TopicPartitionKey], refresh: bool) -> Mapping[TopicPartitionKey, Optional[int]]:
        return self._client._run(self._client._leaders_for, list(tps), refresh)  # type: ignore[no-any-return]

    def send_delete_records(self, leader: int, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int) -> Mapping[TopicPartitionKey, PartitionResult]:
        return self._client._send_delete_records(leader, offsets, timeout_ms)

    def log_start_offsets(self, tps: Collection[TopicPartitionKey]) -> Mapping[TopicPartitionKey, int]:
        return self._client.log_start_offsets(tps)


def _describe_failed(failed: Mapping[TopicPartitionKey, str]) -> str:
    items = sorted(failed.items())
    text = ", ".join(f"{t}-{p} ({e})" for (t, p), e in items[:10])
    return text + (f" and {len(items) - 10} more" if len(items) > 10 else "")


def _int_or_none(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _bool_or_none(value: Optional[str]) -> Optional[bool]:
    if value is None:
        return None
    return value.strip().lower() == "true"


def open_client(config: Any) -> KafkaPythonClient:
    """A connected client for a ``ClientConfig`` or a ``spark_purge.config.PurgeConfig``."""
    if isinstance(config, ClientConfig):
        return KafkaPythonClient(config)
    from spark_purge.config import kafka_client_kwargs

    kwargs = dict(kafka_client_kwargs(config))
    retries = config.kafka.retries
    servers = kwargs.pop("bootstrap_servers")
    timeout = kwargs.pop("request_timeout_ms", 30_000)
    security = {k: v for k, v in kwargs.items() if v is not None}
    client = KafkaPythonClient(
        ClientConfig(
            bootstrap_servers=",".join(servers) if isinstance(servers, (list, tuple)) else str(servers),
            request_timeout_ms=int(timeout),
            security=security,
        )
    )
    client.delete_max_retries = retries  # kafka.retries: re-sends after a leader move or an unreachable leader
    return client


__all__ = ["ClusterClient", "KafkaPythonClient", "error_name", "open_client"]
