"""Airflow DAG: one spark-purge cycle (``jobs/purge_once.py``, i.e. ``spark-purge run --once``)
every 15 minutes through ``spark-submit`` (``SparkSubmitOperator``, from
``apache-airflow-providers-apache-spark``).

Copy this file into the DAGs folder; on the workers, ``pip install spark-purge`` (the wheel) and
put ``jobs/purge_once.py`` where ``spark_purge_job`` points. Two Airflow Variables, with these
defaults:

    spark_purge_config   /opt/spark-purge/conf/prod.yaml      the config file (see conf/example.yaml)
    spark_purge_job      /opt/spark-purge/jobs/purge_once.py  the entry script

and the ``spark_default`` connection naming the cluster (YARN, Kubernetes, standalone or local).

- No overlap: ``max_active_runs=1`` (and ``catchup=False``): a cycle that runs long delays the
  next one instead of racing it.
- Retries are safe: a cycle interrupted after writing its intents is finished by the next
  attempt from the checkpoint (``stream.checkpoint_location``), which executes the recorded
  intents, each checked again; the audit stays exactly-once. (There is no lease yet fencing a
  second, differently scheduled purge job on the same cluster: run one.)
- Exit codes become task states: 0 success; 1 (a DeleteRecords failed; in the audit), 3 (Kafka
  unreachable) and 4 (audit table) fail the try and are retried; 2 (bad config) fails every try.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

# spark_purge.session.DELTA_PACKAGE: the Delta jars the driver and executors resolve.
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
CONFIG = "{{ var.value.get('spark_purge_config', '/opt/spark-purge/conf/prod.yaml') }}"
ENTRY_SCRIPT = "{{ var.value.get('spark_purge_job', '/opt/spark-purge/jobs/purge_once.py') }}"

with DAG(
    dag_id="spark_purge",
    description="Delete Kafka records every required consumer has read; audited in Delta",
    schedule=timedelta(minutes=15),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={
        "owner": "data-platform",
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
        "execution_timeout": timedelta(hours=1),
    },
    tags=["kafka", "spark-purge"],
) as dag:
    purge_once = SparkSubmitOperator(
        task_id="purge_once",
        conn_id="spark_default",
        application=ENTRY_SCRIPT,
        application_args=["--config", CONFIG],
        name="spark-purge",
        packages=DELTA_PACKAGE,
        conf={
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        },
    )
