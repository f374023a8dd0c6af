"""The plan's open-transaction note and the hanging-transaction flag (pure; the DescribeProducers
wire format is checked byte for byte in test_messages.py, a real transaction in
tests/integration/test_producers.py)."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_purge.kafka.messages import PartitionProducers, ProducerState
from spark_purge.kafka.producers import OpenTransactions
from spark_purge.policy.producers import annotate, is_hanging, transaction_note

NOW = 1_700_000_000_000
MAX = 900_000  # transaction.max.timeout.ms, Kafka's default
OPEN = ProducerState(1000, 3, 9, NOW - 5_000, 2, 40)  # wrote 5 s ago, transaction open at 40
IDLE = ProducerState(1001, 0, 4, NOW - 1_000, -1, None)  # idempotent, no transaction
STUCK = ProducerState(7, 1, 2, NOW - MAX - 1, 0, 12)  # silent for longer than the max timeout


def test_the_producer_whose_transaction_starts_at_the_lso_is_named() -> None:
    found = PartitionProducers("t", 0, (IDLE, OPEN))
    note = transaction_note(found, 40, NOW, MAX)
    assert note == (
        "pinned at last stable offset 40 by producer 1000 epoch 3 (transaction open since offset 40, "
        "last write 2023-11-14T22:13:15+00:00)"
    )
    assert transaction_note(PartitionProducers("t", 0, (IDLE,)), 50, NOW, MAX) is None  # nothing open
    assert transaction_note(PartitionProducers("t", 0, error="NOT_LEADER_OR_FOLLOWER"), 40, NOW, MAX) == (
        "active producers unknown (DescribeProducers: NOT_LEADER_OR_FOLLOWER)"
    )


def test_a_transaction_silent_longer_than_the_broker_max_timeout_is_hanging() -> None:
    assert is_hanging(STUCK, NOW, MAX) and not is_hanging(OPEN, NOW, MAX)
    assert not is_hanging(STUCK, NOW, None)  # timeout unknown: never flagged
    assert not is_hanging(IDLE, NOW + 10 * MAX, MAX)  # no transaction open
    note = transaction_note(PartitionProducers("t", 0, (OPEN, STUCK)), 12, NOW, MAX)
    assert note is not None and note.startswith("pinned at last stable offset 12 by producer 7 epoch 1")
    assert "HANGING transaction: producer 7 epoch 1 silent for 900001 ms > transaction.max.timeout.ms 900000 ms" in note
    assert "never purged past offset 12" in note and "producer 1000" not in note.split("HANGING")[1]


def test_annotate_counts_producers_only_where_a_transaction_is_open() -> None:
    rows = [
        {"topic": "t", "partition": 0, "detail": "open transaction: last stable offset 40"},
        {"topic": "t", "partition": 1, "detail": "group g"},
    ]
    found = OpenTransactions({("t", 0): PartitionProducers("t", 0, (IDLE, OPEN))}, MAX)
    out = annotate(rows, {("t", 0): 40}, found, NOW)
    assert [r["active_producers"] for r in out] == [2, None]
    assert out[0]["detail"].startswith("open transaction: last stable offset 40; pinned at last stable offset 40 by producer 1000")
    assert out[1]["detail"] == "group g" and rows[0]["detail"] == "open transaction: last stable offset 40"  # input untouched


_producers = st.lists(
    st.builds(
        ProducerState,
        producer_id=st.integers(0, 50),
        producer_epoch=st.integers(0, 5),
        last_sequence=st.integers(-1, 100),
        last_timestamp=st.integers(-1, NOW),
        coordinator_epoch=st.integers(-1, 3),
        txn_start_offset=st.one_of(st.none(), st.integers(0, 100)),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(producers=_producers, lso=st.integers(0, 100), max_timeout=st.one_of(st.none(), st.integers(1, 2 * MAX)))
def test_the_note_names_an_open_transaction_and_flags_exactly_the_hanging_ones(
    producers: list[ProducerState], lso: int, max_timeout: int | None
) -> None:
    # Independent of the policy code: a transaction hangs when open and silent longer than the timeout.
    hanging = [p for p in producers if p.txn_start_offset is not None and max_timeout is not None
               and p.last_timestamp >= 0 and NOW - p.last_timestamp > max_timeout]
    note = transaction_note(PartitionProducers("t", 0, tuple(producers)), lso, NOW, max_timeout)
    opened = [p for p in producers if p.txn_start_offset is not None]
    if not opened:
        assert note is None
        return
    assert note is not None
    pinned = note.split(" by producer ", 1)[1].split(" ", 1)[0]
    candidates = [p for p in opened if p.txn_start_offset == lso] or [min(opened, key=lambda p: (p.txn_start_offset, p.producer_id))]
    assert int(pinned) in {p.producer_id for p in candidates}
    assert note.count("HANGING transaction") == len(hanging)


def test_the_plans_rows_get_the_annotation_of_every_row_and_only_read_ones_change() -> None:
    """``pipeline.with_producers`` annotates only the partitions DescribeProducers answered for,
    and gives every row what ``annotate`` gives it (the oracle: all rows through ``annotate``)."""
    from datetime import datetime, timezone
    from typing import Any, cast

    from pyspark.sql import Row

    from spark_purge.pipeline import with_producers
    from spark_purge.planner import Plan

    rows = [Row(topic="t", partition=p, detail=d, cutoff=p * 10) for p, d in enumerate(["open", None, "group g", "open too"])]
    table = pa.Table.from_pylist([r.asDict() for r in rows], pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("detail", pa.string()), ("cutoff", pa.int64())]))
    found = OpenTransactions(
        {("t", 0): PartitionProducers("t", 0, (IDLE, OPEN)), ("t", 3): PartitionProducers("t", 3, error="NOT_LEADER_OR_FOLLOWER")}, MAX
    )
    lsos = {("t", 0): 40, ("t", 3): 7}

    class Client:
        def open_transactions(self, asked: Any) -> OpenTransactions:
            assert asked == lsos
            return found

    plan = Plan(rows=cast(Any, None), planned_at=datetime.fromtimestamp(NOW / 1000, timezone.utc), open_transactions=lsos)
    out = with_producers(plan, table, lambda: cast(Any, Client())).to_pylist()
    assert out == annotate([r.asDict() for r in rows], lsos, found, NOW)
    assert [r["active_producers"] for r in out] == [2, None, None, None]
    assert out[0]["detail"].startswith("open; pinned at last stable offset 40") and out[3]["detail"].startswith("open too; active producers unknown")
    assert out[1]["detail"] is None and out[2]["detail"] == "group g" and out[2]["cutoff"] == 20
    assert with_producers(plan, table.slice(0, 0), lambda: cast(Any, Client())).num_rows == 0
    # A table that has the column already: annotated again, the column replaced where it is.
    again = with_producers(plan, pa.Table.from_pylist(out), lambda: cast(Any, Client())).to_pylist()
    assert again == annotate(out, lsos, found, NOW)
    assert list(again[0]) == list(out[0]) == ["topic", "partition", "detail", "cutoff", "active_producers"]
