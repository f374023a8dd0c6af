"""``policy.reuse.reused``: a plan's Column expressions made once per gateway and key."""
from __future__ import annotations

import pytest
from pyspark import SparkContext

from spark_purge.policy.reuse import reused


def test_made_once_per_key_and_again_for_a_new_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[int, ...]] = []

    @reused
    def build(*key: int) -> list[int]:
        made.append(key)
        return list(key)

    one, other = object(), object()  # both alive: distinct ids
    monkeypatch.setattr(SparkContext, "_gateway", one)
    first = build(1, 2)
    assert build(1, 2) is first and build(3) == [3]
    assert made == [(1, 2), (3,)]
    monkeypatch.setattr(SparkContext, "_gateway", other)  # another JVM: its objects are new
    assert build(1, 2) is not first and build(1, 2) == [1, 2]
    assert made == [(1, 2), (3,), (1, 2)]
