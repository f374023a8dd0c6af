"""The continuous job rides out a cluster that is down at start: it retries with backoff,
reports each retry, and purges once the cluster is back."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_purge.pipeline import BatchResult, run_continuous
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import commit_topic, create_topics, log_starts, new_admin, produce
from tests.integration.test_pipeline import make_config


def test_stream_retries_until_the_cluster_comes_back(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = LocalKafka(nodes=1)  # ports are fixed now; the broker is not started yet
    topic = "late"
    cfg = make_config(tmp_path, cluster.bootstrap_servers, topic, ["g"])
    cfg = dataclasses.replace(cfg, kafka=dataclasses.replace(cfg.kafka, request_timeout=2000))  # fail fast
    results: list[BatchResult] = []
    sleeps: list[float] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_continuous(
                spark, cfg, on_batch=results.append, initial_backoff_s=0.5, max_backoff_s=2,
                sleep=lambda s: (sleeps.append(s), time.sleep(s)),
            )
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)
        finally:
            done.set()

    caplog.set_level(logging.WARNING, logger="spark_purge.pipeline")
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 120
        while len(sleeps) < 2:  # at least two failed starts, with growing backoff
            assert not done.is_set(), errors
            assert time.monotonic() < deadline, "the stream never retried"
            time.sleep(0.2)
        with cluster:
            admin = new_admin(cluster.bootstrap_servers)
            create_topics(admin, {topic: 1})
            produce(cluster.bootstrap_servers, topic, [20])
            commit_topic(admin, "g", topic, [12])
            while log_starts(admin, topic, 1) != [12] or not any(r.deleted for r in results):
                assert not done.is_set(), errors
                assert time.monotonic() < deadline, "no purge after the cluster came back"
                time.sleep(0.5)
            admin.close()
            while not done.wait(0.5):  # stop whichever query incarnation is running now
                for query in spark.streams.active:
                    query.stop()
    finally:
        for query in spark.streams.active:
            query.stop()
        worker.join(60)

    assert errors == []
    assert sleeps[0] < sleeps[1]  # exponential backoff
    assert any("Kafka unreachable" in r.getMessage() and cluster.bootstrap_servers in r.getMessage() for r in caplog.records)
