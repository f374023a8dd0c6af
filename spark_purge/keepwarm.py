"""Keep a server's Python workers alive between commands (``spark-purge serve --keep-warm``).

Spark kills every idle Python worker of a kind once that kind has had no work for a minute
(``PythonWorkerFactory``'s idle monitor; not a setting). The next command then forks new ones,
and each imports PySpark, PyArrow and this package again: at 10k partitions x 10k groups a
``plan`` in a warm session took 4.1-4.8 s right after another and 5.7-6.8 s after 75 s idle
(stop 77). A served command comes every few minutes, so the server runs this tiny job more
often than the monitor's minute: a read of a two-partition Python data source, whose creation,
read planning and read tasks use the kinds of worker the purge's own source and Arrow tasks use.
No Kafka, no Delta, nothing written.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import LongType, StructField, StructType

NAME = "spark_purge_keep_warm"
PARTITIONS = 2  # one per task slot of a local[2] session
SCHEMA = StructType([StructField("n", LongType(), False)])


class _Reader(DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield (int(partition.value),)


class KeepWarmDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader()


def touch(spark: SparkSession) -> int:
    """Run the job once; the sum of its rows (``PARTITIONS`` rows 0..n-1), so a caller can tell
    that it ran."""
    spark.dataSource.register(KeepWarmDataSource)
    rows = spark.read.format(NAME).load().groupBy().sum("n").collect()
    return int(rows[0][0])
