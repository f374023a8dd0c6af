"""A replayed batch: recorded intents bounded by a fresh plan, stale ones skipped (pure, no Spark job)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

from spark_purge.audit import BatchContext, intent_rows, outcome_rows
from spark_purge.kafka.model import DeleteOutcome
from spark_purge.pipeline import check_checkpoint, dry_run_checkpoint, progress_location, query_id_of
from spark_purge.replay import bounded_rows, is_stale, replay_context, stale_rows
from tests.unit.test_audit_rows import plan_row

PLANNED = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
FIRST = BatchContext("run-1", "query-1", 4, PLANNED, dry_run=False, config_fingerprint="fp-old")
# What the first attempt recorded: intents on partitions 0..3 (log start 10 everywhere).
INTENTS = intent_rows([plan_row(p, 100, True) for p in range(4)], FIRST)


def fresh(partition: int, cutoff: int | None, binding: str = "group", **kw: object) -> Row:
    return plan_row(partition, cutoff, cutoff is not None and cutoff > 10, binding=binding, snapshot_id="s2", **kw)


def test_context_keeps_the_intents_planned_at_fingerprint_and_dry_run() -> None:
    ctx = replay_context(INTENTS, "run-2")
    assert ctx == BatchContext("run-2", "query-1", 4, PLANNED, dry_run=False, config_fingerprint="fp-old")


def test_each_intent_is_cut_at_most_to_the_fresh_safe_cutoff() -> None:
    rows = bounded_rows(
        INTENTS,
        {
            ("orders", 0): fresh(0, 500),  # moved on: the intent's 100 binds
            ("orders", 1): fresh(1, 20, blocking_group="rewound"),  # a group rewound to 20: 20 binds
            ("orders", 2): fresh(2, None, binding="missing_commit"),  # blocked now: skipped
            # partition 3 no longer in the plan (config changed): skipped
        },
    )
    got = [(r["partition"], r["cutoff"], r["actionable"], r["binding_constraint"], r["blocking_group"]) for r in rows]
    assert got == [
        (0, 100, True, "group", "billing"),
        (1, 20, True, "group", "rewound"),
        (2, None, False, "missing_commit", None),
        (3, None, False, "not_in_snapshot", "billing"),
    ]
    # Outcomes of the replay: the intents' fingerprint and planned_at, the bounded cutoffs.
    ctx = replay_context(INTENTS, "run-2")
    outcomes = outcome_rows(rows, {("orders", p): DeleteOutcome("orders", p, c, 1, c) for p, c in ((0, 100), (1, 20))}, ctx, PLANNED)
    assert [(o["status"], o["cutoff"], o["records_deleted"], o["config_fingerprint"]) for o in outcomes] == [
        ("deleted", 100, 90, "fp-old"), ("deleted", 20, 10, "fp-old"), ("skipped", None, 0, "fp-old"), ("skipped", None, 0, "fp-old"),
    ]


def test_a_fresh_cut_at_or_below_the_planned_log_start_deletes_nothing() -> None:
    (row,) = bounded_rows(INTENTS[:1], {("orders", 0): fresh(0, 10, blocking_group="rewound")})
    assert (row["cutoff"], row["actionable"], row["blocking_group"]) == (10, False, "rewound")


def test_stale_intents_execute_nothing() -> None:
    assert not is_stale(PLANNED, PLANNED + timedelta(minutes=10), 600_000)
    assert is_stale(PLANNED, PLANNED + timedelta(minutes=10, milliseconds=1), 600_000)
    rows = stale_rows(INTENTS)
    assert [(r["actionable"], r["binding_constraint"], r["cutoff"]) for r in rows] == [(False, "stale_snapshot", 100)] * 4


def test_a_dry_run_intent_replays_as_a_dry_run() -> None:
    dry = intent_rows([plan_row(0, 100, True)], BatchContext("r", "q", 1, PLANNED, dry_run=True, config_fingerprint="f"))
    ctx = replay_context(dry, "run-2")
    (out,) = outcome_rows(bounded_rows(dry, {("orders", 0): fresh(0, 500)}), {}, ctx, PLANNED)
    assert (out["status"], out["dry_run"]) == ("dry_run", True)


def test_a_reset_checkpoint_next_to_another_querys_audit_is_refused() -> None:
    check_checkpoint([], "file:/cp", None, "a_checkpoints")  # first run: nothing known
    check_checkpoint(["q1"], "file:/cp", "q1", "a_checkpoints")  # the same query restarted
    for current, holds in ((None, "no streaming query"), ("q2", "query q2")):
        with pytest.raises(ValueError, match=r"^stream\.checkpoint_location: file:/cp now holds " + holds) as info:
            check_checkpoint(["q1"], "file:/cp", current, "a_checkpoints")
        assert "records query q1" in str(info.value) and "removed or reset" in str(info.value)


@settings(max_examples=200, deadline=None)
@given(
    planned=st.lists(st.integers(11, 1_000), min_size=1, max_size=4),
    fresh_cuts=st.lists(st.one_of(st.none(), st.integers(0, 1_000)), min_size=4, max_size=4),
    present=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_a_replay_never_cuts_past_its_intent_nor_the_fresh_safe_cutoff(
    planned: list[int], fresh_cuts: list[int | None], present: list[bool]
) -> None:
    """driver_kill_rewind as a property: whatever happened between the crash and the restart
    (a rewind: a lower fresh cutoff; a block: none; a changed config: the partition gone)."""
    intents = intent_rows([plan_row(p, cut, True) for p, cut in enumerate(planned)], FIRST)
    fresh_rows = {("orders", p): fresh(p, fresh_cuts[p]) for p in range(len(planned)) if present[p]}
    for intent, row in zip(intents, bounded_rows(intents, fresh_rows)):
        f = fresh_rows.get(("orders", row["partition"]))
        if row["actionable"]:
            assert f is not None and f["cutoff"] is not None
            assert 10 < row["cutoff"] <= min(intent["cutoff"], f["cutoff"])
        else:
            assert row["records_to_delete"] == 0


class MemoryFiles:
    """``fs.Files`` over a dict (path -> text)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def exists(self, path: str) -> bool:
        return path in self.files

    def list_names(self, directory: str) -> list[str]:
        return sorted(p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == directory.rstrip("/"))

    def read_text(self, path: str) -> str:
        return self.files[path]


def test_checkpoint_locations_keep_their_scheme_and_bucket() -> None:
    assert progress_location("s3a://lake/purge/cp/") == "s3a://lake/purge/cp/group_progress"
    assert dry_run_checkpoint("abfss://c@acct.dfs.core.windows.net/cp") == "abfss://c@acct.dfs.core.windows.net/cp/dry_run"
    files = MemoryFiles({"s3a://lake/cp/metadata": '{"id":"7f1c-query"}\n'})
    assert query_id_of(files, "s3a://lake/cp") == "7f1c-query"
    assert query_id_of(files, "s3a://lake/other") is None  # before the query first ran
    with pytest.raises(ValueError, match=r"^stream\.checkpoint_location: s3a://lake/bad/metadata is not"):
        query_id_of(MemoryFiles({"s3a://lake/bad/metadata": "garbage"}), "s3a://lake/bad")
