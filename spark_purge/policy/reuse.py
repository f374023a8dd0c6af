"""Column expressions made once and reused by every batch's plan (issue 12: a plan used to
cost about 9,000 Py4J calls to build, ~1 s a batch)."""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TypeVar

from pyspark import SparkContext

_T = TypeVar("_T")


def reused(build: Callable[..., _T]) -> Callable[..., _T]:
    """``build(*key)``'s Columns, made once per Py4J gateway and key, and reused by every
    batch's plan.

    They name columns and constants only (no batch's values), and making them is thousands of
    Py4J calls a batch (about 7,500 for the policy's steps, 0.2-0.4 s). A Column is an unresolved
    expression, bound to no DataFrame or session: each plan resolves it anew."""
    made: dict[tuple[Hashable, ...], _T] = {}

    @functools.wraps(build)
    def get(*key: Hashable) -> _T:
        gateway = id(SparkContext._gateway)
        if (gateway, *key) not in made:
            if any(k[0] != gateway for k in made):
                made.clear()  # a new gateway: the old one's objects are gone
            made[(gateway, *key)] = build(*key)
        return made[(gateway, *key)]

    return get


__all__ = ["reused"]
