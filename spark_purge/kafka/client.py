"""The ``ClusterClient`` interface and its kafka-python implementation, a thin facade.

The rest of spark-purge types against ``ClusterClient`` (a Protocol; unit tests may pass a
fake). ``KafkaPythonClient`` wires one ``Wire`` (the transport, ``wire.py``) to the API
families, each in its own module, so requests grow with brokers and coordinators, not with
partitions or groups:

- ``offsets``: Metadata (1 request) and ListOffsets per leader, all leaders in parallel;
- ``configs``: DescribeConfigs (1 request) and the Cluster Describe ACL check;
- ``groups``: ListGroups per broker (with its stability check), FindCoordinator (1 batched
  request), then per coordinator one request per API: OffsetFetch v8, DescribeGroups,
  ConsumerGroupDescribe, DescribeShareGroupOffsets, ShareGroupDescribe (``members``);
- ``lineage``: OffsetForLeaderEpoch per leader for commits carrying a leader epoch (KIP-320),
  and the topic-id re-check right before DeleteRecords;
- ``snapshot``: the snapshot assembled from the above;
- ``delete``: DeleteRecords per leader via ``DeleteExecutor``;
- ``producers``: DescribeProducers per leader for partitions with an open transaction (KIP-664).
- ``tiering``: a topic's tiered-storage configs (per leader) and offsets, and
  IncrementalAlterConfigs for the tiered-storage disablement (``spark_purge.tiering``).

``request_counts`` counts every request the client sends, by API name.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Protocol

from kafka import KafkaAdminClient

from spark_purge._gc import gc_paused
from spark_purge._time import Deadline
from spark_purge.kafka.configs import snapshot_configs
from spark_purge.kafka.delete import delete_records
from spark_purge.kafka.groups import GroupReader
from spark_purge.kafka.model import (
    ClientConfig,
    ClusterSnapshot,
    DeleteOutcome,
    SnapshotRequest,
    TopicPartitionKey,
    TopicTiering,
)
from spark_purge.kafka.offsets import EARLIEST_LOCAL, OffsetReader
from spark_purge.kafka.producers import OpenTransactions, describe_producers, transaction_max_timeout_ms
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.kafka.snapshot import take_snapshot
from spark_purge.kafka.tiering import alter_topic_configs, read_tiering
from spark_purge.kafka.wire import Wire, error_name

if TYPE_CHECKING:
    from spark_purge.config import PurgeConfig


class ClusterClient(Protocol):
    """What spark-purge needs from a Kafka cluster."""

    def snapshot(self, request: Optional[SnapshotRequest] = None) -> ClusterSnapshot: ...

    def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]: ...

    def log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]: ...

    def delete_records(
        self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int = 30_000, topic_ids: Optional[Mapping[str, str]] = None
    ) -> list[DeleteOutcome]: ...

    @property
    def request_counts(self) -> Mapping[str, int]: ...

    def close(self) -> None: ...

    def __enter__(self) -> ClusterClient: ...

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None: ...


class KafkaPythonClient:
    """``ClusterClient`` over kafka-python 3.0.x. Thread-safe; use as a context manager.

    ``config`` is a ``ClientConfig`` (connection and topic/group selection) or just the
    ``ConnectionSettings`` (select every non-internal topic and every group).
    """

    def __init__(
        self,
        config: ClientConfig | ConnectionSettings,
        admin_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient,
    ) -> None:
        self.config = config if isinstance(config, ClientConfig) else ClientConfig(config)
        self.wire = Wire(self.config.connection, admin_factory)
        self._offsets = OffsetReader(self.wire)
        self._groups = GroupReader(self.wire, self._offsets)
        self._txn_timeout: Optional[int] = None  # the broker's transaction.max.timeout.ms ...
        self._txn_timeout_read = False  # ... read once per client

    @property
    def settings(self) -> ConnectionSettings:
        return self.config.connection

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> KafkaPythonClient:
        return self

    def __exit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    @property
    def request_counts(self) -> dict[str, int]:
        return self.wire.requests.snapshot()

    @property
    def request_count(self) -> int:
        return sum(self.wire.requests.snapshot().values())

    def reset_request_counts(self) -> None:
        self.wire.requests.reset()

    # ---- the API -----------------------------------------------------------------------------
    def snapshot(self, request: Optional[SnapshotRequest] = None) -> ClusterSnapshot:
        """One consistent read of partition state and group commits for the selected topics
        (decoded with the cyclic collector paused: ``spark_purge._gc``)."""
        with gc_paused():
            return self.wire.run(take_snapshot, self.config, self._offsets, self._groups, request or SnapshotRequest())

    def offsets_for_times(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Offset of the first record at/after each timestamp (ms); the high watermark when every
        record is older. Partitions that could not be read raise KafkaError naming them."""
        return self.wire.run(self._offsets.offsets_for_times, dict(timestamps))

    def log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Current log start offsets; partitions that could not be read are left out."""
        return self.wire.run(self._offsets.log_start_offsets, list(tps))

    def local_log_start_offsets(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Current local log start offsets (ListOffsets EARLIEST_LOCAL, tiered topics); partitions
        that could not be read are left out."""
        return self.wire.run(self._offsets.log_start_offsets, list(tps), EARLIEST_LOCAL)

    def tiering(self, topic: str) -> TopicTiering:
        """The topic's tiered-storage configs as every leader sees them, and its offsets
        (``kafka.tiering.read_tiering``)."""
        return self.wire.run(read_tiering, self._offsets, topic, self.settings.request_timeout_ms)

    def alter_topic_configs(self, topic: str, values: Mapping[str, str]) -> None:
        """IncrementalAlterConfigs SET ``values`` on ``topic`` (needs AlterConfigs on it)."""
        self.wire.run(alter_topic_configs, self.wire, topic, dict(values))

    def offsets_retention_ms(self) -> Optional[int]:
        """The broker's ``offsets.retention.minutes`` in ms (None: unknown): how long Kafka keeps
        an empty group's committed offsets. Metadata + one DescribeConfigs (snapshots read it too:
        ``ClusterSnapshot.offsets_retention_ms``)."""

        async def read() -> Optional[int]:
            meta = await self._offsets.metadata(())
            return (await snapshot_configs(self.wire, (), sorted(meta.brokers)))[2]

        return self.wire.run(read)

    def open_transactions(self, tps: Iterable[TopicPartitionKey]) -> OpenTransactions:
        """Active producers of ``tps`` (partitions with an open transaction): one DescribeProducers
        per leader, in parallel; and the broker's ``transaction.max.timeout.ms`` (read once per
        client; None: unknown). See ``kafka.producers``."""
        wanted = sorted(set(tps))

        async def read() -> OpenTransactions:
            deadline = Deadline(self.config.connection.request_timeout_ms / 1000)
            leaders = await self._offsets.leaders_for(wanted, refresh=False)
            found = await describe_producers(self.wire, wanted, leaders, deadline)
            brokers = sorted(b for b in leaders.values() if b is not None)
            if not self._txn_timeout_read and brokers:
                self._txn_timeout = await transaction_max_timeout_ms(self.wire, brokers[0])
                self._txn_timeout_read = True
            return OpenTransactions(found, self._txn_timeout)

        return self.wire.run(read) if wanted else OpenTransactions({}, None)

    def delete_records(
        self, cutoffs: Mapping[TopicPartitionKey, int], timeout_ms: int = 30_000, topic_ids: Optional[Mapping[str, str]] = None
    ) -> list[DeleteOutcome]:
        """Delete records below each cutoff: one request per leader, leaders in parallel, one
        ``DeleteOutcome`` per partition (in input order). Never raises for a partition error.
        Re-sends after a leader move follow the connection's ``retries`` and ``retry_backoff_ms``.
        ``topic_ids`` (topic -> id planned for): topics recreated or deleted since are not cut
        (outcome ``TOPIC_RECREATED`` / ``TOPIC_DELETED``), see ``kafka.delete.delete_records``."""
        if not cutoffs:
            return []
        return delete_records(self._offsets, cutoffs, timeout_ms, topic_ids)


def open_client(config: ClientConfig | ConnectionSettings | PurgeConfig) -> KafkaPythonClient:
    """A connected client for a ``ClientConfig``, ``ConnectionSettings`` or a
    ``spark_purge.config.PurgeConfig`` (secrets resolved from the environment)."""
    if isinstance(config, (ClientConfig, ConnectionSettings)):
        return KafkaPythonClient(config)
    from spark_purge.config import connection_settings

    return KafkaPythonClient(connection_settings(config))


__all__ = ["ClusterClient", "KafkaPythonClient", "error_name", "open_client"]
