"""The store match's chunks in threads (``position_match.in_threads``, stop 87): results in
their items' order, at most ``threads`` made ahead, an error raised at its item's turn; and the
match, its log file and its facts the same in two threads as in one."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from spark_purge import position_match as pm
from spark_purge.position_match import in_threads


def test_results_come_in_their_items_order() -> None:
    def slow_first(i: int) -> int:
        time.sleep(0.02 * (5 - i))  # the first items take longest
        return i * i

    assert list(in_threads(slow_first, range(6), 2)) == [0, 1, 4, 9, 16, 25]
    assert list(in_threads(slow_first, range(6), 1)) == [0, 1, 4, 9, 16, 25]
    assert list(in_threads(slow_first, [], 2)) == []


def test_at_most_threads_items_are_made_ahead_of_the_one_given() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
        return i

    seen = []
    for i in in_threads(work, range(10), 2):
        with lock:
            ahead = max(started) - i
        seen.append(ahead)
    assert max(seen) <= 1, seen  # two threads: while one is used, at most one more is made


def test_one_thread_works_in_the_callers_thread() -> None:
    here = threading.get_ident()
    assert set(in_threads(lambda _: threading.get_ident(), range(3), 1)) == {here}
    assert here not in set(in_threads(lambda _: threading.get_ident(), range(3), 2))


def test_an_error_is_raised_at_its_items_turn_and_later_items_are_not_started() -> None:
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 2:
            raise ValueError("item 2 is bad")
        return i

    given = []
    with pytest.raises(ValueError, match="item 2 is bad"):
        for value in in_threads(work, range(50), 2):
            given.append(value)
    assert given == [0, 1]
    assert max(started) <= 3  # nothing past the one made ahead of the failing item


def _input(path: Path) -> list[pa.RecordBatch]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "diag"))
    from match_memory import build  # the cycle bench's shape: every position moves

    build(600, 300, 50, str(path))
    return pa.ipc.open_file(str(path)).read_all().to_batches(max_chunksize=500)


def test_the_match_in_two_threads_gives_what_it_gives_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _input(tmp_path / "input.arrow")
    outputs = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(pm, "MATCH_THREADS", threads)
        # 600 partitions, 37 at a time: 17 chunks (a group's verdict combines several).
        run = pm.nested_batches((), chunk=37, log_batch=4, packed=True)
        outputs.append(pa.Table.from_batches(list(run(iter(batches)))))
    assert outputs[0].num_rows > 17
    assert outputs[1].equals(outputs[0]) and outputs[2].equals(outputs[0])


def test_the_facts_in_two_threads_are_what_they_are_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from plan_bench import synthetic

    from spark_purge.policy.inputs import TopicRuleRow
    from spark_purge.policy.positions import _facts_ask
    from spark_purge.schemas import SNAPSHOT
    from spark_purge.source_arrow import snapshot_batch

    at = datetime(2024, 5, 1, tzinfo=timezone.utc)
    snap = snapshot_batch(synthetic(300, 120, 25, 1, int(at.timestamp() * 1000)), "snapshot")
    topics = sorted(set(snap.column("topic").to_pylist()))
    # Each topic requires its own groups and one no partition has (missing everywhere).
    rules = [TopicRuleRow(t, "r", False, [*(f"g{g:05d}" for g in range(i, 120, len(topics))), "absent"], True, True, at, "1d", 1, None, [], None)
             for i, t in enumerate(topics)]
    ask, _, _ = _facts_ask(SNAPSHOT, rules)
    assert ask is not None
    names = [f"g{g:05d}" for g in range(0, 120, 2)]  # every other group a stale candidate, long idle
    verdicts = pm._output(pm.ROW_GROUP, len(names), group_id=pa.array(names), stale_candidate=pa.array([True] * len(names)),
                          last_progress=pa.array([0] * len(names), pa.timestamp("us", tz="UTC")), gone=pa.array([False] * len(names)))
    monkeypatch.setattr(pm, "PARTITIONS_PER_STEP", 7)  # 300 partitions: 43 steps
    facts = []
    for threads in (1, 2):
        monkeypatch.setattr(pm, "MATCH_THREADS", threads)
        facts.append(ask.rows(snap, verdicts))
    assert facts[0].num_rows == 300
    assert facts[0].column("stale").combine_chunks().flatten().to_pylist()  # some stale: the verdicts were read
    assert facts[1].equals(facts[0])
