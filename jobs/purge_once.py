"""One-shot purge (``Trigger.AvailableNow``): one snapshot, one purge cycle, then exit — for
Airflow and Databricks Jobs schedules. Exit code 0 when every partition succeeded, 1 when any
DeleteRecords failed (see ``spark-purge --help`` for the others).

    spark-submit --packages io.delta:delta-spark_4.2_2.13:4.4.0 \\
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
      jobs/purge_once.py --config conf/example.yaml [--dry-run]

The checkpoint (``stream.checkpoint_location``) is shared with the continuous job's format, so
the audit stays exactly-once across scheduled runs.
"""
from __future__ import annotations

import sys

from spark_purge.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "--once", *sys.argv[1:]]))
