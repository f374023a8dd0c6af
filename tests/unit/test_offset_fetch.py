"""OffsetFetch v8 answers decoded column by column (``kafka.offset_fetch``) against kafka-python's
own encoder and decoder of the same bytes: the same groups, errors and positions, for any
answer; tagged fields skipped; cut or padded bytes refused."""
from __future__ import annotations

import struct
from itertools import groupby
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from spark_purge.kafka import offset_fetch
from spark_purge.kafka.members import OFFSET_FETCH, CommitRows, build_requests, parse_answer
from spark_purge.kafka.model import GroupInfo

Group = OffsetFetchResponse.OffsetFetchResponseGroup
Topic = Group.OffsetFetchResponseTopics
Partition = Topic.OffsetFetchResponsePartitions

def _answers(metadata: Any, errors: list[int], partitions_at_most: int, names_at_most: int) -> Any:
    """OffsetFetch v8 answers: up to four groups of up to three topics, each with up to
    ``partitions_at_most`` partitions whose metadata is drawn from ``metadata``."""
    partitions = st.lists(
        st.builds(
            Partition,
            partition_index=st.integers(0, 2**31 - 1),
            committed_offset=st.sampled_from([-1, 0, 7, 2**40]) | st.integers(-(2**63), 2**63 - 1),
            committed_leader_epoch=st.integers(-1, 2**31 - 1),
            metadata=metadata,
            error_code=st.sampled_from(errors),
        ),
        max_size=partitions_at_most,
        unique_by=lambda p: p.partition_index,
    )
    topics = st.lists(
        st.builds(Topic, name=st.text(min_size=1, max_size=names_at_most), partitions=partitions), max_size=3, unique_by=lambda t: t.name
    )
    return st.builds(
        lambda groups, throttle: OffsetFetchResponse(throttle_time_ms=throttle, groups=groups, version=8),
        st.lists(st.builds(Group, group_id=st.text(max_size=names_at_most), topics=topics, error_code=st.sampled_from([0, 0, 16, 30])), max_size=4),
        st.integers(0, 1000),
    )


# "" and None are what consumers commit; 200 characters take a two-byte length
answers = _answers(st.none() | st.just("") | st.text(max_size=3) | st.just("é" * 200), [0, 0, 0, 88, 3], 5, 8)


def oracle(group: Any) -> dict[tuple[str, int], tuple[int, Optional[str], Optional[int]]]:
    """kafka-python's decoded group as positions: no error, a non-negative offset."""
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
        for t in group.topics
        for p in t.partitions
        if not p.error_code and p.committed_offset >= 0
    }


def _decoded(answer: Any) -> tuple[bytes, Any, offset_fetch.OffsetFetchAnswerV8]:
    """The answer's bytes, kafka-python's decoding of them and ours, whose throttle time and
    groups (ids, error codes) are checked to be kafka-python's."""
    data = answer.encode(version=8)
    theirs = OffsetFetchResponse[8].decode(data)
    mine = offset_fetch.decode(data)
    assert mine.throttle_time_ms == theirs.throttle_time_ms
    assert [(g.group_id, g.error_code) for g in mine.groups] == [(g.group_id, g.error_code) for g in theirs.groups]
    return data, theirs, mine


@settings(max_examples=300, deadline=None)
@given(answers)
def test_the_columnar_answer_holds_what_kafka_python_decodes(answer: Any) -> None:
    _, theirs, mine = _decoded(answer)
    for got, want in zip(mine.groups, theirs.groups):
        assert got.commits.as_dict() == oracle(want)
    # and through the group reads' parser: the same outcome either way
    names = [g.group_id for g in theirs.groups]
    if len(set(names)) == len(names):
        columnar, classic = parse_answer(OFFSET_FETCH, names, mine, True, {}), parse_answer(OFFSET_FETCH, names, theirs, True, {})
        assert columnar == classic


def _compact(s: Optional[bytes]) -> bytes:
    return b"\x00" if s is None else bytes([len(s) + 1]) + s


def _answer(partition_tags: bytes = b"\x00", tail: bytes = b"") -> bytes:
    """throttle 0; group "g" (no error), topic "t", partition 3 at offset 42, epoch 5, metadata "m"."""
    part = struct.pack(">iqi", 3, 42, 5) + _compact(b"m") + struct.pack(">h", 0) + partition_tags
    topic = _compact(b"t") + b"\x02" + part + b"\x00"
    group = _compact(b"g") + b"\x02" + topic + struct.pack(">h", 0) + b"\x00"
    return struct.pack(">i", 0) + b"\x02" + group + b"\x00" + tail


def test_tagged_fields_a_broker_adds_are_skipped() -> None:
    plain = offset_fetch.decode(_answer())
    tagged = offset_fetch.decode(_answer(partition_tags=b"\x02\x07\x02ab\x09\x00"))  # two tags: 2 bytes, 0 bytes
    assert plain.groups[0].commits.as_dict() == tagged.groups[0].commits.as_dict() == {("t", 3): (42, "m", 5)}


@pytest.mark.parametrize("cut", [1, 5, 17, 20, 30])
def test_an_answer_cut_short_is_refused(cut: int) -> None:
    data = _answer()
    with pytest.raises(ValueError, match="OffsetFetch v8 answer ends"):
        offset_fetch.decode(data[:-cut])


def test_bytes_after_the_answer_are_refused() -> None:
    with pytest.raises(ValueError, match="1 bytes after its end"):
        offset_fetch.decode(_answer(tail=b"\x00"))


def test_the_request_is_kafka_pythons_and_only_its_answer_is_decoded_here() -> None:
    (groups, request), = build_requests(OFFSET_FETCH, ["a", "b"], True)
    assert groups == ["a", "b"] and isinstance(request, offset_fetch.OffsetFetchRequestV8)
    theirs = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups], version=8)
    assert request.encode(version=8) == theirs.encode(version=8)
    request.with_header(correlation_id=7, client_id="c")
    theirs.with_header(correlation_id=7, client_id="c")
    assert request.header.get_response_class() is offset_fetch.OffsetFetchAnswerV8
    assert theirs.header.get_response_class() is OffsetFetchResponse[8]  # every other OffsetFetch as before
    assert request.encode(version=8, header=True) == theirs.encode(version=8, header=True)


def test_commit_rows_are_raw_commits_column_by_column() -> None:
    info = GroupInfo("g", "Stable", "classic", 1)
    raw = [(info, ("t", 0), 5, "m", 3), (info, ("t", 1), -1, None, None), (info, ("u", 0), 7, "", None)]
    rows = CommitRows(raw)
    assert rows == raw and list(rows) == raw and rows[1] == raw[1] and rows[-1] == raw[-1] and rows[:2] == raw[:2]
    assert rows.select({("t", 0), ("t", 1), ("u", 0)}) is rows
    assert rows.select({("u", 0)}) == [raw[2]]
    with pytest.raises(IndexError):
        rows[3]


# What consumers commit: metadata null or empty, no tagged field, so every partition is a
# 20-byte record and the answer is read column-wise (``_decode_fixed``).
plain_answers = _answers(st.none() | st.just(""), [0, 0, 0, 88], 12, 4)


def _keys(block: offset_fetch.CommitBlock) -> list[tuple[str, int]]:
    return list(zip(block.topics, block.partitions))


@settings(max_examples=300, deadline=None)
@given(plain_answers)
def test_an_answer_of_plain_records_is_read_column_wise_and_each_block_sorted(answer: Any) -> None:
    data, theirs, mine = _decoded(answer)
    for got, want in zip(mine.groups, theirs.groups):
        assert got.commits.ordered
        assert got.commits.as_dict() == oracle(want)
        assert _keys(got.commits) == sorted(oracle(want))  # sorted by (topic, partition), each key once
        assert list(got.commits.items()) == sorted(oracle(want).items())  # every column in that order
    assert [g.commits.as_dict() for g in offset_fetch._decode_records(data).groups] == [g.commits.as_dict() for g in mine.groups]


def _records(parts: list[tuple[int, int, bytes, bytes]], topic: bytes = b"t") -> bytes:
    """One group "g", one topic, partitions (index, offset, metadata's compact bytes, tags)."""
    body = b"".join(struct.pack(">iqi", i, o, -1) + meta + struct.pack(">h", 0) + tags for i, o, meta, tags in parts)
    topic_bytes = _compact(topic) + bytes([len(parts) + 1]) + body + b"\x00"
    return struct.pack(">i", 0) + b"\x02" + _compact(b"g") + b"\x02" + topic_bytes + struct.pack(">h", 0) + b"\x00" + b"\x00"


@pytest.mark.parametrize(
    "parts",
    [
        [(1, 5, b"\x01", b"\x00"), (0, 6, b"\x02m", b"\x00")],  # a metadata string: not a 20-byte record
        [(1, 5, b"\x01", b"\x00"), (0, 6, b"\x01", b"\x01\x07\x00")],  # a tagged field
        [(1, 5, b"\x01", b"\x00"), (1, 6, b"\x01", b"\x00")],  # the same key twice: the later wins, as before
    ],
)
def test_an_answer_not_of_plain_records_is_read_record_by_record_in_the_brokers_order(parts: list[tuple[int, int, bytes, bytes]]) -> None:
    data = _records(parts)
    (group,) = offset_fetch.decode(data).groups
    assert not group.commits.ordered
    assert _keys(group.commits) == [("t", i) for i, *_ in parts]
    assert group.commits.as_dict() == offset_fetch._decode_records(data).groups[0].commits.as_dict()


def test_of_a_key_given_twice_the_later_position_counts_as_before() -> None:
    data = _records([(1, 5, b"\x01", b"\x00"), (1, 6, b"\x01", b"\x00")])
    assert offset_fetch.decode(data).groups[0].commits.as_dict() == {("t", 1): (6, "", None)}


def test_a_plain_answer_cut_short_or_padded_is_still_refused() -> None:
    data = _records([(1, 5, b"\x01", b"\x00"), (0, 6, b"\x00", b"\x00")])
    assert offset_fetch.decode(data).groups[0].commits.ordered
    for cut in (1, 3, 20, 25):
        with pytest.raises(ValueError, match="OffsetFetch v8 answer ends"):
            offset_fetch.decode(data[:-cut])
    with pytest.raises(ValueError, match="bytes after its end"):
        offset_fetch.decode(data + b"\x00")


_tps = st.tuples(st.sampled_from(["t", "u", "é"]), st.sampled_from([0, 1, 2, 2**31 - 1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["g", "h"]), _tps, st.integers(-1, 9)), max_size=12), st.frozensets(_tps, max_size=6))
def test_commit_rows_keep_the_rows_on_the_kept_partitions_in_order(raw: list[tuple[str, tuple[str, int], int]], keep: frozenset[tuple[str, int]]) -> None:
    infos = {g: GroupInfo(g, "Stable", "classic", 1) for g in ("g", "h")}
    rows = CommitRows([(infos[g], tp, offset, None, None) for g, tp, offset in raw])
    kept = rows.select(keep)
    assert list(kept) == [row for row in rows if row[1] in keep]
    assert (kept is rows) == all(row[1] in keep for row in rows)
    assert [(info.group_id, n) for info, n in kept.runs] == [(g, len(list(run))) for g, run in groupby(row[0].group_id for row in kept)]
