"""Plain values the Kafka layer takes and returns: frozen dataclasses, no kafka-python types.

Everything here is picklable and JSON-round-trippable (``ClusterSnapshot.to_json`` /
``from_json``) so the data source can persist a snapshot and replay it after a crash.
Topic-partitions are plain ``(topic, partition)`` tuples.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Optional, Union, overload

from spark_purge.errors import ConfigError
from spark_purge.kafka.settings import ConnectionSettings

TopicPartitionKey = tuple[str, int]


def _compile(regex: Optional[str], key: str) -> Optional[re.Pattern[str]]:
    if regex is None:
        return None
    try:
        return re.compile(regex)
    except re.error as exc:
        raise ConfigError(f"{key}: expected a regular expression, got {regex!r} ({exc})") from None


@dataclass(frozen=True)
class ClientConfig:
    """How to reach the cluster (``connection``) and which topics/groups a snapshot covers.

    Regexes are full matches (Kafka tool convention). ``topics`` (explicit list) and
    ``topic_include`` may be combined: a topic is selected if listed or matching. Listed topics
    that do not exist are reported in ``ClusterSnapshot.missing_topics``.
    """

    connection: ConnectionSettings
    topics: Optional[tuple[str, ...]] = None
    topic_include: Optional[str] = None
    topic_exclude: Optional[str] = None
    group_include: Optional[str] = None
    group_exclude: Optional[str] = None
    include_internal: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.connection, ConnectionSettings):
            raise ConfigError(f"connection: expected ConnectionSettings, got {type(self.connection).__name__}")
        if self.topics is not None:
            topics = tuple(t.strip() for t in self.topics if t.strip())
            if not topics:
                raise ConfigError("topics: expected a comma-separated list of topic names, got an empty list")
            object.__setattr__(self, "topics", topics)
        _compile(self.topic_include, "topic.include")
        _compile(self.topic_exclude, "topic.exclude")
        _compile(self.group_include, "group.include")
        _compile(self.group_exclude, "group.exclude")

    @property
    def request_timeout_ms(self) -> int:
        return self.connection.request_timeout_ms

    def selects_topic(self, topic: str, internal: bool) -> bool:
        if self.topics is not None and topic in self.topics:
            return True
        if internal and not self.include_internal:
            return False
        if self.topics is not None and self.topic_include is None:
            return False
        inc = _compile(self.topic_include, "topic.include")
        exc = _compile(self.topic_exclude, "topic.exclude")
        if inc is not None and not inc.fullmatch(topic):
            return False
        return not (exc is not None and exc.fullmatch(topic))

    def selects_group(self, group_id: str) -> bool:
        inc = _compile(self.group_include, "group.include")
        exc = _compile(self.group_exclude, "group.exclude")
        if inc is not None and not inc.fullmatch(group_id):
            return False
        return not (exc is not None and exc.fullmatch(group_id))


@dataclass(frozen=True)
class TimeFloor:
    """Never delete records younger than a point in time, for topics matching ``topic_regex``.

    Give exactly one of ``floor_time_ms`` (absolute, epoch ms) or ``min_retention_ms``
    (relative to the snapshot time).
    """

    topic_regex: str
    floor_time_ms: Optional[int] = None
    min_retention_ms: Optional[int] = None

    def __post_init__(self) -> None:
        _compile(self.topic_regex, "time.floors.topic_regex")
        if (self.floor_time_ms is None) == (self.min_retention_ms is None):
            raise ConfigError(
                f"time.floors: expected exactly one of floor_time_ms or min_retention_ms for {self.topic_regex!r}"
            )
        for key in ("floor_time_ms", "min_retention_ms"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"time.floors.{key}: expected a non-negative integer, got {value!r}")

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.topic_regex, topic) is not None

    def resolve(self, snapshot_time_ms: int) -> int:
        if self.floor_time_ms is not None:
            return self.floor_time_ms
        assert self.min_retention_ms is not None
        return snapshot_time_ms - self.min_retention_ms


@dataclass(frozen=True)
class SnapshotRequest:
    """What one snapshot reads beyond partition state: time floors, groups, its clock and id."""

    time_floors: tuple[TimeFloor, ...] = ()
    snapshot_time_ms: Optional[int] = None  # None: now
    snapshot_id: Optional[str] = None  # None: a new uuid
    include_groups: bool = True


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: Optional[int]
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    internal: bool
    cleanup_policy: Optional[str]
    retention_ms: Optional[int]
    remote_storage_enable: Optional[bool]
    time_floor_time_ms: Optional[int] = None
    time_floor_offset: Optional[int] = None
    # The topic's id (Metadata v10+, a UUID string): a topic deleted and recreated under the same
    # name gets a new one, so a plan made for the old topic is never applied to the new one.
    topic_id: Optional[str] = None
    # Bytes on the leader's disk (DescribeLogDirs; None: unknown, e.g. the broker did not answer).
    size_bytes: Optional[int] = None
    # Tiered storage (remote.storage.enable=true topics only): ListOffsets EARLIEST_LOCAL (-4),
    # offsets below it are remote only; LATEST_TIERED (-5), the highest offset copied to remote
    # storage (-1: none yet). None: not a tiered topic, or the broker could not say.
    local_log_start_offset: Optional[int] = None
    latest_tiered_offset: Optional[int] = None


@dataclass(frozen=True)
class TopicTiering:
    """A topic's tiered-storage state as Kafka reports it now (``KafkaPythonClient.tiering``).

    ``configs``: the tiering keys as every broker leading one of its partitions sees them
    (DescribeConfigs per leader: a config change is applied broker by broker); a key is
    ``None`` when the brokers disagree (not yet applied everywhere). Offsets per partition:
    ``log_start`` (EARLIEST), ``local_log_start`` (EARLIEST_LOCAL), ``latest_tiered``
    (LATEST_TIERED, -1: nothing in remote storage); a partition whose tiered offsets the broker
    could not give is absent from those two.
    """

    topic: str
    topic_id: Optional[str]
    configs: dict[str, Optional[str]]
    log_start: dict[int, int]
    local_log_start: dict[int, int]
    latest_tiered: dict[int, int]

    def flag(self, key: str) -> Optional[bool]:
        """A boolean config as every leader sees it (None: unknown, or not agreed yet)."""
        value = self.configs.get(key)
        return None if value is None else value.strip().lower() == "true"

    @property
    def remote_only(self) -> dict[int, int]:
        """Per partition, how many offsets exist only in remote storage (local log start - log start)."""
        return {p: self.local_log_start[p] - start for p, start in self.log_start.items() if p in self.local_log_start}


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    group_state: Optional[str]
    group_type: Optional[str]  # "classic" | "consumer" (KIP-848) | broker's word | "unknown"
    member_count: Optional[int]  # None: not known (KIP-848 groups without ConsumerGroupDescribe)


@dataclass(frozen=True)
class GroupCommit:
    group_id: str
    group_state: Optional[str]
    group_type: Optional[str]
    member_count: Optional[int]
    topic: str
    partition: int
    committed_offset: int
    commit_metadata: Optional[str]
    # KIP-320: the leader epoch of the last record the group consumed (None: the commit has none).
    committed_leader_epoch: Optional[int] = None
    # The log's end offset for that epoch (OffsetForLeaderEpoch; -1: the log does not know the
    # epoch). Below committed_offset: the committed history diverged from the log (truncation).
    # None: not checked (no epoch, or the leader could not answer).
    epoch_end_offset: Optional[int] = None


COMMIT_FIELDS = tuple(f.name for f in fields(GroupCommit))


def _column_length(columns: Mapping[str, Sequence[Any]]) -> int:
    missing = [name for name in COMMIT_FIELDS if name not in columns]
    if missing:
        raise ValueError(f"commit columns: missing {missing}")
    lengths = {len(columns[name]) for name in COMMIT_FIELDS}
    if len(lengths) > 1:
        raise ValueError(f"commit columns: of different lengths {sorted(lengths)}")
    return lengths.pop()


# The commit fields that are the group's (``GroupInfo``'s), and the integer ones ``CommitColumns``
# may hold as ``array.array``s (the leader epoch -1 where a commit has none).
GROUP_FIELDS = ("group_id", "group_state", "group_type", "member_count")
ARRAY_FIELDS = ("partition", "committed_offset", "committed_leader_epoch")


class CommitColumns(Sequence[GroupCommit]):
    """A snapshot's commits held column by column (``COMMIT_FIELDS``, one list each): what the
    data source turns into Arrow without a Python object per commit. It is still a sequence of
    ``GroupCommit`` (each made when asked for) and equals a tuple of the same commits, so code
    that walks a snapshot's commits one by one (the JSON form, tests) needs no change.

    Made by ``of_runs`` (as the Kafka client makes it), the group fields are held once per run of
    a group's commits and the integer fields as arrays (``group_runs``, ``array``): a field's
    list is made only when asked for (``column``)."""

    __slots__ = ("_arrays", "_columns", "_n", "_runs")

    def __init__(self, columns: Mapping[str, Sequence[Any]]) -> None:
        self._n = _column_length(columns)
        self._columns = {name: list(columns[name]) for name in COMMIT_FIELDS}
        self._runs: Optional[list[tuple[GroupInfo, int]]] = None
        self._arrays: dict[str, Any] = {}

    @classmethod
    def adopt(cls, columns: Mapping[str, list[Any]]) -> CommitColumns:
        """Lists made for this object alone, kept as they are rather than copied (the caller
        changes none of them later)."""
        out = cls.__new__(cls)
        out._n = _column_length(columns)
        out._columns = {name: columns[name] for name in COMMIT_FIELDS}
        out._runs, out._arrays = None, {}
        return out

    @classmethod
    def of_runs(cls, runs: Sequence[Sequence[Any]], columns: Mapping[str, Sequence[Any]]) -> CommitColumns:
        """The commits of ``runs`` (each a pair: a ``GroupInfo`` and how many of the commits in a
        row are its; copied),
        the other fields in ``columns``: lists, or ``array.array``s for ``ARRAY_FIELDS`` (kept as
        they are: the caller changes none of them later)."""
        out = cls.__new__(cls)
        given = {name: columns[name] for name in COMMIT_FIELDS if name not in GROUP_FIELDS}
        out._n = _column_length({**given, **{name: range(sum(n for _, n in runs)) for name in GROUP_FIELDS}})
        out._runs = [(info, n) for info, n in runs]
        out._arrays = {name: given.pop(name) for name in ARRAY_FIELDS if name in given and not isinstance(given[name], list)}
        out._columns = {name: list(values) if not isinstance(values, list) else values for name, values in given.items()}
        return out

    def group_runs(self) -> Optional[list[tuple[GroupInfo, int]]]:
        """The group fields as runs (``of_runs``), or None when held as lists."""
        return self._runs

    def array(self, name: str) -> Any:
        """One of ``ARRAY_FIELDS`` as the ``array.array`` it is held as (the leader epoch -1 where
        none), or None when held as a list."""
        return self._arrays.get(name)

    def column(self, name: str) -> list[Any]:
        """One field of every commit, in order (the list itself: do not change it)."""
        if name not in self._columns:
            if name in GROUP_FIELDS and self._runs is not None:
                self._columns[name] = [value for info, n in self._runs for value in [getattr(info, name)] * n]
            elif name == "committed_leader_epoch":
                self._columns[name] = [None if e < 0 else e for e in self._arrays[name]]
            else:
                self._columns[name] = self._arrays[name].tolist()
        return self._columns[name]

    def _all(self) -> dict[str, list[Any]]:
        return {name: self.column(name) for name in COMMIT_FIELDS}

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> GroupCommit: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[GroupCommit, ...]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[GroupCommit, tuple[GroupCommit, ...]]:
        if isinstance(index, slice):
            return tuple(self)[index]
        return GroupCommit(*(self.column(name)[index] for name in COMMIT_FIELDS))

    def __iter__(self) -> Iterator[GroupCommit]:
        return map(GroupCommit, *(self.column(name) for name in COMMIT_FIELDS))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CommitColumns):
            return self._all() == other._all()
        if isinstance(other, (tuple, list)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"CommitColumns({tuple(self)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"columns": self._all()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._columns = state["columns"]
        self._n = len(self._columns[COMMIT_FIELDS[0]])
        self._runs, self._arrays = None, {}


@dataclass(frozen=True)
class DroppedPartition:
    """A partition left out of the snapshot, and why (topic deleted mid-read, no leader...)."""

    topic: str
    partition: int
    reason: str


@dataclass(frozen=True)
class SnapshotIssue:
    """Something the snapshot could not read but went on without (e.g. a group it may not see)."""

    kind: str  # "group" | "topic_config" | "partition" | "coordinator"
    resource: str
    error: str  # broker error name, e.g. GROUP_AUTHORIZATION_FAILED
    message: str


@dataclass(frozen=True)
class ClusterSnapshot:
    snapshot_id: str
    snapshot_time_ms: int
    partitions: tuple[PartitionState, ...]
    commits: Sequence[GroupCommit]  # a tuple, or ``CommitColumns`` (as the Kafka client returns them)
    groups: tuple[GroupInfo, ...] = ()
    missing_topics: tuple[str, ...] = ()
    dropped_partitions: tuple[DroppedPartition, ...] = ()
    issues: tuple[SnapshotIssue, ...] = ()
    # Selected groups whose commits could not be read (coordinator down, Describe denied, ...):
    # they may hold commits on any topic, so the policy must not purge past them blindly.
    unreadable_groups: tuple[str, ...] = ()
    # The broker's offsets.retention.minutes in ms: how long Kafka keeps an empty group's
    # offsets (None: unknown, e.g. no Cluster DescribeConfigs, or a snapshot from before).
    offsets_retention_ms: Optional[int] = None

    def unreadable_group_errors(self) -> dict[str, str]:
        """Each unreadable group with the error that made it so (from ``issues``)."""
        errors = {i.resource: i.error for i in self.issues if i.kind in ("group", "coordinator")}
        return {g: errors.get(g, "UNKNOWN") for g in self.unreadable_groups}

    def commits_by_partition(self) -> dict[TopicPartitionKey, list[GroupCommit]]:
        out: dict[TopicPartitionKey, list[GroupCommit]] = {}
        for c in self.commits:
            out.setdefault((c.topic, c.partition), []).append(c)
        return out

    def to_json(self) -> str:
        """Compact JSON: rows as arrays in field order (asdict() is ~10x slower at 100k commits)."""
        doc = {
            "format": 1,
            "snapshot_id": self.snapshot_id,
            "snapshot_time_ms": self.snapshot_time_ms,
            "partitions": [list(vars(p).values()) for p in self.partitions],
            "commits": [list(vars(c).values()) for c in self.commits],
            "groups": [list(vars(g).values()) for g in self.groups],
            "missing_topics": list(self.missing_topics),
            "dropped_partitions": [list(vars(d).values()) for d in self.dropped_partitions],
            "issues": [list(vars(i).values()) for i in self.issues],
            "unreadable_groups": list(self.unreadable_groups),
            "offsets_retention_ms": self.offsets_retention_ms,
        }
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ClusterSnapshot:
        d = json.loads(text)
        if d.get("format") != 1:
            raise ValueError(f"unsupported snapshot format {d.get('format')!r}")
        partitions = []
        for row in d["partitions"]:
            row[3], row[4] = tuple(row[3]), tuple(row[4])  # replicas, isr
            partitions.append(PartitionState(*row))
        return cls(
            snapshot_id=d["snapshot_id"],
            snapshot_time_ms=d["snapshot_time_ms"],
            partitions=tuple(partitions),
            commits=tuple(GroupCommit(*c) for c in d["commits"]),
            groups=tuple(GroupInfo(*g) for g in d["groups"]),
            missing_topics=tuple(d["missing_topics"]),
            dropped_partitions=tuple(DroppedPartition(*x) for x in d["dropped_partitions"]),
            issues=tuple(SnapshotIssue(*x) for x in d["issues"]),
            unreadable_groups=tuple(d.get("unreadable_groups", ())),
            offsets_retention_ms=d.get("offsets_retention_ms"),  # absent in files written before
        )


# DeleteOutcome.error of a partition never sent because its topic changed identity since the
# plan (checked right before DeleteRecords): audited as ``skipped`` with the reason in lower case.
TOPIC_RECREATED = "TOPIC_RECREATED"
TOPIC_DELETED = "TOPIC_DELETED"
# Never sent: tiered storage began to be disabled on the topic after the plan (spark_purge.tiering).
TIERING_TRANSITION = "TIERING_TRANSITION"
SKIPPED_ERRORS = (TOPIC_RECREATED, TOPIC_DELETED, TIERING_TRANSITION)


@dataclass(frozen=True)
class DeleteOutcome:
    """What happened to one partition's DeleteRecords.

    ``error`` is None on success (``low_watermark`` is the broker's answer). On
    REQUEST_TIMED_OUT, ``low_watermark`` is the log start offset re-read afterwards (None if
    that failed too): the delete may or may not have gone through; this is the truth.
    """

    topic: str
    partition: int
    requested_offset: int
    leader: Optional[int]
    low_watermark: Optional[int]
    error: Optional[str] = None
    error_message: Optional[str] = None
    attempts: int = 0
    retriable: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def skipped(self) -> bool:
        """Never sent: the topic was recreated or deleted since the plan, or its tiered storage
        began to be disabled (``SKIPPED_ERRORS``)."""
        return self.error in SKIPPED_ERRORS

    @property
    def timed_out(self) -> bool:
        return self.error == "REQUEST_TIMED_OUT"

    @property
    def reached(self) -> bool:
        """The log start offset is known to be at or past the requested offset."""
        return self.low_watermark is not None and self.low_watermark >= self.requested_offset
