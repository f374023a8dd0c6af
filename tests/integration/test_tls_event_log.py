"""TLS secrets and Spark's event log: purges through the mutual-TLS and the SASL_SSL listeners in
a driver process of its own, Spark's event log on, and no secret in anything the run wrote.

The client key's password (mTLS) and ``purger``'s SCRAM password (SASL_SSL) reach spark-purge
only as ``{spark_conf: key}`` references, set in a ``--properties-file`` (not on a command line):
the riskiest path, since the values are then in Spark's conf, which the event log's
``EnvironmentUpdate`` records (redacted by ``spark.redaction.regex``, which the keys match), and
the ``-v`` runs log Spark at INFO and spark-purge at DEBUG. One driver process (``local[1]``: the
event log does not need executors of their own, ``test_multiprocess.py`` has those) runs ``-v
run`` through ``MTLS``, then through ``SCRAM_TLS``, each on a topic only its principal may
purge; the purges are checked on the log start offsets and the audit's
intent and outcome rows, the event log on recording both keys (so the grep is not vacuous).
Then the key password, the broker keystore's password and every SCRAM password are looked for —
in vain — in every file under the run's directory: the event log, the driver's stdout/stderr,
the audits and the checkpoints. Opt-in (``-m multiprocess``): a Spark session of its own and two
purges take minutes on a loaded machine.
"""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import audit_rows, log_starts, new_admin, purge_config_dict
from tests.integration.secure_helpers import (
    SCRAM_USERS,
    event_log,
    event_log_properties,
    files_containing,
    purgeable_topic,
    run_driver,
    tls_security,
)

MASTER = "local[1]"
DRIVER_TIMEOUT_S = 600  # a loaded 2-core CI box: minutes
# Both matched by spark.redaction.regex (they contain "password"), as a spark_conf reference must be.
KEY_PASSWORD_KEY = "spark.purge.test.tls.key.password"
SCRAM_PASSWORD_KEY = "spark.purge.test.tls.scram.password"
REDACTED = "*********(redacted)"  # Spark's stand-in for a redacted value
RECORDS, COMMITTED = [30, 30], [12, 25]


@pytest.mark.multiprocess
def test_tls_purges_leave_no_secret_in_the_event_log(spark: SparkSession, secure_cluster: LocalKafka, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    # name -> (listener, principal, the password's reference)
    listeners = {
        "mtls": ("MTLS", f"User:{secure_cluster.tls_user}", {"ssl_password": {"spark_conf": KEY_PASSWORD_KEY}}),
        "scram": ("SCRAM_TLS", "User:purger", {"sasl_password": {"spark_conf": SCRAM_PASSWORD_KEY}}),
    }
    work = tmp_path / "run"  # everything the driver writes; grepped
    (work / "driver-cwd").mkdir(parents=True)
    topics, configs, audits = {}, {}, {}
    for name, (listener, principal, reference) in listeners.items():
        topic, group = f"tls.ev-{name}-{suffix}", f"tls-ev-{name}"
        purgeable_topic(secure_cluster, topic, group, RECORDS, COMMITTED, principal)
        data = purge_config_dict(
            work / name,
            secure_cluster.listener_bootstrap(listener),
            topic.replace(".", r"\."),
            [group],
            client_id=f"spark-purge-ev-{name}",
            security=tls_security(secure_cluster, listener, **reference),
        )
        configs[name] = work / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(data))
        topics[name], audits[name] = topic, data["audit"]["path"]
    events = work / "events"
    events.mkdir()
    secret_dir = tmp_path / "secret"  # the one place the passwords are written: never grepped
    secret_dir.mkdir()
    properties = secret_dir / "spark.conf"
    conf = {KEY_PASSWORD_KEY: secure_cluster.pki.key_password, SCRAM_PASSWORD_KEY: SCRAM_USERS["purger"]}
    properties.write_text(event_log_properties(events, conf))
    env = dict(
        os.environ,
        PYSPARK_SUBMIT_ARGS=f"--properties-file {properties} pyspark-shell",
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONUNBUFFERED="1",
    )
    runs = [["-v", "run", "-c", str(configs[name]), "--master", MASTER] for name in listeners]

    run = run_driver(work / "driver-cwd", env, runs, DRIVER_TIMEOUT_S)

    assert run.returncode == 0 and run.codes == [0, 0], (run.codes, run.stdout[-2000:], run.stderr[-4000:])
    admin = new_admin(secure_cluster.bootstrap_servers, **secure_cluster.client_kwargs())
    try:
        for name, topic in topics.items():
            assert log_starts(admin, topic, len(RECORDS)) == COMMITTED, name
    finally:
        admin.close()
    for name, topic in topics.items():
        rows = audit_rows(spark, audits[name], None)  # one read, every record type
        intents = [r for r in rows if r["record_type"] == "intent"]
        outcomes = [r for r in rows if r["record_type"] == "outcome"]
        assert [(r["topic"], r["partition"], r["cutoff"], r["status"]) for r in intents] == [
            (topic, p, c, "planned") for p, c in enumerate(COMMITTED)
        ], name
        assert [(r["topic"], r["partition"], r["status"], r["low_watermark"], r["records_deleted"]) for r in outcomes] == [
            (topic, p, "deleted", c, c) for p, c in enumerate(COMMITTED)
        ], name

    # The event log is there and saw the run: both keys in Spark's conf, redacted, and the queries.
    log = event_log(events, "local-")
    (environment,) = [e for e in log if e["Event"] == "SparkListenerEnvironmentUpdate"]
    spark_properties = dict(environment["Spark Properties"])
    assert {key: spark_properties.get(key) for key in conf} == {key: REDACTED for key in conf}
    assert sum(e["Event"].endswith("SQLExecutionStart") for e in log) >= len(runs), "no query in the event log"

    # No secret anywhere: event log, driver output, audits, checkpoints.
    secrets = {
        "the client key's password": secure_cluster.pki.key_password,
        "the broker keystore's password": secure_cluster.pki.keystore_password,
        **{f"{user}'s SCRAM password": password for user, password in SCRAM_USERS.items()},
    }
    assert set(secure_cluster.pki.passwords) <= set(secrets.values())
    leaks = {what: files_containing(work, secret) for what, secret in secrets.items()}
    assert {what: files for what, files in leaks.items() if files} == {}
