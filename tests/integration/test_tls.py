"""TLS on a real broker: a purge through the mutual-TLS listener, and the certificate failures
an operator meets, each failing fast with the setting at fault named. (The purge through the
SASL_SSL listener, with its ACL and password checks, is ``test_security.py``'s.)

The shared ``secure_cluster`` (``LocalKafka(tls=True)``, certificates made at start-up) serves
``SCRAM_TLS`` (SCRAM-SHA-512 over TLS), ``MTLS`` (a client certificate required;
``CN=purger-tls`` maps to ``User:purger-tls``, the only principal with ACLs on its topic, so a
purge through it proves the mapping) and two listeners whose broker certificate is wrong on
purpose: for another host (``TLS_WRONG_HOST``) and expired (``TLS_EXPIRED``).

The purge is ``spark-purge run`` (the CLI's ``main``) and is checked on Kafka's log start
offsets and the audit's intent and outcome rows. The client key's password, the broker
keystore's password and the SCRAM password are then looked for — in vain — in stdout/stderr,
every log record, the audit, every file the run left and the broker's logs. Secrets reach
spark-purge only as ``{env: ...}`` references here; ``test_tls_event_log.py`` purges through
``MTLS`` and ``SCRAM_TLS`` with ``{spark_conf: key}`` references in a driver of its own, Spark's
event log on.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from spark_purge.cli import EXIT_KAFKA, EXIT_OK, EXIT_USAGE, main
from spark_purge.config import load
from spark_purge.kafka import open_client
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import audit_rows, log_starts, new_admin, purge_config_dict
from tests.integration.secure_helpers import (
    KEY_PASSWORD_ENV,
    PURGER_PASSWORD,
    SCRAM_PASSWORD_ENV,
    LogCollector,
    purgeable_topic,
    root_logs,
    tls_security,
)

GROUP = "tls-billing"
RECORDS = [30, 30]
COMMITTED = [12, 25]
# A failing handshake must fail at once, not at the request timeout.
REQUEST_TIMEOUT_S = 20
FAIL_FAST_S = 8




@pytest.fixture(scope="module")
def mtls_topic(secure_cluster: LocalKafka) -> str:
    """A topic with data and a group's commits, which only ``User:purger-tls`` may purge."""
    topic = f"tls.mtls-{uuid.uuid4().hex[:6]}"
    purgeable_topic(secure_cluster, topic, GROUP, RECORDS, COMMITTED, f"User:{secure_cluster.tls_user}")
    return topic


def _config(tmp: Path, cluster: LocalKafka, listener: str, topic: str, name: str, **security: Any) -> Path:
    data = purge_config_dict(
        tmp / name,
        cluster.listener_bootstrap(listener),
        topic.replace(".", r"\."),
        [GROUP],
        client_id=f"spark-purge-{name}",
        request_timeout=f"{REQUEST_TIMEOUT_S}s",
        security=tls_security(cluster, listener, **security),
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def secrets_in_env(secure_cluster: LocalKafka, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """Sets the two password references; returns every secret the TLS runs must not leak."""
    monkeypatch.setenv(SCRAM_PASSWORD_ENV, PURGER_PASSWORD)
    monkeypatch.setenv(KEY_PASSWORD_ENV, secure_cluster.pki.key_password)
    return (PURGER_PASSWORD, *secure_cluster.pki.passwords)


@pytest.fixture
def log_records() -> Iterator[LogCollector]:
    with root_logs() as records:
        yield records


def test_purge_through_the_mutual_tls_listener(
    spark: SparkSession,
    secure_cluster: LocalKafka,
    mtls_topic: str,
    secrets_in_env: tuple[str, ...],
    log_records: LogCollector,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cfg = _config(tmp_path, secure_cluster, "MTLS", mtls_topic, "mtls")
    code = main(["-v", "run", "-c", str(cfg)])
    out = capfd.readouterr()
    assert code == EXIT_OK, out.err[-3000:]

    admin = new_admin(secure_cluster.bootstrap_servers, **secure_cluster.client_kwargs())
    try:
        assert log_starts(admin, mtls_topic, len(RECORDS)) == COMMITTED
    finally:
        admin.close()
    audit = str(tmp_path / "mtls" / "audit")
    outcomes = [
        (r["topic"], r["partition"], r["status"], r["cutoff"], r["low_watermark"], r["records_deleted"])
        for r in audit_rows(spark, audit)
    ]
    assert outcomes == [(mtls_topic, p, "deleted", c, c, c) for p, c in enumerate(COMMITTED)]
    intents = [
        (r["topic"], r["partition"], r["cutoff"], r["binding_constraint"], r["blocking_group"])
        for r in audit_rows(spark, audit, "intent")
    ]
    assert intents == [(mtls_topic, p, c, "group", GROUP) for p, c in enumerate(COMMITTED)]

    # No password anywhere (and the checks are not vacuous: the run logged and audited).
    assert any("DeleteRecords" in line for line in log_records.lines)
    audit_text = [json.dumps(r, default=str) for r in audit_rows(spark, audit, None)]
    assert audit_text
    for secret in secrets_in_env:
        assert secret not in out.out and secret not in out.err, "a password on stdout/stderr"
        assert [line for line in log_records.lines if secret in line] == [], "a password in a log record"
        assert not any(secret in row for row in audit_text), "a password in an audit row"
        leaked = [str(p) for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
        assert leaked == [], f"a password in {leaked}"
        for node_id in secure_cluster.node_ids:
            for log_name in ("server.log", "stdout.log"):
                text = (secure_cluster.node(node_id).directory / log_name).read_text(errors="replace")
                assert secret not in text, f"a password in the broker's {log_name}"


@pytest.mark.parametrize(
    ("case", "listener", "security", "named"),
    [
        ("wrong CA", "SCRAM_TLS", {"ssl_cafile": "other_ca"}, ["kafka.security.ssl_cafile", "not signed by a CA in", "other-ca.pem"]),
        ("expired client certificate", "MTLS", {"ssl_certfile": "client_expired_cert", "ssl_keyfile": "client_expired_key"},
         ["kafka.security.ssl_certfile", "client-expired.pem", "it expired on"]),
        ("expired broker certificate", "TLS_EXPIRED", {}, ["the broker's certificate has expired", "ssl.keystore.location"]),
        ("hostname mismatch", "TLS_WRONG_HOST", {}, ["kafka.security.ssl_check_hostname", "not valid for 127.0.0.1"]),
    ],
)
def test_certificate_failure_names_the_setting_and_fails_fast(
    case: str,
    listener: str,
    security: dict[str, str],
    named: list[str],
    spark: SparkSession,
    secure_cluster: LocalKafka,
    mtls_topic: str,
    secrets_in_env: tuple[str, ...],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    files = {key: str(getattr(secure_cluster.pki, value)) for key, value in security.items()}
    cfg = _config(tmp_path, secure_cluster, listener, mtls_topic, "bad", **files)
    started = time.monotonic()
    code = main(["plan", "-c", str(cfg)])
    took = time.monotonic() - started
    out = capfd.readouterr()
    assert code == EXIT_KAFKA, out.err[-3000:]
    (line,) = [line for line in out.err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: Kafka: TLS handshake with 127.0.0.1:"), line
    for words in named:
        assert words in line, f"{case}: {words!r} not in {line!r}"
    assert took < FAIL_FAST_S, f"{case}: {took:.1f} s (the request timeout is {REQUEST_TIMEOUT_S} s)"
    for secret in secrets_in_env:
        assert secret not in out.out + out.err

    if case == "hostname mismatch":  # the named setting is the one at fault: off, the same listener works
        relaxed = load(str(_config(tmp_path, secure_cluster, listener, mtls_topic, "relaxed", ssl_check_hostname=False)))
        with open_client(relaxed) as client:
            assert sorted(p.partition for p in client.snapshot().partitions if p.topic == mtls_topic) == [0, 1]


def test_wrong_key_password_is_a_config_error_naming_it(
    secure_cluster: LocalKafka,
    mtls_topic: str,
    secrets_in_env: tuple[str, ...],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key password that does not decrypt ``ssl_keyfile`` fails before any connection (exit 2)."""
    wrong = f"wrong-key-pw-{uuid.uuid4().hex}"
    monkeypatch.setenv(KEY_PASSWORD_ENV, wrong)
    cfg = _config(tmp_path, secure_cluster, "MTLS", mtls_topic, "wrongpw")
    code = main(["plan", "-c", str(cfg)])
    out = capfd.readouterr()
    assert code == EXIT_USAGE, out.err[-3000:]
    assert "kafka.security.ssl_password: does not decrypt the private key in kafka.security.ssl_keyfile" in out.err
    for secret in (wrong, *secrets_in_env):
        assert secret not in out.out + out.err
