"""Helpers for integration tests: produce exact record counts and commit exact offsets."""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Optional

from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NoError, NotCoordinatorError
from kafka.structs import OffsetAndMetadata, TopicPartition


def produce(
    bootstrap: str,
    topic: str,
    counts: Mapping[int, int],
    timestamps_ms: Optional[Mapping[int, Sequence[int]]] = None,
) -> None:
    """Write ``counts[p]`` keyed records to partition ``p`` (optionally with explicit timestamps)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for partition, n in counts.items():
            stamps = (timestamps_ms or {}).get(partition)
            for i in range(n):
                producer.send(
                    topic,
                    key=b"k%d" % i,
                    value=b"v%d" % i,
                    partition=partition,
                    timestamp_ms=stamps[i] if stamps else None,
                )
        producer.flush()
    finally:
        producer.close()


def commit(admin: KafkaAdminClient, group: str, offsets: Mapping[tuple[str, int], int], metadata: str = "") -> None:
    """Commit offsets for ``group`` (an empty classic group), retrying while the coordinator loads."""
    payload = {TopicPartition(t, p): OffsetAndMetadata(o, metadata, -1) for (t, p), o in offsets.items()}
    deadline = time.monotonic() + 60
    while True:
        try:
            # Per-partition errors come back in the result, not as exceptions.
            errors = {tp: err for tp, err in admin.alter_group_offsets(group, payload).items() if err is not NoError}
            if not errors:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"committing offsets for {group} failed: {errors}")
        except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)
