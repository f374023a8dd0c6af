"""spark-purge configuration: frozen dataclasses loaded from YAML or JSON, validated on load.

``load(path)`` and ``from_dict(data)`` return a ``PurgeConfig``. Every bad input raises
``ConfigError`` whose message starts with the key path at fault (``rules[1].min_retention``)
and says what was expected; unknown keys get a did-you-mean. A file with several problems
raises ``ConfigProblems`` listing every one (each key of a section, each item of a list is
checked even after one failed; an object's own cross-field check runs once its keys are valid).

Secrets are stored as references, never values: ``{env: NAME}``, ``{spark_conf: key}`` or
``{file: path}``. A literal password is rejected. ``connection_settings`` resolves them at the
last moment into the one ``ConnectionSettings`` every connection is made from (its ``repr``
masks the values; ``kafka_client_kwargs`` gives the same as kafka-python keyword arguments).
``config_fingerprint`` hashes the canonical config (references, not values) for the audit.

Top-level YAML keys (see ``conf/example.yaml`` for every option)::

    kafka:            bootstrap_servers, client_id, request_timeout, delete_timeout, retries,
                      retry_backoff, clock_probe_topic, security{protocol, sasl_mechanism, sasl_username,
                      sasl_password, ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
                      ssl_check_hostname}
    defaults:         min_retention, min_step, stale_after, on_missing_commit, on_stale_group
    rules:            [{name, topics, required_groups, exclude_groups, <any defaults key>}]
    protected_topics: [regex]
    group_exclude:    [regex]  (dropped from discovered groups in every rule)
    manual:           [{topic, partition, offset, force}]
    audit:            path, table_name
    stream:           checkpoint_location, trigger_interval, query_name, max_snapshot_age, keep_warm
    lease:            enabled, purger_id, ttl, wait, path
    external_consumers: [{name, spark_checkpoint, topics} | {name, hold: {topic, partition, offset} | [...]}]
    retirement:       enable, delay  (partition retirement, see ``spark_purge.retirement``)
    tiering:          [{topic, disable: retain|delete}]  (run by `spark-purge tiering apply`)
    dry_run:          bool

Each default is declared once, on its dataclass field; the loader passes only the keys a file
sets, so an absent key takes the field's default (``field_default`` reads it for code that
needs it without an instance).
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import yaml

from spark_purge._time import DURATION_HINT, as_utc, format_duration, parse_duration, parse_timestamp
from spark_purge.errors import ConfigError, ConfigProblems
from spark_purge.kafka.settings import SECRET_FIELDS, ClientKwargs, ConnectionSettings
from spark_purge.schemas import EXTERNAL_SPARK_CHECKPOINT, EXTERNAL_STATIC_HOLD, TIERING_POLICIES

END = -1  # manual offset sentinel for the high watermark, as in kafka-delete-records.sh
GROUP_POLICIES = ("block", "ignore")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECRET_REF_KINDS = ("env", "spark_conf", "file")
# kafka-python kwargs that carry secret values: masked in every repr.
SECRET_KWARGS = SECRET_FIELDS
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SECRET_HINT = "a secret reference like {env: KAFKA_PASSWORD}, {spark_conf: spark.purge.password} or {file: /path}"

DAY_MS = 86_400_000


class _FieldError(ConfigError):
    """Raised by ``__post_init__``; the loader prefixes the key path of the object."""

    def __init__(self, field_path: str, reason: str) -> None:
        self.field_path = field_path
        self.reason = reason
        super().__init__(f"{field_path}: {reason}" if field_path else reason)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _check_regex(pattern: object, path: str) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise _FieldError(path, f"expected a regular expression string, got {pattern!r}")
    try:
        _compiled(pattern)
    except re.error as err:
        raise _FieldError(path, f"invalid regular expression {pattern!r}: {err}") from None


def _unique(section: str, key: str, values: Sequence[str], what: str, hint: str = "") -> None:
    """``_FieldError`` at ``section[i].key`` for the first value repeated, naming its first place."""
    first: dict[str, int] = {}
    for i, value in enumerate(values):
        if value in first:
            raise _FieldError(f"{section}[{i}].{key}", f"duplicate {what} {value!r} (also {section}[{first[value]}]){hint}")
        first[value] = i


def _literal_topic(pattern: str) -> str | None:
    """The one topic name a pattern spells out (``demo\\.orders`` or ``demo.orders``), else None."""
    text = pattern.replace("\\.", ".").replace("\\-", "-")
    return text if _TOPIC_NAME.fullmatch(text) else None


class _ConfLike(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...


# ---------------------------------------------------------------------------------------------
# Dataclasses
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SecretRef:
    """Where a secret lives; exactly one of ``env``, ``spark_conf``, ``file``. Holds no value."""

    env: str | None = None
    spark_conf: str | None = None
    file: str | None = None

    def __post_init__(self) -> None:
        given = [kind for kind in SECRET_REF_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise _FieldError("", f"expected {_SECRET_HINT} (exactly one of env, spark_conf, file)")
        name = getattr(self, given[0])
        if not isinstance(name, str) or not name.strip():
            raise _FieldError(given[0], "expected a non-empty name")

    @property
    def kind(self) -> str:
        return next(kind for kind in SECRET_REF_KINDS if getattr(self, kind) is not None)

    @property
    def name(self) -> str:
        return str(getattr(self, self.kind))

    def __repr__(self) -> str:
        return f"SecretRef({self.kind}={self.name!r})"

    def resolve(self, path: str, env: Mapping[str, str], spark_conf: _ConfLike | None, *, secret: bool = True) -> str:
        """The value; ``ConfigError`` naming ``path`` and the reference (never a value) when absent.

        ``spark_conf`` None means the active Spark session's conf. A ``secret`` read from Spark
        conf must sit under a key ``spark.redaction.regex`` matches, or Spark itself would show
        it (UI, event log).
        """
        value: Any = None
        if self.env is not None:
            value = env.get(self.env)
        elif self.spark_conf is not None:
            conf = spark_conf if spark_conf is not None else active_spark_conf()
            if conf is None:
                raise ConfigError(f"{path}: secret reference spark_conf {self.spark_conf!r} needs an active Spark session")
            with _py4j_quiet():
                value = conf.get(self.spark_conf, None)
            if secret and value:
                _check_redacted(path, self.spark_conf, conf)
        elif self.file is not None:
            try:
                value = Path(self.file).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as err:
                raise ConfigError(f"{path}: cannot read secret file {self.file!r}: {err.strerror}") from None
        if value is None or value == "":
            raise ConfigError(f"{path}: secret reference {self.kind} {self.name!r} is not set")
        return str(value)


def active_spark_conf() -> _ConfLike | None:
    """The active Spark session's runtime conf, or None (pyspark imported only when asked)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    return None if session is None else session.conf


SPARK_REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key"  # Spark's default
_PY4J_LOGGERS = ("py4j.clientserver", "py4j.java_gateway")


@contextlib.contextmanager
def _py4j_quiet() -> Iterator[None]:
    """py4j logs every answer from the JVM at DEBUG, a secret read from Spark conf included:
    no py4j DEBUG while one is read."""
    loggers = [logging.getLogger(name) for name in _PY4J_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.INFO))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _check_redacted(path: str, key: str, conf: _ConfLike) -> None:
    pattern = str(conf.get("spark.redaction.regex", None) or SPARK_REDACTION_REGEX)
    try:
        redacted = re.search(pattern, key) is not None
    except re.error:  # a Java-only regex: Spark knows, we cannot check
        return
    if not redacted:
        raise ConfigError(
            f"{path}: Spark conf key {key!r} is not matched by spark.redaction.regex ({pattern}), so Spark would "
            "show its value in the UI and event log; use a key containing 'password' or 'secret'"
        )


@dataclass(frozen=True)
class SecurityConfig:
    """How to authenticate to Kafka. Passwords are ``SecretRef``s; usernames may be either."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | SecretRef | None = None
    sasl_password: SecretRef | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: SecretRef | None = None
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise _FieldError("protocol", f"expected one of {', '.join(SECURITY_PROTOCOLS)}, got {self.protocol!r}")
        for key in ("sasl_password", "ssl_password"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, SecretRef):
                # Never echo the value: it is a password.
                raise _FieldError(key, f"expected {_SECRET_HINT}, not a literal value")
        sasl = self.protocol.startswith("SASL_")
        if sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise _FieldError(
                    "sasl_mechanism",
                    f"expected one of {', '.join(SASL_MECHANISMS)} with protocol {self.protocol}, "
                    f"got {self.sasl_mechanism!r}",
                )
            for key in ("sasl_username", "sasl_password"):
                if getattr(self, key) is None:
                    raise _FieldError(key, f"required with protocol {self.protocol}")
        else:
            for key in ("sasl_mechanism", "sasl_username", "sasl_password"):
                if getattr(self, key) is not None:
                    raise _FieldError(key, f"only used with protocol SASL_PLAINTEXT or SASL_SSL, not {self.protocol}")
        if not self.protocol.endswith("SSL"):
            for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
                if getattr(self, key) is not None:
                    raise _FieldError(key, f"only used with protocol SSL or SASL_SSL, not {self.protocol}")


@dataclass(frozen=True)
class KafkaConfig:
    """The cluster to purge and how to talk to it. Durations are milliseconds."""

    bootstrap_servers: tuple[str, ...]
    client_id: str = "spark-purge"
    request_timeout: int = 30_000
    # DeleteRecords, all attempts together; each attempt waits at most a third of it for the
    # leader's followers (spark_purge.kafka.delete), so a hung leader leaves time for its successor.
    delete_timeout: int = 30_000
    retries: int = 3
    retry_backoff: int = 500
    # A LogAppendTime topic the purge appends one empty record to per batch, to measure the
    # broker's clock (kafka/clock.py; created on first use). None: the skew is not measured.
    clock_probe_topic: str | None = None
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise _FieldError("bootstrap_servers", "expected at least one host:port")
        for i, server in enumerate(self.bootstrap_servers):
            host, sep, port = server.rpartition(":") if isinstance(server, str) else ("", "", "")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise _FieldError(f"bootstrap_servers[{i}]", f"expected host:port, got {server!r}")
        for key in ("request_timeout", "delete_timeout"):
            if getattr(self, key) <= 0:
                raise _FieldError(key, f"expected a positive duration, got {getattr(self, key)}ms")
        if self.retries < 0:
            raise _FieldError("retries", f"expected a non-negative integer, got {self.retries}")
        if self.clock_probe_topic is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", self.clock_probe_topic):
            raise _FieldError("clock_probe_topic", f"expected a Kafka topic name ([A-Za-z0-9._-], 1-249 chars), got {self.clock_probe_topic!r}")


@dataclass(frozen=True)
class RuleDefaults:
    """Values a topic rule takes unless it sets its own."""

    min_retention: int = 0  # ms; 0 means no time floor
    min_step: int = 1  # records; act only when at least this many can go
    stale_after: int = 7 * DAY_MS  # ms without members or commit progress before a group is stale
    on_missing_commit: str = "block"
    on_stale_group: str = "block"

    def __post_init__(self) -> None:
        _check_rule_values(self)


def _check_rule_values(obj: RuleDefaults | TopicRule) -> None:
    for key in ("on_missing_commit", "on_stale_group"):
        if getattr(obj, key) not in GROUP_POLICIES:
            raise _FieldError(key, f"expected 'block' or 'ignore', got {getattr(obj, key)!r}")
    if obj.min_step < 1:
        raise _FieldError("min_step", f"expected an integer >= 1 (records), got {obj.min_step}")
    for key in ("min_retention", "stale_after"):
        if getattr(obj, key) < 0:
            raise _FieldError(key, f"expected a non-negative duration, got {getattr(obj, key)}ms")


_RULE_DEFAULTS = RuleDefaults()

#: Why a discovering rule must state its ``min_retention`` (the loader's error, and the README's).
DISCOVERY_NEEDS_MIN_RETENTION = (
    "required for a rule that discovers groups (no required_groups), in the rule or in defaults:"
    " discovery sees only consumers Kafka knows about, so a consumer keeping its position"
    " elsewhere (Flink state, a Spark checkpoint not listed under external_consumers) is protected"
    " only by this time floor; set e.g. '24h', or '0s' to accept that such consumers are unprotected"
)


@dataclass(frozen=True)
class TopicRule:
    """Which topics (a regex, full match) and which consumer groups must have read a record first.

    ``required_groups`` None means *discover*: every group with commits on the topic, minus
    ``exclude_groups`` and the config-wide ``group_exclude`` (regexes, full match).
    """

    name: str
    topics: str
    required_groups: tuple[str, ...] | None = None
    exclude_groups: tuple[str, ...] = ()
    # The rule defaults are RuleDefaults' (declared there once); the loader fills in the
    # config's own ``defaults:`` section.
    on_missing_commit: str = _RULE_DEFAULTS.on_missing_commit
    on_stale_group: str = _RULE_DEFAULTS.on_stale_group
    stale_after: int = _RULE_DEFAULTS.stale_after
    min_retention: int = _RULE_DEFAULTS.min_retention
    min_step: int = _RULE_DEFAULTS.min_step

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise _FieldError("name", f"expected a non-empty string, got {self.name!r}")
        _check_regex(self.topics, "topics")
        if self.required_groups is not None:
            if len(self.required_groups) == 0:
                raise _FieldError(
                    "required_groups",
                    "expected at least one group id (omit the key to discover groups from commits)",
                )
            seen: set[str] = set()
            for i, group in enumerate(self.required_groups):
                if not isinstance(group, str) or not group:
                    raise _FieldError(f"required_groups[{i}]", f"expected a group id string, got {group!r}")
                if group in seen:
                    raise _FieldError(f"required_groups[{i}]", f"group {group!r} is listed twice")
                seen.add(group)
            if self.exclude_groups:
                raise _FieldError(
                    "exclude_groups", "only applies when groups are discovered (required_groups not set)"
                )
        for i, pattern in enumerate(self.exclude_groups):
            _check_regex(pattern, f"exclude_groups[{i}]")
        _check_rule_values(self)

    @property
    def discovers_groups(self) -> bool:
        return self.required_groups is None

    def matches(self, topic: str) -> bool:
        return _compiled(self.topics).fullmatch(topic) is not None


@dataclass(frozen=True)
class ManualEntry:
    """An explicit cutoff for one partition (or every partition: ``partition`` None).

    Exactly one of ``offset`` (an offset, or ``END`` = -1 for the high watermark) and
    ``timestamp`` (first offset at/after it). Still bounded by the safety checks unless ``force``.
    """

    topic: str
    partition: int | None = None
    offset: int | None = None
    timestamp: datetime | None = None
    force: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not _TOPIC_NAME.fullmatch(self.topic):
            raise _FieldError("topic", f"expected a topic name (letters, digits, '.', '_', '-'), got {self.topic!r}")
        if self.partition is not None and self.partition < 0:
            raise _FieldError("partition", f"expected a partition number >= 0 or 'all', got {self.partition}")
        if (self.offset is None) == (self.timestamp is None):
            raise _FieldError("offset", "expected exactly one of an offset, 'end' or '@<timestamp>'")
        if self.offset is not None and self.offset < END:
            raise _FieldError(
                "offset", f"expected an offset >= 0, 'end' (-1) or '@<timestamp>', got {self.offset}"
            )
        if self.timestamp is not None:
            object.__setattr__(self, "timestamp", as_utc(self.timestamp))

    @property
    def is_end(self) -> bool:
        return self.offset == END


@dataclass(frozen=True)
class AuditConfig:
    """Where the Delta audit table lives (a path; optionally also registered as a table name)."""

    path: str
    table_name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.strip():
            raise _FieldError("path", f"expected a non-empty path or URI, got {self.path!r}")


@dataclass(frozen=True)
class StreamConfig:
    """Structured-streaming settings for the continuous job."""

    checkpoint_location: str
    trigger_interval: int = 60_000
    query_name: str = "spark-purge"
    # A batch replayed after a crash executes its recorded intents only while they are younger
    # than this; older ones are recorded as skipped (stale_snapshot) and nothing is deleted.
    max_snapshot_age: int = 600_000
    # While the continuous query waits for its next trigger, a tiny Spark job this often keeps
    # the session's Python workers alive (Spark stops a kind of them after a minute without work,
    # and the next batch would start them again: ``spark_purge.keepwarm``). 0: never.
    keep_warm: int = 30_000

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint_location, str) or not self.checkpoint_location.strip():
            raise _FieldError("checkpoint_location", f"expected a non-empty path or URI, got {self.checkpoint_location!r}")
        for key in ("trigger_interval", "max_snapshot_age"):
            if getattr(self, key) <= 0:
                raise _FieldError(key, f"expected a positive duration, got {getattr(self, key)}ms")
        if self.keep_warm < 0:
            raise _FieldError("keep_warm", f"expected a duration >= 0 (0: off), got {self.keep_warm}ms")


_PURGER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")


@dataclass(frozen=True)
class LeaseConfig:
    """The purger lease (``spark_purge.lease``): one job at a time acts for ``purger_id``.

    ``purger_id`` None: derived from the cluster (``purger_id_of``). ``path`` None: the Delta
    table ``<audit.path>_leases``. A starting job waits up to ``wait`` for another holder's
    lease to expire (``ttl`` after its last renewal) before failing with ``FencedError``."""

    enabled: bool = True
    purger_id: str | None = None
    ttl: int = 60_000
    wait: int = 120_000
    path: str | None = None

    def __post_init__(self) -> None:
        if self.purger_id is not None and not _PURGER_ID.fullmatch(self.purger_id):
            raise _FieldError("purger_id", f"expected 1-200 characters of [A-Za-z0-9._:@-], got {self.purger_id!r}")
        if self.ttl < 1000:
            raise _FieldError("ttl", f"expected a duration of at least 1s, got {self.ttl}ms")
        if self.wait < 0:
            raise _FieldError("wait", f"expected a duration >= 0s, got {self.wait}ms")
        if self.path is not None and not self.path.strip():
            raise _FieldError("path", f"expected a non-empty path or URI, got {self.path!r}")


@dataclass(frozen=True)
class RetirementConfig:
    """Partition retirement (seed 002): off unless ``enable``. A ReadOnly partition is reclaimed
    (purged to its high watermark) once drained and its high watermark has not moved for ``delay``."""

    enable: bool = False
    delay: int = 300_000  # ms; seed 002's delete.topic.partition.interval.delay.ms

    def __post_init__(self) -> None:
        if self.delay <= 0:
            raise _FieldError("delay", f"expected a positive duration, got {self.delay}ms")


@dataclass(frozen=True)
class StaticHold:
    """Never cut ``topic`` (one ``partition``, or every one: None) past ``offset``."""

    topic: str
    offset: int
    partition: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not _TOPIC_NAME.fullmatch(self.topic):
            raise _FieldError("topic", f"expected a topic name (letters, digits, '.', '_', '-'), got {self.topic!r}")
        if self.partition is not None and self.partition < 0:
            raise _FieldError("partition", f"expected a partition number >= 0 or 'all', got {self.partition}")
        if self.offset < 0:
            raise _FieldError("offset", f"expected an offset >= 0 (the first record the consumer still needs), got {self.offset}")

    def holds(self, topic: str, partition: int) -> bool:
        return topic == self.topic and (self.partition is None or self.partition == partition)


@dataclass(frozen=True)
class ExternalConsumer:
    """A consumer whose position Kafka does not know, named ``name`` in plans and the audit.

    Exactly one of: ``spark_checkpoint`` (a Spark Structured Streaming query's checkpoint
    location, path or URI, with ``topics``: a regex, full match, of the topics it reads) or
    ``hold`` (static holds, for consumers nothing can read, e.g. Flink state). Either way the
    consumer is required on every partition of its topics, in every rule.
    """

    name: str
    spark_checkpoint: str | None = None
    topics: str | None = None
    hold: tuple[StaticHold, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise _FieldError("name", f"expected a non-empty string, got {self.name!r}")
        if (self.spark_checkpoint is None) == (not self.hold):
            raise _FieldError("", "expected exactly one of spark_checkpoint (with topics) or hold")
        if self.spark_checkpoint is not None:
            if not isinstance(self.spark_checkpoint, str) or not self.spark_checkpoint.strip():
                raise _FieldError("spark_checkpoint", f"expected a checkpoint path or URI, got {self.spark_checkpoint!r}")
            if self.topics is None:
                raise _FieldError("topics", "required with spark_checkpoint: a regex (full match) of the topics the query reads")
            _check_regex(self.topics, "topics")
        elif self.topics is not None:
            raise _FieldError("topics", "only used with spark_checkpoint (a hold names its topic)")

    @property
    def kind(self) -> str:
        """The ``group_type`` its snapshot rows carry (``spark_checkpoint`` or ``static_hold``)."""
        return EXTERNAL_SPARK_CHECKPOINT if self.spark_checkpoint is not None else EXTERNAL_STATIC_HOLD

    def covers(self, topic: str) -> bool:
        """Whether the consumer reads ``topic`` (so it is required on all of its partitions)."""
        if self.topics is not None:
            return _compiled(self.topics).fullmatch(topic) is not None
        return any(h.topic == topic for h in self.hold)


def check_tiering_policy(policy: object) -> str:
    """``policy`` if it is one of ``TIERING_POLICIES``; else ``_FieldError`` naming it."""
    if policy not in TIERING_POLICIES:
        raise _FieldError("disable", f"expected 'retain' or 'delete', got {policy!r}")
    return str(policy)


@dataclass(frozen=True)
class TieringEntry:
    """Disable tiered storage on ``topic`` (``spark_purge.tiering``): ``disable`` ``retain``
    keeps the remote data (read-only, copying stopped), ``delete`` removes it."""

    topic: str
    disable: str

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not _TOPIC_NAME.fullmatch(self.topic):
            raise _FieldError("topic", f"expected a topic name (letters, digits, '.', '_', '-'), got {self.topic!r}")
        check_tiering_policy(self.disable)


MANUAL_RULE_NAME = "manual"


@dataclass(frozen=True)
class PurgeConfig:
    """The whole configuration. At least one rule or one manual entry."""

    kafka: KafkaConfig
    audit: AuditConfig
    rules: tuple[TopicRule, ...] = ()
    protected_topics: tuple[str, ...] = ()
    group_exclude: tuple[str, ...] = ()
    defaults: RuleDefaults = field(default_factory=RuleDefaults)
    manual: tuple[ManualEntry, ...] = ()
    stream: StreamConfig | None = None
    external_consumers: tuple[ExternalConsumer, ...] = ()
    retirement: RetirementConfig = field(default_factory=RetirementConfig)
    tiering: tuple[TieringEntry, ...] = ()
    dry_run: bool = False
    lease: LeaseConfig = field(default_factory=LeaseConfig)

    def __post_init__(self) -> None:
        if not self.rules and not self.manual:
            raise _FieldError("rules", "expected at least one topic rule (or a manual entry)")
        _unique("tiering", "topic", [t.topic for t in self.tiering], "topic", "; expected one entry per topic")
        _unique("external_consumers", "name", [c.name for c in self.external_consumers], "external consumer name")
        _unique("rules", "name", [r.name for r in self.rules], "rule name")
        externals = {c.name: k for k, c in enumerate(self.external_consumers)}
        for i, rule in enumerate(self.rules):
            for j, group in enumerate(rule.required_groups or ()):
                if group in externals:
                    raise _FieldError(
                        f"rules[{i}].required_groups[{j}]",
                        f"{group!r} is the name of external_consumers[{externals[group]}]; external consumers are required "
                        "in every rule without being listed, and the plan would take a Kafka group of that name for it: "
                        "expected Kafka group ids only",
                    )
        for i, pattern in enumerate(self.protected_topics):
            _check_regex(pattern, f"protected_topics[{i}]")
        for i, pattern in enumerate(self.group_exclude):
            _check_regex(pattern, f"group_exclude[{i}]")
        # Two rules spelling out topics both match: certain ambiguity, so fail at load time.
        for i, rule in enumerate(self.rules):
            name = _literal_topic(rule.topics)
            if name is None:
                continue
            for j, other in enumerate(self.rules):
                if j != i and other.matches(name):
                    first, second = sorted((i, j))
                    raise _FieldError(
                        f"rules[{second}].topics",
                        f"topic {name!r} would match both rules[{first}] ({self.rules[first].name!r}) and "
                        f"rules[{second}] ({self.rules[second].name!r}); expected each topic to match exactly one rule",
                    )
        seen: dict[tuple[str, int | None], int] = {}
        for i, entry in enumerate(self.manual):
            key = (entry.topic, entry.partition)
            if key in seen:
                where = "all partitions" if entry.partition is None else f"partition {entry.partition}"
                raise _FieldError(
                    f"manual[{i}]", f"{entry.topic} {where} already has an entry (manual[{seen[key]}]); expected one per partition"
                )
            seen[key] = i

    def matching_rules(self, topic: str) -> list[tuple[int, TopicRule]]:
        return [(i, rule) for i, rule in enumerate(self.rules) if rule.matches(topic)]

    def rule_for(self, topic: str) -> TopicRule | None:
        """The one rule selecting ``topic``; a synthetic ``manual`` rule for manual-only topics.

        Raises ``ConfigError`` when more than one rule matches (checked per actual topic).
        """
        found = self.matching_rules(topic)
        if len(found) > 1:
            listed = ", ".join(f"rules[{i}] ({rule.name!r}: {rule.topics!r})" for i, rule in found)
            raise ConfigError(f"rules: topic {topic!r} matches {listed}; expected each topic to match exactly one rule")
        if found:
            return found[0][1]
        if any(entry.topic == topic for entry in self.manual):
            d = self.defaults
            return TopicRule(
                name=MANUAL_RULE_NAME,
                topics=re.escape(topic),
                on_missing_commit=d.on_missing_commit,
                on_stale_group=d.on_stale_group,
                stale_after=d.stale_after,
                min_retention=d.min_retention,
                min_step=d.min_step,
            )
        return None

    def is_protected(self, topic: str) -> bool:
        return any(_compiled(p).fullmatch(topic) for p in self.protected_topics)

    def manual_for(self, topic: str, partition: int) -> ManualEntry | None:
        """The manual entry for a partition: a partition-specific entry beats an all-partitions one."""
        fallback = None
        for entry in self.manual:
            if entry.topic == topic:
                if entry.partition == partition:
                    return entry
                if entry.partition is None:
                    fallback = entry
        return fallback

    def group_excluded(self, rule: TopicRule, group_id: str) -> bool:
        patterns = self.group_exclude + rule.exclude_groups
        return any(_compiled(p).fullmatch(group_id) for p in patterns)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

_T = TypeVar("_T")
_MISSING: Any = object()


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _collect(problems: list[str], check: Callable[[Any, str], _T], value: Any, path: str) -> _T:
    """``check(value, path)``; on ``ConfigError`` its problems go to ``problems`` and ``_MISSING``
    is returned, so the caller goes on checking its other keys and reports them all at once."""
    try:
        return check(value, path)
    except ConfigError as err:
        problems.extend(err.problems)
        return cast(_T, _MISSING)


def _raise_all(problems: Sequence[str]) -> None:
    """Raise the problems found, if any: one as a plain ``ConfigError``, several together."""
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigProblems(problems)


def _known(value: object, path: str, allowed: tuple[str, ...], problems: list[str]) -> dict[str, Any]:
    """The keys of mapping ``value`` in ``allowed``; each unknown key is a problem (did-you-mean)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path or '<root>'}: expected a mapping with keys {', '.join(allowed)}, got {_type_name(value)}")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"{_join(path, str(key))}: unknown key{hint} (expected one of: {', '.join(allowed)})")
    return {k: v for k, v in value.items() if isinstance(k, str) and k in allowed}


def _section(value: object, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    problems: list[str] = []
    known = _known(value, path, allowed, problems)
    _raise_all(problems)
    return known


def _get(d: Mapping[str, Any], key: str, path: str, check: Callable[[Any, str], _T], default: Any = _MISSING) -> _T:
    where = _join(path, key)
    if key not in d or d[key] is None:
        if default is _MISSING:
            raise ConfigError(f"{where}: required key is missing")
        return cast(_T, default)
    return check(d[key], where)


def _str(value: object, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: expected a non-empty string, got {_type_name(value)} {value!r}")
    return value


def _int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path}: expected an integer, got {_type_name(value)} {value!r}")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: expected true or false, got {_type_name(value)} {value!r}")
    return value


def _duration(value: object, path: str) -> int:
    return parse_duration(value, path)


def _policy(value: object, path: str) -> str:
    if value not in GROUP_POLICIES:
        raise ConfigError(f"{path}: expected 'block' or 'ignore', got {value!r}")
    return str(value)


def _regex(value: object, path: str) -> str:
    try:
        _check_regex(value, "")
    except _FieldError as err:
        raise ConfigError(f"{path}: {err.reason}") from None
    return str(value)


def _list(value: object, path: str, item: Callable[[Any, str], _T]) -> tuple[_T, ...]:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{path}: expected a list, got {_type_name(value)} {value!r}")
    problems: list[str] = []
    items = tuple(_collect(problems, item, v, f"{path}[{i}]") for i, v in enumerate(value))
    _raise_all(problems)
    return items


def _regex_list(value: object, path: str) -> tuple[str, ...]:
    return _list(value, path, _regex)


def _servers(value: object, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(s.strip() for s in value.split(",") if s.strip())
    return _list(value, path, _str)


def _secret(value: object, path: str) -> SecretRef:
    if not isinstance(value, Mapping):
        # The value may be a password: name the key and the expectation, never the value.
        raise ConfigError(f"{path}: expected {_SECRET_HINT}, not a literal value")
    ref = _section(value, path, SECRET_REF_KINDS)
    if len(ref) != 1:
        raise ConfigError(f"{path}: expected {_SECRET_HINT} (exactly one of env, spark_conf, file)")
    ((kind, name),) = ref.items()
    return SecretRef(**{kind: _str(name, _join(path, kind))})


def _username(value: object, path: str) -> str | SecretRef:
    return _secret(value, path) if isinstance(value, Mapping) else _str(value, path)


def _build(cls: Callable[..., _T], path: str, /, **kwargs: Any) -> _T:
    try:
        return cls(**kwargs)
    except _FieldError as err:
        where = _join(path, err.field_path) if err.field_path else (path or "<root>")
        raise ConfigError(f"{where}: {err.reason}") from None


def field_default(cls: type, name: str) -> Any:
    """The default the dataclass ``cls`` declares for field ``name`` (its factory called)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise TypeError(f"{cls.__name__}.{name} has no default")
    raise TypeError(f"{cls.__name__} has no field {name!r}")


def _given(
    d: Mapping[str, Any],
    path: str,
    cls: type,
    checks: Mapping[str, Callable[[Any, str], Any]],
    problems: Sequence[str] = (),
) -> dict[str, Any]:
    """The checked values of the keys ``d`` sets (null counts as unset), in ``checks`` order.

    Unset keys are left out, so ``cls`` applies its own field default: each default is declared
    once. An unset key whose field has no default is a "required key is missing" error. Every
    key is checked; the problems found (after ``problems``, those the caller found already) are
    raised together.
    """
    required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    found = list(problems)
    values: dict[str, Any] = {}
    for key, check in checks.items():
        if d.get(key) is not None:
            values[key] = _collect(found, check, d[key], _join(path, key))
        elif key in required:
            found.append(f"{_join(path, key)}: required key is missing")
    _raise_all(found)
    return values


_SECURITY_KEYS = tuple(f.name for f in dataclasses.fields(SecurityConfig))
_KAFKA_KEYS = tuple(f.name for f in dataclasses.fields(KafkaConfig))
_DEFAULT_KEYS = tuple(f.name for f in dataclasses.fields(RuleDefaults))
_RULE_KEYS = tuple(f.name for f in dataclasses.fields(TopicRule))
_MANUAL_KEYS = ("topic", "partition", "offset", "force")
_AUDIT_KEYS = tuple(f.name for f in dataclasses.fields(AuditConfig))
_STREAM_KEYS = tuple(f.name for f in dataclasses.fields(StreamConfig))
_LEASE_KEYS = tuple(f.name for f in dataclasses.fields(LeaseConfig))
_EXTERNAL_KEYS = tuple(f.name for f in dataclasses.fields(ExternalConsumer))
_HOLD_KEYS = ("topic", "partition", "offset")
_RETIREMENT_KEYS = tuple(f.name for f in dataclasses.fields(RetirementConfig))
_TIERING_KEYS = tuple(f.name for f in dataclasses.fields(TieringEntry))
_ROOT_KEYS = tuple(f.name for f in dataclasses.fields(PurgeConfig))


def _security(value: object, path: str) -> SecurityConfig:
    d = _section(value, path, _SECURITY_KEYS)
    return _build(
        SecurityConfig,
        path,
        protocol=_get(d, "protocol", path, _str, "PLAINTEXT"),
        sasl_mechanism=_get(d, "sasl_mechanism", path, _str, None),
        sasl_username=_get(d, "sasl_username", path, _username, None),
        sasl_password=_get(d, "sasl_password", path, _secret, None),
        ssl_cafile=_get(d, "ssl_cafile", path, _str, None),
        ssl_certfile=_get(d, "ssl_certfile", path, _str, None),
        ssl_keyfile=_get(d, "ssl_keyfile", path, _str, None),
        ssl_password=_get(d, "ssl_password", path, _secret, None),
        ssl_check_hostname=_get(d, "ssl_check_hostname", path, _bool, True),
    )


def _kafka(value: object, path: str) -> KafkaConfig:
    d = _section(value, path, _KAFKA_KEYS)
    checks: dict[str, Callable[[Any, str], Any]] = {
        "bootstrap_servers": _servers,
        "client_id": _str,
        "request_timeout": _duration,
        "delete_timeout": _duration,
        "retries": _int,
        "retry_backoff": _duration,
        "clock_probe_topic": _str,
        "security": _security,
    }
    return _build(KafkaConfig, path, **_given(d, path, KafkaConfig, checks))


_RULE_VALUE_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "min_retention": _duration,
    "min_step": _int,
    "stale_after": _duration,
    "on_missing_commit": _policy,
    "on_stale_group": _policy,
}


def _defaults(value: object, path: str) -> RuleDefaults:
    d = _section(value, path, _DEFAULT_KEYS)
    return _build(RuleDefaults, path, **_given(d, path, RuleDefaults, _RULE_VALUE_CHECKS))


def _group_ids(value: object, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigError(f"{path}: expected a list of group ids, got string {value!r}")
    return _list(value, path, _str)


def _rule(value: object, path: str, base: RuleDefaults, base_sets_min_retention: bool) -> TopicRule:
    d = _section(value, path, _RULE_KEYS)
    # A rule's unset values come from the config's `defaults:` section, not the field defaults.
    values: dict[str, Any] = {key: getattr(base, key) for key in _RULE_VALUE_CHECKS}
    checks = {"name": _str, "topics": _regex, "required_groups": _group_ids, "exclude_groups": _regex_list}
    values.update(_given(d, path, TopicRule, {**checks, **_RULE_VALUE_CHECKS}))
    rule = _build(TopicRule, path, **values)
    if rule.discovers_groups and "min_retention" not in d and not base_sets_min_retention:
        raise ConfigError(f"{_join(path, 'min_retention')}: {DISCOVERY_NEEDS_MIN_RETENTION}")
    return rule


def _manual_offset(raw: object, path: str) -> tuple[int | None, datetime | None]:
    """A manual entry's ``offset``: (an offset or ``END``, None) or (None, the timestamp)."""
    if isinstance(raw, str) and raw.strip().lower() == "end":
        return END, None
    if isinstance(raw, str) and raw.strip().startswith("@"):
        return None, parse_timestamp(raw.strip()[1:], path)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw, None
    raise ConfigError(f"{path}: expected an offset >= 0, 'end' (-1) or '@<ISO timestamp or epoch ms>', got {raw!r}")


def _manual(value: object, path: str) -> ManualEntry:
    d = _section(value, path, _MANUAL_KEYS)
    problems: list[str] = []
    raw_partition = d.get("partition", "all")
    partition = None if raw_partition is None or raw_partition == "all" else _collect(problems, _int, raw_partition, f"{path}.partition")
    where = _join(path, "offset")
    parsed: tuple[int | None, datetime | None] = (None, None)
    if d.get("offset") is None:
        problems.append(f"{where}: required key is missing")
    else:
        parsed = _collect(problems, _manual_offset, d["offset"], where)
    given = _given(d, path, ManualEntry, {"topic": _str, "force": _bool}, problems)  # raises any problem
    offset, timestamp = parsed
    return _build(ManualEntry, path, partition=partition, offset=offset, timestamp=timestamp, **given)


def _audit(value: object, path: str) -> AuditConfig:
    d = _section(value, path, _AUDIT_KEYS)
    return _build(AuditConfig, path, **_given(d, path, AuditConfig, {"path": _str, "table_name": _str}))


def _stream(value: object, path: str) -> StreamConfig:
    d = _section(value, path, _STREAM_KEYS)
    checks = {
        "checkpoint_location": _str, "trigger_interval": _duration, "query_name": _str, "max_snapshot_age": _duration, "keep_warm": _duration,
    }
    return _build(StreamConfig, path, **_given(d, path, StreamConfig, checks))


def _lease(value: object, path: str) -> LeaseConfig:
    d = _section(value, path, _LEASE_KEYS)
    checks = {"enabled": _bool, "purger_id": _str, "ttl": _duration, "wait": _duration, "path": _str}
    return _build(LeaseConfig, path, **_given(d, path, LeaseConfig, checks))


def _partition(value: object, path: str) -> int | None:
    """A partition number, or ``'all'`` (None)."""
    if value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path}: expected a partition number >= 0 or 'all', got {_type_name(value)} {value!r}")
    return value


def _hold(value: object, path: str) -> StaticHold:
    d = _section(value, path, _HOLD_KEYS)
    return _build(StaticHold, path, **_given(d, path, StaticHold, {"topic": _str, "offset": _int, "partition": _partition}))


def _holds(value: object, path: str) -> tuple[StaticHold, ...]:
    if isinstance(value, Mapping):
        return (_hold(value, path),)
    holds = _list(value, path, _hold)
    if not holds:
        raise ConfigError(f"{path}: expected a hold {{topic, partition, offset}} or a non-empty list of them")
    return holds


def _external(value: object, path: str) -> ExternalConsumer:
    d = _section(value, path, _EXTERNAL_KEYS)
    checks = {"name": _str, "spark_checkpoint": _str, "topics": _regex, "hold": _holds}
    return _build(ExternalConsumer, path, **_given(d, path, ExternalConsumer, checks))


def _retirement(value: object, path: str) -> RetirementConfig:
    d = _section(value, path, _RETIREMENT_KEYS)
    return _build(RetirementConfig, path, **_given(d, path, RetirementConfig, {"enable": _bool, "delay": _duration}))
def _tiering_policy(value: object, path: str) -> str:
    try:
        return check_tiering_policy(value)
    except _FieldError as err:
        raise ConfigError(f"{path}: {err.reason}") from None


def _tiering(value: object, path: str) -> TieringEntry:
    d = _section(value, path, _TIERING_KEYS)
    return _build(TieringEntry, path, **_given(d, path, TieringEntry, {"topic": _str, "disable": _tiering_policy}))


def from_dict(data: Mapping[str, Any]) -> PurgeConfig:
    """Build and validate a ``PurgeConfig`` from parsed YAML/JSON; ``ConfigError`` on bad input."""
    problems: list[str] = []
    d = _known(data, "", _ROOT_KEYS, problems)
    defaults: RuleDefaults = field_default(PurgeConfig, "defaults")
    if d.get("defaults") is not None:
        checked = _collect(problems, _defaults, d["defaults"], "defaults")
        # A bad `defaults:` is reported; the rules are checked against the field defaults meanwhile.
        defaults = defaults if checked is _MISSING else checked
    base_sets_min_retention = isinstance(d.get("defaults"), Mapping) and "min_retention" in d["defaults"]
    checks: dict[str, Callable[[Any, str], Any]] = {
        "rules": lambda v, p: _list(v, p, lambda r, rp: _rule(r, rp, defaults, base_sets_min_retention)),
        "kafka": _kafka,
        "audit": _audit,
        "protected_topics": _regex_list,
        "group_exclude": _regex_list,
        "manual": lambda v, p: _list(v, p, _manual),
        "stream": _stream,
        "external_consumers": lambda v, p: _list(v, p, _external),
        "retirement": _retirement,
        "tiering": lambda v, p: _list(v, p, _tiering),
        "dry_run": _bool,
        "lease": _lease,
    }
    return _build(PurgeConfig, "", defaults=defaults, **_given(d, "", PurgeConfig, checks, problems))


def load(path: str | os.PathLike[str]) -> PurgeConfig:
    """Read a ``.yaml``/``.yml``/``.json`` config file and validate it."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{file}: cannot read config file: {err.strerror}") from None
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise ConfigError(f"{file}: not valid {'JSON' if file.suffix.lower() == '.json' else 'YAML'}: {err}") from None
    if data is None:
        raise ConfigError(f"{file}: empty config file; expected a mapping with keys {', '.join(_ROOT_KEYS)}")
    return from_dict(data)


# ---------------------------------------------------------------------------------------------
# Fingerprint and secrets
# ---------------------------------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return as_utc(value).isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def canonical_json(cfg: PurgeConfig) -> str:
    """Deterministic JSON of the config; secrets appear as their references only."""
    return json.dumps(dataclasses.asdict(cfg), sort_keys=True, separators=(",", ":"), default=_json_default)


def config_fingerprint(cfg: PurgeConfig) -> str:
    """sha256 hex of ``canonical_json(cfg)``: which configuration made a decision, for the audit."""
    return hashlib.sha256(canonical_json(cfg).encode("utf-8")).hexdigest()


def purger_id_of(cfg: PurgeConfig) -> str:
    """``lease.purger_id``, or one derived from the cluster: ``cluster-`` + 12 hex digits of the
    sha256 of the sorted bootstrap servers (one purger per cluster and lease table by default)."""
    if cfg.lease.purger_id is not None:
        return cfg.lease.purger_id
    servers = ",".join(sorted(s.strip().lower() for s in cfg.kafka.bootstrap_servers))
    return "cluster-" + hashlib.sha256(servers.encode("utf-8")).hexdigest()[:12]


def connection_settings(
    cfg: PurgeConfig | KafkaConfig,
    env: Mapping[str, str] | None = None,
    spark_conf: _ConfLike | None = None,
) -> ConnectionSettings:
    """The one ``ConnectionSettings`` of the config, secrets resolved from ``env``/``spark_conf``.

    ``env`` defaults to ``os.environ``; ``spark_conf`` is anything with ``get(key, default)``
    (``spark.conf`` or a dict), by default the active Spark session's conf (looked up only for
    a ``{spark_conf: key}`` reference). Raises ``ConfigError`` naming the config key and the
    reference, never the value, when a secret is unset.
    Every connection (snapshot and delete) is made from this value.
    """
    kafka = cfg.kafka if isinstance(cfg, PurgeConfig) else cfg
    environ: Mapping[str, str] = os.environ if env is None else env
    sec = kafka.security
    values: dict[str, Any] = {}
    base = "kafka.security"
    if sec.protocol.startswith("SASL_"):
        user = sec.sasl_username
        if sec.sasl_password is None:  # validated in SecurityConfig
            raise ConfigError(f"{base}.sasl_password: required with protocol {sec.protocol}")
        values.update(
            sasl_mechanism=sec.sasl_mechanism,
            sasl_plain_username=(
                user.resolve(f"{base}.sasl_username", environ, spark_conf, secret=False) if isinstance(user, SecretRef) else user
            ),
            sasl_plain_password=sec.sasl_password.resolve(f"{base}.sasl_password", environ, spark_conf),
        )
    if sec.protocol.endswith("SSL"):
        values.update(
            ssl_check_hostname=sec.ssl_check_hostname,
            ssl_cafile=sec.ssl_cafile,
            ssl_certfile=sec.ssl_certfile,
            ssl_keyfile=sec.ssl_keyfile,
        )
        if sec.ssl_password is not None:
            values["ssl_password"] = sec.ssl_password.resolve(f"{base}.ssl_password", environ, spark_conf)
    return ConnectionSettings(
        bootstrap_servers=tuple(kafka.bootstrap_servers),
        client_id=kafka.client_id,
        request_timeout_ms=kafka.request_timeout,
        retry_backoff_ms=kafka.retry_backoff,
        retries=kafka.retries,
        security_protocol=sec.protocol,
        **values,
    )


def kafka_client_kwargs(
    cfg: PurgeConfig | KafkaConfig,
    env: Mapping[str, str] | None = None,
    spark_conf: _ConfLike | None = None,
) -> ClientKwargs:
    """Keyword arguments for kafka-python clients (``connection_settings(...).kafka_kwargs()``);
    their ``repr`` masks secret values."""
    return connection_settings(cfg, env, spark_conf).kafka_kwargs()


__all__ = [
    "DURATION_HINT",
    "END",
    "EXTERNAL_SPARK_CHECKPOINT",
    "EXTERNAL_STATIC_HOLD",
    "AuditConfig",
    "ClientKwargs",
    "ConnectionSettings",
    "ExternalConsumer",
    "KafkaConfig",
    "ManualEntry",
    "PurgeConfig",
    "RetirementConfig",
    "RuleDefaults",
    "SecretRef",
    "SecurityConfig",
    "StaticHold",
    "StreamConfig",
    "TieringEntry",
    "TopicRule",
    "active_spark_conf",
    "canonical_json",
    "config_fingerprint",
    "connection_settings",
    "field_default",
    "format_duration",
    "from_dict",
    "kafka_client_kwargs",
    "load",
]
