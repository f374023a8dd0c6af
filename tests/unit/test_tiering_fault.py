"""The ``tiering_disable`` checker kind's oracle on its own (no Kafka: the ``retain`` policy needs
no local log start read): it flags a cut of the DISABLING topic, by outcome or by log start, only
in the cycle the topic spends DISABLING, and counts cuts that reached remote storage."""
from __future__ import annotations

import random
from typing import Any

from spark_purge.testing.tiering_fault import DISABLING, TieringDisablement

B = "inv-b"


def _row(topic: str, partition: int, status: str, cuts_remote: bool = False, cutoff: int = 40) -> dict[str, Any]:
    return {"record_type": "outcome", "topic": topic, "partition": partition, "status": status, "cuts_remote": cuts_remote, "cutoff": cutoff}


def _disabling(cycle: int) -> TieringDisablement:
    fault = TieringDisablement(None, None, None, B, random.Random(1))  # type: ignore[arg-type]
    fault.state, fault.policy, fault.stopped_at, fault.during = DISABLING, "retain", "copy_disable", cycle
    return fault


def test_a_cut_of_the_disabling_topic_is_a_violation_in_its_cycle_only() -> None:
    fault = _disabling(4)
    before = {(B, 0): 10, (B, 1): 10, ("inv-a", 0): 5}
    quiet = fault.check(4, before, dict(before), [_row(B, 0, "skipped"), _row("inv-a", 0, "deleted", cuts_remote=True)])
    assert quiet == [] and fault.remote_cuts == 1

    cut = fault.check(4, before, {**before, (B, 1): 40}, [_row(B, 1, "deleted", cuts_remote=True)])
    assert cut == [
        f"cycle 4: {B}-1 cut to 40 while its tiered storage was DISABLING",
        f"cycle 4: {B}-1 log start 40 > 10 while DISABLING (before 10, Kafka's own local log start None)",
    ]
    assert fault.remote_cuts == 2
    assert fault.check(5, before, {**before, (B, 1): 40}, [_row(B, 1, "deleted")]) == []  # another cycle: the usual oracle's


def test_spent_and_pending() -> None:
    fault = _disabling(1)
    assert fault.spent
    fault.state = "DISABLED(retain)"
    assert not fault.spent  # delete may follow retain
    fault.state = "DISABLED(delete)"
    assert fault.spent
    fault.pending = True
    fault.check(1, {}, {}, [])
    assert not fault.pending  # a batch that died before its intents never starts it later
