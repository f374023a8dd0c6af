"""CPU an idle test cluster's broker JVMs use (user + system time from ``/proc/<pid>/stat``).

    PYTHONPATH=. ./dev.sh py bench/diag/idle_brokers.py [--settle 30] [--window 60]

    PYTHONPATH=. ./dev.sh py bench/diag/idle_brokers.py --compare KEY=VALUE ...

Starts the fault suite's 3-node cluster (``FAULT_BROKER_CONFIG``), waits ``--settle`` seconds
after it is ready, then prints each broker's share of one core over ``--window`` idle seconds;
then the same for a 1-node cluster (the shared and secured clusters' size). The whole suite is
CPU-bound on a 2-core machine (stop 61: both cores 92-95 % busy), and several clusters live for
most of a run. Each cluster is stopped by its PIDs at the end, as the tests stop theirs. ``--compare``: two
1-node clusters side by side, one with the given broker settings, over the same window.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cycle_bench import _cpu_s  # (user + system CPU seconds of a process, from /proc)

from spark_purge.testing.cluster import LocalKafka
from tests.integration.faults.conftest import FAULT_BROKER_CONFIG


def idle_share(pids: list[int], settle: float, window: float) -> list[float]:
    """Each process's share of one core (%) over ``window`` idle seconds after ``settle``."""
    time.sleep(settle)
    before = [_cpu_s(p) for p in pids]
    began = time.monotonic()
    time.sleep(window)
    took = time.monotonic() - began
    return [round(100 * (_cpu_s(p) - b) / took, 1) for p, b in zip(pids, before)]


def broker_pids(*clusters: LocalKafka) -> list[int]:
    return [c.node(n).process.pid for c in clusters for n in c.node_ids]  # type: ignore[union-attr]


def compare(settings: list[str], settle: float, window: float) -> None:
    """Two 1-node clusters at once, one as the tests start it, one with ``settings`` added
    (``KEY=VALUE``), measured over the same idle window: the machine's drift falls on both."""
    extra = dict(s.split("=", 1) for s in settings)
    with LocalKafka(nodes=1) as plain, LocalKafka(nodes=1, broker_config=extra) as changed:
        shares = idle_share(broker_pids(plain, changed), settle, window)
    print(f"1-node clusters side by side, idle {window:.0f} s after {settle:.0f} s, % of a core: as the tests start it {shares[0]}; with {' '.join(settings)} {shares[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=30.0, help="seconds after the start before measuring")
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--compare", nargs="+", metavar="KEY=VALUE", help="instead: two 1-node clusters at once, without and with these broker settings")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare, args.settle, args.window)
        return
    with LocalKafka(nodes=3, broker_config=FAULT_BROKER_CONFIG) as cluster:
        print(f"3-node fault cluster, idle {args.window:.0f} s after {args.settle:.0f} s: % of a core per broker:",
              idle_share(broker_pids(cluster), args.settle, args.window))
    with LocalKafka(nodes=1) as cluster:
        print(f"1-node cluster, idle {args.window:.0f} s after {args.settle:.0f} s: % of a core:",
              idle_share(broker_pids(cluster), args.settle, args.window))


if __name__ == "__main__":
    main()
