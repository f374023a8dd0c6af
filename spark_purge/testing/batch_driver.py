"""One purge batch in a process of its own, SIGKILLed at one step of the batch: the invariant
checker's driver crash (``driver_kill_rewind``), a dead process rather than an exception.

    python -m spark_purge.testing.batch_driver CONFIG.yaml QUERY_ID BATCH_ID STEP

It builds the pipeline as the checker does (``workload.new_pipeline``, under ``QUERY_ID``: the
query id a stream would read from its checkpoint) and runs batch ``BATCH_ID`` on a fresh
snapshot (``workload.run_cycle``). The pipeline's fault hook SIGKILLs this very process when the
batch reaches ``STEP`` (the runner's fault-hook steps: ``intents_written``, ``lease_checked``,
``deletes_sent``): no ``finally`` runs, the lease is not
released, nothing is flushed. Its Spark JVM is its child: the caller starts it in a process
group of its own and kills that group by its id afterwards (``processes.run_reaped``).

Exit codes: killed by SIGKILL (-9 to the caller) at the step, 3 when the batch ended without
reaching it, 1 when the batch failed (a fault, the traceback on stderr).
"""
from __future__ import annotations

import os
import signal
import sys

KILLED_MARK = "SIGKILL at"  # what a driver says on stderr right before it kills itself
NOT_REACHED = 3


def sigkill_self(where: str) -> None:
    """Say ``KILLED_MARK where`` on stderr, then SIGKILL this very process: a driver crash, not
    an exception (no ``finally`` runs, nothing more is flushed). Also the killing driver of the
    fault tests (``tests/integration/faults/killing_driver.py``)."""
    sys.stderr.write(f"{KILLED_MARK} {where}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        sys.stderr.write(__doc__ or "")
        return 2
    config_path, query_id, batch, step = argv
    from spark_purge.config import load
    from spark_purge.session import get_spark
    from spark_purge.testing import workload

    def die_at(reached: str, batch_id: int) -> None:
        if reached == step:
            sigkill_self(f"{reached} of batch {batch_id}")

    spark = get_spark(app_name="spark-purge batch driver")
    pipeline = workload.new_pipeline(spark, load(config_path), fault_hook=die_at, query_id=query_id)
    workload.run_cycle(pipeline, int(batch))
    sys.stderr.write(f"batch-driver: batch {batch} ended without reaching {step}\n")
    return NOT_REACHED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
