"""The kafka-python adapter against a real broker: exact offsets, commits, time floors,
per-partition DeleteRecords outcomes, request counts, and failures that name their cause."""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition

from spark_purge.errors import ClusterUnreachable, KafkaError
from spark_purge.kafka import (
    ClientConfig,
    ConnectionSettings,
    KafkaPythonClient,
    SnapshotRequest,
    TimeFloor,
    open_client,
)
from spark_purge.kafka.caught_up import PROBE_PREFIX
from spark_purge.kafka.model import CommitColumns
from spark_purge.testing.cluster import LocalKafka, free_port
from spark_purge.testing.workload import commit, produce


def _client(cluster: LocalKafka, **kw: object) -> KafkaPythonClient:
    connection = ConnectionSettings(cluster.bootstrap_servers, request_timeout_ms=15_000)
    return open_client(ClientConfig(connection, **kw))  # type: ignore[arg-type]


def test_snapshot_reads_exact_offsets_commits_and_configs(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("snap", partitions=3)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 10, 1: 20})
    admin.delete_records({TopicPartition(topic, 0): 4})
    prefix = f"g-{uuid.uuid4().hex[:6]}"
    commit(admin, f"{prefix}-a", {(topic, 0): 7, (topic, 1): 20}, metadata="m1")
    commit(admin, f"{prefix}-b", {(topic, 1): 5})
    missing = f"missing-{uuid.uuid4().hex[:6]}"

    with _client(kafka_cluster, topics=(topic, missing), group_include=f"{prefix}-.*") as client:
        snap = client.snapshot()
        counts = client.request_counts

    state = {p.partition: (p.log_start_offset, p.high_watermark, p.last_stable_offset) for p in snap.partitions}
    assert state == {0: (4, 10, 10), 1: (0, 20, 20), 2: (0, 0, 0)}
    p0 = next(p for p in snap.partitions if p.partition == 0)
    assert (p0.leader, p0.replicas, p0.isr, p0.internal) == (1, (1,), (1,), False)
    # Defaults are reported too (kafka-python's describe_configs would filter them out).
    assert (p0.cleanup_policy, p0.retention_ms, p0.remote_storage_enable) == ("delete", 604_800_000, False)
    assert p0.time_floor_offset is None
    commits = sorted((c.group_id, c.partition, c.committed_offset, c.commit_metadata) for c in snap.commits)
    assert commits == [(f"{prefix}-a", 0, 7, "m1"), (f"{prefix}-a", 1, 20, "m1"), (f"{prefix}-b", 1, 5, "")]
    # Held column by column (no object per commit); the columns say the same.
    assert isinstance(snap.commits, CommitColumns)
    by_column = zip(*(snap.commits.column(k) for k in ("group_id", "partition", "committed_offset", "commit_metadata")))
    assert sorted(by_column) == commits
    assert {(g.group_id, g.group_state, g.group_type, g.member_count) for g in snap.groups} == {
        (f"{prefix}-a", "Empty", "classic", 0),
        (f"{prefix}-b", "Empty", "classic", 0),
    }
    assert snap.missing_topics == (missing,)
    assert snap.dropped_partitions == () and snap.issues == ()
    # The coordinator probe only reads: it creates no group.
    listed = [g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()]
    assert f"{prefix}-a" in listed and not [g for g in listed if g.startswith(PROBE_PREFIX)]
    # One broker: every API is one request, whatever the number of partitions and groups.
    assert counts == {
        # 1 for the snapshot; 1 for the coordinators' high-watermark check; 2 around ListGroups
        # (the coordinators' leaders before and after); 1 after the group reads (still the same)
        "MetadataRequest": 5,
        "DescribeClusterRequest": 1,  # the Cluster Describe check ListGroups depends on
        "ListOffsetsRequest": 4,  # 3 for the partitions, 1 for the coordinators' high watermarks
        "OffsetForLeaderEpochRequest": 1,  # where each coordinator's leader epoch starts
        "DescribeConfigsRequest": 1,
        "ListGroupsRequest": 1,
        "FindCoordinatorRequest": 1,
        "OffsetFetchRequest": 2,  # the groups' commits; the coordinator probe (groups that never exist)
        "DescribeGroupsRequest": 1,
        "DescribeLogDirsRequest": 1,  # the partitions' sizes on the leader's disk
    }


def test_time_floor_and_offsets_for_times(kafka_cluster: LocalKafka, new_topic: Callable[..., str]) -> None:
    topic = new_topic("floor", partitions=1)
    base = int(time.time() * 1000) - 3_600_000
    produce(kafka_cluster.bootstrap_servers, topic, {0: 6}, timestamps_ms={0: [base + i * 1000 for i in range(6)]})
    floors = (TimeFloor(topic, floor_time_ms=base + 2500),)

    with _client(kafka_cluster, topics=(topic,)) as client:
        snap = client.snapshot(SnapshotRequest(time_floors=floors, include_groups=False))
        # min_retention relative to the snapshot time: every record is older -> high watermark.
        snap_now = client.snapshot(SnapshotRequest(time_floors=(TimeFloor(topic, min_retention_ms=60_000),)))
        manual = client.offsets_for_times({(topic, 0): base + 4000})
        manual_late = client.offsets_for_times({(topic, 0): base + 10_000_000})

    (p,) = snap.partitions
    assert (p.time_floor_time_ms, p.time_floor_offset) == (base + 2500, 3)
    (q,) = snap_now.partitions
    assert q.time_floor_offset == 6 and q.time_floor_time_ms == snap_now.snapshot_time_ms - 60_000
    assert manual == {(topic, 0): 4}
    assert manual_late == {(topic, 0): 6}


def test_delete_records_mixed_outcomes_in_one_request(
    kafka_cluster: LocalKafka, new_topic: Callable[..., str]
) -> None:
    plain = new_topic("del", partitions=2)
    compacted = new_topic("compacted", partitions=1, configs={"cleanup.policy": "compact"})
    produce(kafka_cluster.bootstrap_servers, plain, {0: 10, 1: 10})
    produce(kafka_cluster.bootstrap_servers, compacted, {0: 5})
    gone = f"gone-{uuid.uuid4().hex[:6]}"

    with _client(kafka_cluster) as client:
        client.reset_request_counts()
        outcomes = client.delete_records(
            {(plain, 0): 6, (compacted, 0): 3, (plain, 1): 50, (gone, 0): 1}, timeout_ms=10_000
        )
        sent = client.request_counts.get("DeleteRecordsRequest")
        starts = client.log_start_offsets([(plain, 0), (plain, 1), (compacted, 0)])

    by_tp = {(o.topic, o.partition): o for o in outcomes}
    assert [(o.topic, o.partition) for o in outcomes] == [(plain, 0), (compacted, 0), (plain, 1), (gone, 0)]
    assert by_tp[(plain, 0)].ok and by_tp[(plain, 0)].low_watermark == 6 and by_tp[(plain, 0)].leader == 1
    assert by_tp[(compacted, 0)].error == "POLICY_VIOLATION" and by_tp[(compacted, 0)].low_watermark is None
    assert by_tp[(plain, 1)].error == "OFFSET_OUT_OF_RANGE"
    assert by_tp[(gone, 0)].error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert sent == 1  # one leader, one request for all its partitions
    assert starts == {(plain, 0): 6, (plain, 1): 0, (compacted, 0): 0}


def test_topic_deleted_between_metadata_and_list_offsets_is_dropped_and_reported(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    keep = new_topic("keep", partitions=1)
    doomed = new_topic("doomed", partitions=2)
    produce(kafka_cluster.bootstrap_servers, keep, {0: 3})

    client = _client(kafka_cluster, topics=(keep, doomed))
    original = client._offsets.metadata
    calls = {"n": 0}

    async def metadata_then_delete(topics):  # type: ignore[no-untyped-def]
        meta = await original(topics)
        calls["n"] += 1
        if calls["n"] == 1:
            admin.delete_topics([doomed])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and doomed in admin.list_topics():
                time.sleep(0.1)
        return meta

    client._offsets.metadata = metadata_then_delete  # type: ignore[method-assign]
    try:
        snap = client.snapshot(SnapshotRequest(include_groups=False))
    finally:
        client.close()

    assert [(p.topic, p.partition, p.high_watermark) for p in snap.partitions] == [(keep, 0, 3)]
    assert sorted((d.topic, d.partition) for d in snap.dropped_partitions) == [(doomed, 0), (doomed, 1)]
    assert all("UNKNOWN_TOPIC_OR_PARTITION" in d.reason for d in snap.dropped_partitions)


def test_unreachable_bootstrap_fails_fast_naming_the_servers() -> None:
    servers = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as info:
        open_client(ConnectionSettings(servers, request_timeout_ms=1500))
    assert time.monotonic() - started < 6
    assert servers in str(info.value)


def test_a_hung_bootstrap_server_leaves_time_for_the_next(kafka_cluster: LocalKafka, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bootstrap server that accepts TCP and then says nothing (a broker stopped with SIGSTOP)
    gets its share of the request timeout, not all of it: the live broker after it is reached."""
    import socket

    from spark_purge.kafka import wire

    monkeypatch.setattr(wire.random, "randrange", lambda n: 0)  # the hung server is tried first
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # the kernel completes the TCP handshake; nobody ever answers
        servers = f"127.0.0.1:{hung.getsockname()[1]},{kafka_cluster.bootstrap_servers}"
        started = time.monotonic()
        client = open_client(ConnectionSettings(servers, request_timeout_ms=6_000))
        try:
            retention = client.offsets_retention_ms()  # a request answered by the live broker
        finally:
            client.close()
    assert time.monotonic() - started < 12
    assert retention is not None and retention > 0


def test_password_never_reaches_logs_or_errors(kafka_cluster: LocalKafka) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect(level=logging.DEBUG)
    kafka_logger = logging.getLogger("kafka")
    old_level = kafka_logger.level
    kafka_logger.addHandler(handler)
    kafka_logger.setLevel(logging.DEBUG)
    try:
        # SASL against a PLAINTEXT listener: the handshake fails, after kafka-python logged its config.
        cfg = ConnectionSettings(
            kafka_cluster.bootstrap_servers,
            request_timeout_ms=2000,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=password,
        )
        with pytest.raises(KafkaError) as info:
            open_client(cfg)
    finally:
        kafka_logger.removeHandler(handler)
        kafka_logger.setLevel(old_level)
    assert any("configuration" in r for r in records)  # the line that would have leaked it
    assert not [r for r in records if password in r]
    assert password not in str(info.value) and password not in repr(cfg)


def test_snapshot_and_delete_connections_share_every_setting(
    kafka_cluster: LocalKafka, new_topic: Callable[..., str]
) -> None:
    """The data source's connection (rebuilt from its options) and the delete client's are the
    same: client id, retries and backoff included (the snapshot used to drop them)."""
    from spark_purge.config import from_dict
    from spark_purge.pipeline import source_options
    from spark_purge.source import parse_options

    topic = new_topic("same", partitions=1)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 4})
    cfg = from_dict(
        {
            "kafka": {"bootstrap_servers": kafka_cluster.bootstrap_servers, "client_id": "purger-7", "retries": 2,
                      "retry_backoff": "250ms"},
            "rules": [{"name": "all", "topics": topic, "min_retention": "0s"}],
            "audit": {"path": "/tmp/unused-audit"},
        }
    )
    snapshot_config = parse_options(source_options(cfg)).client
    with open_client(snapshot_config) as snap_client, open_client(cfg) as delete_client:
        for client in (snap_client, delete_client):
            assert client.settings.client_id == "purger-7" and client.settings.retries == 2
            admin_config = client.wire._admin.config  # what kafka-python connects with
            assert (admin_config["client_id"], admin_config["retry_backoff_ms"]) == ("purger-7", 250)
        assert snap_client.settings == delete_client.settings
        (p,) = snap_client.snapshot().partitions
        (outcome,) = delete_client.delete_records({(topic, 0): 2}, timeout_ms=10_000)
    assert (p.topic, p.high_watermark) == (topic, 4)
    assert outcome.ok and outcome.low_watermark == 2
