"""Jar locations come from settings, never from a source checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

from spark_purge.errors import ConfigError
from spark_purge.session import DELTA_JARS_ENV, delta_jars
from spark_purge.testing.cluster import KAFKA_JARS_ENV, kafka_jars_dir
from spark_purge.testing.errors import LocalStackError


def test_delta_jars_unset_means_the_maven_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DELTA_JARS_ENV, raising=False)
    assert delta_jars() is None


def test_delta_jars_from_the_variable_or_the_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "b.jar").write_bytes(b"")
    (tmp_path / "a.jar").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a jar")
    monkeypatch.setenv(DELTA_JARS_ENV, str(tmp_path))
    assert delta_jars() == [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]
    monkeypatch.setenv(DELTA_JARS_ENV, "/nonexistent")
    assert delta_jars(tmp_path) == [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]  # the argument wins


def test_delta_jars_folder_without_jars_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DELTA_JARS_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=DELTA_JARS_ENV):
        delta_jars()


def test_kafka_jars_unset_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KAFKA_JARS_ENV, raising=False)
    with pytest.raises(LocalStackError, match=f"{KAFKA_JARS_ENV} is not set"):
        kafka_jars_dir()


def test_kafka_jars_from_the_variable_or_the_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kafka_2.13-4.4.0.jar").write_bytes(b"")
    monkeypatch.setenv(KAFKA_JARS_ENV, str(tmp_path))
    assert kafka_jars_dir() == tmp_path
    monkeypatch.delenv(KAFKA_JARS_ENV)
    assert kafka_jars_dir(tmp_path) == tmp_path
    with pytest.raises(LocalStackError, match="no Kafka broker jars"):
        kafka_jars_dir(tmp_path / "empty")
