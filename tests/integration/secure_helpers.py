"""The SCRAM users of the one secured cluster a test run shares (``secure_cluster`` in conftest).

Distinctive passwords, so a leak cannot hide behind a common substring. ``admin`` is the super
user; ``purger`` the purge principal (its ACLs are set per test); ``nocluster`` lacks Cluster
Describe.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

PURGER_PASSWORD = f"purger-pw-{uuid.uuid4().hex}"
ADMIN_PASSWORD = f"admin-pw-{uuid.uuid4().hex}"
NOCLUSTER_PASSWORD = f"nocluster-pw-{uuid.uuid4().hex}"
SCRAM_USERS = {"admin": ADMIN_PASSWORD, "purger": PURGER_PASSWORD, "nocluster": NOCLUSTER_PASSWORD}


class LogCollector(logging.Handler):
    """Every log record it is attached to, formatted with its arguments and tracebacks
    (``-p no:logging`` safe): where the leak checks look for secrets."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # includes exc_info tracebacks


@contextmanager
def root_logs() -> Iterator[LogCollector]:
    """A :class:`LogCollector` on the root logger at DEBUG for the block (the ``kafka`` logger
    back at WARNING after it, as the CLI keeps it); the root level restored."""
    records, root = LogCollector(), logging.getLogger()
    old_level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logging.getLogger("kafka").setLevel(logging.WARNING)
        root.removeHandler(records)
        root.setLevel(old_level)
