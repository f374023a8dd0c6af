"""Where a JFR recording's CPU samples are (``jdk.ExecutionSample``), by thread kind and method.

    ./dev.sh py bench/diag/jfr_samples.py REC.jfr marks NAME[,NAME...]   # samples whose stack holds each name
    ./dev.sh py bench/diag/jfr_samples.py REC.jfr paths NAME [DEPTH]     # the stacks down from a name, counted
    ./dev.sh py bench/diag/jfr_samples.py REC.jfr under NAME [K]         # what a name calls (K frames), and the self frames
    ./dev.sh py bench/diag/jfr_samples.py REC.jfr compiles [K]           # the JIT's compilations and deoptimizations
    ./dev.sh py bench/diag/jfr_samples.py REC.jfr allocations [K]        # bytes allocated by site, and the collections

Record a bench's Spark JVM with ``--conf spark.driver.extraJavaOptions=-XX:StartFlightRecording=
delay=110s,duration=75s,filename=REC.jfr,settings=profile`` (``cycle_bench.py``; the delay skips
the warm-up; add ``,jdk.Compilation#threshold=0ms`` for every compilation, not only those over
100 ms). Thread kinds: ``executor`` (task threads), ``py4j`` (the driver's Py4J threads:
what Python asks of the JVM), ``other``. A name matches a frame's ``Class.method`` by substring.
Reads the recording with the JDK's ``jfr`` tool.
"""
from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path


def events(path: str, kinds: str, depth: int = 200) -> list[dict]:
    """The recording's events of those kinds (comma-separated), as ``jfr print --json`` gives them."""
    jfr = shutil.which("jfr") or str(Path(shutil.which("java") or "java").resolve().parent / "jfr")
    out = subprocess.run(
        [jfr, "print", "--json", "--events", kinds, "--stack-depth", str(depth), path], capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)["recording"]["events"]


def _thread_kind(thread: str) -> str:
    """``executor`` (a task thread), ``py4j`` (the driver's Py4J threads) or ``other``."""
    return "executor" if "Executor task" in thread else "py4j" if thread.startswith("Thread-") else "other"


def samples(path: str) -> list[tuple[str, list[str]]]:
    """(thread kind, frames innermost first) of every execution sample."""
    found = []
    for event in events(path, "jdk.ExecutionSample"):
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        kind = _thread_kind(thread)
        frames = (values.get("stackTrace") or {}).get("frames") or []
        found.append((kind, [f["method"]["type"]["name"].split("/")[-1] + "." + f["method"]["name"] for f in frames]))
    return found


def marks(found: list[tuple[str, list[str]]], names: list[str]) -> None:
    kinds = collections.Counter(kind for kind, _ in found)
    print("samples by thread kind:", dict(kinds))
    for name in names:
        hits = collections.Counter(kind for kind, frames in found if any(name in f for f in frames))
        print(f"{name}: " + ", ".join(f"{k} {n} ({100 * n / kinds[k]:.1f} %)" for k, n in sorted(hits.items())))


def paths(found: list[tuple[str, list[str]]], name: str, depth: int) -> None:
    counted = collections.Counter()
    for _, frames in found:
        at = [i for i, f in enumerate(frames) if name in f]
        if at:
            i = at[-1]
            counted[" <- ".join(frames[max(0, i - 3) : i + depth])] += 1
    for stack, n in counted.most_common(12):
        print(n, stack, "\n")


def under(found: list[tuple[str, list[str]]], name: str, k: int) -> None:
    callees, own = collections.Counter(), collections.Counter()
    for _, frames in found:
        at = [i for i, f in enumerate(frames) if name in f]
        if at:
            callees[" <- ".join(frames[max(0, at[0] - k) : at[0]]) or "(itself)"] += 1
            own[frames[0]] += 1
    print("total", sum(own.values()))
    print("calls:")
    for stack, n in callees.most_common(20):
        print(" ", n, stack)
    print("self frames:")
    for frame, n in own.most_common(15):
        print(" ", n, frame)


def _seconds(duration: str) -> float:
    """A JFR duration as ``jfr print --json`` writes it (ISO 8601, ``PT0.0123S``) in seconds."""
    text = duration.removeprefix("PT")
    minutes, _, rest = text.rpartition("M")
    return (float(minutes) * 60 if minutes else 0.0) + (float(rest.rstrip("S")) if rest.rstrip("S") else 0.0)


def compiles(path: str, k: int) -> None:
    """The JIT's compilations (``jdk.Compilation``) by tier and the methods compiled most often
    or longest, and its deoptimizations (``jdk.Deoptimization``) by reason and method: whether
    a steady process keeps compiling the same methods again (deoptimized, then recompiled)."""
    found = events(path, "jdk.Compilation,jdk.Deoptimization", depth=1)
    comp = [e["values"] for e in found if e["type"] == "jdk.Compilation"]
    deopt = [e["values"] for e in found if e["type"] == "jdk.Deoptimization"]

    def name(method: dict) -> str:
        return method["type"]["name"].split("/")[-1] + "." + method["name"]

    span = sorted(e["values"]["startTime"] for e in found)
    print(f"{len(comp)} compilations, {len(deopt)} deoptimizations from {span[0] if span else '-'} to {span[-1] if span else '-'}")
    by_level: dict[int, list[float]] = collections.defaultdict(list)
    for c in comp:
        by_level[c["compileLevel"]].append(_seconds(c["duration"]))
    for level, secs in sorted(by_level.items()):
        print(f"  tier {level}: {len(secs)} compilations, {sum(secs):.2f} s compiling")
    times, counts = collections.Counter(), collections.Counter()
    for c in comp:
        times[name(c["method"])] += _seconds(c["duration"])
        counts[name(c["method"])] += 1
    print("methods compiled most often (count, seconds):")
    for method, n in counts.most_common(k):
        print(f"  {n:4} {times[method]:6.2f}  {method}")
    print("methods taking the longest to compile (seconds, count):")
    for method, secs in times.most_common(k):
        print(f"  {secs:6.2f} {counts[method]:4}  {method}")
    print("deoptimizations by reason / action:")
    for (reason, action), n in collections.Counter((d.get("reason"), d.get("action")) for d in deopt).most_common(k):
        print(f"  {n:5}  {reason} / {action}")
    print("methods deoptimized most often:")
    for method, n in collections.Counter(name(d["method"]) for d in deopt).most_common(k):
        print(f"  {n:5}  {method}")


# Frames of the JDK's and Scala's own libraries: an allocation is put on the first frame below them.
_LIBRARY = ("java.", "javax.", "jdk.", "sun.", "scala.", "com.google.", "io.netty.", "org.apache.arrow.memory.")


def _frame(frame: dict) -> str:
    method = frame["method"]
    return method["type"]["name"].replace("/", ".") + "." + method["name"]


def allocations(path: str, k: int) -> None:
    """Where the JVM allocates (``jdk.ObjectAllocationSample``, each sample weighted by the bytes
    it stands for): by thread kind, by the first frame outside the JDK's and Scala's libraries,
    and by the object's class; then its collections (``jdk.GarbageCollection``) by kind, with
    their pauses (stop 92: what a steady cycle allocates, and so what its collections cost).
    A sample's weight is what its thread allocated since that thread's previous sample (JFR
    throttles the samples), so the per-thread totals hold, but a site's share is only as good
    as its count of samples: a thread seldom sampled puts all it allocated on the few sites
    sampled. The count of samples per site is printed beside the bytes."""
    found = events(path, "jdk.ObjectAllocationSample,jdk.GarbageCollection", depth=64)
    allocs = [e["values"] for e in found if e["type"] == "jdk.ObjectAllocationSample"]
    gcs = [e["values"] for e in found if e["type"] == "jdk.GarbageCollection"]
    span = sorted(e["values"]["startTime"] for e in found)
    total = sum(a["weight"] for a in allocs)
    print(f"{len(allocs)} allocation samples standing for {total / 2**20:.0f} MB, from {span[0] if span else '-'} to {span[-1] if span else '-'}")
    kinds, sites, classes, seen = collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
    for a in allocs:
        thread = (a.get("eventThread") or {}).get("javaName") or "?"
        kinds[_thread_kind(thread)] += a["weight"]
        frames = [_frame(f) for f in (a.get("stackTrace") or {}).get("frames", [])]
        own = next((f for f in frames if not f.startswith(_LIBRARY)), frames[0] if frames else "?")
        sites[own] += a["weight"]
        seen[own] += 1
        classes[(a.get("objectClass") or {}).get("name", "?")] += a["weight"]
    for title, counter in (("by thread kind", kinds), ("by site (first frame outside the libraries)", sites), ("by class", classes)):
        print(f"{title} (MB, share):")
        for name, weight in counter.most_common(k):
            count = f" {seen[name]:5} samples" if counter is sites else ""
            print(f"  {weight / 2**20:8.1f} {weight / max(total, 1):6.1%}{count}  {name}")
    print("collections (count, pauses in seconds: sum, longest):")
    by_name: dict[str, list[float]] = collections.defaultdict(list)
    for g in gcs:
        by_name[g.get("name", "?")].append(_seconds(g.get("sumOfPauses") or g.get("duration") or "PT0S"))
    for name, pauses in sorted(by_name.items()):
        print(f"  {name}: {len(pauses)}, {sum(pauses):.2f} s, longest {max(pauses):.3f} s")


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[1] in ("compiles", "allocations"):
        (compiles if argv[1] == "compiles" else allocations)(argv[0], int(argv[2]) if len(argv) > 2 else 25)
        return
    if len(argv) < 3 or argv[1] not in ("marks", "paths", "under"):
        raise SystemExit(__doc__)
    found = samples(argv[0])
    if argv[1] == "marks":
        marks(found, argv[2].split(","))
    elif argv[1] == "paths":
        paths(found, argv[2], int(argv[3]) if len(argv) > 3 else 14)
    else:
        under(found, argv[2], int(argv[3]) if len(argv) > 3 else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
