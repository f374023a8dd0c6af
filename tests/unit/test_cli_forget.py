"""``spark-purge forget-group``: argument and configuration errors exit 2 before any Spark work."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_purge.cli import EXIT_USAGE, main

BASE = {"kafka": {"bootstrap_servers": ["127.0.0.1:1"]}, "audit": {"path": "audit"}, "rules": [{"name": "r", "topics": "orders", "min_retention": "0s"}]}


def write(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "purge.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_refuses_a_config_without_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["forget-group", "gone", "-c", write(tmp_path, BASE)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "stream.checkpoint_location" in err and "nothing to forget" in err


def test_bad_topic_regex_and_missing_group_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(tmp_path, {**BASE, "stream": {"checkpoint_location": str(tmp_path / "ckpt")}})
    assert main(["forget-group", "gone", "-c", cfg, "--topic", "("]) == EXIT_USAGE
    assert "--topic: expected a regular expression" in capsys.readouterr().err
    assert main(["forget-group", "-c", cfg]) == EXIT_USAGE
    assert main(["forget-group", "  ", "-c", cfg]) == EXIT_USAGE
