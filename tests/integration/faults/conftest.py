"""Fault-injection fixtures: one real 3-node KRaft cluster (replication factor 3,
min.insync.replicas 2 on the test topics) for the whole ``faults`` package.

Tests kill, stop and restart nodes; the autouse ``cluster_healed`` fixture brings every node
back (and waits until each answers with all brokers) before and after each test, so one test's
fault never leaks into the next. Every node is stopped by its own PID when the session ends.

Broker settings chosen for the faults:

- ``broker.session.timeout.ms=9000`` (the default, spelled out): a SIGKILLed node stays
  "alive" to the controller — and to DeleteRecords' low-watermark wait — for up to 9 s;
- ``auto.leader.rebalance.enable=false``: leadership moves only because of a test's fault.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import new_admin

FAULT_BROKER_CONFIG = {
    "min.insync.replicas": "2",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "false",
}


@pytest.fixture(scope="session")
def fault_cluster() -> Iterator[LocalKafka]:
    with LocalKafka(nodes=3, broker_config=FAULT_BROKER_CONFIG) as cluster:
        yield cluster


def _heal(cluster: LocalKafka) -> None:
    for node_id in cluster.node_ids:
        if not cluster.node(node_id).running:
            cluster.start_node(node_id, wait=False)
    cluster.wait_ready()


@pytest.fixture(autouse=True)
def cluster_healed(fault_cluster: LocalKafka) -> Iterator[None]:
    _heal(fault_cluster)
    yield
    _heal(fault_cluster)


@pytest.fixture
def fadmin(fault_cluster: LocalKafka) -> Iterator[KafkaAdminClient]:
    """A fresh admin client per test: a previous test's dead connections do not carry over."""
    client = new_admin(fault_cluster.bootstrap_servers)
    yield client
    client.close()
