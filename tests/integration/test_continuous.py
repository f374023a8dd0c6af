"""The continuous job rides out a cluster that is down at start: it retries with backoff,
reports each retry, and purges once the cluster is back."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
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


def test_a_batch_interrupted_by_stop_reads_as_a_stop_to_spark_without_overflowing(spark: SparkSession) -> None:
    """Spark tells a batch interrupted by ``query.stop()`` from a failed one by matching the
    Python error's text (``StreamExecution.isInterruptionException``, the real JVM method here).
    The usual text of an interrupted batch, a traceback holding a Java stack trace, overflows
    java.util.regex's stack; the short ``BatchInterrupted`` the purge raises instead (only while
    its query stops) is read as a stop. A failure of a running query keeps its whole error."""
    import traceback

    from py4j.protocol import Py4JJavaError

    from spark_purge.pipeline import BatchInterrupted, interruption_in, stopping_error

    jvm = spark.sparkContext._jvm
    stream_execution = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution

    def read_as_stop(python_error_text: str) -> bool:
        proxy = jvm.py4j.Py4JException(f"An exception was raised by the Python Proxy. Return Message: {python_error_text}")
        return bool(stream_execution.isInterruptionException(proxy, spark.sparkContext._jsc.sc()))

    java_trace = "".join(f"\tat org.apache.spark.sql.execution.Frame{i}.run(Frame.scala:{i})\n" for i in range(300))
    usual = (
        "Traceback (most recent call last):\n  File \"pipeline.py\", line 1, in each_batch\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling o123.collectToPython.\n"
        f": java.lang.InterruptedException\n{java_trace}"
    )
    with pytest.raises(Py4JJavaError, match="StackOverflowError"):
        read_as_stop(usual)

    interrupted = RuntimeError(usual)
    assert interruption_in(interrupted) == "java.lang.InterruptedException"
    gone = str(uuid.uuid4())  # a query id no active query has: it stopped
    short = stopping_error(interrupted, spark, lambda: gone, batch_id=7)
    assert isinstance(short, BatchInterrupted) and "batch 7" in str(short)
    try:
        raise short from None
    except BatchInterrupted:
        text = traceback.format_exc()
    assert len(text) < 1000 and read_as_stop(text)

    running = spark.readStream.format("rate").load().writeStream.format("noop").start()
    try:  # an interruption while its query runs is a failure: kept whole, for the query's error
        assert stopping_error(interrupted, spark, lambda: str(running.id), batch_id=9) is interrupted
    finally:
        running.stop()
    failed = RuntimeError("py4j.protocol.Py4JJavaError: An error occurred while calling o9.save.\n: java.io.IOException: disk full")
    assert stopping_error(failed, spark, lambda: gone, batch_id=8) is failed  # not an interruption
