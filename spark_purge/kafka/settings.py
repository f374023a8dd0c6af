"""``ConnectionSettings``: how every connection to the cluster is made, in one frozen value.

Built once from the purge config (``spark_purge.config.connection_settings``), carried to the
``kafka_state`` data source as string options (``to_options``) and read back there
(``from_options``) without loss, and handed to kafka-python as keyword arguments
(``kafka_kwargs``). Snapshot connections and delete connections use the very same value, so
``client_id``, ``retries``, the request timeout, the retry backoff and every security setting
apply to both.

Secrets (``sasl_plain_password``, ``ssl_password``) are values here, resolved at the last moment
from references in the config; they never appear in ``repr``/``str`` (nor in the masked
``ClientKwargs``), and the adapter redacts them from every kafka-python log record.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Optional

from spark_purge.errors import ConfigError

# Settings that carry secret values: masked in every repr, redacted from logs.
SECRET_FIELDS = frozenset({"sasl_plain_password", "ssl_password"})
# Data-source option keys that are not ``kafka.<field>``.
_OPTION_KEYS = {"bootstrap_servers": "bootstrap.servers", "request_timeout_ms": "request.timeout.ms"}
_KAFKA_PREFIX = "kafka."


class ClientKwargs(dict[str, Any]):
    """kafka-python keyword arguments whose ``repr``/``str`` mask secret values."""

    def __repr__(self) -> str:
        shown = {k: ("***" if k in SECRET_FIELDS else v) for k, v in self.items()}
        return f"ClientKwargs({shown!r})"

    __str__ = __repr__


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything a connection needs. ``bootstrap_servers`` also accepts ``"h1:p,h2:p"``.

    ``retries``: re-sends of one request after a retriable error (a leader move, a coordinator
    move, an unreachable leader), within the request timeout; None retries until the timeout for
    DeleteRecords and 4 times for snapshot reads (a group's reads follow a moved coordinator
    until the timeout). ``retry_backoff_ms``: the first pause between
    such retries (doubled each time), also kafka-python's own ``retry_backoff_ms``.
    """

    bootstrap_servers: tuple[str, ...]
    client_id: str = "spark-purge"
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100  # kafka-python's default
    retries: Optional[int] = None
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: Optional[str] = None
    sasl_plain_username: Optional[str] = None
    sasl_plain_password: Optional[str] = field(default=None, repr=False)
    sasl_kerberos_service_name: Optional[str] = None
    sasl_kerberos_domain_name: Optional[str] = None
    ssl_check_hostname: bool = True
    ssl_cafile: Optional[str] = None
    ssl_certfile: Optional[str] = None
    ssl_keyfile: Optional[str] = None
    ssl_password: Optional[str] = field(default=None, repr=False)
    ssl_crlfile: Optional[str] = None

    def __post_init__(self) -> None:
        servers: Any = self.bootstrap_servers
        if isinstance(servers, str):
            servers = tuple(s.strip() for s in servers.split(",") if s.strip())
        elif isinstance(servers, (list, tuple)):
            servers = tuple(str(s).strip() for s in servers)
        else:
            servers = ()
        if not servers:
            raise ConfigError("bootstrap.servers: expected host:port[,host:port...], got nothing")
        for s in servers:
            host, _, port = s.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"bootstrap.servers: expected host:port, got {s!r}")
        object.__setattr__(self, "bootstrap_servers", servers)
        _check_int("request.timeout.ms", self.request_timeout_ms, minimum=1)
        _check_int("kafka.retry_backoff_ms", self.retry_backoff_ms, minimum=0)
        if self.retries is not None:
            _check_int("kafka.retries", self.retries, minimum=0)
        if not isinstance(self.ssl_check_hostname, bool):
            raise ConfigError(f"kafka.ssl_check_hostname: expected true or false, got {self.ssl_check_hostname!r}")
        for f in fields(self):
            if f.name not in _INT_FIELDS | {"bootstrap_servers", "ssl_check_hostname"}:
                value = getattr(self, f.name)
                if value is not None and not isinstance(value, str):
                    # Never echo the value: it may be a password.
                    raise ConfigError(f"{_option_key(f.name)}: expected a string")
        if not self.client_id:
            raise ConfigError("kafka.client_id: expected a non-empty string")

    def __repr__(self) -> str:  # secrets never shown
        shown = ", ".join(
            f"{f.name}={'***' if f.name in SECRET_FIELDS else repr(getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) is not None
        )
        return f"ConnectionSettings({shown})"

    __str__ = __repr__

    @property
    def servers(self) -> str:
        """The bootstrap servers as one ``host:port,host:port`` string (for messages)."""
        return ",".join(self.bootstrap_servers)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(v for v in (self.sasl_plain_password, self.ssl_password) if v)

    def without_secrets(self) -> ConnectionSettings:
        """These settings with every secret dropped: what may travel to executors, which never
        connect (a connection made from it fails to authenticate, it does not leak)."""
        dropped: dict[str, Any] = dict.fromkeys(SECRET_FIELDS)
        return replace(self, **dropped)

    def kafka_kwargs(self) -> ClientKwargs:
        """Keyword arguments for kafka-python clients (``retries`` is ours, not kafka-python's)."""
        kwargs = ClientKwargs(
            bootstrap_servers=list(self.bootstrap_servers),
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            security_protocol=self.security_protocol,
        )
        for f in fields(self):
            if f.name in kwargs or f.name in ("retries", "ssl_check_hostname"):
                continue
            value = getattr(self, f.name)
            if value is not None:
                kwargs[f.name] = value
        if self.security_protocol.endswith("SSL") or not self.ssl_check_hostname:
            kwargs["ssl_check_hostname"] = self.ssl_check_hostname
        return kwargs

    # ---- data-source options -------------------------------------------------------------------
    def to_options(self) -> dict[str, str]:
        """String options for the ``kafka_state`` data source; ``from_options`` reads them back
        to an equal value. Spark redacts option values whose key names a password."""
        opts: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name == "ssl_check_hostname" and value is True):
                continue
            if f.name == "bootstrap_servers":
                text = ",".join(value)
            elif isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            opts[_option_key(f.name)] = text
        return opts

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ConnectionSettings:
        """The settings in data-source ``options`` (keys lower-case; other keys are ignored).

        ``kafka.<setting>`` may spell the setting with dots or underscores
        (``kafka.security.protocol``). Unknown ``kafka.*`` keys and bad values raise
        ``ConfigError`` naming the option (never a secret's value).
        """
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in options.items():
            if key in _OPTION_KEYS.values():
                name = next(n for n, k in _OPTION_KEYS.items() if k == key)
            elif key.startswith(_KAFKA_PREFIX):
                name = key[len(_KAFKA_PREFIX):].replace(".", "_").lower()
                if name not in known or name in _OPTION_KEYS:
                    expected = sorted(n for n in known if n not in _OPTION_KEYS)
                    raise ConfigError(f"{key}: not a supported kafka setting; expected kafka.<one of {expected}>")
            else:
                continue
            values[name] = _parse(key, name, raw)
        if "bootstrap_servers" not in values or not str(values["bootstrap_servers"]).strip():
            raise ConfigError("bootstrap.servers: required, expected host:port[,host:port...]")
        return cls(**values)


def is_secret_option(key: str) -> bool:
    """Whether data-source option ``key`` (any case, dots or underscores) carries a secret."""
    key = key.lower()
    return key.startswith(_KAFKA_PREFIX) and key[len(_KAFKA_PREFIX):].replace(".", "_") in SECRET_FIELDS


def _option_key(name: str) -> str:
    return _OPTION_KEYS.get(name, _KAFKA_PREFIX + name)


_INT_FIELDS = frozenset({"request_timeout_ms", "retry_backoff_ms", "retries"})


def _parse(key: str, name: str, raw: Any) -> Any:
    if name in _INT_FIELDS:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        text = str(raw).strip()
        if not text.isdigit():
            raise ConfigError(f"{key}: expected a non-negative integer, got {raw!r}")
        return int(text)
    if name == "ssl_check_hostname":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"{key}: expected true or false, got {raw!r}")
        return text == "true"
    if name == "bootstrap_servers":
        return str(raw)
    if not isinstance(raw, str):
        raise ConfigError(f"{key}: expected a string")
    return raw


def _check_int(key: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum > 0 else "a non-negative integer"
        raise ConfigError(f"{key}: expected {what}, got {value!r}")


__all__ = ["SECRET_FIELDS", "ClientKwargs", "ConnectionSettings", "is_secret_option"]
