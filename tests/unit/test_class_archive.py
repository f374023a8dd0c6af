"""The local driver JVM's class archive (``spark_purge.class_archive``): where it is kept, when a
session maps one or writes one, and that only a whole archive is ever put in place. No JVM here
(``tests/integration/test_class_archive.py`` runs real ones)."""
from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_purge import class_archive as ca
from spark_purge.session import driver_java_options

WHOLE = ca.MAGIC + b"\0" * 64  # what a JVM's finished archive starts with
UNFINISHED = b"\0" * 68  # a JVM writes the header (the magic) last


def yes(option: str) -> bool:
    return True


@pytest.fixture
def java(tmp_path: Path) -> str:
    path = tmp_path / "jdk" / "bin" / "java"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    return str(path)


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("spark-core.jar", "spark-sql.jar"):
        (folder / name).write_bytes(b"jar")
    return folder


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({ca.ARCHIVE_ENV: "off"}, None),
        ({ca.ARCHIVE_ENV: "OFF"}, None),
        ({ca.ARCHIVE_ENV: "0"}, None),
        ({ca.ARCHIVE_ENV: "false"}, None),
        ({ca.ARCHIVE_ENV: "no"}, None),
        ({ca.ARCHIVE_ENV: "/srv/archives"}, Path("/srv/archives")),
        ({"XDG_CACHE_HOME": "/c", "HOME": "/h"}, Path("/c/spark-purge/class-archive")),
        ({"HOME": "/h"}, Path("/h/.cache/spark-purge/class-archive")),
        ({ca.ARCHIVE_ENV: " ", "HOME": "/h"}, Path("/h/.cache/spark-purge/class-archive")),
    ],
)
def test_archive_folder(environ: dict[str, str], expected: Path | None) -> None:
    assert ca.archive_folder(environ) == expected


@pytest.mark.parametrize(
    "option",
    ["-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/x.jsa", "-Xshare:off", "-Xshare:auto", "-XX:+AutoCreateSharedArchive",
     "-XX:SharedClassListFile=l", "-XX:DumpLoadedClassList=l"],
)
def test_options_naming_class_data_sharing_leave_it_to_them(option: str) -> None:
    assert ca.named(["-Xss4m", f"-Dx=1 {option}"])
    assert not ca.named(["-Xss4m -Xlog:class+load=info", ""])


def test_the_key_follows_the_jvm_and_every_jar(java: str, jars: Path, tmp_path: Path) -> None:
    key = ca.archive_key(java, [str(jars)])
    assert key == ca.archive_key(java, [str(jars)])
    assert len(key) == 16
    (jars / "spark-sql.jar").write_bytes(b"a newer jar")
    newer = ca.archive_key(java, [str(jars)])
    assert newer != key
    delta = tmp_path / "delta.jar"
    delta.write_bytes(b"delta")
    assert ca.archive_key(java, [str(jars), str(delta)]) != newer
    other = tmp_path / "other" / "java"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    assert ca.archive_key(str(other), [str(jars)]) != newer


def test_only_a_whole_archive_is_put_in_place(tmp_path: Path) -> None:
    unfinished = tmp_path / "spark-k.1.part"
    unfinished.write_bytes(UNFINISHED)
    assert not ca.promote(tmp_path, "k")
    assert unfinished.exists() and not (tmp_path / "spark-k.jsa").exists()
    (tmp_path / "spark-other.2.part").write_bytes(WHOLE)  # another key's: not this one's
    assert not ca.promote(tmp_path, "k")
    whole = tmp_path / "spark-k.3.part"
    whole.write_bytes(WHOLE)
    assert ca.promote(tmp_path, "k")
    assert (tmp_path / "spark-k.jsa").read_bytes() == WHOLE
    assert not whole.exists()
    assert unfinished.exists()  # left for its JVM, or for tidy
    assert ca.is_complete(tmp_path / "spark-k.jsa") and not ca.is_complete(unfinished) and not ca.is_complete(tmp_path / "none")


def test_tidy_removes_left_overs_and_keeps_the_newest_archives(tmp_path: Path) -> None:
    now = time.time()

    def aged(name: str, seconds: float, data: bytes = UNFINISHED) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        os.utime(path, (now - seconds, now - seconds))
        return path

    left_over = aged("spark-k.1.part", ca.LEFT_OVER_S + 60)
    old_writing = aged("spark-k.2.part", ca.WRITING_S + 60)  # neither writing nor left over yet
    archives = [aged(f"spark-a{i}.jsa", 100 * i, WHOLE) for i in range(ca.KEEP + 2)]
    assert not ca.tidy(tmp_path, "k", now)
    assert not left_over.exists() and old_writing.exists()
    assert [a.exists() for a in archives] == [True] * ca.KEEP + [False, False]
    aged("spark-k.3.part", 30)
    assert ca.tidy(tmp_path, "k", now)
    assert not ca.tidy(tmp_path, "other", now)


def test_a_session_writes_the_archive_when_there_is_none_then_maps_it(tmp_path: Path, java: str, jars: Path) -> None:
    environ = {ca.ARCHIVE_ENV: str(tmp_path / "archives")}
    first = ca.archive_plan(java, [str(jars)], ["-Xss4m", "", ""], yes, environ)
    assert first is not None and first.part is not None
    assert first.part.exists() and first.part.name == f"spark-{first.key}.{os.getpid()}.part"
    assert first.options == [f"-XX:ArchiveClassesAtExit={first.part}", ca.QUIET]
    # While it is being written, another session goes without (no second archive written).
    assert ca.archive_plan(java, [str(jars)], [], yes, environ) is None
    first.part.write_bytes(WHOLE)  # its JVM wrote it at exit
    second = ca.archive_plan(java, [str(jars)], [], yes, environ)
    assert second is not None and second.part is None
    assert second.final == first.final and second.final.read_bytes() == WHOLE
    assert second.options == [f"-XX:SharedArchiveFile={second.final}", ca.QUIET]
    assert not first.part.exists()


def test_no_archive_when_turned_off_named_impossible_or_unwritable(tmp_path: Path, java: str, jars: Path, caplog: pytest.LogCaptureFixture) -> None:
    environ = {ca.ARCHIVE_ENV: str(tmp_path / "archives")}
    asked: list[str] = []

    def probe(option: str) -> bool:
        asked.append(option)
        return False

    assert ca.archive_plan(java, [str(jars)], [], yes, {ca.ARCHIVE_ENV: "off"}) is None
    assert ca.archive_plan(java, [str(jars)], ["-Xshare:off"], yes, environ) is None
    assert ca.archive_plan(None, [str(jars)], [], yes, environ) is None
    assert ca.archive_plan(java, [str(jars)], [], probe, environ) is None
    assert asked == [ca.PROBE]
    assert not (tmp_path / "archives").exists()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="spark_purge.class_archive"):
        assert ca.archive_plan(java, [str(jars)], [], yes, {ca.ARCHIVE_ENV: str(blocked)}) is None
    assert str(blocked) in caplog.text


def test_a_session_that_does_not_start_gives_its_claim_up(tmp_path: Path, java: str, jars: Path) -> None:
    plan = ca.archive_plan(java, [str(jars)], [], yes, {ca.ARCHIVE_ENV: str(tmp_path)})
    assert plan is not None and plan.part is not None and plan.part.exists()
    ca.abandon(plan)
    assert not plan.part.exists()
    ca.abandon(None)


# Stands in for the driver JVM: ends when its stdin closes (as PySpark's gateway does), writing
# the archive first (or not, or only part of it).
JVM = "import sys, pathlib; sys.stdin.read(); pathlib.Path(sys.argv[1]).write_bytes(bytes.fromhex(sys.argv[2]))"


@pytest.mark.parametrize(("written", "in_place"), [(WHOLE, True), (UNFINISHED, False), (None, False)])
def test_at_exit_the_process_waits_for_its_jvm_then_puts_a_whole_archive_in_place(
    tmp_path: Path, java: str, jars: Path, written: bytes | None, in_place: bool
) -> None:
    plan = ca.archive_plan(java, [str(jars)], [], yes, {ca.ARCHIVE_ENV: str(tmp_path)})
    assert plan is not None and plan.part is not None
    args = [sys.executable, "-c", JVM, str(plan.part), written.hex()] if written is not None else [sys.executable, "-c", "import sys; sys.stdin.read()"]
    jvm = subprocess.Popen(args, stdin=subprocess.PIPE)
    try:
        ca._finish(plan, jvm, timeout_s=60)
    finally:
        jvm.kill()
        jvm.wait()
    assert jvm.returncode == 0
    assert plan.final.exists() is in_place
    assert not plan.part.exists()  # moved into place, or removed: its JVM is gone


def test_the_archive_options_go_with_the_driver_options() -> None:
    options = driver_java_options({"spark.driver.extraJavaOptions": "-Xss4m"}, {}, accepts=lambda option: False, extra=["-XX:SharedArchiveFile=/a.jsa", ca.QUIET])
    assert options is not None
    assert options.startswith("-Xss4m -XX:SharedArchiveFile=/a.jsa -Xlog:cds=off,cds+dynamic=off -Dlog4j2.configurationFile=")


def test_finish_pending_does_now_what_exit_would(tmp_path: Path, java: str, jars: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[object] = []
    monkeypatch.setattr(ca.atexit, "register", registered.append)
    monkeypatch.setattr(ca, "_pending", [])
    plan = ca.archive_plan(java, [str(jars)], [], yes, {ca.ARCHIVE_ENV: str(tmp_path)})
    assert plan is not None and plan.part is not None
    jvm = subprocess.Popen([sys.executable, "-c", JVM, str(plan.part), WHOLE.hex()], stdin=subprocess.PIPE)
    try:
        ca.finish_at_exit(plan, jvm)
        assert registered == [ca.finish_pending] and not plan.final.exists()
        ca.finish_pending()
    finally:
        jvm.kill()
        jvm.wait()
    assert plan.final.read_bytes() == WHOLE and not plan.part.exists()
    ca.finish_pending()  # nothing left: a no-op, as at exit then
    ca.finish_at_exit(dataclasses.replace(plan, part=None), jvm)  # a session that maps one: nothing to wait for
    assert ca._pending == [] and registered == [ca.finish_pending]


def test_an_empty_claim_whose_process_is_gone_is_given_up(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead = tmp_path / f"spark-k.{int(gone.stdout)}.part"
    dead.touch()
    alive = tmp_path / f"spark-k.{os.getpid()}.part"
    alive.touch()
    written = tmp_path / f"spark-j.{int(gone.stdout)}.part"  # its JVM, left alone, wrote it
    written.write_bytes(WHOLE)
    assert ca.tidy(tmp_path, "k")  # this process's claim: being written
    assert not dead.exists() and alive.exists() and written.exists()
    alive.unlink()
    assert not ca.tidy(tmp_path, "k")


def test_only_the_context_on_the_jvm_ended_is_stopped_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    class Context:
        stopped = 0

        def stop(self) -> None:
            Context.stopped += 1

    class Gateway:
        proc = object()

    monkeypatch.setattr(SparkContext, "_active_spark_context", Context())
    monkeypatch.setattr(SparkContext, "_gateway", Gateway())
    ca._stop_spark(object())  # type: ignore[arg-type]  # another JVM (a stand-in's, a test's)
    assert Context.stopped == 0
    ca._stop_spark(Gateway.proc)  # type: ignore[arg-type]
    assert Context.stopped == 1
