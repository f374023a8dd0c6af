"""Where a running broker's threads spend their time (stop 87): CPU by thread kind over a window,
and what one kind's running threads are doing (stack samples).

    ./dev.sh py bench/diag/broker_threads.py PID [--seconds 90] [--kind kafka-scheduler] [--every 0.5]

``PID``: a broker's JVM (a ``kafka.Kafka`` process, e.g. one ``cycle_bench.py`` started; its
cycles print nothing of the broker). Reads each thread's user + system time from
``/proc/PID/task/*/stat`` at the window's start and end, threads grouped by name with digits
folded (``kafka-scheduler-3`` -> ``kafka-scheduler-N``; Linux keeps 15 characters of a name).
Meanwhile takes ``jcmd PID Thread.print`` every ``--every`` seconds and counts, over the
RUNNABLE threads whose name starts with ``--kind``, their top frame and their first four Kafka
frames. Not a test: a diagnosis.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import time
from pathlib import Path


def cpu_by_kind(pid: int) -> collections.Counter[str]:
    """Clock ticks of user + system time per thread kind."""
    ticks: collections.Counter[str] = collections.Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        ticks[re.sub(r"\d+", "N", name)] += int(fields[11]) + int(fields[12])
    return ticks


def stacks(pid: int, kind: str, jcmd: str) -> list[list[str]]:
    """The frames of each RUNNABLE thread named ``kind``... in one thread dump."""
    dump = subprocess.run([jcmd, str(pid), "Thread.print"], capture_output=True, text=True, check=True).stdout
    found = []
    for block in dump.split("\n\n"):
        if block.startswith(f'"{kind}') and "RUNNABLE" in block:
            found.append([line.strip()[3:] for line in block.splitlines() if line.strip().startswith("at ")])
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--kind", default="kafka-scheduler", help="the threads whose stacks are sampled (a name prefix)")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between thread dumps")
    args = ap.parse_args(argv)
    jcmd = shutil.which("jcmd") or str(Path(os.path.realpath(shutil.which("java") or "java")).parent / "jcmd")
    before, start = cpu_by_kind(args.pid), time.monotonic()
    tops: collections.Counter[str] = collections.Counter()
    paths: collections.Counter[str] = collections.Counter()
    dumps = 0
    while time.monotonic() - start < args.seconds:
        for frames in stacks(args.pid, args.kind, jcmd):
            if frames:
                tops[frames[0]] += 1
                paths[" < ".join([f for f in frames if f.startswith(("kafka.", "org.apache.kafka"))][:4])] += 1
        dumps += 1
        time.sleep(args.every)
    after, took = cpu_by_kind(args.pid), time.monotonic() - start
    hz = os.sysconf("SC_CLK_TCK")
    print(f"broker {args.pid}: {took:.0f} s; CPU seconds by thread kind (user + system):")
    for name, ticks in sorted(((n, after[n] - before.get(n, 0)) for n in after), key=lambda x: -x[1])[:15]:
        print(f"  {ticks / hz:7.2f}  {name}")
    print(f"{args.kind}: RUNNABLE in {sum(tops.values())} thread samples of {dumps} dumps; their first Kafka frames:")
    for path, n in paths.most_common(12):
        print(f"  {n:5d}  {path}")
    print("their top frames:")
    for frame, n in tops.most_common(8):
        print(f"  {n:5d}  {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
