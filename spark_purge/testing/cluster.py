"""A local Apache Kafka cluster (KRaft, combined broker+controller nodes) for tests, the demo
and benchmarks.

The broker jars are a folder named by ``jars_dir`` or, by default, by the environment variable
``SPARK_PURGE_KAFKA_JARS``; ``./dev.sh`` resolves them from Maven Central into the checkout's
``.cache/jars/kafka`` and exports the variable (the launcher never guesses a repository
layout). Every node binds 127.0.0.1 on free ports, lives in a temporary
directory, and is stopped by its own PID: on ``stop()``, on leaving the ``with`` block, at
interpreter exit, and — because each JVM is started with ``PR_SET_PDEATHSIG`` — even when the
Python process that started it is killed outright.

    with LocalKafka(nodes=3) as kafka:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        kafka.kill_node(1)      # SIGKILL one node (fault tests)
        kafka.start_node(1)     # and bring it back on the same ports and data

Broker logs are kept in ``<workdir>/node-<id>/server.log``; ``keep_logs_on_failure`` leaves the
directory in place when the block exits with an exception. A ``workdir`` given by the caller is
kept; a later ``LocalKafka`` on it starts the same cluster again on its data (its cluster id
read back from the nodes' ``meta.properties``), on new ports: the invariant checker's resumed
runs do this.

Security (``scram_users``): the client listener speaks SASL_PLAINTEXT with SCRAM-SHA-512, the
``StandardAuthorizer`` denies whatever no ACL allows, and every user's SCRAM credential is
written into the metadata log at format time (``StorageTool format --add-scram``), so it exists
before any broker starts. ``super_user`` (default ``admin``) is the brokers' own inter-broker
principal and a super user; :meth:`LocalKafka.client_kwargs` connects as it, and
``client_kwargs(user)`` as any other user::

    with LocalKafka(scram_users={"admin": "a-pw", "purger": "p-pw"}) as kafka:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers, **kafka.client_kwargs())
        purger_kwargs = kafka.client_kwargs("purger")

Tiered storage (``tiered=True``): every broker runs the remote log manager with Kafka's own
``LocalTieredStorage`` (a RemoteStorageManager keeping remote segments in
:attr:`LocalKafka.remote_storage_dir`, from the 4.3.1 storage test jar named by
``SPARK_PURGE_TIERED_STORAGE_JARS``, loaded as a plugin through
``remote.log.storage.manager.class.path`` together with ``java/LogContext.java``, a one-class
shim for the logger class Kafka 4.4 moved) and the topic-based RemoteLogMetadataManager; the
remote log manager's tasks run every 500 ms. Topics opt in with ``remote.storage.enable=true``
and a short ``local.retention.ms``/``local.retention.bytes``; rolled segments then move to the
remote store within a second or two::

    with LocalKafka(tiered=True) as kafka:
        files = kafka.remote_segments("topic", 0)   # remote segment files, by start offset

TLS (``tls=True``, with ``scram_users``): every node gets four more listeners, with
certificates made at start-up by :func:`spark_purge.testing.tls.make_test_pki` (in
``<workdir>/tls``; :attr:`LocalKafka.pki` has their paths and passwords). ``SCRAM_TLS`` speaks
SASL_SSL (the same SCRAM users, over TLS); ``MTLS`` speaks SSL and requires a client certificate
signed by the test CA, whose ``CN`` becomes the principal (``User:purger-tls`` by default,
``tls_user``; ``ssl.principal.mapping.rules``); ``TLS_WRONG_HOST`` and ``TLS_EXPIRED`` are mTLS
listeners whose broker certificate is wrong on purpose (valid only for ``kafka.invalid``;
expired yesterday), for the tests of a client's hostname check and of an expired certificate.
Each listener has its own port; :meth:`LocalKafka.listener_bootstrap` gives its bootstrap
servers and ``client_kwargs(user, listener=...)`` the kafka-python kwargs to connect to it
(inter-broker traffic stays on ``CLIENT``)::

    with LocalKafka(scram_users={"admin": "a-pw", "purger": "p-pw"}, tls=True) as kafka:
        servers = kafka.listener_bootstrap("MTLS")
        admin = KafkaAdminClient(bootstrap_servers=servers, **kafka.client_kwargs(listener="MTLS"))

The controller listener stays PLAINTEXT and binds 127.0.0.1 only; its principal is
``User:ANONYMOUS``, which therefore is a super user too (brokers register and heartbeat with
the controller over it; without it the authorizer would deny ``CLUSTER_ACTION``).
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from spark_purge.testing.errors import LocalStackError
from spark_purge.testing.javac import JAVA_DIR, compiled_classes

if TYPE_CHECKING:  # tls.py needs `cryptography` (a test dependency): imported only for tls=True
    from spark_purge.testing.tls import TestPki

log = logging.getLogger(__name__)

KAFKA_JARS_ENV = "SPARK_PURGE_KAFKA_JARS"
TIERED_STORAGE_JARS_ENV = "SPARK_PURGE_TIERED_STORAGE_JARS"
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
TOPIC_BASED_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
# LocalTieredStorage keeps its files under <dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/.
_LTS_ROOT = "kafka-tiered-storage"
_PR_SET_PDEATHSIG = 1
SCRAM_MECHANISM = "SCRAM-SHA-512"
_SCRAM_FORBIDDEN = ",[]=\"' \\"  # StorageTool / JAAS separators and quotes
CLIENT_LISTENER = "CLIENT"
#: The listeners ``tls=True`` adds beside CLIENT: name -> security protocol.
TLS_LISTENERS = {"SCRAM_TLS": "SASL_SSL", "MTLS": "SSL", "TLS_WRONG_HOST": "SSL", "TLS_EXPIRED": "SSL"}

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def kafka_jars_dir(jars_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder with the broker's jars: ``jars_dir``, else ``$SPARK_PURGE_KAFKA_JARS``.

    Raises LocalStackError naming the variable when neither is given or the folder holds no
    ``kafka_2.13-*.jar``.
    """
    named = jars_dir or os.environ.get(KAFKA_JARS_ENV)
    if not named:
        raise LocalStackError(
            f"{KAFKA_JARS_ENV} is not set: point it at a folder holding the Kafka broker jars "
            "(kafka_2.13-*.jar and their dependencies), or pass jars_dir; ./dev.sh resolves them "
            f"from Maven Central into .cache/jars/kafka and exports {KAFKA_JARS_ENV} itself"
        )
    folder = Path(named)
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise LocalStackError(
            f"no Kafka broker jars (kafka_2.13-*.jar) in {folder} "
            f"({'jars_dir' if jars_dir else KAFKA_JARS_ENV}): run `./dev.sh setup`, which resolves "
            "them from Maven Central"
        )
    return folder


def tiered_storage_jar(jars_dir: str | os.PathLike[str] | None = None) -> Path:
    """The jar holding ``LocalTieredStorage``: in ``jars_dir``, else ``$SPARK_PURGE_TIERED_STORAGE_JARS``.

    Raises LocalStackError naming the variable when neither is given or holds no storage test jar.
    """
    named = jars_dir or os.environ.get(TIERED_STORAGE_JARS_ENV)
    if not named:
        raise LocalStackError(
            f"{TIERED_STORAGE_JARS_ENV} is not set: point it at a folder holding Kafka's storage test jar "
            f"(kafka-storage-*-test.jar, with LocalTieredStorage), or pass tiered_jars_dir; ./dev.sh resolves it "
            f"into .cache/jars/tiered-storage and exports {TIERED_STORAGE_JARS_ENV} itself"
        )
    jars = sorted(Path(named).glob("kafka-storage-*-test.jar"))
    if not jars:
        raise LocalStackError(
            f"no kafka-storage-*-test.jar in {named} "
            f"({'tiered_jars_dir' if jars_dir else TIERED_STORAGE_JARS_ENV}): run `./dev.sh setup`"
        )
    return jars[-1]


def free_port() -> int:
    """A port free on 127.0.0.1 now, below the kernel's ephemeral range when it leaves room (the
    range every outgoing connection takes its local port from: a port picked there can be taken
    by any client's connection before the broker binds it, and was, once: "Address already in
    use"). ``LocalKafka.start`` also moves a cluster to new ports when a node could not bind."""
    low = _ephemeral_low()
    for _ in range(100 if low > 11_000 else 0):
        port = random.randint(10_000, low - 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (Linux; 32768 when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# A node's log line when one of its listeners' ports was taken before it bound it.
_PORT_TAKEN = "Address already in use"


def _port_taken(node: KafkaNode) -> bool:
    """Whether a node's logs say a port was taken: its stdout and its server log both, whole
    (``log_tail`` reads one of them, and the bind error can be in the other)."""
    return any(_PORT_TAKEN in f.read_text(errors="replace") for f in (node.directory / "stdout.log", node.log_file) if f.exists())


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel SIGKILLs the JVM if our process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _port_open(address: str, timeout_s: float = 0.5) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    # Ports of the listeners beside CLIENT (tls=True): listener name -> port.
    listener_ports: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def listener_address(self, listener: str) -> str:
        port = self.port if listener == CLIENT_LISTENER else self.listener_ports.get(listener)
        if port is None:
            raise LocalStackError(
                f"node {self.node_id} has no listener {listener!r}; it has {[CLIENT_LISTENER, *self.listener_ports]}"
            )
        return f"127.0.0.1:{port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class LocalKafka:
    """1 or 3 (any n >= 1) KRaft nodes on 127.0.0.1. Use as a context manager."""

    nodes: int = 1
    broker_config: Mapping[str, str] = field(default_factory=dict)
    workdir: str | os.PathLike[str] | None = None
    heap: str = "512m"
    start_timeout_s: float = 90.0
    keep_logs_on_failure: bool = True
    extra_jvm_args: tuple[str, ...] = ()
    # Listener security for the client listener; SASL tests override (see security tests).
    client_listener_protocol: str = "PLAINTEXT"
    jaas_config: str | None = None
    # SASL/SCRAM-SHA-512 + StandardAuthorizer when non-empty: user name -> password.
    scram_users: Mapping[str, str] = field(default_factory=dict)
    super_user: str = "admin"
    # Broker jars; None: $SPARK_PURGE_KAFKA_JARS (see kafka_jars_dir).
    jars_dir: str | os.PathLike[str] | None = None
    # Tiered storage with LocalTieredStorage (see the module docstring); its jar folder, None:
    # $SPARK_PURGE_TIERED_STORAGE_JARS (see tiered_storage_jar).
    tiered: bool = False
    tiered_jars_dir: str | os.PathLike[str] | None = None
    # The SCRAM_TLS, MTLS, TLS_WRONG_HOST and TLS_EXPIRED listeners (needs scram_users; see the
    # module docstring); tls_user is the principal of the test client certificate.
    tls: bool = False
    tls_user: str = "purger-tls"

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise LocalStackError(f"nodes must be >= 1, got {self.nodes}")
        if self.scram_users:
            if self.super_user not in self.scram_users:
                raise LocalStackError(
                    f"super_user {self.super_user!r} needs a password in scram_users (has {sorted(self.scram_users)})"
                )
            for name, password in self.scram_users.items():
                # StorageTool parses name=...,password=... : keep both free of its separators.
                if set(_SCRAM_FORBIDDEN) & set(name + password) or not name or not password:
                    raise LocalStackError(
                        f"scram_users[{name!r}]: expected a non-empty name and password "
                        f"free of the characters {_SCRAM_FORBIDDEN!r}"
                    )
            self.client_listener_protocol = "SASL_PLAINTEXT"
        self._jars = kafka_jars_dir(self.jars_dir)
        if self.tiered and self.scram_users:
            raise LocalStackError("tiered=True with scram_users: the remote log metadata manager's client has no SASL login here")
        if self.tls and not self.scram_users:
            raise LocalStackError("tls=True needs scram_users: the SCRAM_TLS listener authenticates them over TLS")
        self._pki: TestPki | None = None
        self._tiered_jar = tiered_storage_jar(self.tiered_jars_dir) if self.tiered else None
        self._tiered_shim: Path | None = None
        self._owns_workdir = self.workdir is None
        self._dir = Path(self.workdir or tempfile.mkdtemp(prefix="spark-purge-kafka-"))
        self._cluster_id = _formatted_cluster_id(self._dir) or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._nodes = [
            KafkaNode(
                i,
                free_port(),
                free_port(),
                self._dir / f"node-{i}",
                listener_ports={name: free_port() for name in TLS_LISTENERS} if self.tls else {},
            )
            for i in range(1, self.nodes + 1)
        ]
        self._started = False
        # Stop the JVMs at interpreter exit even if the caller forgot to.
        self._finalizer = weakref.finalize(self, _stop_processes, [n for n in self._nodes])
        atexit.register(self._finalizer)

    # ---- public surface -------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self._nodes)

    @property
    def directory(self) -> Path:
        return self._dir

    def listener_bootstrap(self, listener: str = CLIENT_LISTENER) -> str:
        """Bootstrap servers of one listener: ``CLIENT`` (:attr:`bootstrap_servers`) or, with
        ``tls=True``, one of :data:`TLS_LISTENERS`."""
        return ",".join(n.listener_address(listener) for n in self._nodes)

    @property
    def pki(self) -> TestPki:
        """The certificates and passwords of the TLS listeners (``tls=True``, once started)."""
        if self._pki is None:
            raise LocalStackError("pki: this cluster was not started with tls=True (or not started yet)")
        return self._pki

    @property
    def remote_storage_dir(self) -> Path:
        """LocalTieredStorage's ``dir``, shared by every node (tiered clusters only)."""
        if not self.tiered:
            raise LocalStackError("remote_storage_dir: this cluster was started without tiered=True")
        return self._dir / "remote-storage"

    def remote_segments(self, topic: str, partition: int) -> dict[int, Path]:
        """The remote segment files (``.log``) of one partition in LocalTieredStorage, by start offset."""
        root = self.remote_storage_dir / _LTS_ROOT
        found: dict[int, Path] = {}
        for folder in root.glob(f"{topic}-{partition}-*"):
            # Topic names may contain "-": the folder is <topic>-<partition>-<22-char topic id>.
            if folder.name[: -23] != f"{topic}-{partition}":
                continue
            for f in folder.glob("*.log"):
                found[int(f.name.split("-", 1)[0])] = f
        return dict(sorted(found.items()))

    def node(self, node_id: int) -> KafkaNode:
        for n in self._nodes:
            if n.node_id == node_id:
                return n
        raise LocalStackError(f"no node {node_id}; nodes are {[n.node_id for n in self._nodes]}")

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self._nodes]

    def pids(self) -> list[int]:
        return [n.process.pid for n in self._nodes if n.process is not None and n.running]

    def start(self) -> LocalKafka:
        """Format storage, start every node, wait until a real client sees all brokers."""
        if self._started:
            return self
        self._dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.tls and self._pki is None:
                from spark_purge.testing.tls import make_test_pki

                self._pki = make_test_pki(self._dir / "tls", self.tls_user)
            for n in self._nodes:
                self._write_config(n)
                self._format(n)
            for attempt in range(1, _START_ATTEMPTS + 1):
                for n in self._nodes:
                    self._spawn(n)
                try:
                    self.wait_ready(self._nodes)
                    break
                except LocalStackError:
                    taken = [n.node_id for n in self._nodes if _port_taken(n)]
                    if not taken or attempt == _START_ATTEMPTS:
                        raise
                    # A port picked free was taken before its node bound it: the whole
                    # cluster moves (the controllers' ports are in every node's config).
                    log.warning("Kafka node(s) %s could not bind a port (attempt %d): moving the cluster to new ports", taken, attempt)
                    _stop_processes(self._nodes)
                    self._move_ports(attempt)
        except BaseException:
            self.stop()
            raise
        self._started = True
        log.info("local Kafka up: %s (%s)", self.bootstrap_servers, self._dir)
        return self

    def _move_ports(self, attempt: int) -> None:
        """New free ports for every node, written into every node's config; the logs of start
        ``attempt`` are kept beside as ``<log>.port-clash-<attempt>``."""
        for n in self._nodes:
            n.port, n.controller_port = free_port(), free_port()
            n.listener_ports = {name: free_port() for name in n.listener_ports}
            # A fresh log: the next attempt's clash check reads only its own lines.
            for log_file in (n.directory / "stdout.log", n.log_file):
                if log_file.exists():
                    log_file.rename(log_file.with_name(f"{log_file.name}.port-clash-{attempt}"))
        for n in self._nodes:
            self._write_config(n)

    def stop(self, remove: bool | None = None) -> None:
        """Stop every node by PID (SIGTERM, then SIGKILL after 20 s); remove the temp dir."""
        _stop_processes(self._nodes)
        if remove is None:
            remove = self._owns_workdir
        if remove:
            shutil.rmtree(self._dir, ignore_errors=True)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (a crash, not a clean shutdown)."""
        n = self.node(node_id)
        if n.process is not None and n.running:
            n.process.kill()
            n.process.wait(timeout=30)

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP one node: a hung broker (it keeps its sockets open and answers nothing), not
        a dead one. :meth:`resume_node` lets it go on; :meth:`stop` kills a paused node too."""
        n = self.node(node_id)
        if n.process is not None and n.running:
            os.kill(n.process.pid, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> None:
        """SIGCONT a node :meth:`pause_node` stopped (a no-op for a running or dead one)."""
        n = self.node(node_id)
        if n.process is not None and n.running:
            os.kill(n.process.pid, signal.SIGCONT)

    def active_controller(self) -> int | None:
        """The KRaft quorum's leader as the running nodes last recorded it (each node keeps the
        leader and its epoch in ``__cluster_metadata-0/quorum-state``); the newest epoch wins.
        None when no running node knows a leader yet."""
        best: tuple[int, int] | None = None  # (epoch, leader)
        for n in self._nodes:
            state_file = n.directory / "data" / "__cluster_metadata-0" / "quorum-state"
            if not n.running or not state_file.exists():
                continue
            try:
                state = json.loads(state_file.read_text())
            except (OSError, ValueError):  # being rewritten right now
                continue
            leader, epoch = int(state.get("leaderId", -1)), int(state.get("leaderEpoch", -1))
            if leader >= 0 and (best is None or epoch > best[0]):
                best = (epoch, leader)
        return None if best is None else best[1]

    def stop_node(self, node_id: int) -> None:
        """Shut one node down cleanly."""
        _stop_processes([self.node(node_id)])

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Restart a stopped node on its old ports and data."""
        n = self.node(node_id)
        if n.running:
            return
        self._spawn(n)
        if wait:
            self.wait_ready([n])

    def wait_ready(self, nodes: Iterable[KafkaNode] | None = None, timeout_s: float | None = None) -> None:
        """Block until each node's broker answers a metadata request listing every live broker."""
        from kafka import KafkaAdminClient  # local: keeps import cheap for non-Kafka users

        wanted = list(nodes or self._nodes)
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        last_error: Exception | None = None
        for n in wanted:
            while True:
                if not n.running:
                    raise LocalStackError(
                        f"Kafka node {n.node_id} exited with code {n.process.returncode if n.process else None}; "
                        f"log tail:\n{self.log_tail(n.node_id)}"
                    )
                if time.monotonic() > deadline:
                    raise LocalStackError(
                        f"Kafka node {n.node_id} at {n.address} not ready after "
                        f"{timeout_s or self.start_timeout_s:.0f}s ({last_error}); log tail:\n{self.log_tail(n.node_id)}"
                    )
                if not _port_open(n.address):
                    # Not listening yet: a bare TCP probe, so kafka-python does not log a
                    # connection error (and back off for seconds) on every attempt.
                    last_error = ConnectionRefusedError(f"{n.address} not listening yet")
                    time.sleep(0.2)
                    continue
                try:
                    admin = KafkaAdminClient(
                        bootstrap_servers=n.address, request_timeout_ms=5000, **self.client_kwargs()
                    )
                    try:
                        brokers = admin.describe_cluster()["brokers"]
                    finally:
                        admin.close()
                    live = {n2.node_id for n2 in self._nodes if n2.running}
                    if {b.get("broker_id", b.get("node_id")) for b in brokers} >= live:
                        break
                except Exception as exc:  # not up yet: connection refused, no metadata
                    last_error = exc
                time.sleep(0.5)

    def client_kwargs(self, user: str | None = None, listener: str = CLIENT_LISTENER) -> dict[str, object]:
        """kafka-python kwargs for one of this cluster's listeners (empty for a PLAINTEXT CLIENT).

        With ``scram_users``, on ``CLIENT`` (SASL_PLAINTEXT) or ``SCRAM_TLS`` (SASL_SSL, trusting
        the test CA): SASL/SCRAM-SHA-512 as ``user`` (default: the super user). On ``MTLS``,
        ``TLS_WRONG_HOST`` and ``TLS_EXPIRED`` (SSL): the test client certificate, whose principal
        is ``tls_user`` (``user`` may only name it), and its key with the key password.
        """
        protocol = TLS_LISTENERS.get(listener, self.client_listener_protocol)
        if listener != CLIENT_LISTENER and (listener not in TLS_LISTENERS or not self.tls):
            raise LocalStackError(
                f"client_kwargs(listener={listener!r}): this cluster's listeners are "
                f"{[CLIENT_LISTENER, *(TLS_LISTENERS if self.tls else ())]}"
            )
        kwargs: dict[str, object] = {}
        if protocol.endswith("SSL"):
            kwargs.update(security_protocol=protocol, ssl_cafile=str(self.pki.ca))
        if protocol == "SSL":
            if user not in (None, self.tls_user):
                raise LocalStackError(f"client_kwargs({user!r}, listener={listener!r}): the client certificate is {self.tls_user!r}'s")
            kwargs.update(
                ssl_certfile=str(self.pki.client_cert),
                ssl_keyfile=str(self.pki.client_key),
                ssl_password=self.pki.key_password,
            )
            return kwargs
        if self.scram_users:
            name = user or self.super_user
            if name not in self.scram_users:
                raise LocalStackError(f"no SCRAM user {name!r}; users are {sorted(self.scram_users)}")
            return {
                "security_protocol": protocol,
                **kwargs,
                "sasl_mechanism": SCRAM_MECHANISM,
                "sasl_plain_username": name,
                "sasl_plain_password": self.scram_users[name],
            }
        if user is not None:
            raise LocalStackError(f"client_kwargs({user!r}): this cluster has no SCRAM users")
        return {}

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        path = self.node(node_id).log_file
        if not path.exists():
            out = self.node(node_id).directory / "stdout.log"
            path = out if out.exists() else path
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        failed = exc_type is not None
        keep = failed and self.keep_logs_on_failure
        if keep:
            log.warning("keeping Kafka logs of the failed run in %s", self._dir)
        self.stop(remove=self._owns_workdir and not keep)

    # ---- internals ------------------------------------------------------------------------
    def _quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes)

    def _write_config(self, n: KafkaNode) -> None:
        n.directory.mkdir(parents=True, exist_ok=True)
        rf = str(min(3, self.nodes))
        served = [f"{CLIENT_LISTENER}://127.0.0.1:{n.port}"]
        served += [f"{name}://{n.listener_address(name)}" for name in n.listener_ports]
        protocols = {CLIENT_LISTENER: self.client_listener_protocol, **{name: TLS_LISTENERS[name] for name in n.listener_ports}}
        props = {
            "process.roles": "broker,controller",
            "node.id": str(n.node_id),
            "controller.quorum.voters": self._quorum_voters(),
            "listeners": ",".join([*served, f"CONTROLLER://127.0.0.1:{n.controller_port}"]),
            "advertised.listeners": ",".join(served),
            "listener.security.protocol.map": ",".join(
                [*(f"{name}:{protocol}" for name, protocol in protocols.items()), "CONTROLLER:PLAINTEXT"]
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "CLIENT",
            "log.dirs": str(n.directory / "data"),
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # Tests want deletes of whole segments promptly (default 30 s initial delay).
            "log.initial.task.delay.ms": "1000",
            "log.retention.check.interval.ms": "5000",
            "log.segment.delete.delay.ms": "1000",
            "replica.lag.time.max.ms": "10000",
            # The active controller appends a no-op record to the metadata log when it has had
            # none for this long (500 ms by default), and every node applies it. With the two
            # settings below, an idle 1-node cluster used 2-10 points of a core less than with
            # Kafka's defaults, in pairs run side by side (stop 62, ``bench/diag/idle_brokers.py
            # --compare``, ``runs/diag61-idle-brokers.txt``); the suite runs several at once.
            "metadata.max.idle.interval.ms": "5000",
            # Request handler and network threads wake every 300 ms each, idle or not (8 and 3 by
            # default); the tests' load needs few.
            "num.io.threads": "2",
            "num.network.threads": "1",
        }
        if self.scram_users:
            props.update(self._security_props())
        if self.tls:
            props.update(self._tls_props())
        if self.tiered:
            props.update(self._tiered_props(rf))
        props.update(self.broker_config)
        (n.directory / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (n.directory / "log4j2.properties").write_text(_LOG4J2.format(log_file=n.log_file))

    def _security_props(self) -> dict[str, str]:
        mech = SCRAM_MECHANISM.lower()
        password = self.scram_users[self.super_user]
        return {
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            # The brokers' own login (inter-broker replication, as the super user).
            f"listener.name.client.{mech}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{self.super_user}" password="{password}";'
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{self.super_user};User:ANONYMOUS",
        }

    def _tls_props(self) -> dict[str, str]:
        from spark_purge.testing import tls

        pki = self.pki
        mech = SCRAM_MECHANISM.lower()
        props = {
            # Every TLS listener: the good broker certificate, trusting the test CA (PEM).
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.keystore.password": pki.keystore_password,
            "ssl.key.password": pki.keystore_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            # CN=<user>,O=spark-purge-test -> User:<user>, so ACLs can name a certificate's owner.
            "ssl.principal.mapping.rules": tls.PRINCIPAL_MAPPING_RULES,
            # SASL_SSL: the same SCRAM users as CLIENT.
            f"listener.name.scram_tls.{mech}.sasl.jaas.config": self._security_props()[f"listener.name.client.{mech}.sasl.jaas.config"],
        }
        for name, keystore in (
            ("mtls", None), ("tls_wrong_host", pki.broker_wrong_host_keystore), ("tls_expired", pki.broker_expired_keystore)
        ):
            # Required: without a client certificate the principal would be User:ANONYMOUS, a
            # super user here (the controller listener's).
            props[f"listener.name.{name}.ssl.client.auth"] = "required"
            if keystore is not None:
                props[f"listener.name.{name}.ssl.keystore.location"] = str(keystore)
        return props

    def _tiered_props(self, rf: str) -> dict[str, str]:
        assert self._tiered_jar is not None
        if self._tiered_shim is None:
            # LogContext.java: the one class of 4.3.1's LocalTieredStorage that 4.4 moved.
            self._tiered_shim = compiled_classes(JAVA_DIR / "LogContext.java", self._jars)
        return {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
            # A plugin class path: the 4.3.1 test jar's classes (and the shim) load child-first,
            # the rest (kafka-storage-api, clients) from the 4.4 broker.
            "remote.log.storage.manager.class.path": f"{self._tiered_shim}{os.pathsep}{self._tiered_jar}",
            "rsm.config.dir": str(self.remote_storage_dir),
            "remote.log.metadata.manager.class.name": TOPIC_BASED_RLMM,
            "remote.log.metadata.manager.listener.name": "CLIENT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": rf,
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            "remote.log.manager.task.interval.ms": "500",
            # Local retention (after copy) is enforced by the log retention task.
            "log.retention.check.interval.ms": "1000",
        }

    def _scram_format_args(self) -> list[str]:
        args: list[str] = []
        for name, password in self.scram_users.items():
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
        return args

    def _java_cmd(self, n: KafkaNode, main: str, *args: str) -> list[str]:
        java = shutil.which("java") or (
            str(Path(os.environ["JAVA_HOME"]) / "bin/java") if "JAVA_HOME" in os.environ else None
        )
        if java is None:
            raise LocalStackError("java not found on PATH (and JAVA_HOME unset): Kafka needs Java 17+")
        cmd = [
            java,
            "-Xms128m",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",  # brokers here are short-lived: start fast
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={n.directory / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={n.directory}",
        ]
        if self.jaas_config is not None:
            jaas = n.directory / "jaas.conf"
            jaas.write_text(self.jaas_config)
            cmd.append(f"-Djava.security.auth.login.config={jaas}")
        cmd += list(self.extra_jvm_args)
        cmd += ["-cp", str(self._jars / "*"), main, *args]
        return cmd

    def _format(self, n: KafkaNode) -> None:
        cmd = self._java_cmd(
            n,
            "kafka.tools.StorageTool",
            "format",
            # One token: a random id may start with "-", which argparse would take for an option.
            f"--cluster-id={self._cluster_id}",
            "-c",
            str(n.directory / "server.properties"),
            "--ignore-formatted",
        )
        cmd += self._scram_format_args()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, preexec_fn=_die_with_parent)
        if result.returncode != 0:
            raise LocalStackError(
                f"formatting Kafka storage for node {n.node_id} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )

    def _spawn(self, n: KafkaNode) -> None:
        # The child keeps its own copy of the descriptor: ours is closed once it has started.
        with open(n.directory / "stdout.log", "ab") as out:
            n.process = subprocess.Popen(
                self._java_cmd(n, "kafka.Kafka", str(n.directory / "server.properties")),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )


# Starts of a cluster tried when a node could not bind a port picked free (``LocalKafka.start``).
_START_ATTEMPTS = 3


def _formatted_cluster_id(directory: Path) -> str | None:
    """The cluster id of a cluster formatted in ``directory`` before (None: none was)."""
    for meta in sorted(directory.glob("node-*/data/meta.properties")):
        for line in meta.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "cluster.id":
                return value.strip()
    return None


def _stop_processes(nodes: Iterable[KafkaNode]) -> None:
    """Stop each node's JVM by its own PID: SIGTERM, wait, then SIGKILL."""
    live = [n.process for n in nodes if n.process is not None and n.process.poll() is None]
    for process in live:
        try:
            process.terminate()
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 20
    for process in live:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

