"""Integration fixtures: one real single-node KRaft cluster per test run (started from the
Maven-resolved jars), plus helpers to make uniquely named topics; and, started only when a test
asks for it, one SASL/SCRAM-secured single-node cluster shared by the security tests, with its
SASL_SSL and mutual-TLS listeners (and two whose broker certificates are wrong on purpose)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaAdminClient

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import create_topic
from tests.integration.secure_helpers import SCRAM_USERS


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafka]:
    """A real Apache Kafka broker on 127.0.0.1, stopped by PID at the end of the run."""
    with LocalKafka(nodes=1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def secure_cluster() -> Iterator[LocalKafka]:
    """SASL/SCRAM-SHA-512 + ACLs (users in ``secure_helpers``) on CLIENT, and the TLS listeners
    (``SCRAM_TLS``, ``MTLS``, ``TLS_WRONG_HOST``, ``TLS_EXPIRED``: see ``LocalKafka(tls=True)``),
    stopped by PID at the end."""
    with LocalKafka(nodes=1, scram_users=SCRAM_USERS, tls=True) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def admin(kafka_cluster: LocalKafka) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def new_topic(admin: KafkaAdminClient) -> Callable[..., str]:
    """Create a topic with a unique name (once it has leaders); returns the name."""

    def create(prefix: str = "t", partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        return create_topic(admin, prefix, partitions, configs=configs)

    return create
