"""The real Kafka consumers the integration tests use; they live in
:mod:`spark_purge.testing.share` (the invariant checker runs them too)."""
from __future__ import annotations

from spark_purge.testing.share import (
    Kip848Consumer,
    ShareRun,
    compiled_classpath,
    idle_share_member,
    kip848_consumer,
    set_group_config,
    share_consume,
    share_run,
    share_start_offsets,
    streams_member,
)

__all__ = [
    "Kip848Consumer",
    "ShareRun",
    "compiled_classpath",
    "idle_share_member",
    "kip848_consumer",
    "set_group_config",
    "share_consume",
    "share_run",
    "share_start_offsets",
    "streams_member",
]
