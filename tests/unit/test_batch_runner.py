"""The batch runner with a fake audit and a fake client: intents before deletes, one outcome per
planned partition, and no Kafka connection when there is nothing to delete."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

from spark_purge.audit import BatchContext
from spark_purge.delta_files import rows_of
from spark_purge.kafka.model import DeleteOutcome
from spark_purge.runner import BatchRunner
from spark_purge.testing.invariants import KILL_STEPS, step_never_reached
from tests.unit.test_audit_rows import PLAN_ROWS, plan_row

PLANNED = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
EXECUTED = datetime(2026, 11, 22, 12, 1, tzinfo=timezone.utc)


@dataclass
class Recorder:
    """Both fakes write to one event log, so the test can check the order of effects."""

    events: list[tuple[str, object]] = field(default_factory=list)
    written: dict[str, list[Row]] = field(default_factory=dict)


@dataclass
class FakeAudit:
    log: Recorder

    def ensure_table(self) -> None:
        self.log.events.append(("ensure_table", None))

    def write(self, rows: Sequence[Row] | pa.Table, kind: str, batch_id: int) -> bool:
        self.log.events.append((f"write {kind}", batch_id))
        written = self.log.written[kind] = rows_of(rows) if isinstance(rows, pa.Table) else list(rows)
        return bool(written)


@dataclass
class FakeClient:
    log: Recorder
    answers: dict[tuple[str, int], DeleteOutcome]

    def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        raise AssertionError("the runner never looks up timestamps")

    def delete_records(
        self, cutoffs: Mapping[tuple[str, int], int], timeout_ms: int, topic_ids: Mapping[str, str] | None = None
    ) -> list[DeleteOutcome]:
        assert topic_ids == {"orders": "id-orders"}  # the ids the plan was made for go with the cutoffs
        self.log.events.append(("delete_records", dict(cutoffs)))
        return [self.answers[tp] for tp in cutoffs if tp in self.answers]

    def close(self) -> None:
        pass


def runner(log: Recorder, answers: dict[tuple[str, int], DeleteOutcome] | None = None) -> BatchRunner:
    def connect() -> FakeClient:
        log.events.append(("connect", None))
        return FakeClient(log, answers or {})

    return BatchRunner(FakeAudit(log), connect, delete_timeout_ms=5000, clock=lambda: EXECUTED)


def ctx(dry_run: bool = False) -> BatchContext:
    return BatchContext("run", "query", 3, PLANNED, dry_run, "fp")


def test_intents_then_deletes_then_outcomes() -> None:
    log = Recorder()
    answers = {("orders", 0): DeleteOutcome("orders", 0, 100, 1, 100), ("orders", 1): DeleteOutcome("orders", 1, 200, 1, 200)}

    result = runner(log, answers).run(PLAN_ROWS[:5], ctx())

    assert [name for name, _ in log.events] == ["ensure_table", "write intent", "connect", "delete_records", "write outcome"]
    assert log.events[3][1] == {("orders", 0): 100, ("orders", 1): 200, ("orders", 2): 300, ("orders", 4): 50}
    assert [r.partition for r in log.written["intent"]] == [0, 1, 2, 4]
    assert [(r.partition, r.status) for r in log.written["outcome"]] == [
        (0, "deleted"), (1, "deleted"), (2, "failed"), (3, "skipped"), (4, "failed"),  # 2 and 4: no outcome
    ]
    assert (result.planned, result.actionable, result.deleted, result.failed, result.records_deleted) == (5, 4, 2, 2, 280)


def test_dry_run_and_nothing_actionable_never_connect() -> None:
    for plan, dry_run in ((PLAN_ROWS, True), ([plan_row(0, None, False, binding="missing_commit")], False)):
        log = Recorder()
        result = runner(log).run(plan, ctx(dry_run))
        assert ("connect", None) not in log.events
        assert result.deleted == 0 and result.failed == 0
        assert len(log.written["outcome"]) == len(plan)


def test_fault_hook_runs_between_steps() -> None:
    log = Recorder()
    steps: list[str] = []

    def crash(step: str, batch_id: int) -> None:
        steps.append(step)
        if step == "intents_written":
            raise RuntimeError("crash after the intents")

    run = runner(log)
    run.fault_hook = crash
    with pytest.raises(RuntimeError):
        run.run(PLAN_ROWS, ctx())
    assert steps == ["intents_written"]
    assert [name for name, _ in log.events] == ["ensure_table", "write intent"]  # nothing deleted


def test_the_checkers_unreached_steps_are_the_steps_a_batch_skips() -> None:
    # driver_kill_rewind draws a step before it knows the plan: a step the batch never reaches
    # must be one the checker's step_never_reached accepts, judged from the audit rows alone.
    nothing = [plan_row(0, None, False, binding="missing_commit")]
    for plan in (PLAN_ROWS[:5], nothing):
        log = Recorder()
        reached: list[str] = []
        run = runner(log, {("orders", 0): DeleteOutcome("orders", 0, 100, 1, 100)})
        run.fault_hook = lambda step, batch_id, seen=reached: seen.append(step)
        run.run(plan, ctx())
        audit = [{"record_type": kind} for kind, rows in log.written.items() for _ in rows]
        for step in KILL_STEPS:
            assert (step not in reached) == step_never_reached(step, audit), (step, reached)
    assert reached == ["intents_written", "deletes_sent"]  # the plan with nothing actionable


def test_a_disablement_started_since_the_plan_keeps_its_topic_uncut() -> None:
    """Tiered storage began to be disabled on ``orders`` after the plan: read again right before
    DeleteRecords, its cuts are never sent and their outcomes say why; the other topic's cut goes
    on. The read and the client's opening come before the lease check, so DeleteRecords' window
    (two thirds of lease.ttl) starts at the check. With nothing left to send, the client is not
    even opened."""
    log = Recorder()
    plan = [*PLAN_ROWS[:2], plan_row(0, 70, True, topic="events", topic_id=None)]
    answers = {("events", 0): DeleteOutcome("events", 0, 70, 1, 70)}
    run = runner(log, answers)
    run.before_delete = lambda: log.events.append(("lease", None))

    def transitions() -> frozenset[str]:
        log.events.append(("transitions", None))
        return frozenset({"orders"})

    run.transitions = transitions
    result = run.run(plan, ctx())
    assert log.events[2:6] == [("transitions", None), ("connect", None), ("lease", None), ("delete_records", {("events", 0): 70})]
    assert [(r.topic, r.partition, r.status) for r in log.written["outcome"]] == [
        ("orders", 0, "skipped"), ("orders", 1, "skipped"), ("events", 0, "deleted")
    ]
    assert (result.deleted, result.failed) == (1, 0)

    log = Recorder()
    run = runner(log, answers)
    run.transitions = lambda: frozenset({"orders"})
    result = run.run(PLAN_ROWS[:2], ctx())
    assert ("connect", None) not in log.events
    assert [(r.partition, r.status, r.error) for r in log.written["outcome"]] == [
        (p, "skipped", "tiering_transition: tiered storage began to be disabled on the topic after the plan (spark-purge tiering); not cut")
        for p in (0, 1)
    ]
    assert (result.deleted, result.failed) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(
        st.tuples(st.sampled_from(["orders", "events", "audit"]), st.integers(0, 3), st.booleans()),
        min_size=1, max_size=12, unique_by=lambda c: c[:2],
    ),
    moving=st.sets(st.sampled_from(["orders", "events", "audit", "other"])),
)
def test_property_no_delete_is_sent_for_a_topic_in_transition(cuts: list[tuple[str, int, bool]], moving: set[str]) -> None:
    """Whatever the plan and whichever topics began DISABLING since it: DeleteRecords never
    carries a partition of those topics, and every planned partition gets exactly one outcome."""
    plan = [plan_row(p, 100 + p, actionable, binding="group" if actionable else "missing_commit", topic=t, topic_id=None)
            for t, p, actionable in cuts]
    sent: dict[tuple[str, int], int] = {}

    class Client(FakeClient):
        def delete_records(
            self, cutoffs: Mapping[tuple[str, int], int], timeout_ms: int, topic_ids: Mapping[str, str] | None = None
        ) -> list[DeleteOutcome]:
            sent.update(cutoffs)
            return [DeleteOutcome(t, p, c, 1, c) for (t, p), c in cutoffs.items()]

    log = Recorder()
    run = BatchRunner(FakeAudit(log), lambda: Client(log, {}), delete_timeout_ms=5000, clock=lambda: EXECUTED,
                      transitions=lambda: frozenset(moving))
    run.run(plan, ctx())
    assert not {t for t, _ in sent} & moving
    assert sorted((r.topic, r.partition) for r in log.written["outcome"]) == sorted((t, p) for t, p, _ in cuts)
    actionable = {(t, p): a for t, p, a in cuts}
    for r in log.written["outcome"]:
        wanted = "deleted" if actionable[(r.topic, r.partition)] and r.topic not in moving else "skipped"
        assert r.status == wanted, r
