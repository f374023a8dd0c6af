"""Sizes as people read them (``1.5 MiB``), for tables, plots and explanations."""
from __future__ import annotations

from typing import Optional

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: Optional[float]) -> str:
    """``None`` -> ``"?"`` (unknown); else binary units, one decimal: ``1.5 MiB``."""
    if n is None:
        return "?"
    value, sign = abs(float(n)), "-" if n < 0 else ""
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{sign}{int(value)} B" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["format_bytes"]
