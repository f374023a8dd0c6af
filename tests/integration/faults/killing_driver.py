"""Test-only Spark driver: the real ``spark-purge`` CLI, plus a fault hook that SIGKILLs this
very process at one step — a driver crash, not an exception.

    SPARK_PURGE_TEST_KILL_AT=intents_written|deletes_sent \\
        python -m tests.integration.faults.killing_driver run -c cfg.yaml
    SPARK_PURGE_TEST_KILL_AT=tiering:storage_disable \\
        python -m tests.integration.faults.killing_driver tiering disable TOPIC --policy delete -c cfg.yaml

Without the variable it is exactly ``spark-purge``. The hook is installed by wrapping
``PurgePipeline.__post_init__`` (the pipeline's own ``fault_hook`` parameter) or, for a
``tiering:`` step, ``Disabler.__init__`` (the state machine's ``fault_hook``), so no product
code carries a kill switch. ``run_killing_driver`` starts it as a test's subprocess.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from spark_purge import cli, pipeline, tiering
from spark_purge.testing.batch_driver import sigkill_self
from spark_purge.testing.processes import python_env, run_reaped

KILL_AT_ENV = "SPARK_PURGE_TEST_KILL_AT"
TIERING_PREFIX = "tiering:"
REPO_ROOT = Path(__file__).resolve().parents[3]  # the driver runs `-m tests.integration...`


def run_killing_driver(args: list[str], kill_at: str | None, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """``spark-purge ARGS`` as its own process (and process group), killed at ``kill_at``
    (None: not killed), reaped by its id; its group is SIGKILLed when it ends or times out."""
    env = python_env(**{KILL_AT_ENV: kill_at or None})
    # Its own process group: its JVM joins it, and the whole group is SIGKILLed afterwards.
    return run_reaped([sys.executable, "-m", "tests.integration.faults.killing_driver", *args], cwd=REPO_ROOT, env=env, timeout_s=timeout_s)


def _install_tiering(step: str) -> None:
    original = tiering.Disabler.__init__

    def init(self: tiering.Disabler, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)

        def kill(done: str) -> None:
            if done == step:
                sigkill_self(f"tiering step {done}")

        self.fault_hook = kill

    tiering.Disabler.__init__ = init  # type: ignore[method-assign]


def _install(step: str) -> None:
    original = pipeline.PurgePipeline.__post_init__

    def post_init(self: pipeline.PurgePipeline) -> None:
        original(self)

        def kill(at: str, batch_id: int) -> None:
            if at == step:
                sigkill_self(f"{at} of batch {batch_id}")

        self.fault_hook = kill

    pipeline.PurgePipeline.__post_init__ = post_init  # type: ignore[method-assign]


if __name__ == "__main__":
    kill_at = os.environ.get(KILL_AT_ENV)
    if kill_at and kill_at.startswith(TIERING_PREFIX):
        _install_tiering(kill_at.removeprefix(TIERING_PREFIX))
    elif kill_at:
        _install(kill_at)
    sys.exit(cli.main(sys.argv[1:]))
