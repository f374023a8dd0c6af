"""The end-to-end demo behind ``./dev.sh demo``: a real local Kafka, real Spark + Delta.

1. starts a single-node KRaft broker on 127.0.0.1 (jars from Maven Central, see ``dev.sh``);
2. creates ``demo.orders`` (3 partitions) and ``demo.clicks`` (2), produces records;
3. real consumers read and commit: ``billing`` has read all orders, ``analytics`` lags behind,
   ``dashboards`` has read part of the clicks;
4. prints the plan (``spark-purge plan``), runs one purge (``spark-purge run``), shows each
   partition's log start offset as Kafka reports it, then the audit (``spark-purge audit``);
5. ``spark-purge why demo.orders:2`` explains the partition ``analytics`` holds back most;
6. ``analytics`` catches up, a second run purges further; the audit shows both runs, in records
   and bytes, and draws them (``audit --plot``) into ``var/demo/audit.png``, whose path it prints.

Records are 4 kB and segments 1 MiB (Kafka's minimum), so whole segments go below a new log
start and the second run's audit rows measure the smaller sizes.

Everything it writes lives under ``var/demo`` (wiped at start); the broker is stopped at exit.
Run it from the checkout (it reads ``conf/demo.yaml``): ``./dev.sh demo``, which exports the jar
folders, or ``python -m spark_purge.testing.demo`` with ``SPARK_PURGE_KAFKA_JARS`` set.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from kafka.admin import OffsetSpec

from spark_purge.cli import format_table
from spark_purge.cli import main as cli_main
from spark_purge.logs import NORMAL, configure_logging
from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka

CONFIG = "conf/demo.yaml"
ORDERS, CLICKS = "demo.orders", "demo.clicks"
PRODUCED = {ORDERS: [300, 300, 300], CLICKS: [200, 200]}
# (group, topic) -> committed offset per partition, before and after analytics catches up.
COMMITS_FIRST = {
    ("billing", ORDERS): [300, 300, 300],
    ("analytics", ORDERS): [120, 300, 60],
    ("dashboards", CLICKS): [150, 90],
}
COMMITS_SECOND = {("analytics", ORDERS): [300, 300, 250], ("dashboards", CLICKS): [200, 200]}
VALUE_BYTES = 4000
TOPIC_CONFIGS = {"segment.bytes": str(1024 * 1024)}
PLOT = "var/demo/audit.png"


def banner(text: str) -> None:
    print(f"\n\033[1m=== {text}\033[0m", flush=True)


def produce(bootstrap: str) -> None:
    admin = workload.new_admin(bootstrap)
    try:
        workload.create_topics(admin, {t: len(counts) for t, counts in PRODUCED.items()}, configs=TOPIC_CONFIGS)
    finally:
        admin.close()
    for topic, counts in PRODUCED.items():
        workload.produce(bootstrap, topic, counts, value_bytes=VALUE_BYTES)


def consume_and_commit(bootstrap: str, commits: dict[tuple[str, str], list[int]]) -> None:
    """Real consumers read up to the target offsets and commit what they read."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    for (group, topic), targets in commits.items():
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        try:
            tps = [TopicPartition(topic, p) for p in range(len(targets))]
            consumer.assign(tps)
            # Read (at least) up to each target, then commit exactly the target: what was processed.
            while any(consumer.position(tp) < target for tp, target in zip(tps, targets)):
                consumer.poll(timeout_ms=1000, max_records=500)
            consumer.commit({tp: OffsetAndMetadata(target, f"demo:{group}", -1) for tp, target in zip(tps, targets)})
        finally:
            consumer.close()
        print(f"  {group:<11} committed {topic} at {targets}")


def show_log_start(bootstrap: str) -> None:
    admin = workload.new_admin(bootstrap)
    try:
        tps = [(t, p) for t, counts in PRODUCED.items() for p in range(len(counts))]
        earliest = workload.log_start_offsets(admin, tps)
        latest = workload.list_offsets(admin, tps, OffsetSpec.LATEST)
    finally:
        admin.close()
    rows = [
        {"topic": t, "partition": p, "log_start_offset": earliest[(t, p)], "high_watermark": latest[(t, p)]}
        for t, p in tps
    ]
    print(format_table(rows))


def run_demo() -> int:
    configure_logging(NORMAL)  # as the CLI's: our lines on stderr, Spark's and kafka-python's noise off
    shutil.rmtree("var/demo", ignore_errors=True)
    Path("var/demo").mkdir(parents=True)
    banner("starting a local Apache Kafka broker (KRaft)")
    with LocalKafka(nodes=1, workdir=None) as kafka:
        bootstrap = kafka.bootstrap_servers
        print(f"  broker at {bootstrap}, pid {kafka.pids()}")
        banner("producing sample data and committing consumer offsets")
        produce(bootstrap)
        consume_and_commit(bootstrap, COMMITS_FIRST)
        common = ["-c", CONFIG, "--bootstrap-servers", bootstrap]

        banner("spark-purge plan   (what would be deleted, and what holds each partition back)")
        if (rc := cli_main(["plan", *common, "--all"])) != 0:
            return rc
        banner("spark-purge run    (one purge cycle: intents, DeleteRecords per leader, outcomes)")
        if (rc := cli_main(["run", *common])) != 0:
            return rc
        banner("log start offsets as Kafka reports them now")
        show_log_start(bootstrap)
        banner(f"spark-purge why {ORDERS}:2   (what holds this partition back, and since when)")
        if (rc := cli_main(["why", f"{ORDERS}:2", *common])) != 0:
            return rc

        banner("analytics and dashboards catch up; a second run purges further")
        consume_and_commit(bootstrap, COMMITS_SECOND)
        if (rc := cli_main(["run", *common])) != 0:
            return rc
        show_log_start(bootstrap)

        banner("spark-purge audit --plot  (from the Delta table at var/demo/audit)")
        rc = cli_main(["audit", *common, "--plot", PLOT])
        print(
            "\nQuery it yourself:  ./dev.sh py -m pyspark ... or in Spark SQL:\n"
            "  SELECT topic, partition, status, cutoff, low_watermark, binding_constraint, blocking_group,\n"
            "         size_bytes_before, bytes_reclaimed_estimate\n"
            "  FROM delta.`var/demo/audit` WHERE record_type = 'outcome' ORDER BY planned_at, topic, partition"
        )
        if rc == 0:
            print(f"\nThe picture: {Path(PLOT).resolve()}")
        return rc


if __name__ == "__main__":
    sys.exit(run_demo())
