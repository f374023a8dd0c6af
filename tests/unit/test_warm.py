"""The class archive's warm-up (``spark_purge.warm``): what it finds before any JVM starts, and
how it reports. The real warm-up, with a JVM: ``tests/integration/test_class_archive.py``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_purge import class_archive as ca
from spark_purge import warm
from spark_purge.session import LOCAL_FS_JAR_ENV, archive_classpath, launcher_java, local_fs


def env(folder: Path | str) -> dict[str, str]:
    return {**os.environ, ca.ARCHIVE_ENV: str(folder)}


def test_archives_turned_off_means_nothing_to_do() -> None:
    assert warm.archive_status(env("off")) == (warm.OFF, None)


def test_a_java_that_cannot_write_an_archive_means_nothing_to_do(tmp_path: Path) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 1\n")  # refuses every option
    java.chmod(0o755)
    assert warm.archive_status({**env(tmp_path / "archives"), "JAVA_HOME": str(home)}) == (warm.UNSUPPORTED, None)


def test_no_archive_yet_names_where_it_goes_and_claims_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    status, final = warm.archive_status(env(folder))
    java = launcher_java()
    assert java is not None
    assert status == warm.NOT_WRITTEN
    # The key of the class path a session's driver gets: with the local file system's jar when
    # it is named (./dev.sh names it), which makes it another archive than PySpark's jars alone.
    classpath = archive_classpath(local_fs({}))
    assert final == ca.final_path(folder, ca.archive_key(java, classpath))
    jar = os.environ.get(LOCAL_FS_JAR_ENV)
    assert (jar in classpath) if jar else classpath == archive_classpath({})
    assert not folder.exists()  # no folder made, no .part claimed: a session does that


def test_an_archive_in_place_or_a_whole_one_left_to_move_is_in_place(tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    _, final = warm.archive_status(env(folder))
    assert final is not None
    folder.mkdir()
    part = folder / f"{final.stem}.4242.part"
    part.write_bytes(ca.MAGIC + b"\0" * 64)  # finished by a JVM whose process ended first
    assert warm.archive_status(env(folder)) == (warm.IN_PLACE, final)
    assert final.exists() and not part.exists()
    assert warm.archive_status(env(folder)) == (warm.IN_PLACE, final)


def test_an_unfinished_part_is_not_in_place(tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    _, final = warm.archive_status(env(folder))
    assert final is not None
    folder.mkdir()
    (folder / f"{final.stem}.4242.part").write_bytes(b"\0" * 68)
    assert warm.archive_status(env(folder)) == (warm.NOT_WRITTEN, final)


def test_main_reports_and_is_quiet_if_needed_and_nothing_was_done(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(ca.ARCHIVE_ENV, "off")
    assert warm.main([]) == 0
    assert capsys.readouterr().out.startswith("driver JVM class archive off")
    assert warm.main(["--if-needed"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_main_refuses_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert warm.main(["--force"]) == 2
    assert "unknown arguments ['--force']" in capsys.readouterr().err


def test_a_failed_warm_up_is_a_warning_and_status_1(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def fails(**kwargs: object) -> tuple[str, Path | None]:
        raise RuntimeError("no room on the device")

    monkeypatch.setattr(warm, "prepare", fails)
    assert warm.main(["--if-needed"]) == 1
    assert "warm-up failed (RuntimeError: no room on the device)" in caplog.text
