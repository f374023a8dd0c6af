"""The soak's verdict (``SoakReport.judge``): flat memory and steady batches pass; memory that
keeps growing, or batches that slow down, fail with the figures named."""
from __future__ import annotations

from spark_purge.testing.soak import Sample, SoakReport

MIB = 2**20


def report(totals_mib: list[float], batch_s: list[float]) -> SoakReport:
    r = SoakReport()
    for i, (mem, t) in enumerate(zip(totals_mib, batch_s)):
        r.samples.append(Sample(float(i), i, [t], {"python driver": int(mem * MIB)}))
    r.judge()
    return r


def test_flat_memory_and_steady_batches_pass() -> None:
    r = report([2000, 2100, 2080, 2090, 2110, 2095, 2100, 2105, 2090, 2100], [1.0, 1.2, 1.1, 1.0, 1.1, 1.2, 1.0, 1.1, 1.0, 1.1])
    assert r.failures == []


def test_warm_up_growth_is_not_counted() -> None:
    r = report([500, 2000, 2010, 2005, 2000, 2010], [5.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert r.failures == []


def test_memory_growing_without_bound_fails() -> None:
    r = report([2000 + 100 * i for i in range(10)], [1.0] * 10)
    assert len(r.failures) == 1 and r.failures[0].startswith("driver-side RSS grew")


def test_batch_time_drift_fails() -> None:
    r = report([2000] * 10, [1.0, 1.0, 1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0])
    assert r.failures == ["batch time drifted from a median 1.00s to 3.75s"]


def test_too_few_samples_fail() -> None:
    assert report([2000, 2000], [1.0, 1.0]).failures == ["only 2 samples: run longer than 4 sample intervals"]
