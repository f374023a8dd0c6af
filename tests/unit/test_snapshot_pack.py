"""The snapshot's group rows packed (``spark_purge.snapshot_pack``, the source's ``packed`` view:
issue 12): unpacked, any order, they are the ``snapshot`` view's rows; a reader given part of a
snapshot is refused; the planner plans a packed snapshot exactly as the nested one."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.kafka.model import ClusterSnapshot, GroupCommit, PartitionState
from spark_purge.planner import LastPairs, Planner
from spark_purge.policy import split_snapshot, with_groups
from spark_purge.snapshot_pack import PACKED_COLUMN, pack, partition_index, rows_with_groups, unpacked, unpacked_batches
from spark_purge.source_arrow import SnapshotChunk, arrow_schema, plan_chunks, snapshot_batch
from tests.unit.packing import packed_frame
from tests.unit.test_planner import PROGRESS_CONFIG, PROGRESS_ROWS, PROGRESS_SNAPSHOT, _arrow_maps


def cluster(partitions: int, groups: int) -> ClusterSnapshot:
    """``partitions`` partitions of two topics; group g commits on every partition p with p % (g + 1) == 0."""
    parts = tuple(
        PartitionState(f"t{i % 2}", i // 2, 1, (1,), (1,), 0, 100, 100, False, "delete", None, None, topic_id=f"id-t{i % 2}")
        for i in range(partitions)
    )
    commits = tuple(
        GroupCommit(f"g{g}", "Stable", "classic", 1, p.topic, p.partition, 10 * g + p.partition, None)
        for g in range(groups)
        for p in parts
        if p.partition % (g + 1) == 0
    )
    return ClusterSnapshot("snap", 1_700_000_000_000, parts, commits)


def _sorted_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return sorted(batch.to_pylist(), key=lambda r: (r["topic"], r["partition"]))


@pytest.mark.parametrize(("partitions", "every"), [(7, 2), (7, 100), (1, 1), (40, 3)])
def test_unpacked_in_any_order_they_are_the_snapshot_views_rows(partitions: int, every: int) -> None:
    snap = cluster(partitions, 4)
    nested = snapshot_batch(snap, "snapshot")
    packed = pack(nested, arrow_schema("packed"), rows=every)
    assert packed.schema.names == schemas.PACKED_SNAPSHOT.fieldNames()
    assert packed.column(PACKED_COLUMN).null_count == partitions - -(-partitions // every)  # a blob every `every` rows
    shuffled = packed.take(pa.array(np.random.default_rng(partitions).permutation(partitions)))
    back = unpacked(shuffled)
    assert back.schema == nested.schema
    assert _sorted_rows(back) == _sorted_rows(nested)
    # The mapInArrow function, given the rows in batches of any size, gives them all.
    given = pa.Table.from_batches(list(unpacked_batches(pa.Table.from_batches([shuffled]).to_batches(max_chunksize=3))))
    assert sorted(given.to_pylist(), key=lambda r: (r["topic"], r["partition"])) == _sorted_rows(nested)


def test_the_source_packed_view_carries_the_snapshot_views_rows() -> None:
    """``plan_chunks`` of the ``packed`` view: its chunks' rows unpack to the ``snapshot`` view's."""
    snap = cluster(9, 3)
    chunks = plan_chunks(snap, "packed", rows_per_partition=4)
    assert [c.rows for c in chunks] == [4, 4, 1]
    rows = pa.Table.from_batches([b for c in chunks for b in c.batches()]).combine_chunks().to_batches()[0]
    assert _sorted_rows(unpacked(rows)) == _sorted_rows(snapshot_batch(snap, "snapshot"))
    empty = plan_chunks(ClusterSnapshot("none", 1, (), ()), "packed", rows_per_partition=4)
    assert empty == [SnapshotChunk("none", 0, 0, b"")] and not list(unpacked_batches(iter(())))


def test_part_of_a_snapshot_is_refused_naming_the_column() -> None:
    packed = pack(snapshot_batch(cluster(6, 2), "snapshot"), arrow_schema("packed"), rows=3)
    with pytest.raises(ValueError, match=f"not the 6 its {PACKED_COLUMN} hold"):
        rows_with_groups(packed.slice(0, 4))  # a blob's rows without the rest of them
    with pytest.raises(ValueError, match=f"without their {PACKED_COLUMN}"):
        rows_with_groups(packed.slice(1, 2))  # rows whose blob is elsewhere


def test_with_groups_gives_the_snapshot_rows(spark: SparkSession) -> None:
    snapshot = spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT)
    packed = packed_frame(snapshot)
    assert with_groups(snapshot) is snapshot
    unpacked_df = with_groups(packed)
    assert unpacked_df.schema == schemas.SNAPSHOT
    assert sorted(map(tuple, unpacked_df.collect())) == sorted(map(tuple, snapshot.collect()))
    parts, groups = split_snapshot(packed)
    assert sorted(map(tuple, groups.collect())) == sorted(map(tuple, split_snapshot(snapshot)[1].collect()))
    assert parts.count() == snapshot.count()


def test_a_packed_snapshot_is_planned_as_the_nested_one(spark: SparkSession) -> None:
    """Batch after batch (the first with the facts' own task, unpacking the group rows; the next
    with the facts from the store match's task, which reads the blobs: no unpacking task), the
    plan of the packed snapshot is the plan of the nested one."""
    progress = spark.createDataFrame([r for r in PROGRESS_ROWS if r[0] != "gone"], schemas.PROGRESS_STORE)
    snapshot = spark.createDataFrame(PROGRESS_SNAPSHOT, schemas.SNAPSHOT)
    packed = packed_frame(snapshot)
    ways: dict[str, list[list[tuple[Any, ...]]]] = {"nested": [], "packed": []}
    pairs = {way: LastPairs() for way in ways}
    for batch in range(3):
        for way, frame in (("nested", snapshot), ("packed", packed)):
            plan = Planner(PROGRESS_CONFIG, lambda _: {}, lambda: progress, last_pairs=pairs[way]).plan(frame)
            assert plan is not None and plan.positions is not None
            assert (plan.positions.facts() is not None) == (batch > 0)
            maps = _arrow_maps(plan.rows._jdf.queryExecution().executedPlan())
            # The first batch: the facts' own task (and, packed, the unpacking task below it).
            assert len(maps) == (0 if batch else 1 + (way == "packed")), way
            ways[way].append(sorted(tuple(r) for r in plan.rows.collect()))
            plan.release()
    assert ways["packed"] == ways["nested"]
    assert ways["nested"][0] == ways["nested"][1]


def test_the_stores_packed_rows_come_back_as_packed_and_compressed() -> None:
    """``position_match.pack``: a held store's partition rows, one LZ4-compressed IPC stream
    (``snapshot_pack.ipc_bytes``), read back by ``unpack`` as they were."""
    from datetime import datetime, timezone

    from spark_purge.position_match import PACKED_SCHEMA, unpack
    from spark_purge.position_match import pack as pack_store

    at = datetime(2026, 12, 6, tzinfo=timezone.utc)
    rows = [
        {
            "topic": f"t{p % 3}", "partition": p, "changed": p % 2,
            "positions": [
                {"group_id": f"group-{g}", "committed_offset": 10 * g + p, "last_progress_time": at, "group_type": "classic", "topic_id": f"id-t{p % 3}", "changed": g == p}
                for g in range(40)
            ],
        }
        for p in range(60)
    ]
    table = pa.Table.from_pylist(rows, PACKED_SCHEMA)
    blob = pack_store(table)
    assert unpack([blob, None]).to_pylist() == table.to_pylist()
    plain = pa.BufferOutputStream()
    with pa.ipc.new_stream(plain, PACKED_SCHEMA) as writer:
        writer.write_table(table)
    assert len(blob) < plain.getvalue().size / 3  # the same stream compressed: these rows repeat


_keys = st.tuples(st.sampled_from(["a", "b", "ab", "é"]), st.sampled_from([0, 1, 7, -1, 2**31 - 1, -(2**31)]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_keys, max_size=12), st.lists(_keys, max_size=12), st.booleans())
def test_a_rows_partition_is_found_among_the_others_by_topic_and_partition(
    rows: list[tuple[str, int]], of: list[tuple[str, int]], large: bool
) -> None:
    """``partition_index`` against a plain walk: each row's first equal (topic, partition) among
    ``of``'s, or none; whichever string type either side holds."""
    def table(keys: list[tuple[str, int]], strings: pa.DataType) -> pa.Table:
        return pa.table({"topic": pa.array([t for t, _ in keys], strings), "partition": pa.array([p for _, p in keys], pa.int32())})

    got = partition_index(table(rows, pa.large_string() if large else pa.string()), table(of, pa.string())).to_pylist()
    assert got == [of.index(key) if key in of else None for key in rows]
