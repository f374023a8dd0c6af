"""Test-only Spark driver: the real ``spark-purge`` CLI, plus a fault hook that SIGKILLs this
very process at one pipeline step — a driver crash, not an exception.

    SPARK_PURGE_TEST_KILL_AT=intents_written|deletes_sent \\
        python -m tests.integration.faults.killing_driver run -c cfg.yaml

Without the variable it is exactly ``spark-purge``. The hook is installed by wrapping
``PurgePipeline.__post_init__`` (the pipeline's own ``fault_hook`` parameter), so no product
code carries a kill switch.
"""
from __future__ import annotations

import os
import signal
import sys

from spark_purge import cli, pipeline

KILL_AT_ENV = "SPARK_PURGE_TEST_KILL_AT"


def _install(step: str) -> None:
    original = pipeline.PurgePipeline.__post_init__

    def post_init(self: pipeline.PurgePipeline) -> None:
        original(self)

        def kill(at: str, batch_id: int) -> None:
            if at == step:
                sys.stderr.write(f"killing-driver: SIGKILL at {at} of batch {batch_id}\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)

        self.fault_hook = kill

    pipeline.PurgePipeline.__post_init__ = post_init  # type: ignore[method-assign]


if __name__ == "__main__":
    kill_at = os.environ.get(KILL_AT_ENV)
    if kill_at:
        _install(kill_at)
    sys.exit(cli.main(sys.argv[1:]))
