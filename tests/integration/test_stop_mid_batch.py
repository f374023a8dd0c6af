"""``query.stop()`` in the middle of a purge batch, in a driver process of its own whose stderr
(the JVM's included) is read afterwards. Spark reads the interrupted batch's Python error as a
stop by matching its text with a regex that overflows the stream thread's stack on a long
text (``pipeline.stopping_error``): the stop must be clean, no ``StackOverflowError``. Opt-in
(``multiprocess``): a Spark session of its own and five stopped streams, about a minute."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import python_env, run_reaped
from spark_purge.testing.workload import commit_topic, create_topic, produce
from tests.integration.stop_mid_batch import STOPS

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.multiprocess
def test_a_purge_stopped_mid_batch_stops_cleanly(kafka_cluster: LocalKafka, admin: KafkaAdminClient, tmp_path: Path) -> None:
    topic = create_topic(admin, "stop-mid-batch", partitions=20)
    group = f"{topic}-g"
    produce(kafka_cluster.bootstrap_servers, topic, [50] * 20)
    commit_topic(admin, group, topic, [40] * 20)

    done = run_reaped(
        [sys.executable, "-m", "tests.integration.stop_mid_batch", kafka_cluster.bootstrap_servers, topic, group, str(tmp_path)],
        cwd=REPO_ROOT, env=python_env(), timeout_s=600,
    )

    (tmp_path / "driver.stderr").write_text(done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("stopped")] == [
        f"stopped {n}: exception=None" for n in range(STOPS)
    ], done.stdout
    assert "StackOverflowError" not in done.stderr, done.stderr[-3000:]
    assert "interrupted: the query is stopping" in done.stderr, "no stop came in the middle of a batch"
