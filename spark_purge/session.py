"""The SparkSession factory: local mode with Delta from the project's jar cache, or whatever
the cluster already has (Databricks, or ``spark-submit --packages io.delta:...``).

Resolution order for Delta's jars in local mode:
1. ``SPARK_PURGE_DELTA_JARS`` (a folder of jars), else
2. ``<repo>/.cache/jars/delta`` filled by ``./dev.sh setup`` (Maven Central, no run-time download),
3. otherwise nothing is added: Delta must already be on the classpath (``--packages``, Databricks).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def delta_jars(jars_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Jar paths for Delta in local mode; empty when none are cached (Delta assumed present)."""
    folder = Path(jars_dir or os.environ.get("SPARK_PURGE_DELTA_JARS") or REPO_ROOT / ".cache/jars/delta")
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.glob("*.jar"))


def get_spark(
    app_name: str = "spark-purge",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jars_dir: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build one with Delta configured.

    On a cluster (an active session exists, or ``spark-submit`` set ``spark.master``) nothing
    is forced; locally (``master`` given or none configured) the session binds to loopback,
    uses UTC, keeps the UI off and puts the cached Delta jars on the classpath.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Python workers must run this interpreter (it has pyarrow), not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # spark-submit starts the JVM first and hands Python its gateway: master is set there.
    local = master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.master(master or "local[2]")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.ansi.enabled", "true")
            .config("spark.ui.showConsoleProgress", "false")
            # Delta's default of 50 snapshot partitions makes every small-table read slow locally.
            .config("spark.databricks.delta.snapshotPartitions", "2")
        )
        jars = delta_jars(jars_dir)
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
    builder = builder.config("spark.sql.extensions", DELTA_EXTENSION).config(
        "spark.sql.catalog.spark_catalog", DELTA_CATALOG
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

