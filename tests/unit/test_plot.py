"""``audit --plot``: the series it draws (pure), and real files in each format (matplotlib, Agg)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from spark_purge.errors import ConfigError
from spark_purge.plot import MAX_TOPICS, check_target, cumulative_by_topic, draw

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc)
MIB = 1024 * 1024


def delete(topic: str, minute: int, records: int, size: int | None) -> dict[str, Any]:
    return {"topic": topic, "executed_at": T0 + timedelta(minutes=minute), "records_deleted": records, "bytes_reclaimed_estimate": size}


DELETES = [delete("orders", 0, 100, 3 * MIB), delete("clicks", 1, 400, MIB), delete("orders", 5, 50, None), delete("orders", 9, 20, MIB)]
RANKING = [
    {"blocking_group": "analytics", "binding_constraint": "group", "records_held": 900, "bytes_held": 9 * MIB, "partitions": 3},
    {"blocking_group": "billing", "binding_constraint": "missing_commit", "records_held": 40, "bytes_held": None, "partitions": 1},
]


def test_series_are_running_totals_per_topic_in_time_order() -> None:
    series = cumulative_by_topic(list(reversed(DELETES)), "bytes_reclaimed_estimate")
    assert series["orders"] == ([T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=9)], [3 * MIB, 3 * MIB, 4 * MIB])
    assert series["clicks"] == ([T0 + timedelta(minutes=1)], [MIB])
    many = [delete(f"t{i:02d}", i, 10 + i, None) for i in range(MAX_TOPICS + 3)]
    by_records = cumulative_by_topic(many, "records_deleted")
    assert len(by_records) == MAX_TOPICS + 1  # the smallest three summed into one line
    assert by_records["other topics"][1] == [10, 21, 33]


def test_only_png_svg_and_html_are_drawn() -> None:
    assert [check_target(p) for p in ("a.png", "b.SVG", "c.html")] == [".png", ".svg", ".html"]
    with pytest.raises(ConfigError, match=r"audit --plot: expected a file ending in \.png, \.svg, \.html, got 'out\.jpg'"):
        check_target("out.jpg")


def test_each_format_is_written(tmp_path: Path) -> None:
    png = draw(DELETES, RANKING, str(tmp_path / "sub" / "audit.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    svg = draw(DELETES, RANKING, str(tmp_path / "audit.svg")).read_text()
    for text in ("orders", "clicks", "analytics (group, 3 part.)", "billing (missing_commit, 1 part.)", "bytes reclaimed per topic"):
        assert text in svg, text
    page = draw([], [], str(tmp_path / "audit.html"), title="empty <audit>").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>empty &lt;audit&gt;</title>" in page and "<svg" in page
    assert "no deletes in the audit yet" in page and "no partition is held back by a consumer" in page
