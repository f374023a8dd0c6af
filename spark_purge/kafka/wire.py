"""The transport: the only code in spark-purge that touches kafka-python internals.

``Wire`` borrows ``KafkaAdminClient`` for bootstrap, security and its connection manager, and
offers what the API-family modules (``offsets``, ``groups``, ``configs``, ``delete``) need:
``send`` a request to a node (or ``send_any`` broker), ``gather`` answers in flight, ``run`` a
coroutine on kafka-python's IO thread, ``sleep`` there, the broker's API versions, and
``forget_coordinators`` (kafka-python's group-coordinator cache is never invalidated).

Also here: broker error names (``error_name``, ``exc_name``), the request counter (every request
spark-purge sends, by API name; kafka-python's own bootstrap/ApiVersions/periodic-metadata
traffic is not included), and log redaction: SASL/SSL passwords are removed from every
``kafka.*`` and ``spark_purge.kafka.*`` log record (kafka-python logs its whole configuration at
DEBUG) and never appear in our messages. With SSL or SASL_SSL, the connection uses the one TLS
context ``tls.ssl_context`` builds, after ``tls.check_handshake`` proved TLS works with a
bootstrap server (or named the setting at fault).
"""
from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Optional, TypeVar, cast

import kafka.errors as Errors
from kafka import KafkaAdminClient

from spark_purge._time import Backoff, Deadline
from spark_purge.errors import AuthorizationError, ClusterUnreachable, ConfigError, KafkaError
from spark_purge.kafka import tls
from spark_purge.kafka.settings import ConnectionSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

AUTH_ERRORS = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    }
)
# Requests any broker can answer are sent to another one this many times when one is down.
SEND_ANY_ATTEMPTS = 4
_MAX_IN_FLIGHT = 16


# ---- secrets never reach a log line ------------------------------------------------------------


class _RedactSecrets(logging.Filter):
    secrets: set[str] = set()  # noqa: RUF012 - shared by design: one filter for every logger
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


def install_redaction(secrets: Iterable[str]) -> None:
    """Redact ``secrets`` from every kafka-python logger that exists now, and from ours."""
    with _RedactSecrets._lock:
        _RedactSecrets.secrets.update(s for s in secrets if s)
        names = [n for n in list(logging.Logger.manager.loggerDict) if n == "kafka" or n.startswith("kafka.")]
        ours = [n for n in list(logging.Logger.manager.loggerDict) if n.startswith("spark_purge.kafka")]
        for name in names + ours + [__name__]:
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


def error_retriable(code: int) -> bool:
    return bool(getattr(Errors.for_code(code), "retriable", False))


def exc_name(exc: BaseException) -> str:
    """A broker-style name for an exception a request ended with."""
    name = getattr(exc, "message", None)
    if isinstance(name, str) and name.isupper():
        return "NOT_LEADER_OR_FOLLOWER" if name == "NOT_LEADER_FOR_PARTITION" else name
    if isinstance(exc, (Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
        return "REQUEST_TIMED_OUT"
    if isinstance(exc, (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.UnknownBrokerIdError)):
        return "LEADER_UNREACHABLE"
    return type(exc).__name__


class RequestCounter:
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


# ---- the connection ----------------------------------------------------------------------------


def _unconstructed_admin() -> Any:
    """A ``KafkaAdminClient`` whose ``__init__`` has not run yet (see ``Wire._connect``)."""
    admin_class: Any = KafkaAdminClient
    return admin_class.__new__(admin_class)


# A bootstrap server's attempt gets at least this much of the request timeout.
_MIN_BOOTSTRAP_MS = 2_000


class _Unanswered(Exception):
    """No broker answered one bootstrap attempt (``cause``: the client's exception name)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Wire:
    """One connected kafka-python admin client, used only through the methods below."""

    def __init__(
        self, settings: ConnectionSettings, admin_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient
    ) -> None:
        self.settings = settings
        self.requests = RequestCounter()
        self._closed = False
        install_redaction(settings.secrets)
        self._admin = self._connect(admin_factory)
        install_redaction(settings.secrets)  # loggers kafka-python created while connecting
        self._manager = self._admin._manager

    def _connect(self, admin_factory: Callable[..., KafkaAdminClient]) -> KafkaAdminClient:
        cfg = self.settings
        kwargs: dict[str, Any] = {
            "max_in_flight_requests_per_connection": _MAX_IN_FLIGHT,
            **cfg.kafka_kwargs(),
            "bootstrap_timeout_ms": cfg.request_timeout_ms,
        }
        if tls.uses_tls(cfg):
            # One context for every connection; its files fail here naming their settings, and a
            # certificate problem fails at the first handshake instead of at the bootstrap timeout.
            kwargs["ssl_context"] = context = tls.ssl_context(cfg)
            if admin_factory is KafkaAdminClient:
                tls.check_handshake(cfg, context)
        # One bootstrap server at a time, each with its share of the request timeout: kafka-python
        # picks a bootstrap server at random and gives its handshake the whole timeout, so one
        # hung broker (its port open, nothing answering) would fail the connection though the
        # others answer. Once bootstrapped, the client knows every broker from the metadata.
        servers = list(cfg.bootstrap_servers)
        start = random.randrange(len(servers))
        order = servers[start:] + servers[:start]
        deadline = Deadline(cfg.request_timeout_ms / 1000)
        failures: list[str] = []
        for i, server in enumerate(order):
            share_ms = deadline.remaining_ms() // (len(order) - i)
            attempt_ms = max(min(_MIN_BOOTSTRAP_MS, deadline.remaining_ms()), share_ms)
            try:
                return self._connect_once(admin_factory, {**kwargs, "bootstrap_servers": [server], "bootstrap_timeout_ms": attempt_ms})
            except _Unanswered as exc:
                failures.append(f"{server}: {exc.cause}")
                if deadline.expired():
                    break
                if i + 1 < len(order):
                    log.warning("bootstrap server %s did not answer within %d ms (%s); trying %s", server, attempt_ms, exc.cause, order[i + 1])
        raise ClusterUnreachable(
            f"no Kafka broker answered at {cfg.servers} within {cfg.request_timeout_ms} ms ({'; '.join(failures)})"
        )

    def _connect_once(self, admin_factory: Callable[..., KafkaAdminClient], kwargs: dict[str, Any]) -> KafkaAdminClient:
        """One admin client bootstrapped with ``kwargs``; ``_Unanswered`` if no broker answered."""
        cfg = self.settings
        # Built in two steps so a constructor failing half-way can still be stopped (_abandon).
        admin = _unconstructed_admin() if admin_factory is KafkaAdminClient else None
        try:
            if admin is not None:
                admin.__init__(**kwargs)
                return admin
            return admin_factory(**kwargs)
        except Errors.SaslAuthenticationFailedError as exc:
            self._abandon(admin)
            raise AuthorizationError(
                f"authentication ({cfg.sasl_mechanism or 'SSL'}) as {cfg.sasl_plain_username!r} to {cfg.servers} "
                f"failed: {type(exc).__name__}"
            ) from None
        except Errors.AuthorizationError as exc:
            self._abandon(admin)
            raise AuthorizationError(f"Describe on cluster {cfg.servers} denied during bootstrap ({exc_name(exc)})") from None
        except Errors.KafkaConfigurationError as exc:
            self._abandon(admin)
            raise ConfigError(f"kafka settings: {exc}") from None
        except Exception as exc:
            self._abandon(admin)
            raise _Unanswered(type(exc).__name__) from None

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

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._admin.close()

    # ---- running and sending -----------------------------------------------------------------
    def run(self, coro_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``coro_fn(*args)`` on the IO thread and wait; kafka-python errors become ours."""
        if self._closed:
            raise KafkaError("the Kafka client is closed")
        try:
            return cast(T, self._manager.run(coro_fn, *args))
        except (KafkaError, AuthorizationError):
            raise
        except Errors.AuthorizationError as exc:
            raise AuthorizationError(f"{exc_name(exc)} from {self.settings.servers}: {exc}") from None
        except Errors.KafkaError as exc:
            raise KafkaError(f"Kafka request failed ({exc_name(exc)}): {exc}") from None

    def run_raw(self, coro_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Like ``run`` but kafka-python's exceptions pass through (the caller names them)."""
        return cast(T, self._manager.run(coro_fn, *args))

    def spawn(self, coro_fn: Callable[..., Awaitable[T]], *args: Any) -> Awaitable[T]:
        """Start ``coro_fn(*args)`` on the IO thread (from a coroutine); await it later."""
        return cast(Awaitable[T], self._manager.call_soon(coro_fn, *args))

    def send(self, request: Any, node_id: Optional[int] = None, timeout_ms: Optional[int] = None) -> Any:
        """Send on the IO thread (call from a coroutine); returns a kafka Future to await."""
        self.requests.add(str(request.name))
        return self._manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)

    async def send_any(self, request: Any, attempts: int = SEND_ANY_ATTEMPTS) -> Any:
        """Send a request any broker can answer (Metadata, DescribeConfigs, FindCoordinator).

        kafka-python picks the least loaded node, which may be one that just died; it then backs
        that node off, so the next attempt goes to another broker instead of failing the snapshot.
        """
        backoff = Backoff(first=0.1, cap=2.0)
        for attempt in range(attempts):
            try:
                return await self.send(request)
            except (Errors.KafkaConnectionError, Errors.NodeNotReadyError) as exc:
                if attempt == attempts - 1:
                    raise
                log.info("%s to an unreachable broker (%s); trying another", request.name, exc_name(exc))
                await self.sleep(backoff.next())
        raise AssertionError("unreachable")  # pragma: no cover

    async def gather(self, futures: Sequence[Any]) -> list[Any]:
        """Await futures already in flight; each result is the value or the exception."""
        out: list[Any] = []
        for fut in futures:
            try:
                out.append(await fut)
            except Exception as exc:  # collected per request: one slow leader must not hide the rest
                out.append(exc)
        return out

    async def sleep(self, seconds: float) -> None:
        await self._admin._net.sleep(seconds)

    # ---- broker facts and kafka-python workarounds ---------------------------------------------
    def api_version(self, request_class: Any) -> int:
        """The version of ``request_class`` both sides support; raises
        ``kafka.errors.IncompatibleBrokerVersion`` when the broker lacks the API."""
        return int(self._manager.broker_version_data.api_version(request_class))

    def has_api(self, request_class: Any) -> bool:
        try:
            self.api_version(request_class)
        except Errors.IncompatibleBrokerVersion:
            return False
        return True

    def forget_coordinators(self, group_ids: Iterable[str]) -> None:
        """Drop kafka-python's cached coordinator of each group: it never invalidates them, so
        after a coordinator move NOT_COORDINATOR would come back forever."""
        cache = getattr(self._manager.cluster, "_coordinators", None)
        if isinstance(cache, dict):
            for g in group_ids:
                for key in [k for k in cache if isinstance(k, tuple) and k[-1] == g]:
                    cache.pop(key, None)


__all__ = ["AUTH_ERRORS", "RequestCounter", "Wire", "error_name", "error_retriable", "exc_name", "install_redaction"]
