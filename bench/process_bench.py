"""`spark-purge plan` and one-shot `spark-purge run` as processes, with JVM option variants side by side.

A scheduled purge (Airflow, Databricks Jobs, cron) starts a process, runs one cycle and exits:
its cost is the JVM's start, Spark's and Delta's first use, and one cold cycle, not the steady
cycle ``cycle_bench.py`` measures. This bench builds the cycle bench's setup (topics of 50
partitions, group *i* committing on every partition of topic *i* mod #topics, one discovering
rule with ``min_retention: 0s``), then runs each command once per variant, round after round,
the variants interleaved (so the machine's drift hits them alike); every group advances one
record before each `run`, so every run has something to delete. All runs share one checkpoint
and audit, as a scheduled task's runs do.

    ./dev.sh py bench/process_bench.py [--partitions 1000] [--groups 1000] [--rounds 3]
        [--variant NAME=JAVA_OPTIONS ...] [--env-variant NAME=KEY=VALUE ...] [--warmup 1]

A variant's JAVA_OPTIONS reach the purge's JVM through ``JAVA_TOOL_OPTIONS`` (the JVM reads it
whatever launched it); the variant ``default`` (no options) always runs first in each round.
Prints per command and variant the wall seconds (min / median) and the ratio of medians to
``default``. An ``--env-variant`` sets one environment variable instead (e.g.
``no-archive=SPARK_PURGE_CLASS_ARCHIVE=off``: without the driver JVM's class archive,
``spark_purge.class_archive``). Before the rounds, ``--warmup`` untimed one-shot runs (the first
local session's JVM writes the class archive when none is there).

``--server`` adds the variant ``server``: the same commands as client processes given
``--server SOCKET``, run by one ``spark-purge serve`` (``spark_purge.server``) started before the
rounds (its start, its warm-up and a first served plan untimed, printed) and stopped after them by its own id.
``--server-only`` times the server's clients alone (no cold processes between them, which
write the same Delta tables and so make the server read their commits); ``--gap SECONDS``
waits that long (untimed) before each command, as a schedule does: Spark stops idle Python
workers after a minute, which ``serve --keep-warm`` is there to prevent.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cycle_bench import BROKER_CONFIG, PROCESSES, assign, build_topics, commit_all, run_process
from spark_purge.testing import workload
from spark_purge.testing.cluster import LocalKafka
from spark_purge.testing.processes import kill_group, spawn


def timed(args: list[str], config_file: Path, env: dict[str, str]) -> float:
    took, done = run_process(args, config_file, env)
    if done.returncode != 0:
        raise SystemExit(f"spark-purge {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return took


def start_server(sock: Path, config_file: Path, log: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    """``spark-purge serve`` on ``sock`` in this working directory, warmed up on ``config_file``:
    (the process, seconds until it serves)."""
    t0 = time.perf_counter()
    proc = spawn([sys.executable, "-m", "spark_purge.cli", "-q", "serve", "--socket", str(sock), "-c", str(config_file)],
                 cwd=os.getcwd(), env={**env, "PYTHONUNBUFFERED": "1"}, log=log)  # fmt: skip
    while not sock.exists():
        if proc.poll() is not None:
            raise SystemExit(f"spark-purge serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    # -q: the server logs nothing until served; a client's first command waits for the warm-up
    _, done = run_process(["plan", "--server", str(sock)], config_file, env)
    if done.returncode != 0:
        kill_group(proc)
        raise SystemExit(f"the first served plan exited {done.returncode}:\n{done.stderr[-3000:]}")
    return proc, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heap", default="3g", help="broker heap")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=JAVA_OPTIONS")
    ap.add_argument("--env-variant", action="append", default=[], metavar="NAME=KEY=VALUE")
    ap.add_argument("--warmup", type=int, default=1, help="untimed one-shot runs before the rounds")
    ap.add_argument("--server", action="store_true", help="also time the commands handed to a spark-purge serve")
    ap.add_argument("--server-only", action="store_true", help="time only the commands handed to a spark-purge serve")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds to wait (untimed) before each timed command")
    args = ap.parse_args(argv)
    args.server = args.server or args.server_only
    variants: dict[str, dict[str, str]] = {"default": {}}
    for item in args.variant:
        name, _, options = item.partition("=")
        variants[name] = {"JAVA_TOOL_OPTIONS": options}
    for item in args.env_variant:
        name, _, setting = item.partition("=")
        key, _, value = setting.partition("=")
        variants[name] = {key: value}
    run = uuid.uuid4().hex[:4]
    if args.server:
        variants["server"] = {}
    if args.server_only:
        variants = {"server": {}}
    records = 2 * args.rounds * len(variants) + 2 + args.warmup
    with tempfile.TemporaryDirectory(prefix="process-bench-") as tmp_s, LocalKafka(
        nodes=1, heap=args.heap, broker_config=BROKER_CONFIG, start_timeout_s=300
    ) as cluster, contextlib.ExitStack() as stack:
        tmp = Path(tmp_s)
        assignments = assign(build_topics(cluster.bootstrap_servers, args.partitions, args.per_topic, run, records), args.groups, run)
        offset = 1
        commit_all(cluster.bootstrap_servers, assignments, offset)
        config = workload.purge_config_dict(tmp, cluster.bootstrap_servers, f"cyc-{run}-.*", None, request_timeout="120s", delete_timeout="120s")
        config_file = tmp / "purge.yaml"
        config_file.write_text(yaml.safe_dump(config))
        seconds: dict[tuple[str, str], list[float]] = {}
        base_env = dict(os.environ)
        base_env.pop("JAVA_TOOL_OPTIONS", None)
        for w in range(args.warmup):
            offset += 1
            commit_all(cluster.bootstrap_servers, assignments, offset)
            print(f"warm-up {w}: one-shot run {timed(['run', '--once'], config_file, base_env):6.1f}s (untimed)", flush=True)
        if args.server:
            sock = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sp-srv-"))) / "s"
            server, took = start_server(sock, config_file, tmp / "server.log", base_env)
            stack.callback(kill_group, server)
            print(f"server: started, warmed up (serve -c) and one plan served in {took:6.1f}s (untimed)", flush=True)
        for r in range(args.rounds):
            for name, setting in variants.items():
                env = {**base_env, **setting}
                for label, cmd in PROCESSES:
                    if cmd[0] == "run":
                        offset += 1
                        commit_all(cluster.bootstrap_servers, assignments, offset)  # something to delete (untimed)
                    time.sleep(args.gap)
                    took = timed([*cmd, "--server", str(sock)] if name == "server" else cmd, config_file, env)
                    seconds.setdefault((label, name), []).append(took)
                    print(f"round {r}: {label:<28} {name:<12} {took:6.1f}s", flush=True)
    first = next(iter(variants))
    print(
        f"\n{args.partitions} partitions x {args.groups} groups, {args.rounds} rounds"
        + (f", {args.gap:g} s before each command" if args.gap else "")
        + f" (seconds, min / median; ratio of medians to {first})"
    )
    for label, _ in PROCESSES:
        ref = statistics.median(seconds[(label, first)])
        for name in variants:
            got = seconds[(label, name)]
            print(f"{label:<28} {name:<12} {min(got):6.1f} / {statistics.median(got):6.1f}  x{statistics.median(got) / ref:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
