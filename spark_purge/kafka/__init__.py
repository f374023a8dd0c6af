"""Kafka I/O for spark-purge: the only package that knows kafka-python.

    from spark_purge.kafka import ClientConfig, SnapshotRequest, TimeFloor, open_client

    with open_client(ClientConfig("127.0.0.1:9092", topic_include="orders.*")) as client:
        snap = client.snapshot(SnapshotRequest(time_floors=(TimeFloor("orders.*", min_retention_ms=3_600_000),)))
        outcomes = client.delete_records({("orders", 0): 42}, timeout_ms=30_000)
        client.request_counts   # {"MetadataRequest": 2, "ListOffsetsRequest": 3, ...}

``ClusterClient`` is the interface (a Protocol); ``KafkaPythonClient`` the adapter.
"""
from __future__ import annotations

from spark_purge.kafka.client import ClusterClient, KafkaPythonClient, error_name, open_client
from spark_purge.kafka.delete import DeleteExecutor, DeleteTransport, LeaderRequestError, PartitionResult
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    DeleteOutcome,
    DroppedPartition,
    GroupCommit,
    GroupInfo,
    PartitionState,
    SnapshotIssue,
    SnapshotRequest,
    TimeFloor,
    TopicPartitionKey,
)

__all__ = [
    "ClientConfig",
    "ClusterClient",
    "ClusterSnapshot",
    "DeleteExecutor",
    "DeleteOutcome",
    "DeleteTransport",
    "DroppedPartition",
    "GroupCommit",
    "GroupInfo",
    "KafkaPythonClient",
    "LeaderRequestError",
    "PartitionResult",
    "PartitionState",
    "SnapshotIssue",
    "SnapshotRequest",
    "TimeFloor",
    "TopicPartitionKey",
    "error_name",
    "open_client",
]
