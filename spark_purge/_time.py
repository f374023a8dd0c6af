"""Duration and timestamp parsing for configuration values.

Durations: ``"90s"``, ``"15m"``, ``"2h"``, ``"3 days"``, ``"500ms"``, ``"1h30m"``, ``"1.5h"``, or a
plain integer meaning milliseconds. Timestamps: ISO 8601 (naive means UTC) or epoch milliseconds.
Bad values raise ``ConfigError`` naming the key path given by the caller.

``Deadline`` and ``Backoff`` are the one deadline/backoff pair every retry loop uses.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime, timezone

from spark_purge.errors import ConfigError

_UNIT_MS: dict[str, int] = {}
for _names, _ms in (
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    (("s", "sec", "secs", "second", "seconds"), 1_000),
    (("m", "min", "mins", "minute", "minutes"), 60_000),
    (("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    (("d", "day", "days"), 86_400_000),
    (("w", "week", "weeks"), 604_800_000),
):
    for _name in _names:
        _UNIT_MS[_name] = _ms

_TOKEN = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")
DURATION_HINT = "a duration like '500ms', '90s', '15m', '2h', '3 days' or an integer of milliseconds"


def parse_duration(value: object, path: str) -> int:
    """Milliseconds for ``value``; raises ``ConfigError`` naming ``path`` when it is not a duration."""
    # bool is an int subclass: `true` in YAML is never a duration.
    if isinstance(value, bool):
        raise ConfigError(f"{path}: expected {DURATION_HINT}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{path}: expected a non-negative duration, got {value!r}")
        return value
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: expected {DURATION_HINT}, got {value!r}")
    text = value.strip()
    if text.isdigit():
        return int(text)
    total = 0.0
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.group(2).lower() not in _UNIT_MS:
            unit = match.group(2) if match else text[pos:].strip()
            raise ConfigError(
                f"{path}: expected {DURATION_HINT}, got {value!r} "
                f"(unknown unit {unit!r}; units: ms, s, m, h, d, w)"
            )
        if match.group(2) == "M":  # "1M" reads as a month as often as a minute: say which
            raise ConfigError(
                f"{path}: expected {DURATION_HINT}, got {value!r} (unit 'M' is ambiguous: write 'm' for minutes; "
                "there is no month unit, write days, e.g. '30d')"
            )
        total += float(match.group(1)) * _UNIT_MS[match.group(2).lower()]
        pos = match.end()
    return round(total)


def format_duration(ms: int) -> str:
    """Shortest exact rendering of ``ms`` (``"3d"``, ``"90s"``, ``"500ms"``) for messages."""
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def parse_timestamp(value: object, path: str) -> datetime:
    """A UTC ``datetime`` from ISO 8601 text (naive means UTC) or epoch milliseconds."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return datetime.fromtimestamp(int(text) / 1000, tz=timezone.utc)
        try:
            # Python 3.10's fromisoformat does not accept a trailing Z.
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            pass
        else:
            return as_utc(parsed)
    raise ConfigError(
        f"{path}: expected an ISO 8601 timestamp (e.g. 2024-05-01T00:00:00Z) or epoch milliseconds, "
        f"got {value!r}"
    )


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; naive values are taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


class Deadline:
    """A point on a monotonic clock that retry loops run until; the clock is injectable.

    ``Deadline(5.0)`` expires five seconds from now; ``remaining()`` never goes below 0 and
    ``remaining_ms()`` never below 1 (a request timeout of 0 means "no timeout" to Kafka).
    """

    __slots__ = ("_clock", "at")

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.at = clock() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - self._clock())

    def remaining_ms(self) -> int:
        return max(1, int(self.remaining() * 1000))

    def expired(self) -> bool:
        return self._clock() >= self.at

    def allows(self, pause: float) -> bool:
        """True when pausing ``pause`` seconds still leaves time before the deadline."""
        return self._clock() + pause < self.at


class Backoff:
    """Exponential pauses: ``first``, doubled each step up to ``cap`` (seconds).

    ``next()`` returns the pause to take now and advances; ``within(deadline)`` clips it so a
    loop never sleeps past its deadline. Every retry loop in the package uses this one helper.
    """

    __slots__ = ("_next", "cap", "factor", "first")

    def __init__(self, first: float = 0.1, cap: float = 2.0, factor: float = 2.0) -> None:
        if first <= 0 or cap < first or factor < 1:
            raise ValueError(f"Backoff: expected 0 < first <= cap and factor >= 1, got {first}, {cap}, {factor}")
        self.first, self.cap, self.factor = first, cap, factor
        self._next = first

    def next(self) -> float:
        pause = self._next
        self._next = min(self._next * self.factor, self.cap)
        return pause

    def within(self, deadline: Deadline) -> float:
        return min(self.next(), deadline.remaining())

    def reset(self) -> None:
        self._next = self.first
