"""The tiered-storage disablement state machine's logic, against a fake Kafka and an in-memory
table (the real broker and Delta table: tests/integration/test_tiered_storage.py)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest

from spark_purge.config import from_dict
from spark_purge.errors import AuthorizationError, ConfigError, KafkaError, TieringRefused, TieringUnconfirmed
from spark_purge.kafka.model import TopicTiering
from spark_purge.tiering import STEP_CONFIGS, Disabler, TieringRecord, TieringTable, confirmed, status_rows

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc)
COPY = STEP_CONFIGS["copy_disable"]
STORAGE = STEP_CONFIGS["storage_disable"]


def facts(enable: str = "true", copy_off: str = "false", log_start: int = 0, local: int = 30, topic_id: str = "id-1") -> TopicTiering:
    configs: dict[str, Optional[str]] = {"remote.storage.enable": enable, "remote.log.copy.disable": copy_off}
    return TopicTiering("t", topic_id, configs, {0: log_start}, {0: local}, {0: local - 1})


@dataclass
class FakeKafka:
    """Applies SETs to one topic ``t``; the brokers apply them after ``lag`` reads; ``delete`` on
    disable moves the log start up to the local log start."""

    state: TopicTiering = field(default_factory=facts)
    lag: int = 1
    failures: list[KafkaError] = field(default_factory=list)
    altered: list[dict[str, str]] = field(default_factory=list)
    pending: list[tuple[int, dict[str, str]]] = field(default_factory=list)

    def tiering(self, topic: str) -> TopicTiering:
        if topic != "t":
            raise TieringRefused(f"topic {topic!r}: no such topic (UNKNOWN_TOPIC_OR_PARTITION)")
        due = [values for n, values in self.pending if n <= 0]
        self.pending = [(n - 1, values) for n, values in self.pending if n > 0]
        for values in due:
            configs = {**self.state.configs, **{k: v for k, v in values.items() if k in self.state.configs}}
            starts = self.state.local_log_start if values.get("remote.storage.enable") == "false" else self.state.log_start
            self.state = replace(self.state, configs=configs, log_start=dict(starts))
        return self.state

    def alter_topic_configs(self, topic: str, values: Mapping[str, str]) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.altered.append(dict(values))
        self.pending.append((self.lag, dict(values)))


class MemoryTable(TieringTable):
    """``TieringTable`` kept in a list (no Spark)."""

    def __init__(self) -> None:
        object.__setattr__(self, "rows", [])

    def latest(self, topics: Optional[Iterable[str]] = None) -> dict[str, TieringRecord]:
        wanted = None if topics is None else set(topics)
        return {r.topic: r for r in self.rows if wanted is None or r.topic in wanted}  # type: ignore[attr-defined]

    def append(self, record: TieringRecord) -> None:
        self.rows.append(record)  # type: ignore[attr-defined]


def disabler(kafka: FakeKafka, table: MemoryTable, **kw: Any) -> Disabler:
    ticks = iter(range(10_000))
    return Disabler(kafka, table, operator="op@host", timeout_s=5, clock=lambda: T0 + timedelta(seconds=next(ticks)), sleep=lambda s: None, **kw)


def steps(table: MemoryTable) -> list[tuple[str, str, str]]:
    return [(r.state, r.policy, r.step) for r in table.rows]  # type: ignore[attr-defined]


def test_delete_runs_each_step_intent_first_until_kafka_confirms() -> None:
    kafka, table = FakeKafka(lag=2), MemoryTable()
    seen: list[tuple[str, int]] = []
    done = disabler(kafka, table, fault_hook=lambda step: seen.append((step, len(table.rows)))).disable("t", "delete")
    assert kafka.altered == [COPY, STORAGE]
    assert COPY == {"remote.log.copy.disable": "true", "local.retention.ms": "-2", "local.retention.bytes": "-2"}
    assert STORAGE == {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    # each step's row was in the table before it acted
    assert seen == [("copy_disable", 1), ("storage_disable", 2), ("confirm", 3)]
    assert steps(table) == [("DISABLING", "delete", "copy_disable"), ("DISABLING", "delete", "storage_disable"),
                            ("DISABLING", "delete", "confirm"), ("DISABLED", "delete", "done")]
    assert (done.since, done.operator, done.topic_id) == (T0 + timedelta(seconds=3), "op@host", "id-1")
    assert table.rows[0].since == table.rows[2].since == T0  # type: ignore[attr-defined]  # DISABLING since it started
    assert done.detail == "remote.storage.enable=false, remote.log.copy.disable=true; log start/local log start per partition: 0: 30/30"


def test_a_crash_resumes_from_the_recorded_step_with_its_policy() -> None:
    kafka, table = FakeKafka(), MemoryTable()

    def crash(step: str) -> None:
        if step == "copy_disable":
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        disabler(kafka, table, fault_hook=crash).disable("t", "delete")
    assert steps(table) == [("DISABLING", "delete", "copy_disable")]
    with pytest.raises(TieringRefused, match=r"topic 't' is already DISABLING with policy 'delete' .* rerun with --policy delete"):
        disabler(kafka, table).disable("t", "retain")
    assert len(table.rows) == 1  # type: ignore[attr-defined]
    (done,) = disabler(kafka, table).resume_all()
    assert (done.state, done.policy) == ("DISABLED", "delete")
    assert kafka.altered == [COPY, COPY, STORAGE]  # the recorded step acted again (an idempotent SET)
    assert "remote.storage.enable" not in {k for values in kafka.altered for k, v in values.items() if v == "true"}


def test_retain_stops_copying_and_keeps_remote_data() -> None:
    kafka, table = FakeKafka(), MemoryTable()
    done = disabler(kafka, table).disable("t", "retain")
    assert kafka.altered == [COPY]
    assert (done.state, kafka.state.configs["remote.storage.enable"], kafka.state.log_start) == ("DISABLED", "true", {0: 0})
    assert disabler(kafka, table).disable("t", "retain") is not None and len(table.rows) == 3  # type: ignore[attr-defined]
    # From DISABLED(retain), delete is a new transition.
    again = disabler(kafka, table).disable("t", "delete")
    assert (again.policy, kafka.altered[-1]) == ("delete", STORAGE)


def test_retriable_errors_are_retried_others_leave_the_state_disabling() -> None:
    busy = KafkaError("NOT_CONTROLLER")
    busy.retriable = True
    kafka, table = FakeKafka(failures=[busy, busy]), MemoryTable()
    assert disabler(kafka, table).disable("t", "retain").state == "DISABLED"
    kafka, table = FakeKafka(failures=[AuthorizationError("AlterConfigs on topic 't' denied (TOPIC_AUTHORIZATION_FAILED)")]), MemoryTable()
    with pytest.raises(AuthorizationError, match="AlterConfigs on topic 't' denied"):
        disabler(kafka, table).disable("t", "retain")
    assert steps(table) == [("DISABLING", "retain", "copy_disable")]


def test_unconfirmed_in_time_raises_and_stays_disabling() -> None:
    kafka, table = FakeKafka(lag=10**6), MemoryTable()
    with pytest.raises(TieringUnconfirmed, match=r"topic 't': Kafka has not confirmed the retain disablement after 0s \(remote.log.copy.disable not yet true on every leader\); state stays DISABLING"):
        Disabler(kafka, table, timeout_s=0.05, sleep=lambda s: None).disable("t", "retain")
    assert table.rows[-1].state == "DISABLING"  # type: ignore[attr-defined]


def test_bad_requests_are_refused_naming_the_value_and_record_nothing() -> None:
    table = MemoryTable()
    with pytest.raises(ConfigError, match="tiering disable t: --policy: expected 'retain' or 'delete', got 'keep'"):
        disabler(FakeKafka(), table).disable("t", "keep")
    with pytest.raises(TieringRefused, match="topic 'nope': no such topic"):
        disabler(FakeKafka(), table).disable("nope", "delete")
    with pytest.raises(TieringRefused, match=r"topic 't' does not have tiered storage enabled \(remote.storage.enable=false\)"):
        disabler(FakeKafka(state=facts(enable="false")), table).disable("t", "delete")
    kafka = FakeKafka()
    kafka.state = replace(kafka.state, configs={**kafka.state.configs, "remote.storage.enable": None})  # brokers disagree
    with pytest.raises(TieringRefused, match="not agreed by every leader"):
        disabler(kafka, table).disable("t", "delete")
    assert table.rows == [] and kafka.altered == []  # type: ignore[attr-defined]


def test_a_recreated_topic_starts_afresh() -> None:
    kafka, table = FakeKafka(), MemoryTable()
    table.append(TieringRecord("t", "old-id", "DISABLED", "delete", "done", T0, T0))
    assert disabler(kafka, table).disable("t", "retain").topic_id == "id-1"


def test_confirmed_is_what_kafka_reports() -> None:
    assert confirmed(facts(copy_off="true"), "retain") is None
    assert confirmed(facts(enable="false"), "retain") is None
    assert confirmed(facts(), "retain") == "remote.log.copy.disable not yet true on every leader"
    assert confirmed(facts(enable="false", log_start=0, local=30), "delete") == "offsets still only in remote storage: partition 0: 30"
    assert confirmed(facts(enable="false", log_start=30, local=30), "delete") is None
    assert confirmed(facts(enable="true", log_start=30, local=30), "delete") == "remote.storage.enable not yet false on every leader"
    unknown = replace(facts(enable="false", log_start=30), local_log_start={})
    assert confirmed(unknown, "delete") == "local log start unknown for partition(s) [0]"


def test_config_section_and_status() -> None:
    base = {"kafka": {"bootstrap_servers": "k:1"}, "audit": {"path": "a"}, "defaults": {"min_retention": "0s"}, "rules": [{"name": "r", "topics": "x"}]}
    cfg = from_dict({**base, "tiering": [{"topic": "t", "disable": "delete"}, {"topic": "u", "disable": "retain"}]})
    assert [(e.topic, e.disable) for e in cfg.tiering] == [("t", "delete"), ("u", "retain")]
    for bad, message in [
        ([{"topic": "t", "disable": "keep"}], "tiering[0].disable: expected 'retain' or 'delete', got 'keep'"),
        ([{"topic": "t"}], "tiering[0].disable: required key is missing"),
        ([{"topic": "t", "disabel": "delete"}], "tiering[0].disabel: unknown key; did you mean 'disable'?"),
        ([{"topic": "a b", "disable": "delete"}], "tiering[0].topic: expected a topic name"),
        ([{"topic": "t", "disable": "delete"}, {"topic": "t", "disable": "retain"}], "tiering[1].topic: duplicate topic 't' (also tiering[0])"),
    ]:
        with pytest.raises(ConfigError) as err:
            from_dict({**base, "tiering": bad})
        assert any(p.startswith(message) for p in err.value.problems), (err.value.problems, message)
    table = MemoryTable()
    table.append(TieringRecord("t", "id", "DISABLING", "delete", "confirm", T0, T0))
    assert [(r["topic"], r["state"], r["since"]) for r in status_rows(table, cfg.tiering)] == [("t", "DISABLING", T0), ("u", "ENABLED", None)]
