"""Test helper: a ``SNAPSHOT`` DataFrame as the pipeline reads it, its group rows packed
(``PACKED_SNAPSHOT``, ``spark_purge.snapshot_pack``), built as the source builds it."""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

from spark_purge import schemas
from spark_purge.snapshot_pack import pack
from spark_purge.source_arrow import arrow_schema


def packed_frame(snapshot: DataFrame, rows: int = 2) -> DataFrame:
    """``snapshot``'s rows packed, a blob every ``rows`` rows (small, so that a few rows make
    several blobs), in reversed order (a reader must not rely on the blobs' order)."""
    table = snapshot.toArrow()
    schema = arrow_schema("snapshot")
    batch = pa.Table.from_batches(table.to_batches(), schema=table.schema).cast(schema).combine_chunks()
    batches = batch.to_batches() or [pa.RecordBatch.from_pylist([], schema=schema)]
    packed = pack(batches[0], arrow_schema("packed"), rows=rows)
    reversed_rows = packed.take(pa.array(range(packed.num_rows - 1, -1, -1), pa.int64()))
    return snapshot.sparkSession.createDataFrame(pa.Table.from_batches([reversed_rows]), schemas.PACKED_SNAPSHOT)
