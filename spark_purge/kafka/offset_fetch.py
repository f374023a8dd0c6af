"""OffsetFetch v8 answers read column by column: no Python object per commit.

kafka-python decodes an answer into one object per group, topic and partition. A snapshot asks
each coordinator for all of its groups' commits in one OffsetFetch v8 request, so at 10,000
groups x 50 partitions one answer is 500,000 partition objects (about 60 MB), which the snapshot
then turned into a dict per group (about 80 MB more) before making columns of them. Here an
``OffsetFetchRequestV8`` asks for the same thing, and its answer is decoded straight from the
bytes into one ``CommitBlock`` per group: the group's positions as arrays (32 bytes a commit).

How: kafka-python finds the class that decodes an answer through the request header it kept
for the request (``RequestHeader.get_response_class``); the request here makes its header with
a class whose answer is ``OffsetFetchAnswerV8``. Every other OffsetFetch kafka-python or this
package sends is decoded as before.

The layout read (Kafka's ``OffsetFetchResponse.json``, version 8, a flexible version: compact
arrays and strings, tagged fields at the end of each structure)::

    ThrottleTimeMs int32
    Groups []: GroupId string
               Topics []: Name string
                          Partitions []: PartitionIndex int32, CommittedOffset int64,
                                         CommittedLeaderEpoch int32, Metadata string (nullable),
                                         ErrorCode int16
               ErrorCode int16

A partition with an error code or a negative committed offset is no position, as
``members._parse_offset_fetch`` reads kafka-python's answers: it is left out of the block.

Two ways to read it. Most answers have every partition 20 bytes long: the metadata null or
empty (one length byte) and no tagged field. ``decode`` first walks only the groups' and
topics' headers, taking each topic's partitions as one run of 20-byte records, and checks every
record's metadata length and tag count at once with NumPy; when that holds (the first record
that does not is found at its true place, so a wrong guess is always caught) the records are
read column-wise, with no Python per commit, and each group's block is sorted by (topic,
partition): ``CommitBlock.ordered``. Otherwise, or when a group names a (topic, partition)
twice, the answer is read record by record, its blocks in the broker's order.
"""
from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.util import classproperty

from spark_purge.kafka.model import TopicPartitionKey

VERSION = 8

_PARTITION = struct.Struct(">iqiB")  # index, offset, leader epoch, the metadata length's first byte
_INT16_BYTE = struct.Struct(">hB")  # error code, the tagged-field count's first byte
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# A 20-byte partition record as NumPy reads it (``_decode_fixed``): big-endian, packed.
_RECORD_TYPE = [("index", ">i4"), ("offset", ">i8"), ("epoch", ">i4"), ("meta", "u1"), ("error", ">i2"), ("tags", "u1")]

# (committed offset, metadata, committed leader epoch or None): one group's position on a partition
Position = tuple[int, Optional[str], Optional[int]]


class CommitBlock:
    """One group's positions, column by column: ``topics[i]``, ``partitions[i]``,
    ``offsets[i]``, ``metadata[i]`` and ``epochs[i]`` (-1: none) are commit *i*: sorted by
    (topic, partition) when ``ordered``, else in the order they were added (``decode``'s record
    reader: the broker's). A topic name is one string object for all its commits."""

    __slots__ = ("epochs", "metadata", "offsets", "ordered", "partitions", "topics")
    COLUMNS = ("epochs", "metadata", "offsets", "partitions", "topics")

    def __init__(self) -> None:
        self.topics: list[str] = []
        self.partitions = array("i")
        self.offsets = array("q")
        self.metadata: list[Optional[str]] = []
        self.epochs = array("i")
        # True: the commits are sorted by (topic, partition), each key once (``decode`` says so
        # when it read them column-wise); ``add`` makes no such promise.
        self.ordered = False

    def add(self, topic: str, partition: int, offset: int, metadata: Optional[str], epoch: Optional[int]) -> None:
        self.topics.append(topic)
        self.partitions.append(partition)
        self.offsets.append(offset)
        self.metadata.append(metadata)
        self.epochs.append(-1 if epoch is None or epoch < 0 else epoch)

    @classmethod
    def of(cls, positions: Mapping[TopicPartitionKey, Position]) -> CommitBlock:
        """A block of ``{(topic, partition): (offset, metadata, epoch or None)}``."""
        block = cls()
        for (topic, partition), (offset, metadata, epoch) in positions.items():
            block.add(topic, partition, offset, metadata, epoch)
        return block

    def __len__(self) -> int:
        return len(self.offsets)

    def items(self) -> Iterator[tuple[TopicPartitionKey, Position]]:
        """``((topic, partition), (offset, metadata, epoch or None))`` per commit."""
        for topic, partition, offset, metadata, epoch in zip(self.topics, self.partitions, self.offsets, self.metadata, self.epochs):
            yield (topic, partition), (offset, metadata, None if epoch < 0 else epoch)

    def as_dict(self) -> dict[TopicPartitionKey, Position]:
        return dict(self.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CommitBlock):
            return self.as_dict() == other.as_dict()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CommitBlock({len(self)} commits)"


@dataclass(frozen=True)
class GroupAnswer:
    """One group in an OffsetFetch v8 answer (the fields ``members`` reads of kafka-python's)."""

    group_id: str
    error_code: int
    commits: CommitBlock


@dataclass(frozen=True)
class OffsetFetchAnswerV8:
    """A decoded OffsetFetch v8 answer; ``decode`` and ``parse_header`` are what kafka-python's
    connection calls on the class it found through the request's header."""

    throttle_time_ms: int
    groups: tuple[GroupAnswer, ...]

    API_VERSION = VERSION
    name = "OffsetFetchResponse"

    @classmethod
    def parse_header(cls, data: Any) -> Any:
        return OffsetFetchResponse[VERSION].parse_header(data)

    @classmethod
    def decode(cls, data: Any) -> OffsetFetchAnswerV8:
        return decode(data.read() if hasattr(data, "read") else bytes(data))

    def __repr__(self) -> str:  # kafka-python logs answers at debug level: not 500,000 commits
        return f"OffsetFetchAnswerV8({len(self.groups)} groups, {sum(len(g.commits) for g in self.groups)} commits)"


class _Header(RequestHeader, init=False):  # type: ignore[misc,call-arg]
    __slots__ = ()

    def get_response_class(self) -> type[OffsetFetchAnswerV8]:
        return OffsetFetchAnswerV8


class OffsetFetchRequestV8(OffsetFetchRequest, init=False):  # type: ignore[misc,call-arg]
    """kafka-python's OffsetFetch request, version 8 only, answered as ``OffsetFetchAnswerV8``."""

    def __init__(self, group_ids: list[str]) -> None:
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        super().__init__(groups=[group(group_id=g, topics=None) for g in group_ids], min_version=VERSION, max_version=VERSION)

    @classproperty  # type: ignore[untyped-decorator]
    def header_class(cls) -> type[RequestHeader]:  # a classproperty, as kafka-python's
        return _Header


class _Reader:
    """A cursor over one answer's bytes."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.buf):
                raise ValueError("OffsetFetch v8 answer ends inside a varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("OffsetFetch v8 answer has a varint longer than 5 bytes")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ValueError(f"OffsetFetch v8 answer ends inside a field ({n} bytes at {self.pos} of {len(self.buf)})")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def string(self) -> Optional[str]:
        n = self.uvarint() - 1  # compact: length + 1, 0 for null
        return None if n < 0 else self.take(n).decode()

    def count(self) -> int:
        n = self.uvarint() - 1  # compact array: length + 1, 0 for null (read as empty)
        return max(n, 0)

    def unpack(self, fmt: struct.Struct) -> tuple[Any, ...]:
        if self.pos + fmt.size > len(self.buf):
            raise ValueError(f"OffsetFetch v8 answer ends inside a field ({fmt.size} bytes at {self.pos} of {len(self.buf)})")
        out = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return out

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def decode(buf: bytes) -> OffsetFetchAnswerV8:
    """An OffsetFetch v8 answer's body (after the response header). Raises ``ValueError`` on
    bytes that do not end where the layout does (kafka-python turns that into a protocol error)."""
    return _decode_fixed(buf) or _decode_records(buf)


_RECORD = 20  # a partition's bytes when its metadata is null or empty and it has no tagged field


def _decode_fixed(buf: bytes) -> Optional[OffsetFetchAnswerV8]:
    """The answer read column-wise, when every partition is a 20-byte record and no group names
    a key twice; None otherwise (``_decode_records`` then reads it, and refuses bad bytes)."""
    import numpy as np  # here: the data source's lookup workers import this module, not NumPy

    r = _Reader(buf)
    end = len(buf)
    heads: list[tuple[str, int]] = []  # per group: its id and error code
    runs: list[tuple[int, str, int, int]] = []  # per topic: its group's index, name, first record's byte, records
    try:
        (throttle,) = r.unpack(_INT32)
        for g in range(r.count()):
            group_id = r.string() or ""
            for _ in range(r.count()):
                name = r.string() or ""
                n = r.count()
                if r.pos + n * _RECORD > end:
                    return None
                runs.append((g, name, r.pos, n))
                r.pos += n * _RECORD
                r.skip_tagged()
            (error_code,) = r.unpack(_INT16)
            r.skip_tagged()
            heads.append((group_id, error_code))
        r.skip_tagged()
    except ValueError:
        return None
    if r.pos != end:
        return None
    records = np.frombuffer(b"".join([buf[pos : pos + n * _RECORD] for _, _, pos, n in runs]), dtype=_RECORD_TYPE)
    if len(records) and (int(records["meta"].max()) > 1 or int(records["tags"].max()) > 0):
        return None
    counts = np.fromiter((n for *_, n in runs), np.int64, len(runs))
    names = sorted({name for _, name, _, _ in runs})
    rank = {name: i for i, name in enumerate(names)}
    group = np.repeat(np.fromiter((g for g, *_ in runs), np.int64, len(runs)), counts)
    topic = np.repeat(np.fromiter((rank[name] for _, name, _, _ in runs), np.int64, len(runs)), counts)
    partition = records["index"].astype(np.int32)
    kept = np.flatnonzero((records["error"] == 0) & (records["offset"] >= 0))
    # Sorted by group, then by one key of the topic's rank and the partition (made non-negative).
    # The group stays a key of its own: folded into one integer with the others it would
    # overflow once groups x topics passed 2**31, and mix groups' commits.
    owner = group[kept]
    key = (topic[kept] << 32) | (partition[kept].astype(np.int64) + (1 << 31))
    same = owner[1:] == owner[:-1]
    if len(key) > 1 and not ((owner[1:] > owner[:-1]) | (same & (key[1:] > key[:-1]))).all():
        ranked = np.lexsort((key, owner))
        kept, owner, key = kept[ranked], owner[ranked], key[ranked]
        if ((owner[1:] == owner[:-1]) & (key[1:] == key[:-1])).any():
            return None  # a key twice: read in the broker's order, as the record reader keeps both
    order = kept
    group, topic, partition = group[order], topic[order], partition[order]
    offsets = records["offset"][order].astype(np.int64).tobytes()
    epoch = records["epoch"][order].astype(np.int32)
    epochs = np.where(epoch >= 0, epoch, np.int32(-1)).astype(np.int32).tobytes()
    partitions = partition.tobytes()
    meta = records["meta"][order]
    # Runs of one group's commits on one topic: their topic strings and metadata made per run.
    starts = np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (topic[1:] != topic[:-1])]) if len(order) else np.zeros(0, np.int64)
    bounds = np.r_[starts, len(order)]
    lowest = np.minimum.reduceat(meta, starts) if len(order) else meta
    highest = np.maximum.reduceat(meta, starts) if len(order) else meta
    blocks = [CommitBlock() for _ in heads]
    for block in blocks:
        block.ordered = True
    spans = zip(group[starts].tolist(), topic[starts].tolist(), bounds[:-1].tolist(), bounds[1:].tolist(), lowest.tolist(), highest.tolist())
    for g, t, a, b, low, high in spans:
        block = blocks[g]
        block.topics.extend([names[t]] * (b - a))
        if low == high:
            block.metadata.extend([None if low == 0 else ""] * (b - a))
        else:
            block.metadata.extend([None if m == 0 else "" for m in meta[a:b].tolist()])
    firsts = np.searchsorted(group, np.arange(len(heads) + 1)).tolist()
    for g, block in enumerate(blocks):
        a, b = firsts[g], firsts[g + 1]
        if a < b:
            block.partitions.frombytes(partitions[4 * a : 4 * b])
            block.offsets.frombytes(offsets[8 * a : 8 * b])
            block.epochs.frombytes(epochs[4 * a : 4 * b])
    return OffsetFetchAnswerV8(throttle, tuple(GroupAnswer(gid, err, block) for (gid, err), block in zip(heads, blocks)))


def _decode_records(buf: bytes) -> OffsetFetchAnswerV8:
    """The answer read record by record, each group's commits in the broker's order."""
    r = _Reader(buf)
    (throttle,) = r.unpack(_INT32)
    unpack_commit, unpack_tail, end = _PARTITION.unpack_from, _INT16_BYTE.unpack_from, len(buf)
    names: dict[str, str] = {}  # one string object per topic name, across groups
    groups = []
    for _ in range(r.count()):
        group_id = r.string() or ""
        block = CommitBlock()
        topics, partitions, offsets, metadata, epochs = block.topics, block.partitions, block.offsets, block.metadata, block.epochs
        for _ in range(r.count()):
            name = r.string() or ""
            name = names.setdefault(name, name)
            for _ in range(r.count()):  # once per commit: no call in the common case
                pos = r.pos
                if pos + 20 > end:
                    raise ValueError(f"OffsetFetch v8 answer ends inside a commit (at {pos} of {end})")
                index, offset, epoch, first = unpack_commit(buf, pos)
                pos += 17
                if first < 0x80:  # a one-byte metadata length: null (0), empty (1) or short
                    if first > 1:
                        meta: Optional[str] = buf[pos : pos + first - 1].decode()
                        pos += first - 1
                    else:
                        meta = None if first == 0 else ""
                else:  # 127 bytes or more: a longer varint
                    r.pos = pos - 1
                    meta = r.string()
                    pos = r.pos
                if pos + 3 > end:
                    raise ValueError(f"OffsetFetch v8 answer ends inside a commit (at {pos} of {end})")
                error, tags = unpack_tail(buf, pos)
                r.pos = pos + 3
                if tags:
                    r.pos -= 1
                    r.skip_tagged()
                if error or offset < 0:
                    continue
                topics.append(name)
                partitions.append(index)
                offsets.append(offset)
                metadata.append(meta)
                epochs.append(epoch if epoch >= 0 else -1)
            r.skip_tagged()
        (error_code,) = r.unpack(_INT16)
        r.skip_tagged()
        groups.append(GroupAnswer(group_id, error_code, block))
    r.skip_tagged()
    if r.pos != len(buf):
        raise ValueError(f"OffsetFetch v8 answer has {len(buf) - r.pos} bytes after its end")
    return OffsetFetchAnswerV8(throttle, tuple(groups))


__all__ = ["CommitBlock", "GroupAnswer", "OffsetFetchAnswerV8", "OffsetFetchRequestV8", "Position", "decode"]
