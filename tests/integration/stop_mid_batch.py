"""Test-only driver: a continuous purge stopped with ``query.stop()`` in the middle of its first
batch, ``STOPS`` times over, each on a fresh checkpoint; its stderr (the JVM's too) is the
caller's evidence.

    python -m tests.integration.stop_mid_batch BOOTSTRAP TOPIC GROUP WORKDIR

Prints ``stopped N: exception=...`` per stop; the pipeline logs each batch it finds
interrupted by the stop (``batch N interrupted: the query is stopping``). Run by ``test_stop_mid_batch.py``.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from spark_purge.pipeline import start_stream
from spark_purge.session import get_spark
from spark_purge.testing.workload import purge_config

STOPS = 5


def main(argv: list[str]) -> int:
    bootstrap, topic, group, workdir = argv
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("spark_purge.pipeline").setLevel(logging.INFO)  # "batch N interrupted: ..."
    spark = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "1"})
    for n in range(STOPS):
        cfg = purge_config(Path(workdir) / f"run{n}", bootstrap, topic, [group])
        query, pipeline = start_stream(spark, cfg)
        deadline = time.monotonic() + 120
        while not query.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5 + 0.75 * n)  # a different point of the first batch each time
        query.stop()
        print(f"stopped {n}: exception={query.exception()}", flush=True)
        pipeline.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
