"""What each group's members need, per group type: the reads, their requests and answers, and the
snapshot rows they make. Pure: no I/O here (``groups.GroupReader.fetch_group_state`` sends).

Which reads a group needs (``reads_for``), all sent per coordinator in one round, in parallel:

==========  ===============================================================================
classic     OffsetFetch (commits) + DescribeGroups (state, members, ConsumerProtocol assignments)
consumer    OffsetFetch (commits) + ConsumerGroupDescribe (KIP-848 state, members, assignments)
share       DescribeShareGroupOffsets (the share-partition start offset, SPSO) +
            ShareGroupDescribe (state, members, assignments); share groups never commit
streams     OffsetFetch (commits) + StreamsGroupDescribe (KIP-1071 state, topology, members'
            active tasks: a task (subtopology, p) holds partition p of the subtopology's sources)
==========  ===============================================================================

``assemble_groups`` turns what was read into the snapshot contract:

- a commit (or a share group's SPSO) on a snapshot topic is a row with that offset;
- a partition a group's members hold (assigned or target-assigned) or subscribe to (every
  partition of a topic they subscribe to by name or by a KIP-848 regular expression; a streams
  group's source topics) without a commit / start offset, and a share-partition the broker lists
  with start offset -1, is a row with ``committed_offset = -1`` (the group needs the partition but
  has no position: a missing commit);
- a group any of whose reads failed or was refused is unreadable (no rows; a ``SnapshotIssue``
  names the error), never "no position"; so is a group whose members' topics are unknown (a
  classic group rebalancing, whose subscriptions DescribeGroups does not show; a streams group
  with members and no topology yet).
"""
from __future__ import annotations

import re
import uuid
from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby, repeat
from typing import Any, Optional, Union, overload

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from spark_purge.kafka.messages import (
    REBALANCING,
    GroupDescription,
    ShareGroupOffsets,
    build_consumer_group_describe,
    build_describe_share_group_offsets,
    build_share_group_describe,
    build_streams_group_describe,
    parse_classic_group_assignments,
    parse_consumer_group_describe,
    parse_describe_share_group_offsets,
    parse_share_group_describe,
    parse_streams_group_describe,
)
from spark_purge.kafka.model import GroupInfo, SnapshotIssue, TopicPartitionKey
from spark_purge.kafka.offset_fetch import CommitBlock, GroupAnswer, OffsetFetchRequestV8, Position
from spark_purge.kafka.wire import AUTH_ERRORS, error_name

# The reads, by the API they use.
OFFSET_FETCH = "OffsetFetch"
DESCRIBE_GROUPS = "DescribeGroups"
CONSUMER_DESCRIBE = "ConsumerGroupDescribe"
SHARE_OFFSETS = "DescribeShareGroupOffsets"
SHARE_DESCRIBE = "ShareGroupDescribe"
STREAMS_DESCRIBE = "StreamsGroupDescribe"

NO_POSITION = -1  # committed_offset of a partition a group needs but has no position on

# group id -> its positions (``offset_fetch.CommitBlock``: (committed offset, metadata, committed
# leader epoch or None) per partition, column by column)
Commits = dict[str, CommitBlock]
# group id -> (state, type, protocol type), as ListGroups said
ListedGroups = Mapping[str, tuple[Optional[str], Optional[str], str]]
RawCommit = tuple[GroupInfo, TopicPartitionKey, int, Optional[str], Optional[int]]  # ... offset, metadata, leader epoch
Payload = Union[CommitBlock, GroupDescription, ShareGroupOffsets]


def reads_for(group_type: Optional[str]) -> tuple[str, ...]:
    """The reads a group of ``group_type`` (ListGroups' word) needs before it counts as read."""
    if group_type == "share":
        return (SHARE_OFFSETS, SHARE_DESCRIBE)
    if group_type == "consumer":
        return (OFFSET_FETCH, CONSUMER_DESCRIBE)
    if group_type == "streams":
        return (OFFSET_FETCH, STREAMS_DESCRIBE)
    if group_type in (None, "", "classic"):
        return (OFFSET_FETCH, DESCRIBE_GROUPS)
    return (OFFSET_FETCH,)  # types this version does not know


class CommitRows(CommitBlock, Sequence[RawCommit]):
    """The snapshot's group rows (``RawCommit``: group, (topic, partition), offset, metadata,
    leader epoch or None), held column by column: a ``CommitBlock``'s columns and the group of
    each row. At 500,000 rows a tuple each (and a (topic, partition) tuple in it) took about
    75 MB. Still a sequence of ``RawCommit`` (each made when asked for) that equals a list or
    tuple of the same rows. ``runs`` says the same as ``infos`` in runs: each run's group and
    how many rows in a row are its (what the commits' group columns are made from, once a group
    and not once a row)."""

    __slots__ = ("infos", "runs")
    _COLUMNS = ("infos", *CommitBlock.COLUMNS)

    def __init__(self, rows: Iterable[RawCommit] = ()) -> None:
        super().__init__()
        self.infos: list[GroupInfo] = []
        self.runs: list[list[Any]] = []  # [group, rows]: ``infos`` run by run
        for info, tp, offset, metadata, epoch in rows:
            self.extend(info, [(tp, (offset, metadata, epoch))])

    def _run(self, info: GroupInfo, n: int) -> None:
        if not n:
            return
        if self.runs and self.runs[-1][0] is info:
            self.runs[-1][1] += n
        else:
            self.runs.append([info, n])

    def extend(self, info: GroupInfo, positions: Iterable[tuple[TopicPartitionKey, Position]]) -> None:
        """Rows of one group, in the order given (``CommitBlock.add`` inlined: once per commit,
        where a call a row costs about 0.06 s at 500,000)."""
        infos, topics, partitions, offsets, metadata, epochs = (
            self.infos, self.topics, self.partitions, self.offsets, self.metadata, self.epochs
        )
        before = len(infos)
        for (topic, partition), (offset, meta, epoch) in positions:
            infos.append(info)
            topics.append(topic)
            partitions.append(partition)
            offsets.append(offset)
            metadata.append(meta)
            epochs.append(-1 if epoch is None or epoch < 0 else epoch)
        self._run(info, len(infos) - before)

    def extend_block(self, info: GroupInfo, block: CommitBlock) -> None:
        """Every row of one group's block, in its order: column by column, no Python per row."""
        n = len(block)
        self.infos.extend([info] * n)
        self.topics.extend(block.topics)
        self.partitions.extend(block.partitions)
        self.offsets.extend(block.offsets)
        self.metadata.extend(block.metadata)
        self.epochs.extend(block.epochs)
        self._run(info, n)

    def select(self, keep: Collection[TopicPartitionKey]) -> CommitRows:
        """The rows on the partitions in ``keep`` (this object itself when that is every row)."""
        import numpy as np  # here: the data source's lookup workers import this module, not NumPy

        # A row's key an integer: its topic's code (-1: no kept partition's) and its partition.
        code: dict[str, int] = {}
        for topic, _ in keep:
            code.setdefault(topic, len(code))
        topics = np.fromiter(map(code.get, self.topics, repeat(-1)), np.int64, len(self.topics))
        keys = (topics << 32) | (np.frombuffer(self.partitions, np.int32).astype(np.int64) + (1 << 31))
        kept = np.fromiter(((code[t] << 32) | (p + (1 << 31)) for t, p in keep), np.int64, len(keep))
        found = np.isin(keys, kept)
        if found.all():
            return self
        wanted = np.flatnonzero(found).tolist()
        out = CommitRows()
        for name in self._COLUMNS:
            column = getattr(self, name)
            picked = [column[i] for i in wanted]
            setattr(out, name, array(column.typecode, picked) if isinstance(column, array) else picked)
        out.runs = [[run[0], len(run)] for run in (list(r) for _, r in groupby(out.infos, key=id))]
        return out

    def _row(self, i: int) -> RawCommit:
        epoch = self.epochs[i]
        return (self.infos[i], (self.topics[i], self.partitions[i]), self.offsets[i], self.metadata[i], None if epoch < 0 else epoch)

    @overload
    def __getitem__(self, index: int) -> RawCommit: ...

    @overload
    def __getitem__(self, index: slice) -> list[RawCommit]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[RawCommit, list[RawCommit]]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("CommitRows index out of range")
        return self._row(index)

    def __iter__(self) -> Iterator[RawCommit]:
        return map(self._row, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (CommitRows, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CommitRows({list(self)!r})"


@dataclass(frozen=True)
class Outcome:
    """One group's answer to one read: ``payload`` when ``error`` is None."""

    error: Optional[str]
    message: str
    payload: Optional[Payload] = None


@dataclass
class GroupReads:
    """Everything read for the selected groups; filled round by round."""

    commits: Commits = field(default_factory=dict)
    descriptions: dict[str, GroupDescription] = field(default_factory=dict)
    share_offsets: dict[str, ShareGroupOffsets] = field(default_factory=dict)
    # group -> (error, message) of a read that failed for good (refused, unsupported, malformed)
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)

    def store(self, read: str, group: str, payload: Payload) -> None:
        if read == OFFSET_FETCH:
            assert isinstance(payload, CommitBlock)
            self.commits[group] = payload
        elif read == SHARE_OFFSETS:
            assert isinstance(payload, ShareGroupOffsets)
            self.share_offsets[group] = payload
        else:
            assert isinstance(payload, GroupDescription)
            self.descriptions[group] = payload


# ---- requests ------------------------------------------------------------------------------------


def build_requests(read: str, groups: Sequence[str], offset_fetch_v8: bool) -> list[tuple[list[str], Any]]:
    """The request(s) of one read for ``groups`` on one coordinator: one request, except
    OffsetFetch before v8 (one per group)."""
    gs = list(groups)
    if read == OFFSET_FETCH:
        if offset_fetch_v8:  # answered column by column (``offset_fetch``)
            return [(gs, OffsetFetchRequestV8(gs))]
        return [([g], OffsetFetchRequest(group_id=g, topics=None, min_version=2, max_version=7)) for g in gs]
    if read == DESCRIBE_GROUPS:
        return [(gs, DescribeGroupsRequest(groups=gs, include_authorized_operations=False))]
    if read == CONSUMER_DESCRIBE:
        return [(gs, build_consumer_group_describe(gs))]
    if read == SHARE_DESCRIBE:
        return [(gs, build_share_group_describe(gs))]
    if read == STREAMS_DESCRIBE:
        return [(gs, build_streams_group_describe(gs))]
    if read == SHARE_OFFSETS:
        # Every share-partition the group has state for: asking for the snapshot's topics would
        # list (with -1) partitions of topics the group never subscribed to.
        return [(gs, build_describe_share_group_offsets(gs, None))]
    raise ValueError(f"unknown group read {read!r}")


# ---- answers -------------------------------------------------------------------------------------


def parse_answer(
    read: str, groups: Sequence[str], answer: Any, offset_fetch_v8: bool, topic_names: Mapping[uuid.UUID, str]
) -> dict[str, Outcome]:
    """Each group's outcome of one answer; a group the answer does not mention is an error."""
    out: dict[str, Outcome] = {}
    if read == OFFSET_FETCH:
        out = _parse_offset_fetch(groups, answer, offset_fetch_v8)
    else:
        parsed: Mapping[str, Union[GroupDescription, ShareGroupOffsets]]
        if read == SHARE_OFFSETS:
            parsed = parse_describe_share_group_offsets(answer)
        elif read == SHARE_DESCRIBE:
            parsed = parse_share_group_describe(answer, topic_names)
        elif read == CONSUMER_DESCRIBE:
            parsed = parse_consumer_group_describe(answer, topic_names)
        elif read == STREAMS_DESCRIBE:
            parsed = parse_streams_group_describe(answer)
        else:
            parsed = parse_classic_group_assignments(answer)
        for g in groups:
            result = parsed.get(g)
            if result is None:
                continue
            if result.error is not None:
                detail = f": {result.error_message}" if result.error_message else ""
                out[g] = Outcome(result.error, f"{read} for group {g!r} failed: {result.error}{detail}")
            else:
                out[g] = Outcome(None, "", result)
    for g in groups:
        if g not in out:
            out[g] = Outcome("MISSING_FROM_RESPONSE", f"{read} answer did not mention group {g!r}")
    return out


def _parse_offset_fetch(groups: Sequence[str], answer: Any, v8: bool) -> dict[str, Outcome]:
    """Each group's commits: from an ``OffsetFetchAnswerV8`` as decoded, from kafka-python's
    answer (before v8) partition by partition. A partition with an error or a negative offset
    is no position."""
    out: dict[str, Outcome] = {}
    pairs = ((ga.group_id, ga) for ga in answer.groups) if v8 else zip(groups, [answer])
    for g_id, ga in pairs:
        err = error_name(ga.error_code) or (error_name(answer.error_code) if not v8 else None)
        if err is not None:
            what = "Describe on group" if err in AUTH_ERRORS else "OffsetFetch for group"
            out[g_id] = Outcome(err, f"{what} {g_id!r} failed: {err}")
            continue
        if isinstance(ga, GroupAnswer):
            out[g_id] = Outcome(None, "", ga.commits)
            continue
        commits = CommitBlock()
        for t in ga.topics:
            for p in t.partitions:
                offset = p.committed_offset
                if p.error_code or offset is None or offset < 0:
                    continue
                commits.add(t.name, p.partition_index, int(offset), p.metadata, getattr(p, "committed_leader_epoch", None))  # v5+
        out[g_id] = Outcome(None, "", commits)
    return out


# ---- the snapshot contract -----------------------------------------------------------------------


def assemble_groups(
    selected: Iterable[str],
    listed: ListedGroups,
    reads: GroupReads,
    unread: Mapping[str, SnapshotIssue],
    topics: Collection[str],
    issues: list[SnapshotIssue],
    partitions: Optional[Mapping[str, Collection[int]]] = None,
) -> tuple[list[GroupInfo], CommitRows, list[str]]:
    """(groups, their rows on ``topics``, unreadable groups); see the module docstring.

    ``unread``: group -> the issue that left a read missing (failed, refused or out of time);
    each such group is unreadable and its issue goes to ``issues``. ``partitions``: topic ->
    its partitions (what a rebalancing classic group's subscription holds).
    """
    topic_set = set(topics)
    infos: list[GroupInfo] = []
    rows = CommitRows()
    unreadable: list[str] = []
    for g in sorted(selected):
        state, gtype, _ = listed[g]
        members: Optional[int] = None
        desc = reads.descriptions.get(g)
        if desc is not None:
            state, members = desc.state or state, desc.member_count
        info = GroupInfo(g, state, gtype, members)
        infos.append(info)
        problem = unread.get(g) or _share_partition_error(g, reads.share_offsets.get(g), topic_set)
        if problem is not None:
            unreadable.append(g)
            issues.append(problem)
            continue
        block = reads.commits.get(g)
        needed: set[TopicPartitionKey] = set(desc.held) if desc is not None else set()
        if desc is not None:
            for t in _subscribed(desc, topic_set):
                needed.update((t, p) for p in (partitions or {}).get(t, ()))
        share = reads.share_offsets.get(g)
        # Sorted already, every key once, all on the snapshot's topics: the rows are the block's,
        # column by column, when it has a position on every partition the group needs.
        if (
            block is not None
            and block.ordered
            and share is None
            and topic_set.issuperset(block.topics)
            and (not needed or needed.issubset(zip(block.topics, block.partitions)))
        ):
            rows.extend_block(info, block)
            continue
        positions: dict[TopicPartitionKey, Position] = block.as_dict() if block is not None else {}
        if share is not None:
            positions.update((tp, (offset, None, None)) for tp, offset in share.positions().items())
            needed |= share.without_position()
        for tp in needed - positions.keys():
            positions[tp] = (NO_POSITION, None, None)
        rows.extend(info, sorted(item for item in positions.items() if item[0][0] in topic_set))
    return infos, rows, unreadable


def _subscribed(desc: GroupDescription, topics: Collection[str]) -> set[str]:
    """The snapshot topics ``desc``'s members subscribe to, by name or by a KIP-848 regular
    expression (matched whole, as Kafka does). A member subscribed to a topic gets all of its
    partitions: before its first assignment (KIP-848 and share groups assign at intervals, a
    streams group's first tasks wait for its initial rebalance delay), and when partitions are
    added, it holds none of them yet, and a missing commit must hold them all the same."""
    out = set(desc.subscribed_topics) & set(topics)
    for pattern in desc.subscribed_patterns:
        compiled = re.compile(pattern)  # a pattern Python cannot compile made the group unreadable (messages)
        out.update(t for t in topics if compiled.fullmatch(t))
    return out


def _share_partition_error(
    group: str, offsets: Optional[ShareGroupOffsets], topics: Collection[str]
) -> Optional[SnapshotIssue]:
    """A share-partition of a snapshot topic whose start offset the broker could not give."""
    if offsets is None:
        return None
    bad = sorted((tp, err) for tp, err in offsets.partition_errors().items() if tp[0] in topics)
    if not bad:
        return None
    shown = ", ".join(f"{t}-{p} ({err})" for (t, p), err in bad[:5]) + (" ..." if len(bad) > 5 else "")
    return SnapshotIssue("group", group, bad[0][1], f"{SHARE_OFFSETS} for group {group!r} failed on {shown}")


__all__ = [
    "CONSUMER_DESCRIBE",
    "DESCRIBE_GROUPS",
    "NO_POSITION",
    "OFFSET_FETCH",
    "REBALANCING",
    "SHARE_DESCRIBE",
    "SHARE_OFFSETS",
    "STREAMS_DESCRIBE",
    "CommitRows",
    "Commits",
    "GroupReads",
    "Outcome",
    "Position",
    "RawCommit",
    "assemble_groups",
    "build_requests",
    "parse_answer",
    "reads_for",
]
