"""spark-purge: delete Kafka records once every consumer that needs them has consumed them.

Spark-native: a Python Data Source reads the cluster's offsets, the cutoff policy is
pure DataFrame logic, DeleteRecords go out batched per partition leader, and every
decision lands in a Delta audit table.
"""
from __future__ import annotations

__version__ = "0.1.0"
