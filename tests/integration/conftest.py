"""Integration fixtures: one real single-node KRaft cluster per test run (started from the
Maven-resolved jars), plus helpers to make uniquely named topics."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from spark_purge.localstack import LocalKafka


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafka]:
    """A real Apache Kafka broker on 127.0.0.1, stopped by PID at the end of the run."""
    with LocalKafka(nodes=1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def admin(kafka_cluster: LocalKafka) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def new_topic(admin: KafkaAdminClient) -> Callable[..., str]:
    """Create a topic with a unique name; returns the name."""

    def create(prefix: str = "t", partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        return name

    return create
