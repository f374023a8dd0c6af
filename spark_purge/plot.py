"""``spark-purge audit --plot FILE``: one picture of what the purge reclaimed and who holds back.

Three panels: bytes reclaimed (the audit's estimate) and records deleted per topic, cumulative
over time (each delete is a step at its ``executed_at``), and the "held back by" ranking now
(records each consumer holds back over the partitions it binds, with their bytes). ``.png`` and
``.svg`` are drawn by matplotlib (an optional extra: ``pip install 'spark-purge[plot]'``) with
the headless Agg backend; ``.html`` is the SVG inside a self-contained page.

``draw`` takes plain rows (dicts), so it is testable without Spark; ``audit.reclaimed_over_time``
and ``audit.held_back_ranking`` give them.
"""
from __future__ import annotations

import html
import io
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from spark_purge._units import format_bytes
from spark_purge.errors import ConfigError

FORMATS = (".png", ".svg", ".html")
MAX_TOPICS = 8  # more topics are summed into "other topics"
MAX_HOLDERS = 12  # ranking rows shown

Rows = Sequence[Mapping[str, Any]]


def check_target(path: str) -> str:
    """The file's format (``.png``, ``.svg`` or ``.html``), or a ``ConfigError`` naming it."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"audit --plot: expected a file ending in {', '.join(FORMATS)}, got {path!r}")
    return suffix


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("audit --plot needs matplotlib: pip install 'spark-purge[plot]'") from None
    matplotlib.use("Agg")  # headless: no display, no GUI toolkit
    from matplotlib import pyplot

    return pyplot


def cumulative_by_topic(deletes: Rows, column: str) -> dict[str, tuple[list[datetime], list[int]]]:
    """{topic: (times, running totals of ``column``)}: the ``MAX_TOPICS`` largest topics by
    total, the rest as ``other topics``; null values count 0."""
    totals: dict[str, int] = {}
    for d in deletes:
        totals[d["topic"]] = totals.get(d["topic"], 0) + int(d[column] or 0)
    kept = set(sorted(totals, key=lambda t: (-totals[t], t))[:MAX_TOPICS])
    series: dict[str, tuple[list[datetime], list[int]]] = {}
    for d in sorted(deletes, key=lambda d: d["executed_at"]):
        name = d["topic"] if d["topic"] in kept else "other topics"
        times, values = series.setdefault(name, ([], []))
        times.append(d["executed_at"])
        values.append((values[-1] if values else 0) + int(d[column] or 0))
    return series


def byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit the axis of a byte series reads best in: (name, bytes per unit)."""
    for name, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if largest >= 1024**power:
            return name, 1024**power
    return "bytes", 1


def _panel_over_time(ax: Any, series: Mapping[str, tuple[list[datetime], list[int]]], title: str, as_bytes: bool) -> None:
    import matplotlib.dates

    mdates: Any = matplotlib.dates  # partly untyped
    ax.set_title(title, loc="left", fontsize=11)
    if not series:
        ax.text(0.5, 0.5, "no deletes in the audit yet", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    end = max(times[-1] for times, _ in series.values())
    unit, scale = byte_unit(max(values[-1] for _, values in series.values())) if as_bytes else ("records", 1)
    for topic, (times, values) in sorted(series.items()):
        # From 0 at the first delete, held flat to the last delete of any topic.
        xs, ys = [times[0], *times, end], [0.0, *(v / scale for v in values), values[-1] / scale]
        ax.step(xs, ys, where="post", label=topic)
        ax.plot(times, [v / scale for v in values], "o", markersize=3, color=ax.lines[-1].get_color())
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _panel_ranking(ax: Any, ranking: Rows) -> None:
    ax.set_title("held back now: records per consumer (bytes pro rata of partition size)", loc="left", fontsize=11)
    shown = list(ranking)[:MAX_HOLDERS]
    if not shown:
        ax.text(0.5, 0.5, "no partition is held back by a consumer", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_yticks([])
        return
    names = [f"{r['blocking_group'] or '?'} ({r['binding_constraint']}, {r['partitions']} part.)" for r in shown]
    records = [int(r["records_held"] or 0) for r in shown]
    bars = ax.barh(range(len(shown)), records, color="tab:red", alpha=0.7)
    ax.set_yticks(range(len(shown)), names, fontsize=9)
    ax.invert_yaxis()  # the largest on top
    for bar, r in zip(bars, shown):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {int(r['records_held'] or 0):,} rec · {format_bytes(r['bytes_held'])}",
                va="center", fontsize=8)
    ax.set_xlabel("records held back")
    ax.grid(axis="x", alpha=0.3)
    ax.margins(x=0.25)


def draw(deletes: Rows, ranking: Rows, path: str, title: str = "spark-purge audit") -> Path:
    """Write the picture to ``path`` (``.png``, ``.svg`` or ``.html``); returns the path."""
    suffix = check_target(path)
    pyplot = _matplotlib()
    fig = pyplot.figure(figsize=(12, 8), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(3, 2))
    _panel_over_time(fig.add_subplot(grid[0, 0]), cumulative_by_topic(deletes, "bytes_reclaimed_estimate"),
                     "bytes reclaimed per topic (estimate, cumulative)", as_bytes=True)
    _panel_over_time(fig.add_subplot(grid[0, 1]), cumulative_by_topic(deletes, "records_deleted"),
                     "records deleted per topic (cumulative)", as_bytes=False)
    _panel_ranking(fig.add_subplot(grid[1, :]), ranking)
    fig.suptitle(title, fontsize=13, fontweight="bold")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if suffix == ".html":
            svg = io.StringIO()
            fig.savefig(svg, format="svg")
            out.write_text(_html_page(title, svg.getvalue()), encoding="utf-8")
        else:
            fig.savefig(out, dpi=110)
    finally:
        pyplot.close(fig)
    return out


def _html_page(title: str, svg: str) -> str:
    body = svg[svg.index("<svg"):]  # drop the XML prolog: inline SVG in HTML5
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>\n"
        f"<body style=\"font-family: sans-serif\">\n{body}\n</body></html>\n"
    )


__all__ = ["FORMATS", "check_target", "cumulative_by_topic", "draw"]
