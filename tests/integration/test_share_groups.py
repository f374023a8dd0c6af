"""Share groups (KIP-932), KIP-848 consumer groups and classic groups without commits, on a real
Kafka 4.4 broker, through the snapshot (``open_client(...).snapshot()``): a real share consumer's
share-partition start offset is a row (exact), and partitions a group's members hold without a
commit are rows with -1."""
from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Optional

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import CoordinatorNotAvailableError
from kafka.structs import OffsetAndMetadata

from spark_purge.kafka import ClientConfig, ClusterSnapshot, ConnectionSettings, GroupCommit, GroupInfo, open_client
from spark_purge.kafka.messages import (
    CONSUMER_DESCRIBE_VERSIONS,
    SHARE_DESCRIBE_VERSIONS,
    SHARE_OFFSETS_VERSIONS,
)
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import classic_member, create_topics, new_admin, produce
from tests.integration.share_helpers import (
    idle_share_member,
    kip848_consumer,
    set_group_config,
    share_consume,
    share_run,
    share_start_offsets,
)


def _snapshot_until(
    kafka_cluster: LocalKafka, topic: str, groups: str, done: Callable[[ClusterSnapshot], bool], timeout_s: float = 30.0
) -> tuple[ClusterSnapshot, dict[str, int], list[ClusterSnapshot]]:
    """Snapshots of ``topic`` and the groups matching ``groups`` until ``done`` holds (the share
    coordinator persists acknowledgements asynchronously); (last, its request counts, all seen)."""
    config = ClientConfig(ConnectionSettings(kafka_cluster.bootstrap_servers), topics=(topic,), group_include=groups)
    seen: list[ClusterSnapshot] = []
    deadline = time.monotonic() + timeout_s
    with open_client(config) as client:
        while True:
            client.reset_request_counts()
            snap = client.snapshot()
            seen.append(snap)
            if done(snap) or time.monotonic() > deadline:
                return snap, client.request_counts, seen


def _commit(admin: KafkaAdminClient, group: str, tp: TopicPartition, offset: int) -> None:
    """A real OffsetCommit; retried while a fresh broker creates ``__consumer_offsets``."""
    deadline = time.monotonic() + 60
    while True:
        try:
            result = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, "", -1)})
        except CoordinatorNotAvailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
            continue
        assert all(err.__name__ == "NoError" for err in result.values()), result
        return


def _rows(snap: ClusterSnapshot, group: str) -> dict[tuple[str, int], GroupCommit]:
    return {(c.topic, c.partition): c for c in snap.commits if c.group_id == group}


def _info(snap: ClusterSnapshot, group: str) -> GroupInfo:
    (info,) = [g for g in snap.groups if g.group_id == group]
    return info


def test_broker_speaks_the_pinned_versions(admin: KafkaAdminClient) -> None:
    versions = admin._manager.broker_version_data.api_versions
    for key, (lo, hi) in {90: SHARE_OFFSETS_VERSIONS, 77: SHARE_DESCRIBE_VERSIONS, 69: CONSUMER_DESCRIBE_VERSIONS}.items():
        assert key in versions, f"broker lacks API key {key}"
        b_lo, b_hi = versions[key]
        assert b_lo <= hi and lo <= b_hi, f"API {key}: broker {b_lo}-{b_hi}, ours {lo}-{hi}"
    assert versions[16][1] >= 5  # ListGroups with TypesFilter


def _share_group_on_new_topic(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> tuple[str, str]:
    topic = new_topic("orders")
    produce(kafka_cluster.bootstrap_servers, topic, {0: 100})
    group = f"sq-{uuid.uuid4().hex[:8]}"
    # Share groups start at the latest offset unless the group says otherwise.
    set_group_config(admin, group, {"share.auto.offset.reset": "earliest"})
    return topic, group


def test_share_group_start_offset_is_a_row(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    """The issue's case: a share group accepted 10 of 100 records, a classic group committed 100.
    The snapshot must show the share group at 10, not leave it out."""
    topic, group = _share_group_on_new_topic(kafka_cluster, admin, new_topic)
    fast = f"fast-{uuid.uuid4().hex[:8]}"
    _commit(admin, fast, TopicPartition(topic, 0), 100)
    accepted = share_consume(kafka_cluster.bootstrap_servers, group, topic, accept=10, settle=True)
    assert accepted == [(topic, 0, o) for o in range(10)]

    def share_at_10(s: ClusterSnapshot) -> bool:
        row = _rows(s, group).get((topic, 0))
        return row is not None and row.committed_offset == 10

    snap, counts, seen = _snapshot_until(kafka_cluster, topic, f"{re.escape(group)}|{re.escape(fast)}", share_at_10)
    print("share group SPSO per snapshot:", [r.committed_offset for s in seen for r in _rows(s, group).values()])
    assert snap.unreadable_groups == () and snap.issues == ()
    # Never ahead of what was acknowledged, in any snapshot taken on the way.
    assert all(0 <= r.committed_offset <= 10 for s in seen for r in _rows(s, group).values())
    assert _rows(snap, group) == {(topic, 0): GroupCommit(group, "Empty", "share", 0, topic, 0, 10, None)}
    assert _rows(snap, fast)[(topic, 0)].committed_offset == 100
    assert _info(snap, group) == GroupInfo(group, "Empty", "share", 0)
    assert counts.get("DescribeShareGroupOffsetsRequest") == 1 and counts.get("ShareGroupDescribeRequest") == 1
    assert ClusterSnapshot.from_json(snap.to_json()) == snap


def test_share_group_start_offset_never_runs_ahead(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    """The broker persists the SPSO with the *next* state write: right after the one commit that
    accepted 0-9, DescribeShareGroupOffsets may still say 0 (seen on Kafka 4.4.0). Behind the
    true position is safe; ahead never is."""
    topic, group = _share_group_on_new_topic(kafka_cluster, admin, new_topic)
    accepted = share_consume(kafka_cluster.bootstrap_servers, group, topic, accept=10, settle=False)
    assert accepted == [(topic, 0, o) for o in range(10)]
    snap, _, _ = _snapshot_until(kafka_cluster, topic, re.escape(group), lambda s: (topic, 0) in _rows(s, group))
    assert snap.unreadable_groups == ()
    row = _rows(snap, group)[(topic, 0)]
    print("share group SPSO without the settle round:", row.committed_offset)
    assert row.group_type == "share" and 0 <= row.committed_offset <= 10


def test_records_archived_at_the_delivery_limit_are_behind_the_start_offset(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    """Kafka archives a record once delivered ``share.delivery.count.limit`` times, and the
    share-partition start offset passes records nobody accepted (the invariant checker's oracle
    gap of the seed-35 run). Kafka's own Admin client (the checker's reader) and the snapshot
    agree on that start offset."""
    topic = new_topic("poison")
    bootstrap = kafka_cluster.bootstrap_servers
    produce(bootstrap, topic, {0: 5})
    group = f"sqarch-{uuid.uuid4().hex[:8]}"
    set_group_config(admin, group, {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2"})
    # Two runs each accept one record and release the rest delivered with it: 2-4 are released
    # at their second delivery, the limit, so Kafka archives them.
    first, second = (share_run(bootstrap, group, topic, accept=1) for _ in range(2))
    assert first.accepted == [(topic, 0, 0)] and second.accepted == [(topic, 0, 1)]
    assert [o for _, _, o in second.delivered] == [1, 2, 3, 4]
    produce(bootstrap, topic, {0: 2})
    third = share_run(bootstrap, group, topic, accept=1, settle=True)  # the settle round persists the start
    assert third.accepted == [(topic, 0, 5)]
    assert min(o for _, _, o in third.delivered) == 5  # 2-4 are never delivered again
    seen: list[dict[tuple[str, int], int]] = []
    deadline = time.monotonic() + 60
    while not seen or seen[-1].get((topic, 0), 0) < 6:
        assert time.monotonic() < deadline, f"start offsets read: {seen}"
        seen.append(share_start_offsets(bootstrap, group, topic))
    print("start offsets read by Kafka's Admin client:", seen)
    start = seen[-1][(topic, 0)]
    assert 6 <= start <= 7 and all(s.get((topic, 0), 0) <= start for s in seen)
    snap, _, _ = _snapshot_until(
        kafka_cluster, topic, re.escape(group), lambda s: getattr(_rows(s, group).get((topic, 0)), "committed_offset", None) == start
    )
    assert _rows(snap, group)[(topic, 0)].committed_offset == start


def test_live_share_member_without_a_start_offset_is_minus_one(
    kafka_cluster: LocalKafka, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("queue", partitions=2)
    group = f"sqlive-{uuid.uuid4().hex[:8]}"
    with idle_share_member(kafka_cluster.bootstrap_servers, group, topic):
        snap, _, _ = _snapshot_until(kafka_cluster, topic, re.escape(group), lambda s: len(_rows(s, group)) == 2)
        assert snap.unreadable_groups == ()
        # Kafka 4.4.0 lists both partitions with StartOffset -1 (the group starts at "latest" on
        # an empty topic) and the member holds both: no position, so -1 (a missing commit).
        assert {tp: r.committed_offset for tp, r in _rows(snap, group).items()} == {(topic, 0): -1, (topic, 1): -1}
        assert _info(snap, group) == GroupInfo(group, "Stable", "share", 1)


def test_kip848_assignment_without_commit(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    topic = new_topic("events", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 5, 1: 5})
    group = f"k848-{uuid.uuid4().hex[:8]}"
    with kip848_consumer(kafka_cluster.bootstrap_servers, group, topic) as consumer:
        assert consumer.wait_assigned() == {(topic, 0), (topic, 1)}
        snap, counts, _ = _snapshot_until(kafka_cluster, topic, re.escape(group), lambda s: len(_rows(s, group)) == 2)
        assert snap.unreadable_groups == () and snap.issues == ()
        rows = _rows(snap, group)
        assert {tp: (r.committed_offset, r.commit_metadata, r.group_type) for tp, r in rows.items()} == {
            (topic, 0): (-1, None, "consumer"),
            (topic, 1): (-1, None, "consumer"),
        }
        info = _info(snap, group)
        assert (info.group_type, info.group_state) == ("consumer", "Stable")  # not "Dead" (DescribeGroups' word)
        assert info.member_count is not None and info.member_count >= 1
        # OffsetFetch: 1 for the group, 1 for the coordinator probe (caught_up.py)
        assert counts.get("ConsumerGroupDescribeRequest") == 1 and counts.get("OffsetFetchRequest") == 2
        # ...and it has no commit: OffsetFetch sees nothing, so only the assignment holds it.
        assert admin.list_group_offsets(group) == {group: {}}


@pytest.fixture(scope="module")
def classic_kafka() -> Iterator[tuple[LocalKafka, KafkaAdminClient]]:
    """Classic groups get their own one-node cluster (kept from when the cause of a member left
    without an assignment was not known: see ``workload.classic_member``)."""
    with LocalKafka(nodes=1) as kafka_cluster:
        admin = new_admin(kafka_cluster.bootstrap_servers)
        try:
            yield kafka_cluster, admin
        finally:
            admin.close()


def test_a_rebalancing_classic_group_is_unreadable_until_stable(classic_kafka: tuple[LocalKafka, KafkaAdminClient]) -> None:
    """A member joins an assigned classic group with a topic nobody holds yet: while the group
    rebalances, the broker shows no member's subscription, so the snapshot must call the group
    unreadable (the code before read it as a group needing nothing on that topic, and a rule
    discovering groups could cut it); once Stable, the new topic's partitions are -1 rows."""
    kafka_cluster, admin = classic_kafka
    held, joined = f"held-{uuid.uuid4().hex[:8]}", f"joined-{uuid.uuid4().hex[:8]}"
    create_topics(admin, {held: 1, joined: 2})
    produce(kafka_cluster.bootstrap_servers, joined, {0: 3, 1: 3})
    group = f"classic-{uuid.uuid4().hex[:8]}"
    first = classic_member(kafka_cluster.bootstrap_servers, group, [held])
    second: Optional[KafkaConsumer] = None
    try:
        deadline = time.monotonic() + 120
        while not first.assignment() and time.monotonic() < deadline:
            first.poll(timeout_ms=200)
        assert first.assignment() == {TopicPartition(held, 0)}
        # The second member's JoinGroup starts a rebalance that waits for the first to rejoin,
        # which it does only in poll() (up to max.poll.interval.ms, 300 s): the group stays in it.
        second = classic_member(kafka_cluster.bootstrap_servers, group, [held, joined])

        def rebalancing(s: ClusterSnapshot) -> bool:
            assert second is not None
            second.poll(timeout_ms=200)  # its JoinGroup goes out (and is answered) only in poll()
            return group in s.unreadable_groups

        snap, _, seen = _snapshot_until(kafka_cluster, joined, re.escape(group), rebalancing, timeout_s=60)
        assert rebalancing(snap), [(g.group_state, _rows(x, group)) for x in seen for g in x.groups]
        assert _info(snap, group).group_state in ("PreparingRebalance", "CompletingRebalance")
        assert _rows(snap, group) == {}
        (issue,) = [i for i in snap.issues if i.resource == group]
        assert issue.error == "REBALANCE_IN_PROGRESS" and "shows members' subscriptions only when it is Stable" in issue.message
        # The first member rejoins: Stable, and the joined topic is held without a commit.
        # Until the joined topic is assigned: kafka-python's leader may assign it only in a later
        # generation, once its metadata covers the group's whole subscription.
        deadline = time.monotonic() + 120
        while joined not in {tp.topic for tp in second.assignment()} and time.monotonic() < deadline:
            first.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
        assert {tp.topic for tp in second.assignment()} >= {joined}
        stable = lambda s: group not in s.unreadable_groups and len(_rows(s, group)) == 2  # noqa: E731
        snap, _, _ = _snapshot_until(kafka_cluster, joined, re.escape(group), stable, timeout_s=60)
        assert _info(snap, group).group_state == "Stable"
        assert {tp: r.committed_offset for tp, r in _rows(snap, group).items()} == {(joined, 0): -1, (joined, 1): -1}
    finally:
        for c in (second, first):
            if c is not None:
                c.close(autocommit=False)


def test_classic_assignment_without_commit(classic_kafka: tuple[LocalKafka, KafkaAdminClient]) -> None:
    kafka_cluster, admin = classic_kafka
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    create_topics(admin, {topic: 2})
    produce(kafka_cluster.bootstrap_servers, topic, {0: 3, 1: 3})
    group = f"classic-{uuid.uuid4().hex[:8]}"
    consumer = classic_member(kafka_cluster.bootstrap_servers, group, [topic])
    try:
        deadline = time.monotonic() + 120
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(topic, 0), (topic, 1)}
        snap, counts, _ = _snapshot_until(kafka_cluster, topic, re.escape(group), lambda s: len(_rows(s, group)) == 2)
        assert snap.unreadable_groups == () and snap.issues == ()
        assert {tp: (r.committed_offset, r.commit_metadata) for tp, r in _rows(snap, group).items()} == {
            (topic, 0): (-1, None),
            (topic, 1): (-1, None),
        }
        assert _info(snap, group) == GroupInfo(group, "Stable", "classic", 1)
        assert counts.get("DescribeGroupsRequest") == 1
        assert admin.list_group_offsets(group) == {group: {}}
    finally:
        consumer.close(autocommit=False)
