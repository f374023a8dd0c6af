"""Helpers for the fault tests (and nothing else): topics with replication factor 3 and
min.insync.replicas 2, and a retry that waits out assertions. Producing, commits, log start
offsets, configs, purge cycles and the audit come from ``spark_purge.testing.workload``."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from kafka import KafkaAdminClient

from spark_purge.testing import workload

T = TypeVar("T")
REPLICATION = 3
MIN_ISR = "2"


def retry(fn: Callable[[], T], what: str, timeout_s: float = 60.0) -> T:
    """``workload.retry`` that also waits out a failing assertion (a state the test awaits)."""
    return workload.retry(fn, what, timeout_s, also=(AssertionError,))


def create_topic(
    admin: KafkaAdminClient,
    prefix: str,
    partitions: int,
    replication: int = REPLICATION,
    assignment: Mapping[int, Sequence[int]] | None = None,
) -> str:
    """``assignment`` (partition -> broker ids, the first its leader) places the replicas."""
    replication = len(next(iter(assignment.values()))) if assignment else replication
    configs = {"min.insync.replicas": MIN_ISR} if replication >= 3 else {}
    return workload.create_topic(admin, prefix, partitions, replication, configs, assignment)
