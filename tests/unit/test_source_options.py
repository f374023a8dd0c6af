"""kafka_state without a JVM or a broker: option parsing, partition planning, replay from the
snapshot directory, AvailableNow, and that everything Spark pickles pickles."""
from __future__ import annotations

import pickle
from array import array
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_purge import schemas
from spark_purge.errors import ConfigError
from spark_purge.kafka.model import (
    COMMIT_FIELDS,
    ClientConfig,
    ClusterSnapshot,
    CommitColumns,
    GroupCommit,
    GroupInfo,
    PartitionState,
    SnapshotRequest,
)
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.source import (
    KafkaStateDataSource,
    KafkaStateReader,
    KafkaStateStreamReader,
    parse_options,
)
from spark_purge.source_arrow import SnapshotChunk, arrow_schema, plan_chunks, snapshot_batch

BASE = {"bootstrap.servers": "127.0.0.1:9092"}


def _snapshot(n_partitions: int = 3, sid: str = "s1") -> ClusterSnapshot:
    parts = tuple(
        PartitionState("t", p, 1, (1,), (1,), p, 10 + p, 10 + p, False, "delete", 1000, False, 5_000, 7 + p)
        for p in range(n_partitions)
    )
    commits = (
        GroupCommit("g1", "Empty", "classic", 0, "t", 0, 4, "m"),
        GroupCommit("g2", "Stable", "consumer", None, "t", 0, 6, None),
        GroupCommit("g1", "Empty", "classic", 0, "t", 1, 11, ""),
    )
    return ClusterSnapshot(sid, 1_700_000_000_000, parts, commits)


# ---- options ----------------------------------------------------------------------------------


def test_defaults_and_pass_through() -> None:
    opts = parse_options(
        {
            **BASE,
            "Topics": "a, b",
            "topic.exclude": "tmp-.*",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl_check_hostname": "False",
            "kafka.sasl_plain_password": "hunter2",
            "time.floors": '[{"topic_regex": "a", "min_retention_ms": 60000}, {"topic_regex": "b", "floor_time_ms": 5}]',
            "poll.interval": "2m",
            "request.timeout.ms": "5000",
        }
    )
    assert opts.view == "snapshot" and opts.poll_interval_ms == 120_000
    conn = opts.client.connection
    assert opts.client.topics == ("a", "b") and conn.request_timeout_ms == 5000
    assert (conn.security_protocol, conn.ssl_check_hostname, conn.sasl_plain_password) == ("SASL_SSL", False, "hunter2")
    assert (conn.client_id, conn.retries, conn.retry_backoff_ms) == ("spark-purge", None, 100)  # the defaults
    assert [(f.topic_regex, f.resolve(100_000)) for f in opts.time_floors] == [("a", 40_000), ("b", 5)]
    assert "hunter2" not in repr(opts)


@pytest.mark.parametrize(
    "options, key",
    [
        ({}, "bootstrap.servers"),
        ({"bootstrap.servers": "no-port"}, "bootstrap.servers"),
        ({**BASE, "view": "rows"}, "view"),
        ({**BASE, "poll.interval": "soon"}, "poll.interval"),
        ({**BASE, "request.timeout.ms": "-1"}, "request.timeout.ms"),
        ({**BASE, "topic.include": "(["}, "topic.include"),
        ({**BASE, "group.exclude": "*x"}, "group.exclude"),
        ({**BASE, "time.floors": "{not json"}, "time.floors"),
        ({**BASE, "time.floors": '[{"topic_regex": "a"}]'}, "time.floors"),
        ({**BASE, "time.floors": '[{"topic_regex": "a", "min_retention_ms": 1, "floor_time_ms": 2}]'}, "time.floors"),
        ({**BASE, "kafka.bogus": "1"}, "kafka.bogus"),
        ({**BASE, "kafka.ssl_check_hostname": "maybe"}, "kafka.ssl_check_hostname"),
        ({**BASE, "kafka.retries": "-1"}, "kafka.retries"),
        ({**BASE, "kafka.retry_backoff_ms": "soon"}, "kafka.retry_backoff_ms"),
        ({**BASE, "kafka.bootstrap_servers": "h:2"}, "kafka.bootstrap_servers"),
        ({**BASE, "topicz": "a"}, "topicz"),
        ({**BASE, "include.internal": "yes"}, "include.internal"),
    ],
)
def test_bad_options_name_the_key(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_options(options)
    assert str(info.value).startswith(key)


FULL = ConnectionSettings(
    ("k1:9092", "k2:9093"),
    client_id="purger-7",
    request_timeout_ms=12_000,
    retry_backoff_ms=750,
    retries=5,
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    sasl_plain_username="svc",
    sasl_plain_password="s3cret-pw",
    sasl_kerberos_service_name="kafka",
    sasl_kerberos_domain_name="example.com",
    ssl_check_hostname=False,
    ssl_cafile="/etc/ca.pem",
    ssl_certfile="/etc/cert.pem",
    ssl_keyfile="/etc/key.pem",
    ssl_password="key-pw",
    ssl_crlfile="/etc/crl.pem",
)


@pytest.mark.parametrize("settings", [ConnectionSettings("h:1"), ConnectionSettings("h:1", retries=0), FULL])
def test_connection_settings_round_trip_through_source_options(settings: ConnectionSettings) -> None:
    options = settings.to_options()
    assert all(isinstance(v, str) for v in options.values())
    assert ConnectionSettings.from_options(options) == settings
    # ... and through the data source itself, which is what the pipeline passes them to.
    assert parse_options(options).client.connection == settings


def test_every_field_travels_in_the_options() -> None:
    from dataclasses import fields

    options = FULL.to_options()
    assert len(options) == len(fields(ConnectionSettings))  # none left behind
    assert options["kafka.client_id"] == "purger-7" and options["kafka.retries"] == "5"


def test_connection_settings_never_show_secrets() -> None:
    for shown in (repr(FULL), str(FULL), f"{FULL}", repr(FULL.kafka_kwargs()), repr(ClientConfig(FULL))):
        assert "s3cret-pw" not in shown and "key-pw" not in shown
    assert FULL.secrets == ("s3cret-pw", "key-pw")
    assert FULL.kafka_kwargs()["sasl_plain_password"] == "s3cret-pw"  # the value is there for kafka-python


def test_pipeline_options_carry_the_connection_the_deletes_use() -> None:
    """Snapshot and delete connections come from one value: client id and retries included."""
    from spark_purge import config as c
    from spark_purge.pipeline import source_options

    cfg = c.from_dict(
        {
            "kafka": {"bootstrap_servers": "k1:9092", "client_id": "purger-7", "retries": 5, "retry_backoff": "750ms"},
            "rules": [{"name": "all", "topics": "orders", "min_retention": "0s"}],
            "audit": {"path": "/tmp/audit"},
        }
    )
    settings = c.connection_settings(cfg, env={})
    assert parse_options(source_options(cfg)).client.connection == settings
    assert (settings.client_id, settings.retries, settings.retry_backoff_ms) == ("purger-7", 5, 750)


def test_data_source_validates_on_creation_and_picks_the_view_schema() -> None:
    with pytest.raises(ConfigError, match=r"^view"):
        KafkaStateDataSource({**BASE, "view": "nope"})
    assert KafkaStateDataSource.name() == "kafka_state"
    assert KafkaStateDataSource({**BASE, "view": "groups"}).schema() == schemas.GROUP_OFFSETS
    assert KafkaStateDataSource(dict(BASE)).schema() == schemas.SNAPSHOT
    assert KafkaStateDataSource({**BASE, "view": "packed"}).schema() == schemas.PACKED_SNAPSHOT


def test_stream_reader_requires_the_snapshot_view_and_persists_nothing() -> None:
    with pytest.raises(ConfigError, match=r"^view"):
        KafkaStateDataSource({**BASE, "view": "partitions"}).streamReader(schemas.PARTITION_STATE)
    # The pipeline's view: a whole snapshot a batch, its group rows packed.
    assert KafkaStateDataSource({**BASE, "view": "packed"}).streamReader(schemas.PACKED_SNAPSHOT).options.view == "packed"
    # Snapshots are no longer persisted (a replay executes its recorded intents): the old
    # option is an unknown key, named.
    with pytest.raises(ConfigError, match=r"^snapshot\.dir: unknown kafka_state option"):
        KafkaStateDataSource({**BASE, "snapshot.dir": "/tmp/x"})


def test_topic_and_group_selection() -> None:
    cfg = ClientConfig(ConnectionSettings("h:1"), topics=("x",), topic_include="orders-.*", topic_exclude="orders-tmp", group_exclude="tmp-.*")
    assert cfg.selects_topic("x", False) and cfg.selects_topic("orders-1", False)
    assert not cfg.selects_topic("orders-tmp", False) and not cfg.selects_topic("other", False)
    assert not cfg.selects_topic("__consumer_offsets", True)
    assert cfg.selects_group("app") and not cfg.selects_group("tmp-1")
    only_listed = ClientConfig(ConnectionSettings("h:1"), topics=("x",))
    assert only_listed.selects_topic("x", False) and not only_listed.selects_topic("y", False)


# ---- rows and planning ------------------------------------------------------------------------


def _rows(snap: ClusterSnapshot, view: str) -> list[dict[str, Any]]:
    batch = snapshot_batch(snap, view)
    assert batch.schema.equals(arrow_schema(view))  # what PySpark's reader checks
    return batch.to_pylist()


def _columnar(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The same snapshot with its commits column by column, as the Kafka client returns them."""
    columns = {name: [getattr(c, name) for c in snap.commits] for name in COMMIT_FIELDS}
    return ClusterSnapshot(snap.snapshot_id, snap.snapshot_time_ms, snap.partitions, CommitColumns(columns))


def test_commit_columns_are_the_same_commits_as_a_tuple() -> None:
    snap = _snapshot()
    cols = _columnar(snap).commits
    assert isinstance(cols, CommitColumns) and len(cols) == 3
    assert cols == snap.commits and snap.commits == cols and list(cols) == list(snap.commits)
    assert (cols[1], cols[-1], cols[1:]) == (snap.commits[1], snap.commits[-1], snap.commits[1:])
    assert hash(cols) == hash(snap.commits) and _columnar(snap) == snap  # the snapshots compare equal too
    assert cols != snap.commits[:2] and cols != snap.commits[::-1]
    assert pickle.loads(pickle.dumps(cols)) == cols
    assert ClusterSnapshot.from_json(_columnar(snap).to_json()) == snap  # the replay form is unchanged
    with pytest.raises(ValueError, match=r"missing \['epoch_end_offset'\]"):
        CommitColumns({name: [] for name in COMMIT_FIELDS if name != "epoch_end_offset"})
    with pytest.raises(ValueError, match="different lengths"):
        CommitColumns({name: [1] if name == "topic" else [] for name in COMMIT_FIELDS})


def _runs_form(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The same snapshot with its commits as the Kafka client makes them (``of_runs``): the group
    fields once a run of a group's commits, the integers in arrays (the epoch -1 for none)."""
    runs: list[tuple[GroupInfo, int]] = []
    for c in snap.commits:
        info = GroupInfo(c.group_id, c.group_state, c.group_type, c.member_count)
        if runs and runs[-1][0] == info:
            runs[-1] = (info, runs[-1][1] + 1)
        else:
            runs.append((info, 1))
    commits = snap.commits
    columns: dict[str, Any] = {
        "topic": [c.topic for c in commits],
        "partition": array("i", [c.partition for c in commits]),
        "committed_offset": array("q", [c.committed_offset for c in commits]),
        "commit_metadata": [c.commit_metadata for c in commits],
        "committed_leader_epoch": array("i", [-1 if c.committed_leader_epoch is None else c.committed_leader_epoch for c in commits]),
        "epoch_end_offset": [c.epoch_end_offset for c in commits],
    }
    return ClusterSnapshot(snap.snapshot_id, snap.snapshot_time_ms, snap.partitions, CommitColumns.of_runs(runs, columns))


def _with_epochs(snap: ClusterSnapshot) -> ClusterSnapshot:
    commits = tuple(replace(c, committed_leader_epoch=e, epoch_end_offset=end) for c, (e, end) in zip(snap.commits, [(3, 9), (None, None), (0, -1)]))
    return ClusterSnapshot(snap.snapshot_id, snap.snapshot_time_ms, snap.partitions, commits)


def test_commits_held_in_runs_and_arrays_are_the_same_commits() -> None:
    snap = _with_epochs(_snapshot())
    runs = _runs_form(snap).commits
    assert isinstance(runs, CommitColumns) and runs.group_runs() is not None and len(runs) == 3
    assert runs == snap.commits and list(runs) == list(snap.commits) and runs == _columnar(snap).commits
    assert runs.column("group_id") == ["g1", "g2", "g1"] and runs.column("committed_leader_epoch") == [3, None, 0]
    assert pickle.loads(pickle.dumps(_runs_form(snap).commits)) == snap.commits
    assert ClusterSnapshot.from_json(_runs_form(snap).to_json()) == snap
    for view in ("groups", "snapshot", "packed"):
        assert snapshot_batch(_runs_form(snap), view).equals(snapshot_batch(snap, view))
    with pytest.raises(ValueError, match="different lengths"):
        CommitColumns.of_runs([(GroupInfo("g", None, None, None), 2)], {name: [] for name in COMMIT_FIELDS})


def test_columnar_commits_make_the_same_batches() -> None:
    snap = _snapshot()
    for view in ("groups", "snapshot"):
        assert snapshot_batch(_columnar(snap), view).equals(snapshot_batch(snap, view))
    # A commit on a partition the snapshot left out is dropped from the nested rows either way.
    stray = ClusterSnapshot(snap.snapshot_id, snap.snapshot_time_ms, snap.partitions[:1], snap.commits)
    assert snapshot_batch(_columnar(stray), "snapshot").equals(snapshot_batch(stray, "snapshot"))
    assert [len(r["groups"]) for r in _rows(_columnar(stray), "snapshot")] == [2]


_TOPICS = ("a", "b", "c")  # "c" is never a snapshot's: its commits are left out


@settings(max_examples=60, deadline=None)
@given(
    st.sets(st.tuples(st.sampled_from(_TOPICS[:2]), st.integers(0, 4)), max_size=6),
    st.lists(st.tuples(st.sampled_from(_TOPICS), st.integers(0, 6), st.integers(0, 99)), max_size=25),
    st.sampled_from(["tuple", "lists", "runs"]),
)
def test_each_partition_nests_its_own_commits_in_snapshot_order(
    keys: set[tuple[str, int]], rows: list[tuple[str, int, int]], form: str
) -> None:
    """The ``snapshot`` view's ``groups``, made column-wise, against a plain walk of the commits:
    each partition's row holds exactly the commits on it, in the snapshot's order; commits on a
    partition (or a topic) the snapshot lacks are in no row."""
    parts = tuple(PartitionState(t, p, 1, (1,), (1,), 0, 9, 9, False, "delete", None, None) for t, p in sorted(keys, reverse=True))
    commits = tuple(GroupCommit(f"g{i // 3}", "Stable", "classic", 1, t, p, o, None) for i, (t, p, o) in enumerate(rows))
    snap = ClusterSnapshot("s", 1_700_000_000_000, parts, commits)
    got = _rows({"tuple": snap, "lists": _columnar(snap), "runs": _runs_form(snap)}[form], "snapshot")
    assert [(r["topic"], r["partition"]) for r in got] == [(p.topic, p.partition) for p in parts]
    for row in got:
        want = [(c.group_id, c.committed_offset) for c in commits if (c.topic, c.partition) == (row["topic"], row["partition"])]
        assert [(g["group_id"], g["committed_offset"]) for g in row["groups"]] == want


def test_batches_follow_the_schemas_exactly() -> None:
    snap = _snapshot()
    views = (("partitions", schemas.PARTITION_STATE), ("groups", schemas.GROUP_OFFSETS), ("snapshot", schemas.SNAPSHOT), ("packed", schemas.PACKED_SNAPSHOT))
    for view, schema in views:
        rows = _rows(snap, view)
        assert rows and all(list(r) == schema.fieldNames() for r in rows)
    named = _rows(snap, "partitions")[1]
    assert named["snapshot_time"] == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)
    assert (named["log_start_offset"], named["high_watermark"], named["time_floor_offset"]) == (1, 11, 8)
    assert named["time_floor_time"] == datetime(1970, 1, 1, 0, 0, 5, tzinfo=timezone.utc)
    assert (named["replicas"], named["isr"], named["cleanup_policy"], named["topic_id"]) == ([1], [1], "delete", None)
    snap_rows = {r["partition"]: r for r in _rows(snap, "snapshot")}
    g1, g2 = [dict(zip(schemas.GROUP_COMMIT.fieldNames(), v)) for v in (("g1", "Empty", "classic", 0, 4, "m", None, None), ("g2", "Stable", "consumer", None, 6, None, None, None))]
    assert snap_rows[0]["groups"] == [g1, g2]
    assert snap_rows[1]["groups"] == [{**g1, "committed_offset": 11, "commit_metadata": ""}]
    assert snap_rows[2]["groups"] == []
    assert all(r["unreadable_groups"] == [] for r in snap_rows.values())
    flat = _rows(snap, "groups")
    assert [(r["group_id"], r["topic"], r["partition"], r["committed_offset"]) for r in flat] == [("g1", "t", 0, 4), ("g2", "t", 0, 6), ("g1", "t", 1, 11)]


def test_commits_nest_under_their_partition_in_snapshot_order() -> None:
    from dataclasses import replace

    snap = _snapshot(3)
    extra = (
        GroupCommit("g3", "Empty", "classic", 0, "t", 2, 9, None),
        GroupCommit("gone", "Empty", "classic", 0, "other", 0, 1, None),  # a partition the snapshot left out
        GroupCommit("g0", "Empty", "classic", 0, "t", 0, 2, None),
    )
    rows = _rows(replace(snap, commits=snap.commits + extra), "snapshot")
    assert [[(g["group_id"], g["committed_offset"]) for g in r["groups"]] for r in rows] == [
        [("g1", 4), ("g2", 6), ("g0", 2)], [("g1", 11)], [("g3", 9)]
    ]


def test_unreadable_groups_reach_every_snapshot_row_with_their_error() -> None:
    from dataclasses import replace

    from spark_purge.kafka.model import SnapshotIssue

    snap = replace(
        _snapshot(),
        issues=(
            SnapshotIssue("group", "g9", "GROUP_AUTHORIZATION_FAILED", "Describe on group 'g9' denied"),
            SnapshotIssue("coordinator", "g7", "COORDINATOR_NOT_AVAILABLE", "no coordinator for group 'g7'"),
        ),
        unreadable_groups=("g7", "g9"),
    )
    rows = _rows(snap, "snapshot")
    assert len(rows) == 3 and all(
        r["unreadable_groups"] == [
            {"group_id": "g7", "error": "COORDINATOR_NOT_AVAILABLE"}, {"group_id": "g9", "error": "GROUP_AUTHORIZATION_FAILED"}
        ]
        for r in rows
    )
    assert len(schemas.UNREADABLE_GROUP.fields) == 2


def test_planning_splits_a_snapshot_into_picklable_arrow_chunks() -> None:
    snap = _snapshot(5)
    chunks = plan_chunks(snap, "partitions", rows_per_partition=2)
    assert [c.rows for c in chunks] == [2, 2, 1] and [c.index for c in chunks] == [0, 1, 2]
    assert pickle.loads(pickle.dumps(chunks)) == chunks
    read = [row for c in chunks for batch in c.batches() for row in batch.to_pylist()]
    assert read == snapshot_batch(snap, "partitions").to_pylist()
    nested = plan_chunks(snap, "snapshot", rows_per_partition=2)
    assert [r["groups"] for c in nested[1:] for b in c.batches() for r in b.to_pylist()] == [[], [], []]
    empty = plan_chunks(ClusterSnapshot("e", 0, (), ()), "groups", 10)
    assert empty == [SnapshotChunk("e", 0, 0, b"")] and list(empty[0].batches()) == []


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[SnapshotRequest] = []
        self.closed = False

    def snapshot(self, request: SnapshotRequest) -> ClusterSnapshot:
        self.calls.append(request)
        return _snapshot(2, sid=f"s{len(self.calls)}")

    def close(self) -> None:
        self.closed = True


def _stream_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeClient, clock: list[float]) -> KafkaStateStreamReader:
    monkeypatch.setattr(KafkaStateStreamReader, "client_factory", staticmethod(lambda cfg: fake))
    monkeypatch.setattr(KafkaStateStreamReader, "clock", staticmethod(lambda: clock[0]))
    ds = KafkaStateDataSource({**BASE, "poll.interval": "10s"})
    reader = ds.streamReader(schemas.SNAPSHOT)
    assert isinstance(reader, KafkaStateStreamReader)
    return reader


def test_stream_polls_once_per_interval_and_a_restart_gets_a_fresh_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, clock = FakeClient(), [100.0]
    reader = _stream_reader(tmp_path, monkeypatch, fake, clock)
    start = reader.initialOffset()

    end = reader.latestOffset(start, None)
    assert end == {"seq": 1} and len(fake.calls) == 1
    clock[0] += 3
    assert reader.latestOffset(end, None) == end  # within poll.interval: no new batch
    assert reader.partitions(end, end) == []  # restart probe: nothing

    first = reader.partitions(start, end)
    again = reader.partitions(start, end)  # planning twice gives the same data
    assert first == again and first[0].snapshot_id == "s1"

    # A fresh process (crash + restart) replaying batch 1 takes a fresh snapshot, once even
    # when planning runs twice (the pipeline bounds the batch's recorded intents by it).
    other = FakeClient()
    restarted = _stream_reader(tmp_path, monkeypatch, other, clock)
    replay = restarted.partitions(start, end)
    assert restarted.partitions(start, end) == replay and len(other.calls) == 1
    assert [r for c in replay for b in restarted.read(c) for r in b.to_pylist()] == snapshot_batch(_snapshot(2, sid="s1"), "snapshot").to_pylist()
    assert not any(tmp_path.iterdir())  # nothing written anywhere

    clock[0] += 10
    end2 = reader.latestOffset(end, None)
    assert end2 == {"seq": 2} and reader.partitions(end, end2)[0].snapshot_id == "s2"
    reader.commit(end2)
    assert list(reader._taken) == []  # committed snapshots are dropped from memory
    reader.stop()
    assert fake.closed


def test_available_now_takes_exactly_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, clock = FakeClient(), [0.0]
    reader = _stream_reader(tmp_path, monkeypatch, fake, clock)
    reader.prepareForTriggerAvailableNow()
    start = {"seq": 4}  # restarted query: resumes after its last committed batch

    end = reader.latestOffset(start, None)
    assert end == {"seq": 5}
    assert reader.latestOffset(start, None) == end  # asked again before running: same target
    clock[0] += 1000
    assert reader.latestOffset(end, None) == end  # target reached: the query stops
    assert len(fake.calls) == 1


def test_readers_pickle_without_clients_or_cached_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = KafkaStateDataSource({**BASE, "kafka.sasl_plain_password": "pw", "view": "groups"})
    assert pickle.loads(pickle.dumps(ds)).parsed == ds.parsed

    batch = ds.reader(schemas.GROUP_OFFSETS)
    assert isinstance(batch, KafkaStateReader)
    batch._planned = plan_chunks(_snapshot(), "groups", 10)
    restored: Any = pickle.loads(pickle.dumps(batch))
    assert restored._planned is None and restored.options == batch.options.without_secrets()
    assert restored.options.client.connection.secrets == () and batch.options.client.connection.secrets == ("pw",)

    fake, clock = FakeClient(), [0.0]
    stream = _stream_reader(tmp_path, monkeypatch, fake, clock)
    stream.latestOffset(stream.initialOffset(), None)
    assert stream._client is fake
    assert pickle.loads(pickle.dumps(stream))._client is None


def test_snapshot_json_round_trip_keeps_every_field() -> None:
    from spark_purge.kafka.model import DroppedPartition, GroupInfo, SnapshotIssue

    snap = ClusterSnapshot(
        "sid",
        42,
        _snapshot(2).partitions,
        _snapshot(2).commits,
        groups=(GroupInfo("g2", "Stable", "consumer", None),),
        missing_topics=("nope",),
        dropped_partitions=(DroppedPartition("gone", 0, "UNKNOWN_TOPIC_OR_PARTITION"),),
        issues=(SnapshotIssue("group", "g9", "GROUP_AUTHORIZATION_FAILED", "Describe on group 'g9' denied"),),
        unreadable_groups=("g9",),
    )
    assert ClusterSnapshot.from_json(snap.to_json()) == snap


def test_creating_the_data_source_imports_neither_pyarrow_nor_kafka_python() -> None:
    """Spark's data-source creation and lookup workers import ``source`` for the options and the
    schema only: PyArrow, NumPy and kafka-python (about 45 MB a worker) wait for a reader."""
    import subprocess
    import sys

    code = (
        "import sys; from spark_purge.source import KafkaStateDataSource as S; "
        "S({'bootstrap.servers': '127.0.0.1:9092'}).schema(); "
        "print(sorted(m for m in ('pyarrow', 'numpy', 'kafka') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
