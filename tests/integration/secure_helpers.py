"""The SCRAM users of the one secured cluster a test run shares (``secure_cluster`` in conftest),
and what the leak checks share: a purge config's TLS security section, a topic only one
principal may purge, and ``spark-purge`` in a driver subprocess of its own with Spark's event log
on (the event log and every file of the run then grepped for secrets).

Distinctive passwords, so a leak cannot hide behind a common substring. ``admin`` is the super
user; ``purger`` the purge principal (its ACLs are set per test); ``nocluster`` lacks Cluster
Describe.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import commit_topic, create_topics, new_admin, produce

PURGER_PASSWORD = f"purger-pw-{uuid.uuid4().hex}"
ADMIN_PASSWORD = f"admin-pw-{uuid.uuid4().hex}"
NOCLUSTER_PASSWORD = f"nocluster-pw-{uuid.uuid4().hex}"
SCRAM_USERS = {"admin": ADMIN_PASSWORD, "purger": PURGER_PASSWORD, "nocluster": NOCLUSTER_PASSWORD}

#: Where :func:`tls_security`'s ``{env: ...}`` references point (a test sets them).
SCRAM_PASSWORD_ENV = "SPARK_PURGE_TEST_TLS_SCRAM_PASSWORD"
KEY_PASSWORD_ENV = "SPARK_PURGE_TEST_TLS_KEY_PASSWORD"


class LogCollector(logging.Handler):
    """Every log record it is attached to, formatted with its arguments and tracebacks
    (``-p no:logging`` safe): where the leak checks look for secrets."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # includes exc_info tracebacks


@contextmanager
def root_logs() -> Iterator[LogCollector]:
    """A :class:`LogCollector` on the root logger at DEBUG for the block (the ``kafka`` logger
    back at WARNING after it, as the CLI keeps it); the root level restored."""
    records, root = LogCollector(), logging.getLogger()
    old_level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logging.getLogger("kafka").setLevel(logging.WARNING)
        root.removeHandler(records)
        root.setLevel(old_level)


def tls_security(cluster: LocalKafka, listener: str, **override: Any) -> dict[str, Any]:
    """A config's ``kafka.security`` for ``listener`` of ``cluster``: ``SCRAM_TLS`` (SASL_SSL as
    ``purger``) or else mutual TLS with the test client certificate; passwords as ``{env: ...}``
    references (:data:`SCRAM_PASSWORD_ENV`, :data:`KEY_PASSWORD_ENV`) unless ``override`` says."""
    pki = cluster.pki
    if listener == "SCRAM_TLS":
        security: dict[str, Any] = {
            "protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "purger",
            "sasl_password": {"env": SCRAM_PASSWORD_ENV},
            "ssl_cafile": str(pki.ca),
        }
    else:
        security = {
            "protocol": "SSL",
            "ssl_cafile": str(pki.ca),
            "ssl_certfile": str(pki.client_cert),
            "ssl_keyfile": str(pki.client_key),
            "ssl_password": {"env": KEY_PASSWORD_ENV},
        }
    return {**security, **override}


def purgeable_topic(
    cluster: LocalKafka, topic: str, group: str, records: Sequence[int], committed: Sequence[int], principal: str
) -> None:
    """Create ``topic`` (one partition per ``records`` entry) with data and ``group``'s commits,
    ``principal`` (e.g. ``User:purger``) the only one with the ACLs a purge of it needs."""
    servers = cluster.bootstrap_servers
    admin = new_admin(servers, **cluster.client_kwargs())
    try:
        create_topics(admin, {topic: len(records)})
        produce(servers, topic, list(records), **cluster.client_kwargs())
        commit_topic(admin, group, topic, list(committed))

        def allow(rtype: ResourceType, name: str, op: ACLOperation) -> ACL:
            return ACL(principal, "*", op, ACLPermissionType.ALLOW, ResourcePattern(rtype, name))

        acls = [allow(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.DESCRIBE)]
        acls += [allow(ResourceType.GROUP, group, ACLOperation.DESCRIBE)]
        acls += [allow(ResourceType.TOPIC, topic, op) for op in (ACLOperation.DESCRIBE, ACLOperation.DESCRIBE_CONFIGS, ACLOperation.DELETE)]
        created = admin.create_acls(acls)
        assert created["failed"] == [] and len(created["succeeded"]) == len(acls), created
    finally:
        admin.close()


# `spark-purge` once per argv list (one session: the first run builds it), then the session
# stopped so the event log is complete; main's codes printed.
DRIVER = """
import json, sys
from pyspark.sql import SparkSession
from spark_purge.cli import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
SparkSession.getActiveSession().stop()
print("EXIT_CODES", *codes, flush=True)
"""


@dataclass(frozen=True)
class DriverRun:
    """What :func:`run_driver` saw: the process's exit code, ``main``'s code per run (empty if
    the driver died before printing them) and its output."""

    returncode: int
    codes: list[int]
    stdout: str
    stderr: str


def run_driver(cwd: Path, env: Mapping[str, str], runs: Sequence[Sequence[str]], timeout_s: float) -> DriverRun:
    """``spark-purge`` with each argv of ``runs`` in one driver process of its own, in its own
    process group (its JVM and any executors join it), reaped by its id; its output goes to
    ``driver.out`` / ``driver.err`` under ``cwd`` (for the leak checks to grep with the rest)."""
    out_path, err_path = cwd / "driver.out", cwd / "driver.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps([list(argv) for argv in runs])],
            cwd=cwd, env=dict(env), stdout=out, stderr=err, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            proc.wait(timeout=timeout_s)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # anything the driver left behind
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
    stdout = out_path.read_text()
    printed = [line.split()[1:] for line in stdout.splitlines() if line.startswith("EXIT_CODES")]
    return DriverRun(proc.returncode, [int(c) for c in printed[-1]] if printed else [], stdout, err_path.read_text())


def event_log_properties(events_dir: Path, conf: Mapping[str, str]) -> str:
    """A ``--properties-file``'s text: Spark's event log on, into ``events_dir``, uncompressed
    and in one file (the leak checks read plain text; Spark 4 defaults to zstd); and ``conf``."""
    lines = [
        "spark.eventLog.enabled true",
        "spark.eventLog.compress false",
        "spark.eventLog.rolling.enabled false",
        f"spark.eventLog.dir file://{events_dir}",
    ]
    return "\n".join(lines + [f"{key} {value}" for key, value in conf.items()]) + "\n"


def event_log(events_dir: Path, app_prefix: str) -> list[dict[str, Any]]:
    """The events of the one complete application log in ``events_dir``, whose application id
    starts with ``app_prefix`` (``local-`` on a ``local[n]`` master, ``app-`` on a cluster's)."""
    files = [p for p in events_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    assert len(files) == 1 and files[0].name.startswith(app_prefix) and not files[0].name.endswith(".inprogress"), files
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def files_containing(root: Path, needle: str) -> list[str]:
    """Every regular file under ``root`` whose bytes contain ``needle`` (symlinks not followed)."""
    data = needle.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and data in p.read_bytes()]
