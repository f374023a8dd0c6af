"""Keep a session's Python workers alive while it waits: a server between commands
(``spark-purge serve --keep-warm``), a continuous purge between triggers (``stream.keep_warm``,
``IdleKeeper``).

Spark kills every idle Python worker of a kind once that kind has had no work for a minute
(``PythonWorkerFactory``'s idle monitor; not a setting). The next command then forks new ones,
and each imports PySpark, PyArrow and this package again: at 10k partitions x 10k groups a
``plan`` in a warm session took 4.1-4.8 s right after another and 5.7-6.8 s after 75 s idle
(stop 77). A served command comes every few minutes, so the server runs this tiny job more
often than the monitor's minute: a read of a one-partition Python data source, whose creation,
read planning and read task use the kinds of worker the purge's own source and Arrow tasks use.
No Kafka, no Delta, nothing written.

A continuous purge waits ``stream.trigger_interval`` between batches (5 minutes in
``conf/example.yaml``): longer than the minute, so every batch would start its workers again.
``IdleKeeper`` runs the same job from a thread of its own while no batch runs.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import LongType, StructField, StructType

log = logging.getLogger(__name__)

NAME = "spark_purge_keep_warm"
# One read task: a local session keeps one idle Python worker of a kind
# (``session.IDLE_PYTHON_WORKERS``), which the purge's own Arrow tasks (one task each) reuse. A
# second task at once forked another worker on every touch, and the pool kept the new one: the
# next batch's task then ran in a worker that had run only the touch
# (``bench/diag/worker_pool.py --touch``).
PARTITIONS = 1
SCHEMA = StructType([StructField("n", LongType(), False)])


class _Reader(DataSourceReader):
    def __init__(self, partitions: int) -> None:
        self.n = partitions

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(self.n)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield (int(partition.value) + 1,)


class KeepWarmDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(int(self.options.get("partitions", PARTITIONS)))


# The sessions the keep-warm source is registered in.
_REGISTERED: weakref.WeakSet[SparkSession] = weakref.WeakSet()
# The Spark job group of the touches made from a thread of their own (``IdleKeeper``).
JOB_GROUP = "spark-purge-keep-warm"


def touch(spark: SparkSession, job_group: str | None = None, partitions: int = PARTITIONS) -> int:
    """Run the job once; the sum of its rows (one row a partition: 1..``partitions``), so a
    caller can tell that it ran. ``job_group``: set first as the calling thread's Spark job
    group. ``partitions``: read tasks (``PARTITIONS``; more only to measure what they cost)."""
    if job_group is not None:
        spark.sparkContext.setJobGroup(job_group, "spark-purge: keep the Python workers warm")
    if spark not in _REGISTERED:  # once a session: a touch from a keeper's thread changes no registry a batch reads
        spark.dataSource.register(KeepWarmDataSource)
        _REGISTERED.add(spark)
    rows = spark.read.format(NAME).option("partitions", str(partitions)).load().groupBy().sum("n").collect()
    return int(rows[0][0])


class IdleKeeper:
    """A daemon thread that calls ``touch`` whenever ``every_s`` seconds have passed since the
    last activity (``idle_since``: when the last batch ended, monotonic seconds; None while one
    runs) and since its own last touch. ``touch`` failing is logged, never raised: it only
    leaves the next batch to start cold. ``stop`` ends the thread (it waits for a touch under
    way); so does ``alive`` turning false (the query it serves has stopped). The touch and a
    batch beginning at that moment may overlap: the touch reads nothing a batch uses."""

    def __init__(
        self,
        every_s: float,
        idle_since: Callable[[], float | None],
        touch: Callable[[], object],
        alive: Callable[[], bool] = lambda: True,
        name: str = "spark-purge-keep-warm",
    ) -> None:
        if every_s <= 0:
            raise ValueError(f"keep-warm: expected a period > 0 s, got {every_s}")
        self.every_s = every_s
        self.touches = 0
        self._idle_since = idle_since
        self._touch = touch
        self._alive = alive
        self._stopped = threading.Event()
        self._last = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> IdleKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def due_in(self, now: float) -> float | None:
        """Seconds until the next touch is due (0: now); None while a batch runs."""
        since = self._idle_since()
        if since is None:
            return None
        return max(0.0, max(since, self._last) + self.every_s - now)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self._alive():
                    return
            except Exception as exc:  # the session is going away
                log.debug("keep-warm: stopping: %s", exc)
                return
            due = self.due_in(time.monotonic())
            if due is None or due > 0:
                # While a batch runs, look again each second: the touch is due every_s after it.
                self._stopped.wait(min(1.0, self.every_s) if due is None else due)
                continue
            try:
                self._touch()
                self.touches += 1
            except Exception as exc:  # the session stopping, a job cancelled: the next batch starts cold
                log.debug("keep-warm: the touch failed: %s", exc)
            self._last = time.monotonic()
