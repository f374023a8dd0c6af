"""Partition retirement, the pure parts: the policy's retirement step, config keys, request
checks, the registry's export and the kafka-python partitioner (a fake cluster)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kafka.partitioner import DefaultPartitioner
from pyspark.sql import SparkSession

from spark_purge import schemas
from spark_purge.config import from_dict
from spark_purge.errors import ConfigError, ConfigProblems
from spark_purge.partitioner import RetirementPartitioner, closed_partitions
from spark_purge.policy.retirement import is_reclaim
from spark_purge.retirement import (
    TopicFacts,
    check_cancel,
    check_request,
    check_retire,
    event_row,
    export_document,
    parse_partitions,
)
from tests.unit.test_policy import NOW, ORDERS, brief, config, grp, part, retirement_state, rows, run

RO, NONE = schemas.READ_ONLY, schemas.RETIRED


def test_retiring_partitions_are_reclaimed_only_when_drained_and_quiet(spark: SparkSession) -> None:
    cfg = config(ORDERS, retirement={"enable": True, "delay": "1m"})
    names = ["reclaim", "recent", "moved", "behind", "missing", "vanished", "empty", "retired", "again", "plain", "recreated"]
    parts = [part("orders", i, log_start=0, hw=500) for i in range(len(names))]
    # Recreated under the same name and refilled to 500: the history's row is the old topic's.
    parts[names.index("recreated")] = part("orders", names.index("recreated"), log_start=0, hw=500, topic_id="id-new")
    parts[names.index("empty")] = part("orders", names.index("empty"), log_start=500, hw=500)
    parts[names.index("retired")] = part("orders", names.index("retired"), log_start=500, hw=500)
    parts[names.index("again")] = part("orders", names.index("again"), log_start=300, hw=500)
    groups = []
    for i, name in enumerate(names):
        billing = {"behind": 200, "vanished": 500}.get(name, 500)
        groups.append(grp("billing", "orders", i, billing))
        if name == "vanished":  # Kafka forgot it; the purge remembers it at 150
            groups.append(grp("analytics", "orders", i, 150, state="Vanished", members=0))
        elif name != "missing":
            groups.append(grp("analytics", "orders", i, 500))
    long_ago, just_now = NOW - timedelta(minutes=2), NOW - timedelta(seconds=10)
    history = [("orders", i, long_ago, 500, None) for i in range(len(names))]
    history[names.index("recent")] = ("orders", names.index("recent"), just_now, 500, None)
    history[names.index("moved")] = ("orders", names.index("moved"), long_ago, 400, None)  # 500 not seen yet
    history[names.index("recreated")] = ("orders", names.index("recreated"), long_ago, 500, "id-old")
    state = [("orders", i, RO, None) for i, n in enumerate(names) if n not in ("retired", "again", "plain")]
    state += [("orders", names.index("retired"), NONE, 500), ("orders", names.index("again"), NONE, 300)]
    plan = rows(run(spark, cfg, parts, groups, retirement=retirement_state(spark, *state), history=history))
    got = {names[p]: brief(r) for (_, p), r in plan.items()}
    assert got == {
        "reclaim": ("retiring", 500, 500, True, None),
        "recent": ("retiring", None, 0, False, None),
        "moved": ("retiring", None, 0, False, None),
        "behind": ("retiring", 200, 200, True, "billing"),  # the ordinary partial purge goes on
        "missing": ("retiring", None, 0, False, "analytics"),
        "vanished": ("retiring", 150, 150, True, "analytics"),
        "empty": ("retiring", 500, 0, False, None),  # a reclaim the broker already made
        "retired": ("high_watermark", 500, 0, False, None),  # None and unwritten: an ordinary partition
        "again": ("writes_to_retired_partition", 500, 200, True, None),
        "plain": ("high_watermark", 500, 500, True, None),  # ReadWrite: untouched by retirement
        "recreated": ("retiring", None, 0, False, None),  # still since the old topic's time: not quiet
    }
    detail = {names[p]: r.detail for (_, p), r in plan.items()}
    assert detail["reclaim"] == "drained by every required consumer and no writes for over 1m: reclaimed to its high watermark 500"
    assert detail["recent"].startswith("recent_writes: drained, but the high watermark is at 500 since 2024-05-01 11:59:50")
    assert detail["moved"].startswith("recent_writes: drained, but the high watermark is not yet seen unchanged at 500")
    assert detail["recreated"].startswith("recent_writes: drained, but the high watermark is not yet seen unchanged at 500")
    assert detail["behind"].startswith("retiring, not drained: group billing at 200")
    assert detail["missing"] == "retiring, not drained: required group analytics has no commit on this partition"
    assert detail["again"].startswith("writes_to_retired_partition: 200 record(s) written since it was reclaimed at 300; drained")
    reclaims = {names[p] for (_, p), r in plan.items() if is_reclaim(r)}
    assert reclaims == {"reclaim", "empty", "again"}


def test_retirement_config_keys_are_validated() -> None:
    base: dict[str, Any] = {"kafka": {"bootstrap_servers": ["k:9092"]}, "audit": {"path": "a"}, "rules": [ORDERS]}
    assert from_dict(base).retirement.enable is False and from_dict(base).retirement.delay == 300_000
    assert from_dict({**base, "retirement": {"enable": True, "delay": "2s"}}).retirement.delay == 2000
    with pytest.raises(ConfigProblems) as found:
        from_dict({**base, "retirement": {"enable": "yes", "delay": "soon"}})
    assert [p.split(":")[0] for p in found.value.problems] == ["retirement.enable", "retirement.delay"]
    assert found.value.problems[0] == "retirement.enable: expected true or false, got str 'yes'"
    with pytest.raises(ConfigError, match=r"^retirement.delai: unknown key; did you mean 'delay'\?"):
        from_dict({**base, "retirement": {"delai": "1m"}})
    with pytest.raises(ConfigError, match=r"^retirement.delay: expected a positive duration, got 0ms$"):
        from_dict({**base, "retirement": {"delay": "0s"}})


def test_parse_partitions_names_the_bad_item() -> None:
    assert parse_partitions("orders:3, orders:7,orders:3") == [("orders", 3), ("orders", 7)]
    with pytest.raises(ConfigError, match=r"got 'orders' in 'orders:1,orders'"):
        parse_partitions("orders:1,orders")
    with pytest.raises(ConfigError, match=r"got 'orders:-1'"):
        parse_partitions("orders:-1")


def test_check_retire_reports_every_problem() -> None:
    cfg = config(ORDERS, {"name": "rest", "topics": "(compact|secret|lone)"}, protected_topics=["secret"], retirement={"enable": True})
    facts = {
        "orders": TopicFacts((0, 1, 2), False, "delete"),
        "compact": TopicFacts((0,), False, "compact"),
        "secret": TopicFacts((0, 1), False, "delete"),
        "lone": TopicFacts((0,), False, "delete"),
        "stray": TopicFacts((0, 1), False, "delete"),
    }
    statuses = {("orders", 1): RO, ("orders", 2): NONE}
    requests = [("orders", 0), ("orders", 1), ("orders", 9), ("compact", 0), ("secret", 0), ("lone", 0), ("nope", 0),
                ("__consumer_offsets", 0), ("stray", 0)]
    with pytest.raises(ConfigProblems) as found:
        check_retire(requests, facts, statuses, cfg)
    assert list(found.value.problems) == [
        "retire orders:1: already ReadOnly",
        "retire orders:9: unknown partition 9 (topic 'orders' has partitions 0..2)",
        "retire orders:0, orders:1, orders:9: would leave topic 'orders' with no writable (ReadWrite) partition of its 3",
        "retire compact:0: topic 'compact' has cleanup.policy=compact, which lacks delete: its disk cannot be reclaimed",
        "retire secret:0: topic 'secret' matches protected_topics: never purged, so never retired",
        "retire lone:0: would leave topic 'lone' with no writable (ReadWrite) partition of its 1",
        "retire nope:0: unknown topic 'nope': the cluster has no such topic",
        "retire __consumer_offsets:0: topic '__consumer_offsets' is internal: never retired",
        "retire stray:0: topic 'stray' matches no rule: the purge would never reclaim it (add a rule selecting it)",
    ]
    check_retire([("orders", 0)], facts, {}, cfg)  # fine: two partitions stay writable
    with pytest.raises(ConfigError, match=r"^retire --cancel orders:2: is None, expected ReadOnly"):
        check_cancel([("orders", 2)], statuses, cfg)
    check_cancel([("orders", 1)], statuses, cfg)
    with pytest.raises(ConfigError, match=r"^retirement.enable: is false"):
        check_request(config(ORDERS), "why", cancelling=False)
    with pytest.raises(ConfigError, match=r"^retire --reason: expected why"):
        check_request(cfg, "  ", cancelling=False)


def test_export_lists_retiring_and_retired_partitions_for_the_partitioner() -> None:
    rows_ = [
        event_row(("orders", 2), RO, "retire", NOW, "ops@h", "why"),
        event_row(("orders", 3), NONE, "reclaimed", NOW, "ops@h", "why", 40, 7),
        event_row(("orders", 4), schemas.READ_WRITE, "cancel", NOW),
    ]
    document = export_document(rows_, NOW)
    assert document == {
        "format": 1,
        "written_at": "2024-05-01T12:00:00+00:00",
        "partitions": [
            {"topic": "orders", "partition": 2, "status": 1, "status_name": "ReadOnly"},
            {"topic": "orders", "partition": 3, "status": -1, "status_name": "None"},
        ],
    }
    assert closed_partitions(document) == {"orders": frozenset({2, 3})}


class FakeCluster:
    """kafka-python's ClusterMetadata, as much as a partitioner reads."""

    def __init__(self, partitions: int, unavailable: frozenset[int] = frozenset()) -> None:
        self._all, self._unavailable = set(range(partitions)), unavailable

    def topics(self) -> set[str]:
        return {"orders"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(self._all)

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self._all - self._unavailable


def test_partitioner_skips_closed_partitions_and_refreshes() -> None:
    document: dict[str, Any] = {"partitions": [{"topic": "orders", "partition": 1}, {"topic": "orders", "partition": 2}]}
    now = [0.0]
    chooser = RetirementPartitioner(lambda: document, refresh_interval_s=10, clock=lambda: now[0])
    cluster = FakeCluster(4, unavailable=frozenset({3}))
    unkeyed = {chooser.partition("orders", None, None, b"v", b"v", cluster) for _ in range(200)}
    assert unkeyed == {0}  # 1, 2 retired; 3 has no leader
    default = DefaultPartitioner()
    for key in (b"k%d" % i for i in range(200)):
        home = default.partition("orders", key, key, b"v", b"v", cluster)
        chosen = chooser.partition("orders", key, key, b"v", b"v", cluster)
        assert chosen == home if home in (0, 3) else chosen in (0, 3)
    document["partitions"] = []
    assert chooser.closed("orders") == frozenset({1, 2})  # cached until the interval has passed
    now[0] = 10.0
    assert chooser.closed("orders") == frozenset()
    document["partitions"] = [{"topic": "orders", "partition": p} for p in range(4)]
    now[0] = 20.0
    with pytest.raises(ValueError, match=r"topic 'orders': every partition is retiring or retired \(\[0, 1, 2, 3\]\)"):
        chooser.partition("orders", None, None, b"v", b"v", cluster)


def test_partitioner_keeps_the_last_good_export(tmp_path: Any) -> None:
    export = tmp_path / "audit_retirements.json"
    chooser = RetirementPartitioner(f"file:{export}", refresh_interval_s=0)
    assert chooser.closed("orders") == frozenset()  # no export yet: nothing retired
    export.write_text('{"partitions": [{"topic": "orders", "partition": 1}]}')
    assert chooser.closed("orders") == frozenset({1})
    export.write_text("{not json")
    assert chooser.closed("orders") == frozenset({1})
    export.unlink()  # the writer replaces it: delete, then rename
    assert chooser.closed("orders") == frozenset({1})


def test_a_batch_without_a_reclaim_never_reads_the_registry() -> None:
    from datetime import datetime, timezone

    from pyspark.sql import Row

    from spark_purge.audit import BatchContext
    from spark_purge.retirement import RegistryTracker

    class Registry:
        reads = 0

        def current(self) -> Any:
            Registry.reads += 1
            raise AssertionError("read the registry")

    plan = [Row(topic=ORDERS, partition=0, binding_constraint="group", cutoff=5, high_watermark=9, actionable=True, log_start_offset=0)]
    ctx = BatchContext("run", "q", 3, datetime.now(timezone.utc), False, "fp")
    tracker = RegistryTracker(Registry())  # type: ignore[arg-type]
    tracker.before_deletes(plan, ctx)
    tracker.after_outcomes(plan, [], ctx)
    assert Registry.reads == 0 and not is_reclaim(plan[0])
    reclaim = [plan[0].asDict() | {"binding_constraint": "retiring", "cutoff": 9}]
    assert is_reclaim(reclaim[0])
    with pytest.raises(AssertionError, match="read the registry"):  # a reclaim still reads it
        tracker.before_deletes([Row(**reclaim[0])], ctx)


def test_cuts_remote_follows_the_retirement_decision(spark: SparkSession) -> None:
    """A retiring partition of a tiered topic: retirement decides anew whether it acts, and
    ``cuts_remote`` follows that decision. Drained but written recently, it is held (not
    actionable), so its cut reaches no remote storage (False, not the unknown the plan before
    retirement gave it: it would have cut to the high watermark with the latest tiered offset
    unread); reclaimed, its cut reaches remote storage when the latest tiered offset is at or
    above the log start."""
    cfg = config(ORDERS, retirement={"enable": True, "delay": "1m"})
    names = ["recent", "reclaim", "reclaim_unread"]
    parts = [
        part("orders", 0, log_start=0, hw=500, remote=True, tiered=None, local_start=100),
        part("orders", 1, log_start=0, hw=500, remote=True, tiered=300, local_start=100),
        part("orders", 2, log_start=0, hw=500, remote=True, tiered=None, local_start=100),
    ]
    groups = [grp(g, "orders", i, 500) for i in range(len(names)) for g in ("billing", "analytics")]
    long_ago, just_now = NOW - timedelta(minutes=2), NOW - timedelta(seconds=10)
    history = [("orders", 0, just_now, 500, None), ("orders", 1, long_ago, 500, None), ("orders", 2, long_ago, 500, None)]
    state = [("orders", i, RO, None) for i in range(len(names))]
    plan = rows(run(spark, cfg, parts, groups, retirement=retirement_state(spark, *state), history=history))
    got = {names[p]: (r.binding_constraint, r.actionable, r.cuts_remote) for (_, p), r in plan.items()}
    assert got == {
        "recent": ("retiring", False, False),
        "reclaim": ("retiring", True, True),
        "reclaim_unread": ("retiring", True, None),
    }
