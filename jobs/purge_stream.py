"""Continuous purge: a structured-streaming query with a processingTime trigger
(``stream.trigger_interval``), checkpointed at ``stream.checkpoint_location``.

    spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 \\
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
      jobs/purge_stream.py --config conf/example.yaml

(With the package installed on the driver; locally ``--jars "$(ls .cache/jars/delta/*.jar | paste -sd,)"``
replaces ``--packages``.) Stops on SIGTERM/Ctrl-C; restarts resume from the checkpoint.
"""
from __future__ import annotations

import sys

from spark_purge.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "--follow", *sys.argv[1:]]))
