"""Kafka I/O for spark-purge: the only package that knows kafka-python.

    from spark_purge.kafka import ClientConfig, ConnectionSettings, SnapshotRequest, TimeFloor, open_client

    with open_client(ClientConfig(ConnectionSettings("127.0.0.1:9092"), topic_include="orders.*")) as client:
        snap = client.snapshot(SnapshotRequest(time_floors=(TimeFloor("orders.*", min_retention_ms=3_600_000),)))
        outcomes = client.delete_records({("orders", 0): 42}, timeout_ms=30_000)
        client.request_counts   # {"MetadataRequest": 2, "ListOffsetsRequest": 3, ...}

``ClusterClient`` is the interface (a Protocol); ``KafkaPythonClient`` the adapter, a facade
over the modules below. ``ConnectionSettings`` is the one description of a connection.

    settings.py  ConnectionSettings: every connection setting, to/from data-source options
    model.py     plain values taken and returned (ClientConfig, ClusterSnapshot, DeleteOutcome...)
    wire.py      the transport: the only code touching kafka-python internals
    tls.py       the TLS context from the settings and the first handshake (failures name the setting)
    offsets.py   Metadata and per-leader ListOffsets
    configs.py   DescribeConfigs and the Cluster Describe ACL check
    caught_up.py whether each group coordinator serves its predecessor's commits (high watermark
                 against its leader epoch's start), checked around the group listing and reads
    groups.py    ListGroups (its stability check a pure function), FindCoordinator, and each
                 group's reads per coordinator (OffsetFetch, Describe*, share-group offsets)
    members.py   which reads each group type needs, their requests and answers, and the rows
                 they make (commits, share-partition start offsets, -1 = held without a position)
    offset_fetch.py  OffsetFetch v8 answers decoded from their bytes into columns (no object per commit)
    messages.py  the protocol messages kafka-python lacks (APIs 90, 77, 69), build and parse
    snapshot.py  the snapshot assembled from the above
    delete.py    the per-leader DeleteRecords executor and its request
    client.py    the ClusterClient Protocol and the KafkaPythonClient facade
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark_purge.kafka.client import ClusterClient, KafkaPythonClient, error_name, open_client
    from spark_purge.kafka.delete import DeleteExecutor, DeleteTransport, LeaderRequestError, PartitionResult
    from spark_purge.kafka.groups import GroupListing, check_group_listing
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
    from spark_purge.kafka.settings import ConnectionSettings

# The names above, imported when first used: a process that needs only the plain values
# (``model``, ``settings``: the data source's creation worker) imports neither kafka-python nor
# the client (about 10 MB less in each such Python worker).
_HOME = {
    **dict.fromkeys(("ClusterClient", "KafkaPythonClient", "error_name", "open_client"), "client"),
    **dict.fromkeys(("DeleteExecutor", "DeleteTransport", "LeaderRequestError", "PartitionResult"), "delete"),
    **dict.fromkeys(("GroupListing", "check_group_listing"), "groups"),
    **dict.fromkeys(
        ("ClientConfig", "ClusterSnapshot", "DeleteOutcome", "DroppedPartition", "GroupCommit", "GroupInfo",
         "PartitionState", "SnapshotIssue", "SnapshotRequest", "TimeFloor", "TopicPartitionKey"),
        "model",
    ),
    "ConnectionSettings": "settings",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ClientConfig",
    "ClusterClient",
    "ClusterSnapshot",
    "ConnectionSettings",
    "DeleteExecutor",
    "DeleteOutcome",
    "DeleteTransport",
    "DroppedPartition",
    "GroupCommit",
    "GroupInfo",
    "GroupListing",
    "KafkaPythonClient",
    "LeaderRequestError",
    "PartitionResult",
    "PartitionState",
    "SnapshotIssue",
    "SnapshotRequest",
    "TimeFloor",
    "TopicPartitionKey",
    "check_group_listing",
    "error_name",
    "open_client",
]
