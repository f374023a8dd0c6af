"""The store match's memory in its Python worker (issue 12), by chunk size.

    ./dev.sh py bench/diag/match_memory.py [--partitions 10000] [--groups 10000] [--chunks 0,2000,500] [--log none,append,rewrite] [--threads 1,2]

Builds the match's input (``position_match.NESTED_INPUT``) of the cycle bench's shape in Arrow:
topics of 50 partitions, group *i* committing on every partition of topic *i* mod #topics; the
snapshot's side with every group one offset past the store's, the store's side with every
position (so every key moves, as in the cycle bench). Writes it as an Arrow IPC file, then for
each chunk size runs ``position_match.nested_batches`` over it in a fresh Python process with
only the worker's modules imported, as a Spark Python worker does, and prints that process's
peak RSS above what it held once the input was read (``VmHWM``, reset through
``/proc/self/clear_refs``: ``ru_maxrss`` keeps the parent's peak across ``exec``), PyArrow's pool peak and
the seconds. ``0`` is every partition at once (one chunk). ``--threads``: the threads the match
runs its chunks in (``position_match.MATCH_THREADS``, stop 87; 0: the module's own). Not a test:
a diagnosis.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# Run in a child: the input read, then the match, memory measured around it.
CHILD = r"""
import sys, time
from pathlib import Path
import pyarrow as pa
sys.path.insert(0, {root!r})
from spark_purge import position_match as pm
def status_mb(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
batches = pa.ipc.open_file({path!r}).read_all().to_batches()
chunk = {chunk}
if {threads} and hasattr(pm, "MATCH_THREADS"):  # stop 87: chunks matched in threads
    pm.MATCH_THREADS = {threads}
Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) from here on
start = status_mb("VmRSS")
t = time.perf_counter()
rows = 0
import inspect
chunked = "chunk" in inspect.signature(pm.nested_batches).parameters  # a checkout before stop 66: all at once
log = {log!r}
extra = {{}} if log == "none" else {{"log_batch": 1, "rewrite_above": -1 if log == "rewrite" else None}}  # stop 67: the log's files
if "packed" in inspect.signature(pm.nested_batches).parameters:  # stop 68: the store held packed, given packed
    extra["packed"] = True
for b in (pm.nested_batches((), chunk or 10**9, **extra) if chunked else pm.nested_batches(()))(iter(batches)):
    rows += b.num_rows
print("threads %s log %-7s chunk %-8s %6.2f s  peak RSS %5.0f MB above the %3.0f MB once the input was read; Arrow pool peak %5.0f MB  (%d rows out)" % (
    {threads} or "default", log, chunk or "all", time.perf_counter() - t, status_mb("VmHWM") - start, start, pa.default_memory_pool().max_memory() / 1e6, rows))
"""


def build(partitions: int, groups: int, per_topic: int, path: str) -> None:
    import pyarrow as pa

    from spark_purge import position_match
    from spark_purge.position_match import COMMIT, NESTED_INPUT, POSITION

    n_topics = (partitions + per_topic - 1) // per_topic
    topics = [f"t{i % n_topics:05d}" for i in range(partitions)]
    parts = [i // n_topics for i in range(partitions)]
    tids = [f"id-{t}-0123456789abcdef" for t in topics]
    at = 1_700_000_000_000_000
    members = [list(range(i % n_topics, groups, n_topics)) for i in range(partitions)]
    snap_groups = [[{"group_id": f"g{g:05d}", "group_state": "Stable", "group_type": "classic", "member_count": 1, "committed_offset": 20 + g % 7} for g in m] for m in members]
    stored = [[{"group_id": f"g{g:05d}", "committed_offset": 19 + g % 7, "last_progress_time": at, "group_type": "classic", "topic_id": tids[i], "changed": False} for g in m] for i, m in enumerate(members)]
    schema = pa.schema([pa.field(n, k) for n, k in NESTED_INPUT])
    packs = "packed" in schema.names  # stop 68: the store held packed, a row a chunk (``position_match.pack``)
    stamp = pa.timestamp("us", tz="UTC")
    snap_columns = {"stored": [False] * partitions, "topic": topics, "partition": pa.array(parts, pa.int32()), "snapshot_id": ["s1"] * partitions,
                    "snapshot_time": pa.array([at] * partitions, stamp), "topic_id": tids, "groups": pa.array(snap_groups, pa.list_(COMMIT)),
                    "positions": pa.nulls(partitions, pa.list_(POSITION))}
    snap_columns.update({name: pa.nulls(partitions, kind) for name, kind in NESTED_INPUT if name not in snap_columns})  # later columns: null
    snap = pa.table({name: snap_columns[name] for name in schema.names}, schema=schema)
    store_columns = {"stored": [True] * partitions, "topic": topics, "partition": pa.array(parts, pa.int32()), "snapshot_id": pa.nulls(partitions, pa.string()),
                     "snapshot_time": pa.nulls(partitions, stamp), "topic_id": pa.nulls(partitions, pa.string()), "groups": pa.nulls(partitions, pa.list_(COMMIT)),
                     "positions": pa.array(stored, pa.list_(POSITION))}
    if packs:
        rows = pa.table({"topic": topics, "partition": pa.array(parts, pa.int32()), "positions": store_columns["positions"], "changed": pa.array([0] * partitions, pa.int64())})
        blobs = [position_match.pack(rows.slice(i, 2000)) for i in range(0, partitions, 2000)]
        n = len(blobs)
        store_packed = {"stored": pa.array([True] * n), "packed": pa.array(blobs, pa.binary())}
        store = pa.table({name: store_packed.get(name, pa.nulls(n, kind)) for name, kind in NESTED_INPUT}, schema=schema)
    else:
        store_columns.update({name: pa.nulls(partitions, kind) for name, kind in NESTED_INPUT if name not in store_columns})
        store = pa.table({name: store_columns[name] for name in schema.names}, schema=schema)
    both = pa.concat_tables([snap, store])
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, schema) as w:
        for b in both.to_batches(max_chunksize=10_000):
            w.write_batch(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--chunks", default="0,2000,500", help="chunk sizes, comma-separated (0: all at once)")
    ap.add_argument("--log", default="none", help="also the progress log's files (stop 67), comma-separated: none, append (the changed "
                    "positions' file), rewrite (and the others' file)")
    ap.add_argument("--threads", default="0", help="threads the match runs its chunks in, comma-separated (0: the module's default; stop 87)")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose spark_purge runs the match (another: git worktree add)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="match-memory-") as tmp:
        path = str(Path(tmp) / "input.arrow")
        build(args.partitions, args.groups, args.per_topic, path)
        print(f"{args.root}: {args.partitions} partitions x {args.groups} groups: input {Path(path).stat().st_size / 1e6:.0f} MB as Arrow IPC")
        for log in args.log.split(","):
            for chunk in (int(c) for c in args.chunks.split(",")):
                for threads in (int(t) for t in args.threads.split(",")):
                    subprocess.run([sys.executable, "-c", CHILD.format(root=args.root, path=path, chunk=chunk, log=log, threads=threads)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
