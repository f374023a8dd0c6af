"""End-to-end purges on a real broker with real Spark + Delta (issue: end-to-end purge)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_purge import txn_append
from spark_purge.config import PurgeConfig
from spark_purge.pipeline import PurgePipeline, default_client_factory, start_stream
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_commit_versions,
    audit_rows,
    commit_topic,
    log_starts,
    produce,
    purge_config,
    run_available_now,
)


def make_config(tmp: Path, bootstrap: str, topic: str, groups: list[str] | None, **extra: object) -> PurgeConfig:
    return purge_config(tmp, bootstrap, topic.replace(".", r"\."), groups, **extra)


def run_once(spark: SparkSession, cfg: PurgeConfig, dry_run: bool = False) -> PurgePipeline:
    return run_available_now(spark, cfg, dry_run=dry_run, timeout_s=180)


@pytest.fixture
def topic3(new_topic: Callable[..., str], kafka_cluster: LocalKafka) -> Iterator[str]:
    name = new_topic("orders", partitions=3)
    produce(kafka_cluster.bootstrap_servers, name, [100, 100, 100])
    yield name


def test_purge_cuts_each_partition_at_the_minimum_required_commit(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    a, b = [100, 80, 30], [60, 100, 0]
    commit_topic(admin, f"{topic3}-a", topic3, a)
    commit_topic(admin, f"{topic3}-b", topic3, b)
    cfg = make_config(tmp_path, kafka_cluster.bootstrap_servers, topic3, [f"{topic3}-a", f"{topic3}-b"])
    expected = [min(x, y) for x, y in zip(a, b)]  # computed independently of the policy code
    before = dict(txn_append.COUNTS)

    pipeline = run_once(spark, cfg)

    # Every txn write of the batch (the lease's, its audit fence, intents, outcomes) was made
    # directly, its id read from the checksum: none fell back to Delta's writer and its state job.
    made = {k: v - before[k] for k, v in txn_append.COUNTS.items()}
    assert made["writer"] == 0 and made["fast"] >= 2, made

    assert log_starts(admin, topic3, 3) == expected
    outcomes = {r["partition"]: r for r in audit_rows(spark, cfg)}
    assert outcomes[0]["status"] == "deleted" and outcomes[0]["low_watermark"] == 60
    assert outcomes[0]["records_deleted"] == 60 and outcomes[0]["blocking_group"] == f"{topic3}-b"
    assert outcomes[1]["low_watermark"] == 80 and outcomes[1]["blocking_group"] == f"{topic3}-a"
    # The lagging group holds partition 2 at 0: untouched, and the audit names the group.
    assert outcomes[2]["status"] == "skipped" and outcomes[2]["records_deleted"] == 0
    assert outcomes[2]["blocking_group"] == f"{topic3}-b"
    assert pipeline.totals.records_deleted == 140 and pipeline.totals.batches == 1
    # Every delete has its intent, in an earlier Delta commit of the same batch.
    intents = {(r["batch_id"], r["partition"]): r for r in audit_rows(spark, cfg, "intent")}
    assert set(intents) == {(0, 0), (0, 1)}
    assert all(intents[(0, p)]["cutoff"] == expected[p] for p in (0, 1))
    by_meta = audit_commit_versions(spark, cfg)
    assert by_meta["intent:0"] < by_meta["outcome:0"]


def test_dry_run_changes_nothing_in_kafka(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    commit_topic(admin, f"{topic3}-a", topic3, [50, 50, 50])
    cfg = make_config(tmp_path, kafka_cluster.bootstrap_servers, topic3, [f"{topic3}-a"])

    run_once(spark, cfg, dry_run=True)

    assert log_starts(admin, topic3, 3) == [0, 0, 0]
    rows = audit_rows(spark, cfg)
    assert [(r["status"], r["dry_run"], r["cutoff"]) for r in rows] == [("dry_run", True, 50)] * 3


def test_replayed_batch_leaves_no_duplicate_audit_rows(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    from spark_purge.pipeline import read_snapshot

    commit_topic(admin, f"{topic3}-a", topic3, [10, 20, 30])
    cfg = make_config(tmp_path, kafka_cluster.bootstrap_servers, topic3, [f"{topic3}-a"])
    pipeline = PurgePipeline(
        spark, cfg, default_client_factory(cfg), checkpoint_location=str(tmp_path / "cp"), query_id_override="q-direct"
    )
    snapshot = read_snapshot(spark, cfg).cache()
    snapshot.count()
    try:
        first = pipeline.process_batch(snapshot, 7)
        again = pipeline.process_batch(snapshot, 7)  # what foreachBatch does after a crash
    finally:
        pipeline.close()

    assert first.deleted == 3 and again.deleted == 0  # its outcomes are recorded: nothing is redone
    assert log_starts(admin, topic3, 3) == [10, 20, 30]
    assert len(audit_rows(spark, cfg)) == 3
    assert len(audit_rows(spark, cfg, "intent")) == 3


def test_crash_after_intents_then_restart_completes_exactly_once(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    commit_topic(admin, f"{topic3}-a", topic3, [40, 40, 40])
    cfg = make_config(tmp_path, kafka_cluster.bootstrap_servers, topic3, [f"{topic3}-a"])

    def crash(step: str, batch_id: int) -> None:
        if step == "intents_written":
            raise RuntimeError("simulated driver crash after the intent write")

    assert cfg.stream is not None
    pipeline = PurgePipeline(
        spark, cfg, default_client_factory(cfg), checkpoint_location=cfg.stream.checkpoint_location, fault_hook=crash
    )
    query, _ = start_stream(spark, cfg, available_now=True, pipeline=pipeline)
    with pytest.raises(Exception):  # noqa: B017 - Spark wraps the error in a JVM exception
        query.awaitTermination(180)
    pipeline.close()
    assert log_starts(admin, topic3, 3) == [0, 0, 0]  # crashed before any delete
    assert len(audit_rows(spark, cfg, "intent")) == 3 and audit_rows(spark, cfg) == []

    # Commits move on meanwhile; the replayed batch executes its recorded intents (never a new plan).
    commit_topic(admin, f"{topic3}-a", topic3, [90, 90, 90])
    run_once(spark, cfg)

    outcomes = audit_rows(spark, cfg)
    assert [(r["batch_id"], r["cutoff"]) for r in outcomes if r["batch_id"] == 0] == [(0, 40)] * 3
    assert len(audit_rows(spark, cfg, "intent")) == len([r for r in outcomes if r["status"] == "deleted"]), [
        (r["batch_id"], r["partition"], r["status"], r["cutoff"], r["error"]) for r in outcomes
    ]
    assert log_starts(admin, topic3, 3)[0] >= 40


def wait_purged(query: StreamingQuery, pipeline: PurgePipeline, admin: KafkaAdminClient, topic: str, step: list[int]) -> None:
    """Until Kafka shows the cut to ``step`` (the log starts of ``topic``'s partitions) and the
    batch that made it has written its outcomes (the stream's deleted records add up to it)."""
    deadline = time.monotonic() + 90
    while log_starts(admin, topic, len(step)) != step or pipeline.totals.records_deleted != sum(step):
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"stream never purged to {step}"
        time.sleep(0.2)


def test_stream_purges_progressively_over_three_batches(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    group = f"{topic3}-a"
    cfg = make_config(tmp_path, kafka_cluster.bootstrap_servers, topic3, [group])
    steps = [[10, 10, 10], [40, 30, 20], [70, 60, 50]]
    commit_topic(admin, group, topic3, steps[0])
    from spark_purge.audit import PROGRESS_APPENDS

    appends = dict(PROGRESS_APPENDS)
    query, pipeline = start_stream(spark, cfg)
    seen: list[list[int]] = []
    try:
        for step in steps:
            commit_topic(admin, group, topic3, step)
            wait_purged(query, pipeline, admin, topic3, step)
            seen.append(log_starts(admin, topic3, 3))
    finally:
        query.stop()
        pipeline.close()

    assert seen == steps
    # The moves after the store's first batch were appended as the match's own file, and the
    # store reads them back.
    remembered = {(r["partition"], r["committed_offset"]) for r in pipeline.progress.read().where(f"group_id = '{group}'").collect()}
    assert remembered == set(enumerate(steps[-1]))
    assert PROGRESS_APPENDS["file"] > appends["file"], (appends, PROGRESS_APPENDS)
    deleted = [r for r in audit_rows(spark, cfg) if r["status"] == "deleted"]
    assert len({r["batch_id"] for r in deleted}) >= 3
    assert sum(r["records_deleted"] for r in deleted) == sum(steps[-1])


def test_a_continuous_query_keeps_its_python_workers_warm_between_triggers(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path
) -> None:
    """``stream.keep_warm``: while the query waits for its next trigger, the pipeline runs the
    keep-warm job (a real Spark job over Python workers) in its own job group, and the purge
    goes on as usual; it stops with the query. (Never while a batch runs:
    ``tests/unit/test_keepwarm.py``.)"""
    from spark_purge import keepwarm

    group = f"{topic3}-a"
    cfg = make_config(
        tmp_path, kafka_cluster.bootstrap_servers, topic3, [group],
        stream={"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval": "4s", "keep_warm": "300ms"},
    )
    steps = [[10, 10, 10], [40, 30, 20]]
    commit_topic(admin, group, topic3, steps[0])
    query, pipeline = start_stream(spark, cfg)
    keeper = pipeline._keeper
    assert keeper is not None and keeper.every_s == 0.3
    touched: list[object] = []  # the job's answers
    real = keeper._touch

    def touch() -> object:
        answer = real()
        touched.append(answer)
        return answer

    keeper._touch = touch
    tracker = spark.sparkContext.statusTracker()
    try:
        for step in steps:
            commit_topic(admin, group, topic3, step)
            wait_purged(query, pipeline, admin, topic3, step)
        deadline = time.monotonic() + 30
        while len(touched) < 2:  # the trigger is 4 s: the query idles between batches
            assert time.monotonic() < deadline, f"no keep-warm touch in 30 s: {touched}"
            time.sleep(0.1)
    finally:
        query.stop()
        pipeline.close()

    assert set(touched) == {keepwarm.PARTITIONS * (keepwarm.PARTITIONS + 1) // 2}  # the job ran and answered (rows 1..n)
    assert len(tracker.getJobIdsForGroup(keepwarm.JOB_GROUP)) >= len(touched)
    assert pipeline._keeper is None and not keeper._thread.is_alive()
    assert log_starts(admin, topic3, 3) == steps[-1]


def test_manual_timestamp_entry_resolves_through_list_offsets_by_timestamp(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("replay", partitions=1)
    base = int(time.time() * 1000) - 600_000  # recent: older records would meet retention.ms
    # record i has timestamp base + i seconds
    produce(kafka_cluster.bootstrap_servers, topic, [50], timestamps_ms={0: [base + i * 1000 for i in range(50)]})
    from datetime import datetime, timezone

    cut_at = datetime.fromtimestamp((base + 30_000) / 1000, tz=timezone.utc).isoformat()
    cfg = make_config(
        tmp_path, kafka_cluster.bootstrap_servers, topic, None,
        rules=[], manual=[{"topic": topic, "offset": f"@{cut_at}", "force": True}],
    )

    run_once(spark, cfg)

    assert log_starts(admin, topic, 1) == [30]  # the first record at/after the timestamp
    (row,) = audit_rows(spark, cfg)
    assert (row["status"], row["binding_constraint"], row["cutoff"]) == ("deleted", "manual", 30)


def test_cli_plan_prints_the_plan_without_a_stream_or_any_change(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, topic3: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from spark_purge.cli import main

    commit_topic(admin, f"{topic3}-a", topic3, [25, 50, 0])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({
        "kafka": {"bootstrap_servers": kafka_cluster.bootstrap_servers, "request_timeout": "10s"},
        "rules": [{"name": "r", "topics": topic3, "required_groups": [f"{topic3}-a"]}],
        "audit": {"path": str(tmp_path / "audit")},  # no stream section: no checkpoint needed
    }))

    assert main(["plan", "-c", str(path), "--all", "--json"]) == 0

    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["partition"], r["cutoff"], r["binding_constraint"], r["actionable"]) for r in rows] == [
        (0, 25, "group", True), (1, 50, "group", True), (2, 0, "group", False),
    ]
    assert log_starts(admin, topic3, 3) == [0, 0, 0]
    assert not (tmp_path / "audit").exists()
