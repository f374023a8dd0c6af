"""A kafka-python partitioner that keeps producers off retiring and retired partitions.

Retiring a partition (``spark-purge retire``) only helps once producers stop writing to it.
:class:`RetirementPartitioner` is a drop-in ``partitioner`` for kafka-python 3.0's
``KafkaProducer`` (the ``kafka.partitioner.Partitioner`` interface: ``partition(topic, key,
serialized_key, value, serialized_value, cluster)``) that never picks a ReadOnly or None partition:

- a keyed record goes where kafka-python's ``DefaultPartitioner`` sends it (murmur2 over every
  partition, as the Java client does), unless that partition is retired: then murmur2 over the
  writable ones (so a key keeps one partition while the registry does not change);
- a record without a key goes to a random writable partition with a leader;
- an explicit ``send(topic, partition=p)`` bypasses any partitioner (kafka-python's rule): the
  purge reports such writes (``writes_to_retired_partition``).

It reads the JSON export the purge job and the CLI rewrite beside the registry at every change
(``<audit.path>_retirements.json``, see ``spark_purge.retirement``), not the Delta table: a
producer needs no Spark, no JVM and no Delta reader. The file is re-read at most every
``refresh_interval_s`` (default 30 s), so a retirement reaches producers within that interval:
keep ``retirement.delay`` well above it. ``source`` is a local path (or ``file:`` URI): mount or
sync the export where producers run; for anything else (s3, http) pass a callable returning the
parsed document. Until an export has been read nothing counts as retired; after that a missing
(being replaced) or unreadable one keeps the last good one (an unreadable one is logged).

    from spark_purge.partitioner import RetirementPartitioner
    producer = KafkaProducer(bootstrap_servers=..., partitioner=RetirementPartitioner("/shared/audit_retirements.json"))
"""
from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka.partitioner import Partitioner, murmur2

log = logging.getLogger(__name__)

Loader = Callable[[], Mapping[str, Any]]


def closed_partitions(document: Mapping[str, Any]) -> dict[str, frozenset[int]]:
    """topic -> its ReadOnly and None partitions, from the export (``retirement.export_document``)."""
    found: dict[str, set[int]] = {}
    for entry in document.get("partitions", []):
        found.setdefault(str(entry["topic"]), set()).add(int(entry["partition"]))
    return {t: frozenset(ps) for t, ps in found.items()}


def file_loader(path: str) -> Loader:
    """Read the export at a local ``path`` (``file:`` URI accepted); ``OSError`` when it is missing."""
    local = Path(path[len("file:"):] if path.startswith("file:") else path)

    def load() -> Mapping[str, Any]:
        loaded: Mapping[str, Any] = json.loads(local.read_text(encoding="utf-8"))
        return loaded

    return load


class RetirementPartitioner(Partitioner):  # type: ignore[misc]  # kafka-python is untyped
    """See the module docstring. Thread-safe: ``send`` may be called from several threads."""

    def __init__(self, source: str | Loader, refresh_interval_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if refresh_interval_s < 0:
            raise ValueError(f"refresh_interval_s: expected >= 0 seconds, got {refresh_interval_s}")
        self._load = file_loader(source) if isinstance(source, str) else source
        self._interval = refresh_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._closed: dict[str, frozenset[int]] = {}
        self._loaded_at: float | None = None

    def closed(self, topic: str) -> frozenset[int]:
        """The partitions of ``topic`` not to write to, refreshed when the interval has passed."""
        with self._lock:
            now = self._clock()
            if self._loaded_at is None or now - self._loaded_at >= self._interval:
                self._loaded_at = now
                try:
                    self._closed = closed_partitions(self._load())
                except FileNotFoundError as exc:  # none written yet, or being replaced right now
                    log.debug("no retirement export (%s): keeping the last one read", exc)
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    log.warning("retirement export unreadable (%s): keeping the last one read", exc)
            return self._closed.get(topic, frozenset())

    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any, serialized_value: bytes | None, cluster: Any) -> int:
        if topic not in cluster.topics():
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        every = sorted(cluster.partitions_for_topic(topic))
        closed = self.closed(topic)
        writable = [p for p in every if p not in closed]
        if not writable:
            raise ValueError(f"topic {topic!r}: every partition is retiring or retired ({sorted(closed)}); nothing to write to")
        if serialized_key is not None:
            hashed = murmur2(serialized_key) & 0x7FFFFFFF
            home = every[hashed % len(every)]
            return int(home) if home not in closed else int(writable[hashed % len(writable)])
        available = [p for p in cluster.available_partitions_for_topic(topic) if p not in closed]
        return int(random.choice(available or writable))


__all__ = ["RetirementPartitioner", "closed_partitions", "file_loader"]
