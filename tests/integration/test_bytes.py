"""Bytes on a real broker: the snapshot's partition sizes (DescribeLogDirs), the audit's size
before a delete and its reclaimed estimate, the smaller size a later cycle measures once Kafka
removed the segments below the new log start, and the operator's views of them (``audit``
with ``--plot``, ``why``), all in this process on the shared cluster and Spark session.

The oracle for sizes is the broker's log directory on disk (the partition's ``*.log`` segment
files), not DescribeLogDirs."""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from spark_purge._units import format_bytes
from spark_purge.audit import measured_sizes
from spark_purge.cli import main
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    commit_topic,
    log_starts,
    produce,
    purge_config,
    purge_config_dict,
    retry,
    run_available_now,
)

SEGMENT_BYTES = 1024 * 1024  # Kafka 4's minimum segment.bytes
RECORDS, VALUE_BYTES, COMMITTED = 400, 10_000, 300  # ~4 MB: about four segments


def segment_bytes_on_disk(cluster: LocalKafka, topic: str) -> int:
    """The partition's segment files (``*.log``, not those already renamed ``.deleted``) on its
    only broker's disk: what DescribeLogDirs should report."""
    (node_id,) = cluster.node_ids
    folder = cluster.node(node_id).directory / "data" / f"{topic}-0"
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def wait_for_disk_below(cluster: LocalKafka, topic: str, size: int, timeout_s: float = 90.0) -> int:
    """Kafka removes whole segments below the log start asynchronously (every
    log.retention.check.interval.ms, 5 s on the test broker): wait until the disk shows it."""

    def smaller() -> int:
        now = segment_bytes_on_disk(cluster, topic)
        assert now < size, f"{topic}: still {now} bytes on disk (was {size})"
        return now

    return retry(smaller, f"segments of {topic} below the new log start removed", timeout_s, also=(AssertionError,))


def test_sizes_before_the_estimate_and_the_measured_size_after(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    topic = new_topic("bytes", configs={"segment.bytes": str(SEGMENT_BYTES)})
    produce(kafka_cluster.bootstrap_servers, topic, [RECORDS], value_bytes=VALUE_BYTES)
    group = f"{topic}-g"
    commit_topic(admin, group, topic, [COMMITTED])
    before = segment_bytes_on_disk(kafka_cluster, topic)
    assert before > RECORDS * VALUE_BYTES
    cfg = purge_config(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), [group])

    run_available_now(spark, cfg, timeout_s=300)

    assert log_starts(admin, topic, 1) == [COMMITTED]
    first = measured_sizes(spark.read.format("delta").load(cfg.audit.path)).collect()
    assert len(first) == 1
    row = first[0]
    assert (row.records_deleted, row.size_bytes_before, row.size_bytes_after) == (COMMITTED, before, None)
    assert row.bytes_reclaimed_estimate == before * COMMITTED // RECORDS  # records are equally large here

    after = wait_for_disk_below(kafka_cluster, topic, before)
    # Whole segments only: at most the estimate, and less by under one segment (the one holding the new log start stays).
    assert row.bytes_reclaimed_estimate - SEGMENT_BYTES < before - after <= row.bytes_reclaimed_estimate

    run_available_now(spark, cfg, timeout_s=300)  # a later cycle measures the size after

    (measured,) = measured_sizes(spark.read.format("delta").load(cfg.audit.path)).collect()
    assert (measured.size_bytes_before, measured.size_bytes_after, measured.bytes_measured_drop) == (before, after, before - after)

    # The operator's views, in this process (the shared Spark session): bytes in the reports, the plot, why.
    config_file = tmp_path / "bytes.yaml"
    config_file.write_text(yaml.safe_dump(purge_config_dict(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), [group])))
    capsys.readouterr()
    plot = tmp_path / "audit.png"
    assert main(["audit", "-c", str(config_file), "--report", "deleted", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "bytes_reclaimed_est" in out and f"plot: {plot.resolve()}" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"
    commit_topic(admin, group, topic, [COMMITTED + 50])  # the group moves on: 50 records could go now
    assert main(["why", f"{topic}:0", "-c", str(config_file)]) == 0
    why = capsys.readouterr().out.splitlines()
    assert why[0] == f"{topic}:0  bound by group ({group}, classic)"
    assert why[2].startswith(f"  log:          start {COMMITTED}, high watermark {RECORDS}: {RECORDS - COMMITTED} records, {format_bytes(after)}")
    assert why[3:5] == [
        f"  cutoff:       {COMMITTED + 50}, would delete 50 records now",
        f"  lag:          {group} is 50 records (~{format_bytes(after * 50 // (RECORDS - COMMITTED))}) behind the high watermark "
        f"(position {COMMITTED + 50})",
    ]
    assert why[5].startswith("  since:        ")
    assert why[6].startswith("  last delete:  ") and why[6].endswith(f", {COMMITTED} records (~{format_bytes(row.bytes_reclaimed_estimate)}), batch 0")
