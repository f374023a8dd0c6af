"""Real Kafka consumers for the integration tests and the invariant checker: a share consumer
(KIP-932) that acknowledges an exact number of records, a KIP-848 consumer that holds an
assignment without committing, and a Kafka Streams application in a streams group (KIP-1071)
that holds its tasks without committing.

The first two are ``spark_purge/testing/java/ShareConsume.java``, compiled with ``javac`` on first
use against the broker jars (``.cache/jars/kafka`` or ``SPARK_PURGE_KAFKA_JARS``); the streams
member is ``java/StreamsHold.java``, compiled against Kafka Streams' jars
(``.cache/jars/kafka-streams`` or ``SPARK_PURGE_KAFKA_STREAMS_JARS``: Kafka Streams 4.3.1 with its
own kafka-clients, the newest on Maven Central). Each compiles into a temp folder keyed by the
source and jar list. Every JVM is stopped by its own PID (terminate, then kill).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kafka import KafkaAdminClient

from spark_purge.kafka.tiering import set_configs_request
from spark_purge.testing.cluster import kafka_jars_dir
from spark_purge.testing.javac import JAVA_DIR, compiled_classes, java_tool

JAVA_SOURCE = JAVA_DIR / "ShareConsume.java"
STREAMS_SOURCE = JAVA_DIR / "StreamsHold.java"
STREAMS_JARS_ENV = "SPARK_PURGE_KAFKA_STREAMS_JARS"
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP (KIP-848 / KIP-932 group configs)


def _die_with_parent() -> None:
    """Runs in the child before exec: the JVM gets SIGKILL if the test process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def streams_jars_dir() -> Path:
    """The folder with Kafka Streams' jars (``$SPARK_PURGE_KAFKA_STREAMS_JARS``)."""
    named = os.environ.get(STREAMS_JARS_ENV)
    folder = Path(named) if named else None
    if folder is None or not any(folder.glob("kafka-streams-*.jar")):
        raise RuntimeError(
            f"no Kafka Streams jars (kafka-streams-*.jar) in {STREAMS_JARS_ENV}={named!r}: run "
            "`./dev.sh setup`, which resolves them from Maven Central into .cache/jars/kafka-streams"
        )
    return folder


def _compiled(source: Path, jars: Path) -> str:
    """Classpath with ``source`` compiled against ``jars`` and the jars."""
    return f"{compiled_classes(source, jars)}{os.pathsep}{jars / '*'}"


def compiled_classpath() -> str:
    """Classpath with the compiled ShareConsume helper and the Kafka client jars."""
    return _compiled(JAVA_SOURCE, kafka_jars_dir())


def _java_cmd(*args: str, classpath: Optional[str] = None, main: str = "ShareConsume") -> list[str]:
    return [
        java_tool("java"),
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        "-cp",
        classpath or compiled_classpath(),
        main,
        *args,
    ]


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def set_group_config(admin: KafkaAdminClient, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on a GROUP resource (e.g. share.auto.offset.reset=earliest)."""
    request = set_configs_request(GROUP_RESOURCE, group, configs)

    async def send() -> object:
        return await admin._manager.send(request)

    response = admin._manager.run(send)
    for r in response.responses:
        if r.error_code != 0:
            raise AssertionError(f"IncrementalAlterConfigs on group {group!r} failed: {r.error_code} {r.error_message}")


@dataclass(frozen=True)
class ShareRun:
    """What one share-consumer run did: the records it ACCEPTed and every record delivered to it
    (accepted or released), each as (topic, partition, offset), in delivery order."""

    accepted: list[tuple[str, int, int]]
    delivered: list[tuple[str, int, int]]
    returncode: int = 0


def _run_helper(timeout_s: float, *args: str) -> tuple[int, str, str]:
    """Run the ShareConsume helper to its end (stopped by its PID after ``timeout_s``): its exit
    code, stdout and stderr."""
    proc = subprocess.Popen(
        _java_cmd(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        preexec_fn=_die_with_parent,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        _stop(proc)
    return proc.returncode, out, err


def _printed(out: str, *kinds: str) -> Iterator[tuple[str, tuple[str, int, int]]]:
    """The helper's ``<KIND> <topic> <partition> <offset>`` lines of ``kinds``, in order."""
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind in kinds:
            t, p, o = rest.split()
            yield kind, (t, int(p), int(o))


def share_run(
    bootstrap: str, group: str, topic: str, accept: int, settle: bool = False, timeout_s: float = 90.0, check: bool = True
) -> ShareRun:
    """Run the share consumer until it ACCEPTed ``accept`` records (committed); what it did.
    ``check=False``: a non-zero exit (e.g. 3, fewer records than ``accept`` arrived in time) is
    returned in ``returncode`` with what was printed, instead of raised.

    ``settle``: one more round that only RELEASEs what it is given, so the broker persists the
    share-partition start offset the accepted records moved (see ShareConsume.java).
    """
    code, out, err = _run_helper(
        timeout_s, "share", bootstrap, group, topic, str(accept), str(int(timeout_s * 1000) - 5000), "1" if settle else "0"
    )
    if code != 0 and check:
        raise AssertionError(f"share consumer exited {code}:\n{out}\n{err[-4000:]}")
    accepted: list[tuple[str, int, int]] = []
    delivered: list[tuple[str, int, int]] = []
    for kind, record in _printed(out, "ACCEPTED", "RELEASED"):
        delivered.append(record)
        if kind == "ACCEPTED":
            accepted.append(record)
    return ShareRun(accepted, delivered, code)


def share_start_offsets(bootstrap: str, group: str, topic: str, timeout_s: float = 60.0) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the share-partition start offset (SPSO) Kafka has persisted for
    ``group``, read with Kafka's own Admin client (``listShareGroupOffsets``), for every partition
    of ``topic`` the group has one. Every record below it is done for the group in Kafka's own
    words: acknowledged, or archived once delivered ``share.delivery.count.limit`` times."""
    code, out, err = _run_helper(timeout_s, "share-offsets", bootstrap, group, topic)
    if code != 0 or "DONE" not in out:
        raise AssertionError(f"share-offsets exited {code}:\n{out}\n{err[-2000:]}")
    return {(t, p): o for _, (t, p, o) in _printed(out, "START")}


def share_consume(
    bootstrap: str, group: str, topic: str, accept: int, settle: bool = False, timeout_s: float = 90.0
) -> list[tuple[str, int, int]]:
    """:func:`share_run`, returning only the records it ACCEPTed."""
    return share_run(bootstrap, group, topic, accept, settle, timeout_s).accepted


class HoldingMember:
    """A running group member that holds an assignment and never commits: a KIP-848 consumer
    (``group.protocol=consumer``) or a Kafka Streams application (``group.protocol=streams``).
    Both helpers print ``ASSIGNED <topic>-<partition>,...`` when what they hold changes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.assigned: Optional[set[tuple[str, int]]] = None
        self.lines: list[str] = []
        self._event = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("ASSIGNED "):
                parts = [x for x in line[len("ASSIGNED ") :].split(",") if x]
                self.assigned = {(x.rpartition("-")[0], int(x.rpartition("-")[2])) for x in parts}
                if self.assigned:
                    self._event.set()

    def wait_assigned(self, timeout_s: float = 60.0) -> set[tuple[str, int]]:
        deadline = time.monotonic() + timeout_s
        while not self._event.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"group member got no assignment (exit {self.proc.poll()}): {self.lines[-20:]}")
        assert self.assigned is not None
        return set(self.assigned)


Kip848Consumer = HoldingMember  # the name the KIP-848 tests know it by


def _spawn(cmd: list[str]) -> subprocess.Popen[str]:
    """A long-lived helper process (it exits when its stdin closes), stopped by the caller."""
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.PIPE,
        text=True,
        preexec_fn=_die_with_parent,
    )


@contextmanager
def _running(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """Yields ``proc``; on exit closes its stdin (the helpers exit on EOF), then stops it by PID."""
    try:
        yield proc
    finally:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        finally:
            _stop(proc)


@contextmanager
def kip848_consumer(bootstrap: str, group: str, topic: str) -> Iterator[HoldingMember]:
    """A KIP-848 consumer subscribed to ``topic``; stopped (stdin closed, then by PID) on exit."""
    with _running(_spawn(_java_cmd("consumer", bootstrap, group, topic))) as proc:
        yield HoldingMember(proc)


@contextmanager
def streams_member(bootstrap: str, group: str, topic: str) -> Iterator[HoldingMember]:
    """A Kafka Streams application (application.id ``group``, ``group.protocol=streams``) reading
    ``topic`` that never commits (java/StreamsHold.java); stopped (stdin closed: it halts without
    the commit a clean close makes, then by PID) on exit. Its state dir is removed after."""
    state_dir = tempfile.mkdtemp(prefix="spark-purge-streams-")
    classpath = _compiled(STREAMS_SOURCE, streams_jars_dir())
    try:
        with _running(_spawn(_java_cmd(bootstrap, group, topic, state_dir, classpath=classpath, main="StreamsHold"))) as proc:
            yield HoldingMember(proc)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@contextmanager
def idle_share_member(bootstrap: str, group: str, topic: str, timeout_s: float = 60.0) -> Iterator[subprocess.Popen[str]]:
    """A live share-group member subscribed to ``topic`` that acknowledges nothing; stopped on exit."""
    with _running(_spawn(_java_cmd("share-idle", bootstrap, group, topic))) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = ""
        while line.strip() != "JOINED":
            line = proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise AssertionError(f"share member did not join (exit {proc.poll()})")
        yield proc
