"""The progress store (real Delta, local files): an incremental MERGE that remembers every
position seen, never stores -1, never drops a key because its group disappeared, is harmless
to re-run, and forgets only on an operator's request."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_purge import schemas, txn_append
from spark_purge.audit import ProgressStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5)
T2 = T0 + timedelta(minutes=10)


def groups(spark: SparkSession, rows: list[tuple[str, str, int, int, str | None]]) -> Any:
    """GROUP_OFFSETS rows from (group, topic, partition, committed_offset, group_type)."""
    full = [("s", T0, g, "Empty", kind, 0, t, p, o, None, None, None) for g, t, p, o, kind in rows]
    return spark.createDataFrame(full, schemas.GROUP_OFFSETS)


def content(store: ProgressStore) -> dict[tuple[str, str, int], tuple[int, datetime, str | None]]:
    return {
        (r["group_id"], r["topic"], r["partition"]): (r["committed_offset"], r["last_progress_time"].replace(tzinfo=timezone.utc), r["group_type"])
        for r in store.read().collect()
    }


def test_merge_remembers_every_position_and_keeps_unchanged_progress_times(spark: SparkSession, tmp_path: Path) -> None:
    store = ProgressStore(spark, str(tmp_path / "progress"), app_id="q")
    assert store.read().count() == 0 and not store.exists()

    store.update(groups(spark, [("a", "t", 0, 10, "classic"), ("b", "t", 0, 5, "consumer"), ("c", "t", 1, -1, "consumer")]), T0, 0)
    assert content(store) == {("a", "t", 0): (10, T0, "classic"), ("b", "t", 0): (5, T0, "consumer")}  # -1: no position

    # a moves, b disappears from the snapshot (offsets expired): b is kept as it was.
    store.update(groups(spark, [("a", "t", 0, 12, "classic")]), T1, 1)
    assert content(store) == {("a", "t", 0): (12, T1, "classic"), ("b", "t", 0): (5, T0, "consumer")}

    # Unchanged: the progress time stays; a re-run of the same batch changes nothing.
    for _ in range(2):
        store.update(groups(spark, [("a", "t", 0, 12, "classic")]), T2, 2)
    assert content(store) == {("a", "t", 0): (12, T1, "classic"), ("b", "t", 0): (5, T0, "consumer")}

    # b comes back lower (a reset): that is progress too.
    store.update(groups(spark, [("b", "t", 0, 3, "consumer")]), T2, 3)
    assert content(store)[("b", "t", 0)] == (3, T2, "consumer")


def test_remembered_and_remove_for_forget_group(spark: SparkSession, tmp_path: Path) -> None:
    store = ProgressStore(spark, str(tmp_path / "progress"), app_id="q")
    assert store.remembered("gone") == []
    store.update(
        groups(spark, [("gone", "orders", 0, 30, "classic"), ("gone", "orders", 1, 31, "classic"), ("gone", "clicks", 0, 7, "classic"),
                       ("other", "orders", 0, 99, "classic")]),
        T0,
        0,
    )
    assert [(r["topic"], r["partition"]) for r in store.remembered("gone", "ord.*")] == [("orders", 0), ("orders", 1)]
    assert store.remembered("gone", "ord") == []  # full match, like the config's regexes

    store.remove(store.remembered("gone", "orders"))
    assert set(content(store)) == {("gone", "clicks", 0), ("other", "orders", 0)}
    store.remove(store.remembered("gone"))
    assert set(content(store)) == {("other", "orders", 0)}


def test_a_table_written_before_group_type_is_migrated(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "progress")
    spark.createDataFrame([("old", "t", 0, 4, T0)], schemas.GROUP_PROGRESS).write.format("delta").save(path)
    store = ProgressStore(spark, path, app_id="q")
    assert content(store) == {("old", "t", 0): (4, T0, None)}

    store.update(groups(spark, [("new", "t", 0, 8, "share")]), T1, 0)
    assert content(store) == {("old", "t", 0): (4, T0, None), ("new", "t", 0): (8, T1, "share")}


def test_positions_carry_the_topic_id_and_a_new_incarnation_is_new_progress(spark: SparkSession, tmp_path: Path) -> None:
    store = ProgressStore(spark, str(tmp_path / "progress"), app_id="q")

    def parts(topic_id: str) -> Any:
        return spark.createDataFrame([("s", T0, "t", 0, 1, [1], [1], 0, 50, 50, False, "delete", None, None, None, None, topic_id, None, None, None)], schemas.PARTITION_STATE)

    def ids() -> dict[tuple[str, str, int], tuple[int, datetime, str | None]]:
        return {(r["group_id"], r["topic"], r["partition"]): (r["committed_offset"], r["last_progress_time"].replace(tzinfo=timezone.utc), r["topic_id"]) for r in store.read().collect()}

    store.update(groups(spark, [("a", "t", 0, 10, "classic")]), T0, 0, parts("id-1"))
    assert ids() == {("a", "t", 0): (10, T0, "id-1")}
    store.update(groups(spark, [("a", "t", 0, 10, "classic")]), T1, 1, parts("id-1"))  # unchanged
    assert ids() == {("a", "t", 0): (10, T0, "id-1")}
    # The topic was recreated and the group committed 10 again there: a new position.
    store.update(groups(spark, [("a", "t", 0, 10, "classic")]), T2, 2, parts("id-2"))
    assert ids() == {("a", "t", 0): (10, T2, "id-2")}


def test_the_log_appends_changed_keys_only_and_pruning_keeps_each_keys_newest_row(
    spark: SparkSession, tmp_path: Path, monkeypatch: Any
) -> None:
    from spark_purge import audit

    monkeypatch.setattr(audit, "LOG_FACTOR", 2)
    path = str(tmp_path / "progress")
    store = ProgressStore(spark, path, app_id="q")

    def raw() -> list[tuple[str, int, int | None]]:
        rows = spark.read.format("delta").load(path).collect()
        return sorted((r["group_id"], r["committed_offset"], r["batch_id"]) for r in rows)

    store.update(groups(spark, [("a", "t", 0, 1, "classic"), ("b", "t", 0, 5, "classic")]), T0, 0)
    store.update(groups(spark, [("a", "t", 0, 2, "classic"), ("b", "t", 0, 5, "classic")]), T1, 1)  # only a moved
    assert raw() == [("a", 1, 0), ("a", 2, 1), ("b", 5, 0)]  # appended, nothing rewritten
    assert content(store) == {("a", "t", 0): (2, T1, "classic"), ("b", "t", 0): (5, T0, "classic")}

    # a moves twice more: 5 rows for 2 keys > LOG_FACTOR x 2: the superseded rows go. The batch
    # that makes the prune due rewrites the log as its rows after the batch (one commit, each
    # key's row stamped with the batch).
    store.update(groups(spark, [("a", "t", 0, 3, "classic")]), T2, 2)
    assert raw() == [("a", 1, 0), ("a", 2, 1), ("a", 3, 2), ("b", 5, 0)]
    version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).first()[0]
    store.update(groups(spark, [("a", "t", 0, 4, "classic")]), T2 + timedelta(minutes=5), 3)
    assert raw() == [("a", 4, 3), ("b", 5, 3)]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(f"version > {version}").collect()
    assert [(h["operation"], h["operationParameters"]["mode"]) for h in history] == [("WRITE", "Overwrite")]
    # The size the next prune is judged by: the rows the rewrite wrote.
    assert audit._PROGRESS_LOG_SIZE[path] == audit._LogSize(rows=2, keys=2)
    assert content(store) == {("a", "t", 0): (4, T2 + timedelta(minutes=5), "classic"), ("b", "t", 0): (5, T0, "classic")}

    # forget-group removes every row of a key, superseded ones included.
    store.update(groups(spark, [("a", "t", 0, 6, "classic")]), T2 + timedelta(minutes=9), 4)
    store.remove(store.remembered("a"))
    assert raw() == [("b", 5, 3)]

    # Without Delta's direct path the prune is the MERGE: each key's newest row, its batch kept.
    monkeypatch.setattr(txn_append, "_UNSUPPORTED", ["not here"])
    for batch, offset in ((5, 7), (6, 8), (7, 9)):
        store.update(groups(spark, [("a", "t", 0, offset, "classic"), ("b", "t", 0, 5, "classic")]), T2 + timedelta(minutes=10 + batch), batch)
    assert raw() == [("a", 8, 6), ("a", 9, 7), ("b", 5, 3)]  # batch 6 pruned; b's row is batch 3's still


def test_a_rewrite_the_table_moved_under_appends_and_prunes_instead(spark: SparkSession, tmp_path: Path, monkeypatch: Any) -> None:
    """Another writer's commit between the batch's read and its rewrite is never overwritten:
    the rewrite conflicts, and the batch appends its changes and prunes with the MERGE."""
    from spark_purge import audit

    monkeypatch.setattr(audit, "LOG_FACTOR", 2)
    path = str(tmp_path / "progress")
    store = ProgressStore(spark, path, app_id="q")
    store.update(groups(spark, [("a", "t", 0, 1, "classic"), ("b", "t", 0, 5, "classic")]), T0, 0)
    store.update(groups(spark, [("a", "t", 0, 2, "classic"), ("b", "t", 0, 5, "classic")]), T1, 1)
    store.update(groups(spark, [("a", "t", 0, 3, "classic"), ("b", "t", 0, 5, "classic")]), T2, 2)
    other = [("z", "t", 0, 40, T0, "classic", None, 99)]

    def another_writer(at: str) -> None:
        spark.createDataFrame(other, audit.PROGRESS_LOG).write.format("delta").mode("append").save(at)

    monkeypatch.setattr(txn_append, "BEFORE_COMMIT", [another_writer])
    rewrites: list[bool] = []
    rewrite = ProgressStore._rewrite
    monkeypatch.setattr(ProgressStore, "_rewrite", lambda self, *a: (rewrites.append(rewrite(self, *a)), rewrites[-1])[1])
    store.update(groups(spark, [("a", "t", 0, 4, "classic"), ("b", "t", 0, 5, "classic")]), T2 + timedelta(minutes=5), 3)
    assert rewrites == [False]  # it conflicted
    rows = sorted((r["group_id"], r["committed_offset"], r["batch_id"]) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("a", 4, 3), ("b", 5, 0), ("z", 40, 99)]  # the other writer's row is there
    assert store.path not in audit._PROGRESS_STATE  # the table moved: the next read reads it
    assert {k: v[0] for k, v in content(store).items()} == {("a", "t", 0): 4, ("b", "t", 0): 5, ("z", "t", 0): 40}


def test_the_rows_a_batch_recorded_answer_the_next_read_only_while_the_table_has_not_moved(
    spark: SparkSession, tmp_path: Path, monkeypatch: Any
) -> None:
    """``record`` keeps the store's rows after its append and its own prune (no Delta read at the
    next batch): they must be exactly what the table reads, after every kind of batch, and be
    given up as soon as anything else commits to the table."""
    import random

    from spark_purge import audit, deltalog
    from spark_purge.deltalog import table_state

    monkeypatch.setattr(deltalog, "_UNSUPPORTED", [])  # whatever an earlier test's failure left
    path = str(tmp_path / "progress")
    store = ProgressStore(spark, path, app_id="q")

    def from_table() -> dict[tuple[str, str, int], tuple[int, datetime, str | None]]:
        known = audit._PROGRESS_STATE.pop(store.path, None)  # read the table itself, then put it back
        try:
            return content(store)
        finally:
            if known is not None:
                audit._PROGRESS_STATE[store.path] = known

    def parts(topic_id: str) -> Any:
        return spark.createDataFrame(
            [("s", T0, "t", p, 1, [1], [1], 0, 50, 50, False, "delete", None, None, None, None, topic_id, None, None, None) for p in (0, 1)],
            schemas.PARTITION_STATE,
        )

    store.update(groups(spark, [("a", "t", 0, 1, "classic")]), T0, 0)  # creates the table, then reads it (empty)
    assert content(store) == from_table() == {("a", "t", 0): (1, T0, "classic")}

    draw = random.Random(12)
    offsets = {(g, p): 1 for g in "abcd" for p in (0, 1)}
    topic_id = "id-1"
    monkeypatch.setattr(audit, "COMPACT_EVERY", 4)  # batches 3 and 7 compact the table
    kept = []
    prunes: list[int] = []  # batches that pruned, by the MERGE or by rewriting the log
    prune, rewrite = ProgressStore.prune, ProgressStore._rewrite
    monkeypatch.setattr(ProgressStore, "prune", lambda self, batch_id: (prunes.append(batch_id), prune(self, batch_id))[1])
    monkeypatch.setattr(ProgressStore, "_rewrite", lambda self, after, batch_id, v, *rest: (prunes.append(batch_id), rewrite(self, after, batch_id, v, *rest))[1])
    for batch in range(1, 9):
        now = T0 + timedelta(minutes=batch)
        for key in draw.sample(sorted(offsets), 3):  # some move, some stay, one may leave the snapshot
            offsets[key] += draw.choice([0, 1, 5, -1])
        if batch == 5:
            topic_id = "id-2"  # the topic recreated: every position on it is new progress
        kind = "share" if batch == 3 else "classic"  # a group type newly known changes only the type
        rows = [(g, "t", p, o, kind if g == "c" else "consumer") for (g, p), o in sorted(offsets.items()) if (g, p) != ("d", batch % 2)]
        failed_before = deltalog.failed_calls()
        store.update(groups(spark, rows), now, batch, parts(topic_id))
        known = audit._PROGRESS_STATE.get(store.path)
        # Kept after its own append and prune; given up after a compaction (not known to commit),
        # or when a listing of Delta's log failed in the batch (then the table is read: safe).
        failed = deltalog.failed_calls() - failed_before  # in this batch (not the diagnostic call below)
        why = (batch, prunes, deltalog._UNSUPPORTED, failed, table_state(spark, store.path), audit._PROGRESS_READ.get(store.path))
        if known is None and batch % 4 != 3:
            assert failed > 0, why
        else:
            assert (known is not None) == (batch % 4 != 3), why
        if known is not None:
            assert known.table == table_state(spark, store.path), batch
            assert not known.held._jdf.queryExecution().analyzed().rdd().getStorageLevel().deserialized()  # kept as bytes
            kept.append(batch)
        assert content(store) == from_table(), batch
    assert set(prunes) & set(kept), (prunes, kept)  # a batch that pruned kept its rows

    # Another writer (an operator's forget-group) commits: the rows kept are given up.
    store.remove(store.remembered("a"))
    assert content(store) == from_table() and not any(k[0] == "a" for k in content(store))
    assert store.path not in audit._PROGRESS_STATE


def _added_stats(path: str) -> list[dict[str, Any]]:
    """The statistics of every file the table's commits added (its ``_delta_log``)."""
    import json

    found = []
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action and action["add"].get("stats"):
                found.append(json.loads(action["add"]["stats"]))
    return found


def test_the_log_keeps_row_counts_not_column_statistics_also_on_a_table_written_before(spark: SparkSession, tmp_path: Path) -> None:
    from spark_purge.audit import PROGRESS_PROPERTIES
    from spark_purge.deltalog import latest_snapshot

    def properties(path: str) -> dict[str, str]:
        configuration = latest_snapshot(spark, path).metadata().configuration()
        return {k: str(configuration.get(k).get()) for k in PROGRESS_PROPERTIES if configuration.get(k).isDefined()}

    new = str(tmp_path / "new")
    store = ProgressStore(spark, new, app_id="q")
    store.update(groups(spark, [("g", "t", 0, 5, "classic"), ("g", "t", 1, 6, "classic")]), T0, 0)
    assert properties(new) == PROGRESS_PROPERTIES
    assert _added_stats(new) == [{"numRecords": 2}]  # no min / max / null counts per column

    old = str(tmp_path / "old")  # a table of an earlier version: Delta's default statistics
    spark.createDataFrame([("old", "t", 0, 4, T0)], schemas.GROUP_PROGRESS).write.format("delta").save(old)
    assert "minValues" in _added_stats(old)[0]
    store = ProgressStore(spark, old, app_id="q")
    store.update(groups(spark, [("new", "t", 0, 8, "share")]), T1, 0)
    assert properties(old) == PROGRESS_PROPERTIES
    assert _added_stats(old)[-1] == {"numRecords": 1}
    assert content(store) == {("old", "t", 0): (4, T0, None), ("new", "t", 0): (8, T1, "share")}


def test_the_match_tasks_log_file_is_committed_as_it_is_and_reads_as_spark_would_write_it(spark: SparkSession, tmp_path: Path) -> None:
    """A batch of the nested path (``NestedPositions`` given the batch id): the match's task
    makes the changed positions' Parquet file, the store commits it with no Spark write, and the
    table then reads what Spark's writer makes of the same rows (another table, side by side)."""
    from spark_purge import audit
    from spark_purge.policy import split_snapshot
    from spark_purge.policy.positions import NestedPositions, nest_store

    def snapshot(offsets: dict[tuple[str, int], int], at: datetime = T1) -> Any:
        rows = [
            ("s", at, "t", p, 1, [1], [1], 0, 50, 50, False, "delete", None, None, None, None, "id-1", None, None,
             None, [(g, "Empty", "classic", 0, o, None, None, None) for (g, q), o in sorted(offsets.items()) if q == p], [])
            for p in (0, 1)
        ]
        return spark.createDataFrame(rows, schemas.SNAPSHOT)

    stores = {way: ProgressStore(spark, str(tmp_path / way), app_id="q") for way in ("file", "writer")}
    parts, first = split_snapshot(snapshot({("a", 0): 1, ("b", 0): 2, ("a", 1): 3}, T0))
    for store in stores.values():
        store.update(first, T0, 0, parts)
    moved = {("a", 0): 5, ("b", 0): 2, ("a", 1): 3, ("c", 1): 7}  # a moved, b and (a, 1) stayed, c new
    before = dict(audit.PROGRESS_APPENDS)
    for way, store in stores.items():
        nested = NestedPositions.match(snapshot(moved), nest_store(store.read()), (), at=T1, log_batch=1 if way == "file" else None)
        nested.staleness_table()  # the job that computes the match, as the planner runs it
        log_file = nested.log_file()
        assert (log_file is None) == (way == "writer")
        if log_file is not None:
            assert (log_file.batch_id, log_file.rows) == (1, 2) and log_file.body
        after, holder = nested.hand_over(T1)
        store.record(after, 1, holder=holder, log_file=log_file)
    assert audit.PROGRESS_APPENDS["file"] == before["file"] + 1 and audit.PROGRESS_APPENDS["writer"] == before["writer"] + 1
    for store in stores.values():
        audit._PROGRESS_STATE.pop(store.path, None)  # read each table itself
    expected = {
        ("a", "t", 0): (5, T1, "classic"), ("b", "t", 0): (2, T0, "classic"), ("a", "t", 1): (3, T0, "classic"), ("c", "t", 1): (7, T1, "classic"),
    }
    assert content(stores["file"]) == content(stores["writer"]) == expected
    logged = {
        way: sorted(tuple(r) for r in spark.read.format("delta").load(s.path).where("batch_id = 1").select("group_id", "topic", "partition", "committed_offset", "topic_id").collect())
        for way, s in stores.items()
    }
    assert logged["file"] == logged["writer"] == [("a", "t", 0, 5, "id-1"), ("c", "t", 1, 7, "id-1")]
    assert _added_stats(stores["file"].path)[-1] == {"numRecords": 2}


def test_a_file_is_committed_only_to_a_table_it_fits(spark: SparkSession, tmp_path: Path) -> None:
    """``txn_append.append_file`` leaves to Spark's writer (None) a table with per-column
    statistics, a partitioned one, one of other columns, and one keeping a column not null that
    the file may hold nulls in; it commits to a table that fits."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("k", StringType(), False), StructField("v", LongType(), True)])
    body = io.BytesIO()
    pq.write_table(pa.table({"k": ["x", "y"], "v": [1, None]}), body)

    def table(name: str, rows_schema: StructType, partitioned: bool = False, stats: bool = False) -> str:
        from delta.tables import DeltaTable

        path = str(tmp_path / name)
        builder = DeltaTable.create(spark).location(path).addColumns(rows_schema)  # k NOT NULL
        if partitioned:
            builder = builder.partitionedBy("k")
        if not stats:
            builder = builder.property("delta.dataSkippingNumIndexedCols", "0")
        builder.execute()
        spark.createDataFrame([("w", 0)], rows_schema).write.format("delta").mode("append").save(path)  # a version past 0
        return path

    fits = table("fits", schema)
    assert txn_append.append_file(spark, fits, body.getvalue(), 2, schema) is True
    assert sorted(tuple(r) for r in spark.read.format("delta").load(fits).collect()) == [("w", 0), ("x", 1), ("y", None)]
    assert spark.read.format("delta").load(fits).count() == 3  # from the add's row count
    assert txn_append.append_file(spark, table("stats", schema, stats=True), body.getvalue(), 2, schema) is None
    assert txn_append.append_file(spark, table("parted", schema, partitioned=True), body.getvalue(), 2, schema) is None
    other = StructType([StructField("k", StringType(), False), StructField("w", LongType(), True)])
    assert txn_append.append_file(spark, table("other", other), body.getvalue(), 2, schema) is None
    loose = StructType([StructField("k", StringType(), True), StructField("v", LongType(), True)])
    assert txn_append.append_file(spark, fits, body.getvalue(), 2, loose) is None  # the table keeps k not null


def test_a_rewrite_due_commits_the_match_tasks_two_files_and_reads_as_spark_would_write_it(spark: SparkSession, tmp_path: Path) -> None:
    """Batches of the nested path where every position moves: the log is due a rewrite every
    few batches, and the store told the match how much room is left (``rewrite_above``), so the
    task also made the unchanged positions' file: the rewrite commits both files with no Spark
    write, leaves one row a key, and every batch the table reads as a store written by Spark's
    writer does, side by side."""
    from spark_purge import audit
    from spark_purge.policy import split_snapshot
    from spark_purge.policy.positions import NestedPositions, nest_store

    def snapshot(offsets: dict[tuple[str, int], int], at: datetime) -> Any:
        rows = [
            ("s", at, "t", p, 1, [1], [1], 0, 50, 50, False, "delete", None, None, None, None, "id-1", None, None,
             None, [(g, "Empty", "classic", 0, o, None, None, None) for (g, q), o in sorted(offsets.items()) if q == p], [])
            for p in (0, 1)
        ]
        return spark.createDataFrame(rows, schemas.SNAPSHOT)

    offsets = {(g, p): 1 for g in "abc" for p in (0, 1)}
    stores = {way: ProgressStore(spark, str(tmp_path / way), app_id="q") for way in ("file", "writer")}
    parts, first = split_snapshot(snapshot(offsets, T0))
    for store in stores.values():
        store.update(first, T0, 0, parts)
    before = dict(audit.PROGRESS_APPENDS)
    for batch in range(1, 6):
        at = T0 + timedelta(minutes=batch)
        offsets = {k: o + 1 if k != ("c", 1) else o for k, o in offsets.items()}  # all but one move
        if batch == 3:
            offsets[("d", 0)] = 4  # a new key
        for way, store in stores.items():
            room = store.rewrite_above()
            nested = NestedPositions.match(
                snapshot(offsets, at), nest_store(store.read()), (), at=at, log_batch=batch if way == "file" else None, rewrite_above=room
            )
            nested.staleness_table()
            log_file = nested.log_file()
            if log_file is not None:
                assert (log_file.rest is not None) == (room is not None and log_file.rows > max(room, 0)), (batch, room, log_file)
            after, holder = nested.hand_over(at)
            store.record(after, batch, holder=holder, log_file=log_file)
        tables = {}
        for way, store in stores.items():
            known = audit._PROGRESS_STATE.pop(store.path, None)
            try:
                tables[way] = content(store)
            finally:
                if known is not None:
                    audit._PROGRESS_STATE[store.path] = known
        assert tables["file"] == tables["writer"], batch
        assert {k: v[0] for k, v in tables["file"].items()} == {(g, "t", p): o for (g, p), o in offsets.items()}
    done = {k: audit.PROGRESS_APPENDS[k] - before[k] for k in before}
    assert done["rewrite file"] >= 1 and done["rewrite writer"] >= 1 and done["file"] >= 1, done
    rows = spark.read.format("delta").load(stores["file"].path)
    assert rows.count() <= 3 * len(offsets)  # pruned by its rewrites (one row a key right after each)
