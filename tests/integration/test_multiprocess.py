"""A purge on Spark's ``local-cluster`` master: separate executor JVMs with their own Python
workers and working directories, the driver in a subprocess of its own.

Nothing may depend on the driver and the executors sharing one process or directory: the
``kafka_state`` reader runs ``read()`` on the executors from its pickled state only, the audit
is written by executor tasks. The purge principal's password reaches the driver only as a
``{spark_conf: key}`` reference, set in a ``--properties-file`` (not on a command line), and must
appear nowhere: not in stdout/stderr (driver and executors), Spark's event log, the executors'
work directories, the audit or the checkpoint. (The printed plan is grepped in-process by
``test_secrets.py``.) Marked ``multiprocess`` (opt-in): a session of its own plus two executor JVMs take about a
minute on an idle machine, several on a loaded one.

``local-cluster`` needs ``$SPARK_HOME/bin`` and ``jars``: pyspark's pip package ships both. Its
workers put executor directories under ``$SPARK_HOME/work``, so the driver gets a throwaway
``SPARK_HOME`` of symlinks into the pyspark package (nothing is written into the virtualenv).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyspark
import pytest
import yaml
from pyspark.sql import SparkSession

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    create_topic,
    log_starts,
    new_admin,
    produce,
    purge_config_dict,
)
from tests.integration.secure_helpers import (
    ADMIN_PASSWORD,
    event_log,
    event_log_properties,
    files_containing,
    run_driver,
)

MASTER = "local-cluster[2,1,1024]"  # 2 workers, 1 core and 1 GiB each
DRIVER_TIMEOUT_S = 900  # a loaded 2-core CI box: minutes
PASSWORD_KEY = "spark.purge.test.kafka.password"  # matched by spark.redaction.regex
RECORDS, COMMITTED = [60, 60], [25, 45]


def _spark_home(root: Path) -> Path:
    """A SPARK_HOME of symlinks into the pyspark package, so ``work/`` lands under ``root``."""
    package = Path(pyspark.__file__).parent
    home = root / "spark-home"
    home.mkdir()
    for entry in package.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    return home


@pytest.mark.multiprocess
def test_purge_on_local_cluster_executors(spark: SparkSession, secure_cluster: LocalKafka, tmp_path: Path) -> None:
    servers = secure_cluster.bootstrap_servers
    admin = new_admin(servers, **secure_cluster.client_kwargs())
    try:
        topic = create_topic(admin, "mp", len(RECORDS))
        produce(servers, topic, RECORDS, **secure_cluster.client_kwargs())
        group = f"{topic}-g"
        commit_topic(admin, group, topic, COMMITTED)
    finally:
        admin.close()
    security = {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "admin",
        "sasl_password": {"spark_conf": PASSWORD_KEY},
    }
    work = tmp_path / "run"
    data = purge_config_dict(work, servers, topic, [group], security=security)
    (work / "driver-cwd").mkdir(parents=True)
    config = work / "purge.yaml"
    config.write_text(yaml.safe_dump(data))
    events = work / "events"
    events.mkdir()
    secret_dir = tmp_path / "secret"  # the one place the password is written: never grepped
    secret_dir.mkdir()
    properties = secret_dir / "spark.conf"
    properties.write_text(event_log_properties(events, {PASSWORD_KEY: ADMIN_PASSWORD}))
    spark_home = _spark_home(work)
    env = dict(
        os.environ,
        SPARK_HOME=str(spark_home),
        PYSPARK_SUBMIT_ARGS=f"--properties-file {properties} pyspark-shell",
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONUNBUFFERED="1",
    )

    run = run_driver(work / "driver-cwd", env, [["run", "-c", str(config), "--master", MASTER]], DRIVER_TIMEOUT_S)

    assert run.returncode == 0 and run.codes == [0], (run.stdout[-2000:], run.stderr[-4000:])
    admin = new_admin(servers, **secure_cluster.client_kwargs())
    try:
        assert log_starts(admin, topic, len(RECORDS)) == COMMITTED
    finally:
        admin.close()
    intents = audit_rows(spark, data["audit"]["path"], "intent")
    outcomes = audit_rows(spark, data["audit"]["path"], "outcome")
    assert [(r["batch_id"], r["partition"], r["cutoff"], r["status"]) for r in intents] == [
        (0, p, c, "planned") for p, c in enumerate(COMMITTED)
    ]
    assert [(r["batch_id"], r["partition"], r["status"], r["low_watermark"], r["records_deleted"]) for r in outcomes] == [
        (0, p, "deleted", c, c) for p, c in enumerate(COMMITTED)
    ]

    # The work really ran on two executor processes, never in the driver.
    log = event_log(events, "app-")
    executors = {e["Executor ID"] for e in log if e["Event"] == "SparkListenerExecutorAdded"}
    task_hosts = {e["Task Info"]["Executor ID"] for e in log if e["Event"] == "SparkListenerTaskStart"}
    # (Which executor gets which task is the scheduler's choice: every task ran on one of them.)
    assert executors == {"0", "1"} and task_hosts and task_hosts <= executors, (executors, task_hosts)
    executor_dirs = sorted(p.name for p in (spark_home / "work").glob("app-*/*") if p.is_dir())
    assert executor_dirs == ["0", "1"]

    # The password: nowhere.
    assert files_containing(work, ADMIN_PASSWORD) == []  # output, event log, executor logs, audit, checkpoint
    assert any(e["Event"] == "SparkListenerEnvironmentUpdate" and PASSWORD_KEY in json.dumps(e) for e in log)
