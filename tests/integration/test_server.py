"""``spark-purge serve`` with a real Spark session and Delta, against the real broker: commands
handed to it by ``spark-purge ... --server`` processes plan, purge and audit as the same commands
run locally do, one after the other in its one session; a client elsewhere is refused; SIGTERM
stops it and removes its socket. (The protocol's edge cases, on a fake runner:
``tests/unit/test_server.py``.)"""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge.cli import PLAN_COLUMNS
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import kill_group, python_env, run_reaped, spawn
from spark_purge.testing.workload import audit_rows, commit_topic, log_starts, produce, purge_config_dict

START_TIMEOUT_S = 600  # a loaded 2-core box: a JVM, Spark, Delta and the warm-up plan
COMMAND_TIMEOUT_S = 600
OUR_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) spark_purge[.\w]*: ")


def wait_for_line(log: Path, proc: subprocess.Popen[bytes], needle: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while needle not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"the server exited {proc.returncode}:\n{log.read_text(errors='replace')[-5000:]}"
        assert time.monotonic() < deadline, f"no {needle!r} in {timeout_s} s:\n{log.read_text(errors='replace')[-5000:]}"
        time.sleep(0.2)


@pytest.fixture
def served(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> Iterator[tuple[str, Path, Path, subprocess.Popen[bytes], Path]]:
    """A topic with 2 partitions (10 records each, group ``<topic>-g`` at 6 and 3), its config in
    ``tmp_path``, and a server working there (warmed up on that config: a plan, and a dry run on
    scratch tables): (topic, config, socket, server, server log)."""
    topic = new_topic("served", partitions=2)
    produce(kafka_cluster.bootstrap_servers, topic, [10, 10])
    commit_topic(admin, f"{topic}-g", topic, [6, 3])
    config = tmp_path / "purge.yaml"
    config.write_text(yaml.safe_dump(purge_config_dict(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), [f"{topic}-g"])))
    with tempfile.TemporaryDirectory(prefix="sp-srv-") as short:  # a Unix socket's path is at most 107 bytes
        sock = Path(short) / "s"
        log = tmp_path / "server.log"
        proc = spawn(
            [sys.executable, "-m", "spark_purge.cli", "serve", "--socket", str(sock), "-c", str(config)],
            cwd=tmp_path, env=python_env(SPARK_PURGE_SERVER=None), log=log,
        )  # fmt: skip
        try:
            wait_for_line(log, proc, f"serving on {sock}", START_TIMEOUT_S)
            yield topic, config, sock, proc, log
        finally:
            kill_group(proc)  # the server and its JVM, by the server's own id


def client(args: list[str], config: Path, sock: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_reaped(
        [sys.executable, "-m", "spark_purge.cli", *args, "-c", str(config), "--server", str(sock)],
        cwd=cwd, env=python_env(), timeout_s=COMMAND_TIMEOUT_S,
    )  # fmt: skip


def plan_cells(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    assert lines[0].split() == [head for _, head in PLAN_COLUMNS], stdout
    rows = lines[2 : lines.index("")]
    return [row.split(maxsplit=len(PLAN_COLUMNS) - 1)[:-1] for row in rows]


def test_served_commands_plan_purge_and_audit(
    served: tuple[str, Path, Path, subprocess.Popen[bytes], Path], admin: KafkaAdminClient, spark: SparkSession, tmp_path: Path
) -> None:
    topic, config, sock, proc, log = served

    planned = client(["plan"], config, sock, tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert [line for line in planned.stderr.splitlines() if not OUR_LOG_LINE.match(line)] == [], planned.stderr
    cells = plan_cells(planned.stdout)
    leader = cells[0][2]
    assert cells == [
        [topic, "0", leader, "0", "10", "6", "6", "group", f"{topic}-g", "yes"],
        [topic, "1", leader, "0", "10", "3", "3", "group", f"{topic}-g", "yes"],
    ]
    assert "2 partitions planned, 2 actionable, 9 records would be deleted" in planned.stdout
    assert log_starts(admin, topic, 2) == [0, 0]  # a plan changes nothing, nor did the warm-up's dry run
    warm = log.read_text()
    assert "warmed up: a dry run on scratch tables" in warm and "warm-up dry run failed" not in warm, warm[-5000:]
    assert not (tmp_path / "audit").exists()  # the dry run's tables were scratch ones

    ran = client(["run", "--once"], config, sock, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "batch 0: 2 partitions planned, 2 actionable, 2 deleted (9 records), 0 failed" in ran.stderr
    assert log_starts(admin, topic, 2) == [6, 3]
    outcomes = audit_rows(spark, str(tmp_path / "audit"))
    assert [(r["partition"], r["status"], r["low_watermark"], r["records_deleted"]) for r in outcomes] == [
        (0, "deleted", 6, 6),
        (1, "deleted", 3, 3),
    ]

    commit_topic(admin, f"{topic}-g", topic, [8, 10])  # the group moves on: the session holds no stale state
    again = client(["run", "--once"], config, sock, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "batch 1: 2 partitions planned, 2 actionable, 2 deleted (9 records), 0 failed" in again.stderr
    assert log_starts(admin, topic, 2) == [8, 10]

    audited = client(["audit", "--report", "deleted"], config, sock, tmp_path)
    assert audited.returncode == 0, audited.stderr
    assert topic in audited.stdout and "18" in audited.stdout, audited.stdout

    elsewhere = client(["plan"], config, sock, tmp_path.parent)
    assert elsewhere.returncode == 2
    assert f"the server works in {tmp_path.resolve()}, this command was run in {tmp_path.parent.resolve()}" in elsewhere.stderr

    # A client killed while its run deletes: the server stops that run (or lets it end, if it
    # was ending anyway), serves on, and the next run finishes the purge, nothing lost.
    commit_topic(admin, f"{topic}-g", topic, [9, 10])
    killed = subprocess.Popen(
        [sys.executable, "-m", "spark_purge.cli", "run", "--once", "-c", str(config), "--server", str(sock)],
        cwd=tmp_path, env=python_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert killed.stderr is not None
        seen = []
        for line in killed.stderr:
            seen.append(line)
            if "DeleteRecords for" in line:
                killed.kill()
                break
        assert killed.wait(timeout=60) == -signal.SIGKILL, seen
    finally:
        kill_group(killed)  # type: ignore[arg-type]
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while not re.search(r"served run --once .* \(client gone\)", log.read_text()):
        assert time.monotonic() < deadline, log.read_text()[-5000:]
        time.sleep(0.2)
    gone = re.search(r"served run --once .*: exit (0|130) in [\d.]+ s \(client gone\)", log.read_text())
    assert gone, log.read_text()[-5000:]
    print(gone.group(0))  # exit 130: stopped mid-batch; 0: it was ending anyway
    after = client(["run", "--once"], config, sock, tmp_path)
    assert after.returncode == 0, after.stderr
    assert log_starts(admin, topic, 2) == [9, 10]
    outcomes = audit_rows(spark, str(tmp_path / "audit"))
    # the delete to 9 is audited: by the killed run's batch, or replayed from its intent by the next
    assert [r["status"] for r in outcomes if r["partition"] == 0 and r["low_watermark"] == 9] == ["deleted"], outcomes

    text = log.read_text()
    assert len(re.findall(r"spark_purge\.server: served ", text)) == 6, text[-5000:]  # not the warm-up plan
    assert len(re.findall(r"spark_purge\.server: refused plan ", text)) == 1, text[-5000:]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    assert not sock.exists()
    assert "stopping: 6 command(s) served" in log.read_text()


def test_the_keep_warm_job_reads_its_source_in_python_workers(spark: SparkSession) -> None:
    from spark_purge.keepwarm import touch

    assert touch(spark) == 1  # one read task, its row 1
    assert touch(spark) == 1  # registered once: the same
    assert touch(spark, partitions=3) == 6  # rows 1, 2 and 3, one from each read task


def test_a_served_command_leaves_no_streaming_query_running(spark: SparkSession, tmp_path: Path) -> None:
    from spark_purge.cli import _served

    query = spark.readStream.format("rate").load().writeStream.format("noop").queryName("left-behind").start()
    try:
        assert _served(["lease", "-c", str(tmp_path / "missing.yaml")]) == 2
        assert not query.isActive
        assert spark.streams.active == []
    finally:
        query.stop()
