"""The test harness's errors: a small tree of its own, outside the product's ``SparkPurgeError``::

    HarnessError            anything the harness (launcher, workload, checker) reports
    ├── LocalStackError     the local Kafka launcher cannot start or reach its brokers
    ├── NotReadyError       the cluster is not in the wanted state yet; retriable
    └── WorkloadError       a workload step failed for good (its deadline passed, a wrong ack)

Branch on the class (or on ``retriable``), never on message text.
"""
from __future__ import annotations


class HarnessError(Exception):
    """Raised for any failure of the test harness itself."""

    retriable: bool = False


class LocalStackError(HarnessError):
    """Raised when the local Kafka launcher cannot start or reach its brokers."""


class NotReadyError(HarnessError):
    """Raised when the cluster is not in the wanted state yet (no leader, a commit refused by a
    moving coordinator); :func:`spark_purge.testing.workload.retry` tries again."""

    retriable = True


class WorkloadError(HarnessError):
    """Raised when a workload step failed for good: still failing at its deadline, or Kafka
    acknowledged something the workload cannot explain."""

