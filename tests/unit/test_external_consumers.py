"""External consumers: their config (key paths, did-you-mean) and the snapshot rows they become."""
from __future__ import annotations

import copy
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_purge import config as c
from spark_purge.errors import ConfigError
from spark_purge.external_snapshot import CHECKPOINT_UNREADABLE, ExternalPosition, external_positions
from tests.unit.test_config import REPO, base
from tests.unit.test_external import MemoryFiles, offsets


def build(consumers: Any) -> c.PurgeConfig:
    d = copy.deepcopy(base())
    d["external_consumers"] = consumers
    return c.from_dict(d)


def test_checkpoint_and_hold_entries_load() -> None:
    cfg = build(
        [
            {"name": "enrich-query", "spark_checkpoint": "s3a://bucket/ck/enrich", "topics": r"demo\.orders"},
            {"name": "flink-fraud", "hold": {"topic": "demo.orders", "partition": 0, "offset": 25}},
            {"name": "flink-all", "hold": [{"topic": "demo.orders", "offset": 7}, {"topic": "demo.clicks.web", "partition": "all", "offset": 3}]},
        ]
    )
    query, fraud, every = cfg.external_consumers
    assert query.kind == c.EXTERNAL_SPARK_CHECKPOINT and query.covers("demo.orders") and not query.covers("demo.ordersX")
    assert fraud.kind == c.EXTERNAL_STATIC_HOLD and fraud.hold == (c.StaticHold("demo.orders", 25, 0),)
    assert [h.partition for h in every.hold] == [None, None]
    assert every.covers("demo.clicks.web") and not fraud.covers("demo.clicks.web")
    # The external consumers are part of the fingerprint (they change decisions).
    assert c.config_fingerprint(cfg) != c.config_fingerprint(build([]))


@pytest.mark.parametrize(
    ("consumers", "fragments"),
    [
        ("nope", ["external_consumers: expected a list"]),
        ([{"name": "q", "spark_checkpoint": "/ck"}], ["external_consumers[0].topics: required with spark_checkpoint"]),
        ([{"name": "q", "spark_checkpoint": "/ck", "topics": "("}], ["external_consumers[0].topics: invalid regular expression"]),
        ([{"name": "q"}], ["external_consumers[0]: expected exactly one of spark_checkpoint (with topics) or hold"]),
        (
            [{"name": "q", "spark_checkpoint": "/ck", "topics": "t", "hold": {"topic": "t", "offset": 1}}],
            ["external_consumers[0]: expected exactly one of"],
        ),
        ([{"name": "q", "hold": {"topic": "t", "offset": 1}, "topics": "t"}], ["external_consumers[0].topics: only used with spark_checkpoint"]),
        ([{"spark_checkpoint": "/ck", "topics": "t"}], ["external_consumers[0].name: required key is missing"]),
        ([{"name": "q", "spark_checkpont": "/ck", "topics": "t"}], ["external_consumers[0].spark_checkpont: unknown key", "did you mean 'spark_checkpoint'"]),
        ([{"name": "q", "hold": {"topic": "t", "ofset": 1}}], ["external_consumers[0].hold.ofset: unknown key", "did you mean 'offset'"]),
        ([{"name": "q", "hold": {"topic": "t"}}], ["external_consumers[0].hold.offset: required key is missing"]),
        ([{"name": "q", "hold": [{"topic": "t", "offset": 1}, {"topic": "t", "offset": -2}]}], ["external_consumers[0].hold[1].offset: expected an offset >= 0"]),
        ([{"name": "q", "hold": {"topic": "t", "partition": "first", "offset": 1}}], ["external_consumers[0].hold.partition: expected a partition number >= 0 or 'all'"]),
        ([{"name": "q", "hold": {"topic": "t", "partition": -1, "offset": 1}}], ["external_consumers[0].hold.partition: expected a partition number >= 0"]),
        ([{"name": "q", "hold": {"topic": "a topic", "offset": 1}}], ["external_consumers[0].hold.topic: expected a topic name"]),
        ([{"name": "q", "hold": []}], ["external_consumers[0].hold: expected a hold"]),
        (
            [{"name": "q", "hold": {"topic": "t", "offset": 1}}, {"name": "q", "spark_checkpoint": "/ck", "topics": "t"}],
            ["external_consumers[1].name: duplicate external consumer name 'q' (also external_consumers[0])"],
        ),
    ],
)
def test_bad_entries_name_the_key_path(consumers: Any, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        build(consumers)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_example_config_documents_external_consumers() -> None:
    cfg = c.load(REPO / "conf" / "example.yaml")
    kinds = {e.kind for e in cfg.external_consumers}
    assert kinds == {c.EXTERNAL_SPARK_CHECKPOINT, c.EXTERNAL_STATIC_HOLD}


CK = {
    "ck/metadata": '{"id":"q"}',
    "ck/offsets/0": offsets('{"orders":{"0":40,"1":38}}'),
    "ck/commits/0": 'v1\n{"nextBatchWatermarkMs":0}',
}
PARTS = [("orders", 0), ("orders", 1), ("orders", 2), ("clicks", 0)]


def consumer(**kwargs: Any) -> c.ExternalConsumer:
    return c.ExternalConsumer(**kwargs)


def test_checkpoint_position_per_partition_and_minus_one_where_it_has_none() -> None:
    found = external_positions([consumer(name="q", spark_checkpoint="ck", topics="orders")], PARTS, MemoryFiles(dict(CK)))
    assert not found.unreadable
    assert [(r.topic, r.partition, r.committed_offset) for r in found.rows] == [("orders", 0, 40), ("orders", 1, 38), ("orders", 2, -1)]
    assert {r.group_id for r in found.rows} == {"q"} and {r.group_type for r in found.rows} == {"spark_checkpoint"}
    assert found.rows[0].commit_metadata == "checkpoint ck batch 0"


def test_unreadable_checkpoint_blocks_with_minus_one_rows_and_names_the_path() -> None:
    broken = dict(CK, **{"ck/offsets/0": "garbage"})
    for files in (MemoryFiles(broken), MemoryFiles({})):
        found = external_positions([consumer(name="q", spark_checkpoint="ck", topics="orders")], PARTS, files)
        assert [r.committed_offset for r in found.rows] == [-1, -1, -1]
        assert found.unreadable["q"].startswith(f"{CHECKPOINT_UNREADABLE}: ck")


def test_storage_errors_count_as_unreadable() -> None:
    class Denied(MemoryFiles):
        def exists(self, path: str) -> bool:
            raise OSError("AccessDenied: s3a://bucket/ck\nstack trace line")

    found = external_positions([consumer(name="q", spark_checkpoint="ck", topics="orders")], PARTS, Denied({}))
    assert found.unreadable == {"q": f"{CHECKPOINT_UNREADABLE}: ck: AccessDenied: s3a://bucket/ck"}


def test_a_consumer_covering_no_snapshot_partition_is_not_read() -> None:
    found = external_positions([consumer(name="q", spark_checkpoint="missing", topics="other")], PARTS, MemoryFiles({}))
    assert found.rows == () and not found.unreadable


def test_static_holds_on_held_partitions_lowest_wins() -> None:
    holds = (c.StaticHold("orders", 25, 0), c.StaticHold("orders", 30, None), c.StaticHold("clicks", 5, 3))
    found = external_positions([consumer(name="flink", hold=holds)], PARTS, MemoryFiles({}))
    assert found.rows == (
        ExternalPosition("flink", "static_hold", "orders", 0, 25, "static hold"),
        ExternalPosition("flink", "static_hold", "orders", 1, 30, "static hold"),
        ExternalPosition("flink", "static_hold", "orders", 2, 30, "static hold"),
    )


def test_snapshot_gains_the_rows_and_the_unreadable_consumer(spark: SparkSession) -> None:
    from spark_purge import schemas
    from spark_purge.external_snapshot import with_external_consumers
    from spark_purge.policy import split_snapshot, unreadable_groups_of
    from tests.unit.test_planner import commit as group_commit
    from tests.unit.test_planner import snapshot_row

    snapshot = spark.createDataFrame(
        [
            snapshot_row("orders", 0, 0, 100, 100, [group_commit("fast", 100)]),
            snapshot_row("orders", 1, 0, 100, 100, []),
            snapshot_row("clicks", 0, 0, 100, 100, [group_commit("fast", 100)]),
        ],
        schemas.SNAPSHOT,
    )
    consumers = [
        c.ExternalConsumer(name="q", spark_checkpoint="ck", topics="orders"),
        c.ExternalConsumer(name="lost", spark_checkpoint="nowhere", topics="clicks"),
        c.ExternalConsumer(name="flink", hold=(c.StaticHold("orders", 25, 0),)),
    ]
    merged = with_external_consumers(snapshot, consumers, MemoryFiles(dict(CK)))

    assert merged.schema.fieldNames() == schemas.SNAPSHOT.fieldNames()
    _parts, groups = split_snapshot(merged)
    got = sorted((r["topic"], r["partition"], r["group_id"], r["group_type"], r["committed_offset"], r["group_state"]) for r in groups.collect())
    assert got == [
        ("clicks", 0, "fast", "classic", 100, "Stable"),
        ("clicks", 0, "lost", "spark_checkpoint", -1, None),
        ("orders", 0, "fast", "classic", 100, "Stable"),
        ("orders", 0, "flink", "static_hold", 25, None),
        ("orders", 0, "q", "spark_checkpoint", 40, None),
        ("orders", 1, "q", "spark_checkpoint", 38, None),
    ]
    rows = merged.collect()
    assert len(rows) == 3
    assert all(unreadable_groups_of(r) == {"lost": f"{CHECKPOINT_UNREADABLE}: nowhere: checkpoint not found"} for r in rows)
    # Nothing configured (or nothing covering the snapshot): the very same DataFrame.
    assert with_external_consumers(snapshot, [], MemoryFiles({})) is snapshot


# ---- an external consumer named like a Kafka group ---------------------------------------------


def _clash_config(**extra: Any) -> c.PurgeConfig:
    return c.from_dict(
        {
            "kafka": {"bootstrap_servers": ["k:9092"]},
            "audit": {"path": "a"},
            "rules": [{"name": "all", "topics": "orders|clicks", "min_retention": "0s"}],  # discovers groups
            "external_consumers": [{"name": "q", "spark_checkpoint": "ck", "topics": "orders"}],
            **extra,
        }
    )


def test_an_external_consumer_listed_as_a_required_group_is_refused_at_load() -> None:
    data = {
        "kafka": {"bootstrap_servers": ["k:9092"]},
        "audit": {"path": "a"},
        "rules": [{"name": "orders", "topics": "orders", "required_groups": ["billing", "q"], "min_retention": "0s"}],
        "external_consumers": [{"name": "q", "spark_checkpoint": "ck", "topics": "orders"}],
    }
    with pytest.raises(ConfigError, match=r"rules\[0\]\.required_groups\[1\]: 'q' is the name of external_consumers\[0\]"):
        c.from_dict(data)


def _clash_snapshot(spark: SparkSession, groups_on_clicks: list[Any], unreadable: list[Any]) -> Any:
    from spark_purge import schemas
    from spark_purge.external_snapshot import with_external_consumers
    from tests.unit.test_planner import commit as group_commit
    from tests.unit.test_planner import snapshot_row

    def row(topic: str, partition: int, groups: list[Any]) -> tuple[Any, ...]:
        return (*snapshot_row(topic, partition, 0, 100, 100, groups)[:-1], unreadable)

    snapshot = spark.createDataFrame(
        [row("orders", 0, [group_commit("fast", 100)]), row("orders", 1, []), row("clicks", 0, groups_on_clicks)],
        schemas.SNAPSHOT,
    )
    return with_external_consumers(snapshot, _clash_config().external_consumers, MemoryFiles(dict(CK)))


def test_a_kafka_group_named_like_an_external_consumer_stops_the_plan(spark: SparkSession) -> None:
    # Before: it planned, taking the Kafka group q and the external consumer q for one consumer.
    from spark_purge.planner import Planner
    from tests.unit.test_planner import commit as group_commit

    snapshot = _clash_snapshot(spark, [group_commit("q", 10)], [])
    with pytest.raises(ConfigError, match=r"external_consumers\[0\]\.name: 'q' is also the id of a Kafka consumer group \(it has rows"):
        Planner(_clash_config(), lambda _: {}).plan(snapshot)


def test_an_unreadable_kafka_group_named_like_an_external_consumer_stops_the_plan(spark: SparkSession) -> None:
    # Before: it planned; an unreadable Kafka group q was taken for the external q, which blocks
    # only the topics it covers, not every topic the Kafka group may have commits on.
    from spark_purge.planner import Planner
    from tests.unit.test_planner import commit as group_commit

    snapshot = _clash_snapshot(spark, [group_commit("fast", 100)], [("q", "COORDINATOR_NOT_AVAILABLE")])
    with pytest.raises(ConfigError, match=r"'q' is also the id of a Kafka consumer group \(Kafka could not read its commits\)"):
        Planner(_clash_config(), lambda _: {}).plan(snapshot)


def test_a_remembered_kafka_group_named_like_an_external_consumer_stops_the_plan(spark: SparkSession) -> None:
    # Before: it planned; the external q's rows made the Kafka group q's remembered positions look
    # seen, so they never came back as a vanished group's.
    from spark_purge import schemas
    from spark_purge.planner import Planner
    from tests.unit.test_planner import NOW
    from tests.unit.test_planner import commit as group_commit

    snapshot = _clash_snapshot(spark, [group_commit("fast", 100)], [])
    remembered = [("q", "orders", 1, 5, NOW, "classic", "id-orders")]
    progress = spark.createDataFrame(remembered, schemas.PROGRESS_STORE)
    with pytest.raises(ConfigError, match=r"'q' is also the id of a Kafka consumer group \(the progress store remembers"):
        Planner(_clash_config(), lambda _: {}, lambda: progress).plan(snapshot)
    # The external consumer's own name never clashes with itself: without the Kafka rows, it plans.
    assert Planner(_clash_config(), lambda _: {}).plan(snapshot) is not None
