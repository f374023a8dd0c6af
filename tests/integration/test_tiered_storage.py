"""Tiered storage on a real broker: Kafka's LocalTieredStorage and the topic-based RLMM
(``LocalKafka(tiered=True)``, one single-node cluster for this module, stopped by PID).

Topics roll a 1 MiB segment every 10 records of 100 kB and keep 1 byte locally, so the rolled
segments [0, 10), [10, 20), [20, 30) move to remote storage and the local log starts at 30.
"""
from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from spark_purge import cli
from spark_purge.errors import ConfigError, TieringRefused
from spark_purge.kafka import open_client
from spark_purge.kafka.model import TopicTiering
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.pipeline import plan_snapshot
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.errors import NotReadyError
from spark_purge.testing.workload import (
    audit_rows,
    commit_topic,
    create_topic,
    list_offsets,
    log_starts,
    new_admin,
    new_pipeline,
    purge_config,
    purge_config_dict,
    retry,
    run_cycle,
)
from spark_purge.tiering import Disabler, TieringTable
from tests.integration.faults.killing_driver import run_killing_driver

TIERED = {"remote.storage.enable": "true", "segment.bytes": str(1 << 20), "local.retention.bytes": "1"}
RECORD = b"x" * 100_000  # 10 a segment


@pytest.fixture(scope="module")
def tiered() -> Iterator[LocalKafka]:
    with LocalKafka(nodes=1, tiered=True) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def tadmin(tiered: LocalKafka) -> Iterator[KafkaAdminClient]:
    client = new_admin(tiered.bootstrap_servers)
    yield client
    client.close()


def tiered_topic(cluster: LocalKafka, admin: KafkaAdminClient, records: int) -> str:
    """A tiered topic with ``records`` records, once every rolled segment is in remote storage."""
    topic = create_topic(admin, "tier", configs=TIERED)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=0, max_request_size=2_000_000)
    try:
        for _ in range(records):  # one batch per record: segments roll at exact offsets
            producer.send(topic, RECORD, partition=0)
            producer.flush()
    finally:
        producer.close()
    rolled = list(range(0, records - records % 10 - (10 if records % 10 == 0 else 0), 10))

    def moved() -> None:
        local = local_log_start(admin, topic)
        if list(cluster.remote_segments(topic, 0)) != rolled or local != rolled[-1] + 10:
            raise NotReadyError(f"remote segments {list(cluster.remote_segments(topic, 0))}, local log start {local}")

    retry(moved, f"segments of {topic} moving to remote storage", 60)
    return topic


def local_log_start(admin: KafkaAdminClient, topic: str) -> int:
    return list_offsets(admin, [(topic, 0)], OffsetSpec.EARLIEST_LOCAL)[(topic, 0)]


def steps(table: TieringTable, topic: str) -> list[tuple[str, str, str]]:
    rows = table.spark.read.format("delta").load(table.path).where(f"topic = '{topic}'").orderBy("recorded_at").collect()
    return [(r["state"], r["policy"], r["step"]) for r in rows]


def test_purge_cuts_into_remote_segments_and_disable_delete_survives_a_crash(
    spark: SparkSession, tiered: LocalKafka, tadmin: KafkaAdminClient, tmp_path: Path
) -> None:
    topic = tiered_topic(tiered, tadmin, 40)  # remote: [0,10) [10,20) [20,30); local from 30
    commit_topic(tadmin, "reader", topic, [25])
    cfg = purge_config(tmp_path, tiered.bootstrap_servers, topic, ["reader"])
    plan = plan_snapshot(spark, cfg)
    assert plan is not None
    (row,) = plan.rows.collect()
    assert (row.cutoff, row.local_log_start_offset, row.cuts_remote, row.remote_storage_enable) == (25, 30, True, True)
    assert row.detail.endswith("; reaches remote storage (offsets below 30 are remote only)")

    result = run_cycle(new_pipeline(spark, cfg), batch_id=0)
    assert (result.deleted, result.records_deleted) == (1, 25)
    assert log_starts(tadmin, topic, 1) == [25]
    (outcome,) = audit_rows(spark, cfg)
    assert {k: outcome[k] for k in ("status", "cutoff", "low_watermark", "prior_log_start_offset", "prior_local_log_start_offset",
                                    "local_log_start_offset", "cuts_remote", "remote_storage_enable", "remote_bytes_removed")} == {
        "status": "deleted", "cutoff": 25, "low_watermark": 25, "prior_log_start_offset": 0, "prior_local_log_start_offset": 30,
        "local_log_start_offset": 30, "cuts_remote": True, "remote_storage_enable": True, "remote_bytes_removed": None,
    }
    # The remote log manager deletes the remote segments wholly below the new log start.
    retry(lambda: _expect(list(tiered.remote_segments(topic, 0)), [20]), "remote segments below 25 deleted", 60, also=(AssertionError,))

    # `spark-purge tiering disable --policy delete`, a real process SIGKILLed right after
    # remote.storage.enable=false went out (its Spark JVM with it).
    table = TieringTable.beside(spark, cfg.audit.path)
    config = tmp_path / "purge.yaml"
    config.write_text(yaml.safe_dump(purge_config_dict(tmp_path, tiered.bootstrap_servers, topic, ["reader"])))
    killed = run_killing_driver(["tiering", "disable", topic, "--policy", "delete", "-c", str(config)], "tiering:storage_disable")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert "SIGKILL at tiering step storage_disable" in killed.stderr
    with open_client(ConnectionSettings(tiered.bootstrap_servers)) as client:
        assert steps(table, topic) == [("DISABLING", "delete", "copy_disable"), ("DISABLING", "delete", "storage_disable")]
        assert table.in_transition() == {topic}
        # Meanwhile the purge leaves the topic alone, and asking for the other policy changes nothing.
        commit_topic(tadmin, "reader", topic, [40])
        (held,) = plan_snapshot(spark, cfg).rows.collect()  # type: ignore[union-attr]
        assert (held.binding_constraint, held.cutoff, held.actionable) == ("tiering_transition", None, False)
        with pytest.raises(TieringRefused, match=f"topic '{topic}' is already DISABLING with policy 'delete'"):
            Disabler(client, table, timeout_s=60).disable(topic, "retain")

        # Restarted: resumes from the persisted step with its policy, and finishes.
        done = Disabler(client, table, operator="test", timeout_s=60).disable(topic, "delete")
        facts = client.tiering(topic)
    assert (done.state, done.policy, done.step) == ("DISABLED", "delete", "done")
    assert steps(table, topic) == [("DISABLING", "delete", "copy_disable"), ("DISABLING", "delete", "storage_disable"),
                                   ("DISABLING", "delete", "confirm"), ("DISABLED", "delete", "done")]
    assert _flags(facts) == ("false", "true")
    assert (facts.log_start, facts.local_log_start) == ({0: 30}, {0: 30})  # remote-only offsets gone
    assert log_starts(tadmin, topic, 1) == [30]
    assert tiered.remote_segments(topic, 0) == {}
    assert table.in_transition() == frozenset()


def test_disable_retain_keeps_remote_data_and_bad_input_changes_nothing(
    spark: SparkSession, tiered: LocalKafka, tadmin: KafkaAdminClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = tiered_topic(tiered, tadmin, 30)  # remote: [0,10) [10,20); local from 20
    plain = create_topic(tadmin, "plain")
    table = TieringTable.beside(spark, str(tmp_path / "audit"))
    with open_client(ConnectionSettings(tiered.bootstrap_servers)) as client:
        disabler = Disabler(client, table, timeout_s=60)
        with pytest.raises(TieringRefused, match="topic 'no-such-topic': no such topic"):
            disabler.disable("no-such-topic", "delete")
        with pytest.raises(TieringRefused, match=f"topic '{plain}' does not have tiered storage enabled .remote.storage.enable=false."):
            disabler.disable(plain, "delete")
        with pytest.raises(ConfigError, match=f"tiering disable {topic}: --policy: expected 'retain' or 'delete', got 'keep'"):
            disabler.disable(topic, "keep")
        assert not table.exists()  # nothing recorded
        assert _flags(client.tiering(plain)) == ("false", "false") and _flags(client.tiering(topic)) == ("true", "false")

        # The disablement starts while a purge batch is between its intents and DeleteRecords
        # (and stops DISABLING, its job killed after copy_disable): the batch reads the state
        # again right before DeleteRecords and leaves the topic alone.
        commit_topic(tadmin, "reader", topic, [15])
        cfg = purge_config(tmp_path, tiered.bootstrap_servers, topic, ["reader"])

        def start_disabling(step: str, batch_id: int) -> None:
            if step == "intents_written":
                with pytest.raises(RuntimeError, match="killed"):
                    Disabler(client, table, timeout_s=60, fault_hook=_kill_at("copy_disable")).disable(topic, "retain")

        run_cycle(new_pipeline(spark, cfg, fault_hook=start_disabling), batch_id=0)
        (intent,) = audit_rows(spark, cfg, "intent")
        (outcome,) = audit_rows(spark, cfg)
        assert (intent["cutoff"], intent["cuts_remote"]) == (15, True)
        assert (outcome["status"], outcome["cutoff"]) == ("skipped", 15)
        assert outcome["error"].startswith("tiering_transition: tiered storage began to be disabled")
        assert log_starts(tadmin, topic, 1) == [0]
        assert table.in_transition() == {topic}

        done = disabler.disable(topic, "retain")  # resumed from copy_disable
        facts = client.tiering(topic)
        assert disabler.disable(topic, "retain") == done  # DISABLED already: nothing more happens
    assert (done.state, done.policy) == ("DISABLED", "retain")
    assert steps(table, topic) == [("DISABLING", "retain", "copy_disable"), ("DISABLING", "retain", "confirm"), ("DISABLED", "retain", "done")]
    # Read-only tiering: copying stopped, the remote data and the log start left as they were.
    assert _flags(facts) == ("true", "true")
    assert (facts.log_start, facts.local_log_start, facts.latest_tiered) == ({0: 0}, {0: 20}, {0: 19})
    assert list(tiered.remote_segments(topic, 0)) == [0, 10]

    # The operator's view, in-process: status lists the topic since when; a bad policy is a usage error.
    config = tmp_path / "purge.json"
    config.write_text(_config_json(tmp_path, tiered.bootstrap_servers, topic))
    assert cli.main(["tiering", "status", "-c", str(config)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"{topic}  DISABLED  retain  done  {done.since:%Y-%m-%d %H:%M:%S}" in out
    assert cli.main(["tiering", "disable", topic, "--policy", "keep", "-c", str(config)]) == cli.EXIT_USAGE
    assert "got 'keep'" in capsys.readouterr().err
    assert len(steps(table, topic)) == 3


def _kill_at(step: str) -> Callable[[str], None]:
    def kill(done: str) -> None:
        if done == step:
            raise RuntimeError(f"disabler killed after {done}")

    return kill


def _flags(facts: TopicTiering) -> tuple[Any, Any]:
    return facts.configs.get("remote.storage.enable"), facts.configs.get("remote.log.copy.disable")


def _expect(got: Any, wanted: Any) -> None:
    assert got == wanted, got


def _config_json(tmp: Path, bootstrap: str, topic: str) -> str:
    import json

    return json.dumps(
        {
            "kafka": {"bootstrap_servers": bootstrap},
            "defaults": {"min_retention": "0s"},
            "rules": [{"name": "r", "topics": topic}],
            "audit": {"path": str(tmp / "audit")},
            "tiering": [{"topic": topic, "disable": "retain"}],
        }
    )
