"""Share groups (KIP-932) and KIP-848 consumer groups on a real Kafka 4.4 broker: the probe reads
a real share consumer's share-partition start offset (exact), and a real KIP-848 consumer's
assignment while it has no commit."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from kafka import KafkaAdminClient, KafkaConsumer

from spark_purge.kafka.messages import (
    CONSUMER_DESCRIBE_VERSIONS,
    SHARE_DESCRIBE_VERSIONS,
    SHARE_OFFSETS_VERSIONS,
)
from spark_purge.kafka.share_probe import GroupProbe, list_groups, probe_groups, topic_id_names
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import produce
from tests.integration.share_helpers import idle_share_member, kip848_consumer, set_group_config, share_consume


def _probe_until(admin: KafkaAdminClient, done: Callable[[GroupProbe], bool], timeout_s: float = 30.0, **kwargs: object) -> GroupProbe:
    """Probe until ``done`` holds (the share coordinator persists acknowledgements asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        probe = probe_groups(admin, **kwargs)  # type: ignore[arg-type]
        if done(probe) or time.monotonic() > deadline:
            return probe
        time.sleep(0.5)


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


def test_share_group_start_offset_is_exact(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    topic, group = _share_group_on_new_topic(kafka_cluster, admin, new_topic)
    accepted = share_consume(kafka_cluster.bootstrap_servers, group, topic, accept=10, settle=True)
    assert accepted == [(topic, 0, o) for o in range(10)]

    listed = list_groups(admin, types=("share",))
    assert listed.error is None
    assert group in listed.of_type("share")

    probe = _probe_until(admin, lambda p: p.share_positions().get((group, topic, 0)) == 10, share_groups=[group])
    assert probe.unreadable == {}
    assert probe.share_positions() == {(group, topic, 0): 10}
    offsets = probe.share_offsets[group]
    assert offsets.error is None
    (part,) = offsets.partitions
    assert (part.topic, part.partition, part.start_offset, part.error) == (topic, 0, 10, None)
    assert part.lag == 90  # v1: 100 records, 10 acknowledged
    description = probe.share_groups[group]
    assert description.group_type == "share"
    assert description.member_count == 0  # the consumer closed
    assert description.state == "Empty"

    # Asking for the topic explicitly gives the same answer.
    explicit = probe_groups(admin, share_groups=[group], topics={topic: [0]})
    assert explicit.share_positions() == {(group, topic, 0): 10}


def test_share_group_start_offset_never_runs_ahead(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]
) -> None:
    """The broker persists the SPSO with the *next* state write: right after the one commit that
    accepted 0-9, DescribeShareGroupOffsets still says 0 (seen on Kafka 4.4.0) while the lag
    already counts the 10 acknowledgements. Behind the true position is safe; ahead never is."""
    topic, group = _share_group_on_new_topic(kafka_cluster, admin, new_topic)
    accepted = share_consume(kafka_cluster.bootstrap_servers, group, topic, accept=10, settle=False)
    assert accepted == [(topic, 0, o) for o in range(10)]
    probe = _probe_until(admin, lambda p: p.share_offsets.get(group) is not None, share_groups=[group])
    (part,) = probe.share_offsets[group].partitions
    assert part.start_offset is not None and 0 <= part.start_offset <= 10
    assert part.lag == 90


def test_live_share_member_assignment(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    topic = new_topic("queue", partitions=2)
    group = f"sqlive-{uuid.uuid4().hex[:8]}"
    with idle_share_member(kafka_cluster.bootstrap_servers, group, topic):
        want = {(topic, 0), (topic, 1)}
        probe = _probe_until(
            admin, lambda p: group in p.share_groups and p.share_groups[group].assigned == want, share_groups=[group]
        )
        assert probe.unreadable == {}
        description = probe.share_groups[group]
        assert (description.group_type, description.state, description.member_count) == ("share", "Stable", 1)
        assert description.assigned == want
        assert description.subscribed_topics == {topic}
        assert description.unresolved_topic_ids == frozenset()
        # Kafka 4.4.0 listed both partitions with StartOffset -1 (no position yet: the group
        # starts at "latest" on an empty topic): the purge must read that as a missing commit.
        offsets = probe.share_offsets[group]
        assert {p.tp for p in offsets.partitions} == want
        assert all(p.start_offset in (None, 0) and p.error is None for p in offsets.partitions)


def test_unknown_share_group_is_unreadable_not_empty(admin: KafkaAdminClient) -> None:
    group = f"nosuch-{uuid.uuid4().hex[:8]}"
    probe = probe_groups(admin, share_groups=[group], timeout_ms=10_000)
    assert set(probe.unreadable) == {group}
    assert probe.share_offsets == {}


def test_kip848_assignment_without_commit(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    topic = new_topic("events", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 5, 1: 5})
    group = f"k848-{uuid.uuid4().hex[:8]}"
    with kip848_consumer(kafka_cluster.bootstrap_servers, group, topic) as consumer:
        assert consumer.wait_assigned() == {(topic, 0), (topic, 1)}
        listed = list_groups(admin, types=("consumer",))
        assert group in listed.of_type("consumer")
        ids = topic_id_names(admin)
        assert topic in ids.values()
        probe = _probe_until(
            admin,
            lambda p: group in p.consumer_groups and p.consumer_groups[group].assigned == {(topic, 0), (topic, 1)},
            consumer_groups=[group],
            topic_names=ids,
        )
        assert probe.unreadable == {}
        description = probe.consumer_groups[group]
        assert description.group_type == "consumer"
        assert description.member_count == 1
        assert description.state == "Stable"
        assert description.assigned == {(topic, 0), (topic, 1)}
        assert description.held == {(topic, 0), (topic, 1)}
        assert description.unresolved_topic_ids == frozenset()
        # ...and it has no commit: OffsetFetch sees nothing, so only the assignment can hold it.
        assert admin.list_group_offsets(group) == {group: {}}


def test_classic_assignment_without_commit(kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str]) -> None:
    topic = new_topic("clicks", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, {0: 3, 1: 3})
    group = f"classic-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(topic, 0), (topic, 1)}
        probe = probe_groups(admin, classic_groups=[group])
        assert probe.unreadable == {}
        description = probe.classic_groups[group]
        assert (description.group_type, description.state, description.member_count) == ("classic", "Stable", 1)
        assert description.assigned == {(topic, 0), (topic, 1)}
        assert probe.assignments() == {group: {(topic, 0), (topic, 1)}}
        assert admin.list_group_offsets(group) == {group: {}}
    finally:
        consumer.close(autocommit=False)
