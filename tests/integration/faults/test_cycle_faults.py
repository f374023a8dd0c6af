"""Faults between the snapshot and the delete, consumer groups rewinding, and a run that cannot
start (cluster unreachable, bad configuration, bad arguments) — on the real 3-node cluster."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions
from pyspark.sql import SparkSession

from spark_purge.cli import EXIT_KAFKA, EXIT_USAGE, main
from spark_purge.testing.cluster import LocalKafka, free_port
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    leaders,
    log_start_offsets,
    log_starts,
    new_pipeline,
    produce,
    purge_config,
    purge_config_dict,
    run_cycle,
)
from tests.integration.faults.helpers import create_topic, retry

pytestmark = pytest.mark.faults


def test_group_rewind_nothing_is_purged_past_its_new_position(
    spark: SparkSession, fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path
) -> None:
    topic = create_topic(fadmin, "rw", partitions=2)
    produce(fault_cluster.bootstrap_servers, topic, [100, 100])
    fast, slow = f"{topic}-fast", f"{topic}-slow"
    commit_topic(fadmin, fast, topic, [80, 80])
    commit_topic(fadmin, slow, topic, [60, 70])
    cfg = purge_config(tmp_path, fault_cluster.bootstrap_servers, topic, [fast, slow])
    pipeline = new_pipeline(spark, cfg)
    try:
        run_cycle(pipeline, 0)
        assert log_starts(fadmin, topic, 2) == [60, 70]
        # The slow group is reset backwards (an operator replays), below what is already gone:
        # whatever the fast group does, nothing may move now.
        commit_topic(fadmin, slow, topic, [20, 30])
        produce(fault_cluster.bootstrap_servers, topic, [50, 50])
        commit_topic(fadmin, fast, topic, [150, 150])
        held = run_cycle(pipeline, 1)
        assert held.deleted == 0 and log_starts(fadmin, topic, 2) == [60, 70]
        # It consumes again, to 65 / 110: purged to exactly there, not to the fast group's 150.
        commit_topic(fadmin, slow, topic, [65, 110])
        run_cycle(pipeline, 2)
        assert log_starts(fadmin, topic, 2) == [65, 110]
    finally:
        pipeline.close()
    rows = {(r["batch_id"], r["partition"]): r for r in audit_rows(spark, cfg)}
    assert [rows[(1, p)]["status"] for p in (0, 1)] == ["skipped", "skipped"]
    assert [rows[(1, p)]["blocking_group"] for p in (0, 1)] == [slow, slow]
    assert [(rows[(2, p)]["status"], rows[(2, p)]["cutoff"]) for p in (0, 1)] == [("deleted", 65), ("deleted", 110)]


def test_topic_deleted_between_snapshot_and_delete(
    spark: SparkSession, fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path
) -> None:
    keep = create_topic(fadmin, "td-keep", partitions=2)
    gone = create_topic(fadmin, "td-gone", partitions=2)
    for t in (keep, gone):
        produce(fault_cluster.bootstrap_servers, t, [50, 50])
    group = f"{keep}-g"
    for t in (keep, gone):
        commit_topic(fadmin, group, t, [40, 40])
    cfg = purge_config(tmp_path, fault_cluster.bootstrap_servers, f"{keep}|{gone}", [group])

    def delete_topic(step: str, batch_id: int) -> None:
        if step == "intents_written":
            fadmin.delete_topics([gone])
            retry(lambda: _assert_gone(fadmin, gone), f"{gone} deleted")

    pipeline = new_pipeline(spark, cfg, fault_hook=delete_topic)
    try:
        result = run_cycle(pipeline, 0)
    finally:
        pipeline.close()
    assert log_starts(fadmin, keep, 2) == [40, 40]
    rows = {(r["topic"], r["partition"]): r for r in audit_rows(spark, cfg)}
    assert len(rows) == 4 and len(audit_rows(spark, cfg, "intent")) == 4
    for p in (0, 1):
        assert rows[(keep, p)]["status"] == "deleted"
        # The lineage recheck right before DeleteRecords finds the topic gone and never sends it
        # (skipped, topic_deleted); a broker whose metadata still lists it makes the send fail.
        gone_row = rows[(gone, p)]
        assert (gone_row["status"], gone_row["error"].split(":")[0]) in {
            ("skipped", "topic_deleted"),
            ("failed", "UNKNOWN_TOPIC_OR_PARTITION"),
            ("failed", "UNKNOWN_TOPIC_ID"),
        }, gone_row
    assert (result.deleted, result.failed) == (2, sum(rows[(gone, p)]["status"] == "failed" for p in (0, 1)))


def test_a_group_seen_only_on_a_leaderless_partition_still_holds_the_topic(
    spark: SparkSession, fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path
) -> None:
    """billing stopped with a commit on orders-0 only (orders-1 came later); orders-0's one
    replica dies, so the snapshot drops it, and billing's only row with it. A discovering rule
    must still require billing on orders-1 (a missing commit there), not cut it to analytics'
    position: billing reads orders-1 from its reset position when it comes back."""
    victim, other = fault_cluster.node_ids[-1], fault_cluster.node_ids[0]
    topic = create_topic(fadmin, "ll", partitions=2, assignment={0: [victim], 1: [other]})
    produce(fault_cluster.bootstrap_servers, topic, [100, 100])
    commit_topic(fadmin, f"{topic}-billing", topic, [50, None])
    commit_topic(fadmin, f"{topic}-analytics", topic, [100, 100])
    fault_cluster.kill_node(victim)
    retry(lambda: _assert_leader(fadmin, topic, 0, -1), f"{topic}-0 without a leader", timeout_s=90)
    cfg = purge_config(tmp_path, fault_cluster.bootstrap_servers, topic, None)  # groups discovered
    pipeline = new_pipeline(spark, cfg)
    try:
        result = run_cycle(pipeline, 0)
    finally:
        pipeline.close()
    assert result.deleted == 0
    assert log_start_offsets(fadmin, [(topic, 1)]) == {(topic, 1): 0}  # orders-0 has no leader to ask
    (row,) = [r for r in audit_rows(spark, cfg) if r["partition"] == 1]
    assert (row["status"], row["binding_constraint"], row["blocking_group"]) == ("skipped", "missing_commit", f"{topic}-billing"), row


def _assert_leader(admin: KafkaAdminClient, topic: str, partition: int, leader: int) -> None:
    assert leaders(admin, topic)[partition] == leader


def _assert_gone(admin: KafkaAdminClient, topic: str) -> None:
    assert topic not in admin.list_topics()


def test_partitions_added_between_snapshot_and_delete(
    spark: SparkSession, fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path
) -> None:
    topic = create_topic(fadmin, "pa", partitions=2)
    produce(fault_cluster.bootstrap_servers, topic, [50, 50])
    group = f"{topic}-g"
    commit_topic(fadmin, group, topic, [30, 30])
    cfg = purge_config(tmp_path, fault_cluster.bootstrap_servers, topic, [group])

    def add_partition(step: str, batch_id: int) -> None:
        if step == "intents_written" and batch_id == 0:
            fadmin.create_partitions({topic: NewPartitions(3)})

    pipeline = new_pipeline(spark, cfg, fault_hook=add_partition)
    try:
        run_cycle(pipeline, 0)
        assert log_starts(fadmin, topic, 2) == [30, 30]
        produce(fault_cluster.bootstrap_servers, topic, [0, 0, 40])
        # The new partition has no commit from the required group: it blocks.
        run_cycle(pipeline, 1)
        assert log_starts(fadmin, topic, 3) == [30, 30, 0]
        commit_topic(fadmin, group, topic, [30, 30, 25])
        run_cycle(pipeline, 2)
    finally:
        pipeline.close()
    assert log_starts(fadmin, topic, 3) == [30, 30, 25]
    rows = {(r["batch_id"], r["partition"]): r for r in audit_rows(spark, cfg)}
    assert sorted(p for b, p in rows if b == 0) == [0, 1]  # planned before the partition existed
    assert rows[(1, 2)]["status"] == "skipped" and rows[(1, 2)]["blocking_group"] == group
    assert (rows[(2, 2)]["status"], rows[(2, 2)]["cutoff"]) == ("deleted", 25)


def test_unreachable_cluster_one_shot_exits_3_naming_the_servers(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    servers = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"  # nothing listens there
    data = purge_config_dict(tmp_path, servers, "nothing", ["g"], request_timeout="3s")
    path = tmp_path / "purge.yaml"
    path.write_text(yaml.safe_dump(data))

    code = main(["run", "-c", str(path)])

    err = capfd.readouterr().err
    assert code == EXIT_KAFKA, err[-2000:]
    message = [line for line in err.splitlines() if line.startswith("error:")]
    assert message and servers.split(",")[0] in message[-1], err[-2000:]
    assert not (tmp_path / "audit" / "_delta_log").exists() or audit_is_empty(tmp_path)


def audit_is_empty(tmp: Path) -> bool:
    return not any((tmp / "audit").glob("*.parquet"))


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda d: d["defaults"].update(min_step=-5), "defaults.min_step"),
        (lambda d: d["rules"][0].update(topics="(unclosed"), "rules[0].topics"),
        (lambda d: d["kafka"].update(security={"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                                               "sasl_username": "u", "sasl_password": "literal-secret"}),
         "kafka.security.sasl_password"),
        (lambda d: d.update(retention_policy="forever"), "retention_policy"),
    ],
    ids=["negative-min-step", "bad-regex", "literal-password", "unknown-key"],
)
def test_bad_config_exits_2_naming_the_key_and_deletes_nothing(
    fault_cluster: LocalKafka, fadmin: KafkaAdminClient, tmp_path: Path, capfd: pytest.CaptureFixture[str], mutate, key  # type: ignore[no-untyped-def]
) -> None:
    topic = create_topic(fadmin, "bc", partitions=1)
    produce(fault_cluster.bootstrap_servers, topic, [20])
    commit_topic(fadmin, f"{topic}-g", topic, [20])  # fully consumed: a valid config would purge it
    data = purge_config_dict(tmp_path, fault_cluster.bootstrap_servers, topic, [f"{topic}-g"])
    mutate(data)
    path = tmp_path / "purge.yaml"
    path.write_text(yaml.safe_dump(data))

    code = main(["run", "-c", str(path)])

    err = capfd.readouterr().err
    assert code == EXIT_USAGE, err[-2000:]
    assert key in err, err[-2000:]
    assert "literal-secret" not in err
    assert log_starts(fadmin, topic, 1) == [0]
    assert not (tmp_path / "audit").exists()


@pytest.mark.parametrize(
    "argv, expect",
    [
        ([], "command"),
        (["frobnicate"], "frobnicate"),
        (["run"], "--config"),
        (["audit", "-c", "x.yaml", "--days", "many"], "--days"),
        (["run", "-c", "/nonexistent/purge.yaml"], "/nonexistent/purge.yaml"),
    ],
    ids=["no-command", "unknown-command", "missing-config", "bad-int", "missing-file"],
)
def test_bad_cli_args_exit_2_with_a_clear_message(
    argv: list[str], expect: str, capfd: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    err = capfd.readouterr().err
    assert code == EXIT_USAGE, err
    assert expect in err and "error:" in err, err
