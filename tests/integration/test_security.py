"""Security on a real broker: SASL/SCRAM-SHA-512 over TLS + StandardAuthorizer with ACLs.

The purger connects through the ``SCRAM_TLS`` listener (SASL_SSL, the test CA in
``ssl_cafile``), as production clusters are reached; ``admin`` sets things up on CLIENT
(SASL_PLAINTEXT). One secured single-node cluster (``secure_cluster``, shared with the other security tests): ``admin`` (super user, sets things up) and
``purger`` (the purge principal). The purger has exactly the ACLs the design lists — Topic
Describe / Delete / DescribeConfigs, Group Describe, Cluster Describe — except Topic Delete on
one topic. Its password reaches spark-purge only as a secret reference ``{env: ...}``.

The checks: the denied topic's partitions are recorded as TOPIC_AUTHORIZATION_FAILED while the
other topic is purged, and the password string appears nowhere — not in a log record, not in
the broker logs, not on stdout/stderr (Spark's JVM included: capfd captures file descriptors),
not in a plan row, an exception message, an audit row or any file the run left on disk (nor
are the broker keystore's and the TLS client key's passwords).
"""
from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import KafkaError as KafkaPythonError
from pyspark.sql import SparkSession

from spark_purge.cli import EXIT_FAILED, EXIT_KAFKA, EXIT_OK, EXIT_USAGE, main
from spark_purge.config import load
from spark_purge.errors import AuthorizationError
from spark_purge.kafka import open_client
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import commit, create_topics, log_starts, new_admin, produce
from tests.integration.secure_helpers import NOCLUSTER_PASSWORD, PURGER_PASSWORD, root_logs

PASSWORD_ENV = "SPARK_PURGE_TEST_PURGER_PASSWORD"
WRONG_PASSWORD = f"wrong-pw-{uuid.uuid4().hex}"
GROUP = "sec-billing"
PARTITIONS = 2
RECORDS = 50
COMMITTED = [30, 40]




@pytest.fixture(scope="module")
def secure_topics(secure_cluster: LocalKafka) -> Iterator[tuple[str, str]]:
    """(allowed, denied) topics with data, a group's commits and the purger's ACLs."""
    suffix = uuid.uuid4().hex[:6]
    allowed, denied = f"sec.allowed-{suffix}", f"sec.denied-{suffix}"
    servers = secure_cluster.bootstrap_servers
    admin = new_admin(servers, **secure_cluster.client_kwargs())
    try:
        create_topics(admin, {t: PARTITIONS for t in (allowed, denied)})
        for topic in (allowed, denied):
            produce(servers, topic, [RECORDS] * PARTITIONS, **secure_cluster.client_kwargs())
        commit(admin, GROUP, {(topic, p): o for topic in (allowed, denied) for p, o in enumerate(COMMITTED)})

        def allow(rtype: ResourceType, name: str, op: ACLOperation) -> ACL:
            return ACL("User:purger", "*", op, ACLPermissionType.ALLOW, ResourcePattern(rtype, name))

        acls = [allow(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.DESCRIBE)]
        acls.append(allow(ResourceType.GROUP, GROUP, ACLOperation.DESCRIBE))
        for topic in (allowed, denied):
            acls += [allow(ResourceType.TOPIC, topic, ACLOperation.DESCRIBE)]
            acls += [allow(ResourceType.TOPIC, topic, ACLOperation.DESCRIBE_CONFIGS)]
        acls.append(allow(ResourceType.TOPIC, allowed, ACLOperation.DELETE))  # not on `denied`
        created = admin.create_acls(acls)
        assert created["failed"] == [] and len(created["succeeded"]) == len(acls), created
        yield allowed, denied
    finally:
        admin.close()


def _log_starts(cluster: LocalKafka, topic: str, partitions: int = PARTITIONS) -> list[int]:
    admin = new_admin(cluster.bootstrap_servers, **cluster.client_kwargs())
    try:
        return log_starts(admin, topic, partitions)
    finally:
        admin.close()


def _write_config(tmp: Path, cluster: LocalKafka, topics: tuple[str, str]) -> Path:
    """The purger's config, through the SCRAM_TLS listener (SASL_SSL, trusting the test CA)."""
    data = {
        "kafka": {
            "bootstrap_servers": cluster.listener_bootstrap("SCRAM_TLS"),
            "client_id": "spark-purge-sec-test",
            "request_timeout": "10s",
            "delete_timeout": "10s",
            "security": {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": "purger",
                "sasl_password": {"env": PASSWORD_ENV},
                "ssl_cafile": str(cluster.pki.ca),
            },
        },
        "defaults": {"min_retention": "0s", "min_step": 1},
        "rules": [{"name": "sec", "topics": "|".join(t.replace(".", r"\.") for t in topics), "required_groups": [GROUP]}],
        "audit": {"path": str(tmp / "audit")},
        "stream": {"checkpoint_location": str(tmp / "checkpoint"), "trigger_interval": "1s"},
    }
    path = tmp / "secure.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _files_containing(root: Path, secret: str) -> list[str]:
    needle = secret.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_purger_without_delete_acl_is_recorded_and_its_password_leaks_nowhere(
    spark: SparkSession,
    secure_cluster: LocalKafka,
    secure_topics: tuple[str, str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed, denied = secure_topics
    cfg_path = _write_config(tmp_path, secure_cluster, secure_topics)
    assert PURGER_PASSWORD not in cfg_path.read_text()  # only the reference is in the file
    monkeypatch.setenv(PASSWORD_ENV, PURGER_PASSWORD)
    with root_logs() as records:
        plan_code = main(["-v", "plan", "-c", str(cfg_path), "--all", "--json"])
        plan_out = capfd.readouterr()
        run_code = main(["-v", "run", "-c", str(cfg_path)])
        run_out = capfd.readouterr()
        # A wrong password: the client cannot authenticate; the message must not echo it.
        monkeypatch.setenv(PASSWORD_ENV, WRONG_PASSWORD)
        wrong_code = main(["plan", "-c", str(cfg_path), "--bootstrap-servers", secure_cluster.listener_bootstrap("SCRAM_TLS")])
        wrong_out = capfd.readouterr()
        monkeypatch.delenv(PASSWORD_ENV)
        unset_code = main(["plan", "-c", str(cfg_path)])
        unset_out = capfd.readouterr()
        # The CLI keeps kafka-python at WARNING; the Kafka layer on its own, at DEBUG, must not
        # log the password either (connection setup, SASL handshake, requests, errors).
        monkeypatch.setenv(PASSWORD_ENV, PURGER_PASSWORD)
        kafka_logger = logging.getLogger("kafka")
        kafka_logger.setLevel(logging.DEBUG)
        before_debug = len(records.lines)
        with open_client(load(str(cfg_path))) as client:
            snap = client.snapshot()
            direct = client.delete_records({(denied, 0): 1, (allowed, 0): COMMITTED[0]}, timeout_ms=10_000)
        debug_lines = len(records.lines) - before_debug
        debug_out = capfd.readouterr()

    # -- the plan: JSON lines, one per partition, both topics actionable up to the commits.
    assert plan_code == EXIT_OK, plan_out.err[-3000:]
    plan_rows = [json.loads(line) for line in plan_out.out.splitlines() if line.startswith("{")]
    assert sorted((r["topic"], r["partition"], r["cutoff"]) for r in plan_rows) == sorted(
        (t, p, COMMITTED[p]) for t in (allowed, denied) for p in range(PARTITIONS)
    )

    # -- the run: exit 1 (a partition failed); the allowed topic purged, the denied one untouched.
    assert run_code == EXIT_FAILED, run_out.err[-3000:]
    assert _log_starts(secure_cluster, allowed) == COMMITTED
    assert _log_starts(secure_cluster, denied) == [0] * PARTITIONS
    audit = spark.read.format("delta").load(str(tmp_path / "audit"))
    outcomes = {(r["topic"], r["partition"]): r.asDict() for r in audit.where("record_type = 'outcome'").collect()}
    assert set(outcomes) == {(t, p) for t in (allowed, denied) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        ok, no = outcomes[(allowed, p)], outcomes[(denied, p)]
        assert (ok["status"], ok["low_watermark"], ok["records_deleted"]) == ("deleted", COMMITTED[p], COMMITTED[p])
        assert no["status"] == "failed" and no["error"].startswith("TOPIC_AUTHORIZATION_FAILED"), no
        assert no["records_deleted"] in (0, None) and no["low_watermark"] in (0, None)
    assert "TOPIC_AUTHORIZATION_FAILED" in run_out.err  # the operator sees it too

    # -- bad credentials: exit 3 (cluster not usable) or 2 (secret unset), and a clear message.
    assert wrong_code == EXIT_KAFKA, wrong_out.err[-3000:]
    assert secure_cluster.listener_bootstrap("SCRAM_TLS").split(",")[0] in wrong_out.err
    assert unset_code == EXIT_USAGE and PASSWORD_ENV in unset_out.err and "sasl_password" in unset_out.err

    # -- the password appears nowhere.
    # ... nor the broker's keystore password, nor the TLS client key's.
    for secret in (PURGER_PASSWORD, WRONG_PASSWORD, *secure_cluster.pki.passwords):
        for name, text in (
            ("plan stdout", plan_out.out), ("plan stderr", plan_out.err),
            ("run stdout", run_out.out), ("run stderr", run_out.err),
            ("wrong-password stdout", wrong_out.out), ("wrong-password stderr", wrong_out.err),
            ("unset stderr", unset_out.err),
        ):
            assert secret not in text, f"password leaked on {name}"
        leaked = [line for line in records.lines if secret in line]
        assert leaked == [], f"password in log records: {leaked[:3]}"
        audit_text = [json.dumps(r.asDict(recursive=True), default=str) for r in audit.collect()]
        assert not any(secret in row for row in audit_text), "password in an audit row"
        assert _files_containing(tmp_path, secret) == [], "password in a file of the audit or checkpoint"
        for node_id in secure_cluster.node_ids:
            node_dir = secure_cluster.node(node_id).directory
            for log_name in ("server.log", "stdout.log"):
                log_file = node_dir / log_name
                assert log_file.exists()
                assert secret not in log_file.read_text(errors="replace"), f"password in broker {log_name}"
        assert secret not in debug_out.out + debug_out.err
        assert secret not in repr(snap) and secret not in repr(direct)
    # The handler did see the runs' logging (so "no leak" above is not vacuous).
    assert any("DeleteRecords" in line for line in records.lines)
    assert debug_lines > 20, debug_lines
    assert [(o.partition, o.error) for o in direct if o.topic == denied] == [(0, "TOPIC_AUTHORIZATION_FAILED")]


def test_secured_listener_rejects_a_client_without_credentials(secure_cluster: LocalKafka) -> None:
    """The launcher really enforces SASL: a PLAINTEXT client gets no metadata."""
    with pytest.raises(KafkaPythonError):
        KafkaAdminClient(bootstrap_servers=secure_cluster.bootstrap_servers, request_timeout_ms=3000, api_version_auto_timeout_ms=3000).describe_cluster()


def test_group_the_purger_may_not_describe_blocks_discovered_topics(
    secure_cluster: LocalKafka,
    secure_topics: tuple[str, str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ListGroups (Cluster Describe) shows a group whose OffsetFetch the purger is denied: its
    commits are unknown, so a rule that discovers its groups must not purge past them blindly."""
    topic, hidden = f"sec.blind-{uuid.uuid4().hex[:6]}", f"sec-hidden-{uuid.uuid4().hex[:6]}"
    admin = new_admin(secure_cluster.bootstrap_servers, **secure_cluster.client_kwargs())
    try:
        create_topics(admin, {topic: 1})
        produce(secure_cluster.bootstrap_servers, topic, [RECORDS], **secure_cluster.client_kwargs())
        commit(admin, GROUP, {(topic, 0): 45})  # GROUP: readable
        commit(admin, hidden, {(topic, 0): 10})
        allow = [
            ACL("User:purger", "*", op, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, topic))
            for op in (ACLOperation.DESCRIBE, ACLOperation.DESCRIBE_CONFIGS, ACLOperation.DELETE)
        ]
        assert admin.create_acls(allow)["failed"] == []  # nothing on the group `hidden`
    finally:
        admin.close()
    monkeypatch.setenv(PASSWORD_ENV, PURGER_PASSWORD)

    def plan(exclude: list[str]) -> dict[str, object]:
        cfg = yaml.safe_load(_write_config(tmp_path, secure_cluster, secure_topics).read_text())
        cfg["rules"] = [{"name": "blind", "topics": topic.replace(".", r"\."), "exclude_groups": exclude}]
        path = tmp_path / "blind.yaml"
        path.write_text(yaml.safe_dump(cfg))
        code = main(["plan", "-c", str(path), "--all", "--json"])
        out = capfd.readouterr()
        assert code == EXIT_OK, out.err[-3000:]
        (row,) = [json.loads(line) for line in out.out.splitlines() if line.startswith("{")]
        return row  # type: ignore[no-any-return]

    # Groups other tests on this shared cluster left behind (the purger may not read those either)
    # would block too: the rule sees only this test's two groups.
    others = f"(?!{re.escape(hidden)}$)(?!{re.escape(GROUP)}$).*"
    blind = plan(exclude=[others])
    assert (blind["binding_constraint"], blind["blocking_group"], blind["cutoff"], blind["actionable"]) == (
        "group_unreadable", hidden, None, False
    ), blind
    assert f"{hidden} (GROUP_AUTHORIZATION_FAILED)" in str(blind["detail"])

    # Excluded from the rule, the hidden group no longer matters: the readable group binds.
    seen = plan(exclude=[others, "sec-hidden-.*"])
    assert (seen["binding_constraint"], seen["blocking_group"], seen["cutoff"], seen["actionable"]) == (
        "group", GROUP, 45, True
    ), seen
    assert _log_starts(secure_cluster, topic, 1) == [0]  # plan changes nothing


def test_principal_without_cluster_describe_is_refused_with_the_reason(
    secure_cluster: LocalKafka, secure_topics: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Cluster Describe, ListGroups hides every group the principal may not describe —
    silently. The snapshot refuses to plan from such a list and says which ACL is missing."""
    allowed, _ = secure_topics
    admin = KafkaAdminClient(bootstrap_servers=secure_cluster.bootstrap_servers, **secure_cluster.client_kwargs())
    try:
        acls = [
            ACL("User:nocluster", "*", op, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, allowed))
            for op in (ACLOperation.DESCRIBE, ACLOperation.DESCRIBE_CONFIGS, ACLOperation.DELETE)
        ]
        acls.append(ACL("User:nocluster", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.GROUP, GROUP)))
        assert admin.create_acls(acls)["failed"] == []
    finally:
        admin.close()
    cfg = yaml.safe_load(_write_config(tmp_path, secure_cluster, secure_topics).read_text())
    cfg["kafka"]["security"]["sasl_username"] = "nocluster"
    path = tmp_path / "nocluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv(PASSWORD_ENV, NOCLUSTER_PASSWORD)

    with open_client(load(str(path))) as client, pytest.raises(AuthorizationError) as denied:
        client.snapshot()
    assert "Describe on the cluster denied" in str(denied.value) and "Cluster Describe" in str(denied.value)
    assert NOCLUSTER_PASSWORD not in str(denied.value)
