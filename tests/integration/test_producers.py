"""Producer awareness on a real broker (issue 13): a real kafka-python transactional producer
leaves a transaction open; the plan names it at the last stable offset, the purge cuts no
further, the audit counts the active producers, and the broker's transaction.max.timeout.ms
decides when it is flagged as hanging."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kafka import KafkaAdminClient, KafkaProducer
from pyspark.sql import SparkSession

from spark_purge import cli
from spark_purge.config import from_dict
from spark_purge.kafka import open_client
from spark_purge.policy.producers import transaction_note
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.workload import (
    audit_rows,
    commit,
    log_starts,
    new_pipeline,
    produce,
    purge_config_dict,
    run_cycle,
)


def test_an_open_transaction_is_named_at_the_lso_counted_in_the_audit_and_flagged_once_hanging(
    spark: SparkSession, kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = new_topic("txn")
    produce(bootstrap, topic, [30])  # offsets 0-29, no transaction
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"tx-{topic}", acks="all",
        transaction_timeout_ms=600_000,  # stays open through a slow test (the default, 60 s, could end it)
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):  # offsets 30-34, left uncommitted: the LSO stays at 30
            producer.send(topic, key=b"k", value=b"open-%d" % i, partition=0)
        producer.flush()
        produce(bootstrap, topic, [10])  # 35-44 by another producer: the high watermark moves on
        commit(admin, f"{topic}-g", {(topic, 0): 45})  # the group read everything it could

        data = purge_config_dict(tmp_path, bootstrap, re.escape(topic), [f"{topic}-g"])
        data["lease"] = {"purger_id": f"tx-{topic}"}
        path = tmp_path / "purge.yaml"
        path.write_text(yaml.safe_dump(data))

        # `spark-purge plan --json`: bound at the LSO, the pinning producer named.
        assert cli.main(["plan", "-c", str(path), "--json", "--all"]) == 0
        (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        assert (row["binding_constraint"], row["cutoff"], row["high_watermark"]) == ("last_stable_offset", 30, 45)
        assert re.search(r"pinned at last stable offset 30 by producer \d+ epoch 0 \(transaction open since offset 30, last write ", row["detail"]), row
        assert "HANGING" not in row["detail"]

        # The broker's own answer, read the same way: its transaction.max.timeout.ms decides hanging.
        cfg = from_dict(data)
        with open_client(cfg) as client:
            found = client.open_transactions([(topic, 0)])
        producers = found.producers[(topic, 0)].producers  # the open one, and any idempotent produce() one
        assert row["active_producers"] == len(producers) >= 1
        assert found.max_timeout_ms == 900_000  # Kafka's default, read with DescribeConfigs
        (pinning,) = found.producers[(topic, 0)].open_transactions
        assert pinning.txn_start_offset == 30
        later = pinning.last_timestamp + found.max_timeout_ms + 1  # silent that long: hanging
        note = transaction_note(found.producers[(topic, 0)], 30, later, found.max_timeout_ms)
        assert note is not None and f"HANGING transaction: producer {pinning.producer_id} epoch 0" in note

        # A purge cycle cuts to the LSO, never into the open transaction; the audit counts producers.
        pipeline = new_pipeline(spark, cfg)
        run_cycle(pipeline, 0)
        pipeline.close()
        assert log_starts(admin, topic, 1) == [30]
        (outcome,) = audit_rows(spark, data["audit"]["path"])
        assert (outcome["status"], outcome["cutoff"], outcome["binding_constraint"], outcome["active_producers"]) == (
            "deleted", 30, "last_stable_offset", len(producers)
        )
    finally:
        try:
            producer.abort_transaction()
        finally:
            producer.close()

