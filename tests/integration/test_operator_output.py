"""What an operator sees: a CLI command run as its own process, against the real broker, prints
its output on stdout and nothing but our own log lines on stderr (no Spark start-up noise)."""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from kafka import KafkaAdminClient

from spark_purge.cli import PLAN_COLUMNS
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import python_env, run_reaped
from spark_purge.testing.workload import commit_topic, log_starts, produce, purge_config_dict

REPO_ROOT = Path(__file__).resolve().parents[2]
# Lines Spark, Hadoop and log4j print on their own unless told not to.
NOISE = (
    "NativeCodeLoader",
    "SparkStringUtils",
    "Truncated the string representation",
    "ResolveWriteToStream",
    "log4j",
    "Setting default log level",
    "To adjust logging level",
)
OUR_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) spark_purge[.\w]*: ")
# The java launcher itself prints this for the module Spark adds (--add-modules); log4j cannot
# silence it (see the README's known limits).
JVM_LAUNCHER_LINES = ("WARNING: Using incubator modules: jdk.incubator.vector",)


def test_plan_prints_only_our_output(
    kafka_cluster: LocalKafka, admin: KafkaAdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic("quiet")
    produce(kafka_cluster.bootstrap_servers, topic, [10])
    commit_topic(admin, f"{topic}-g", topic, [6])
    config = tmp_path / "plan.yaml"
    config.write_text(yaml.safe_dump(purge_config_dict(tmp_path, kafka_cluster.bootstrap_servers, re.escape(topic), [f"{topic}-g"])))

    done = run_reaped(
        [sys.executable, "-m", "spark_purge.cli", "plan", "-c", str(config)], cwd=tmp_path, env=python_env(), timeout_s=600
    )

    assert done.returncode == 0, done.stderr
    noisy = [line for line in done.stderr.splitlines() if not OUR_LOG_LINE.match(line) and line not in JVM_LAUNCHER_LINES]
    assert noisy == [], done.stderr
    assert not [n for n in NOISE if n in done.stderr], done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6, done.stdout
    header, rule, row, blank, summary, lease = lines
    assert header.split() == [head for _, head in PLAN_COLUMNS]
    assert set(rule.replace(" ", "")) == {"-"}
    *cells, why = row.split(maxsplit=len(PLAN_COLUMNS) - 1)
    assert cells == [topic, "0", str(kafka_cluster.node_ids[0]), "0", "10", "6", "6", "group", f"{topic}-g", "yes"]
    assert f"{topic}-g" in why and why.endswith("holds back 4 records"), why
    assert blank == ""
    assert summary == "1 partitions planned, 1 actionable, 6 records would be deleted (0 with nothing to do hidden; --all shows them)"
    assert lease.startswith("lease: purger cluster-") and lease.endswith("never leased (" + str(tmp_path / "audit") + "_leases)"), lease
    assert log_starts(admin, topic, 1) == [0]  # plan changes nothing
