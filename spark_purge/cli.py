"""``spark-purge`` — the operator's command line.

    spark-purge plan  -c conf/prod.yaml              # what would be deleted, and why not more
    spark-purge run   -c conf/prod.yaml [--once] [--dry-run]  # one purge cycle (Trigger.AvailableNow)
    spark-purge run   -c conf/prod.yaml --follow     # keep purging every stream.trigger_interval
    spark-purge audit -c conf/prod.yaml [--report deleted|blocked|errors|all] [--days N] [--plot FILE.png]
    spark-purge why TOPIC[:PARTITION] -c conf/prod.yaml  # why a partition is not shrinking
    spark-purge forget-group GROUP -c conf/prod.yaml [--topic REGEX]  # a vanished group stops holding
    spark-purge lease -c conf/prod.yaml [--release]  # the purger lease: holder, generation, expiry
    spark-purge retire TOPIC:PARTITION[,...] -c conf/prod.yaml --reason TEXT  # ReadWrite -> ReadOnly
    spark-purge retire --cancel TOPIC:PARTITION[,...] -c conf/prod.yaml       # ReadOnly -> ReadWrite
    spark-purge retirements -c conf/prod.yaml        # retiring/retired partitions, drain progress
    spark-purge tiering disable TOPIC --policy retain|delete -c conf/prod.yaml  # resumable (spark_purge.tiering)
    spark-purge tiering apply  -c conf/prod.yaml      # the config's tiering entries, and any left DISABLING
    spark-purge tiering status -c conf/prod.yaml      # each topic's tiering state and since when
    spark-purge serve --socket PATH [-c conf/prod.yaml]  # one warm Spark session for the commands
    spark-purge plan -c conf/prod.yaml --server PATH     # given --server PATH (spark_purge.server)

stdout carries the command's output only; log lines go to stderr: ours at INFO, Spark's at WARN
with its start-up noise silenced (``-q``: warnings and errors only; ``-v``: debug, Spark at INFO;
see ``spark_purge.logs``). On a terminal, long steps (the Spark start, the snapshot) show a
spinner on stderr (``spark_purge.progress``); pipes and files never get one.

Exit codes (like ``rpk``: non-zero when anything failed):

    0  all good
    1  at least one partition's DeleteRecords failed (each is in the audit with its error)
    2  bad arguments or configuration (the message names the key; an unusable TLS file too)
    3  the Kafka cluster could not be reached or read (a failed TLS handshake too: TlsHandshakeError)
    4  the Delta audit table could not be read or written
    5  any other spark-purge error
    6  fenced: another purge job holds (or took over) this purger id's lease (FencedError)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from spark_purge.errors import AuditError, ConfigError, FencedError, KafkaError, SparkPurgeError, from_spark_exception
from spark_purge.logs import NORMAL, QUIET, VERBOSE, Verbosity, configure_logging
from spark_purge.server import ENV as SERVER_ENV

if TYPE_CHECKING:  # the CLI imports Spark only once a command needs it
    from pyspark.sql import DataFrame, SparkSession

    from spark_purge.config import PurgeConfig
    from spark_purge.planner import Plan

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_KAFKA, EXIT_AUDIT, EXIT_OTHER, EXIT_FENCED = 0, 1, 2, 3, 4, 5, 6

log = logging.getLogger("spark_purge.cli")

PLAN_COLUMNS = (
    ("topic", "topic"),
    ("partition", "part"),
    ("leader", "leader"),
    ("log_start_offset", "log_start"),
    ("high_watermark", "high_wm"),
    ("cutoff", "cutoff"),
    ("records_to_delete", "to_delete"),
    ("binding_constraint", "bound_by"),
    ("blocking_group", "group"),
    ("actionable", "act"),
    ("detail", "why"),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep our wording
        self.print_usage(sys.stderr)
        raise ConfigError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spark-purge", description="Consumer-aware Kafka purging on Spark with a Delta audit.")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="store_true", help="debug logging; Spark's at INFO")
    loudness.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--config", required=True, help="YAML/JSON config file (see conf/example.yaml)")
        p.add_argument("--bootstrap-servers", help="override kafka.bootstrap_servers (comma-separated)")
        p.add_argument("--master", help="Spark master for a local run (default: local[2] outside spark-submit)")
        p.add_argument(
            "--server", metavar="SOCKET",
            help=f"run the command on the `spark-purge serve` listening at SOCKET, in its warm Spark session (default: ${SERVER_ENV})",
        )

    plan = sub.add_parser("plan", help="print the purge plan as a table; changes nothing")
    common(plan)
    plan.add_argument("--all", action="store_true", help="also list partitions with nothing to do")
    plan.add_argument("--json", action="store_true", help="print JSON lines instead of a table")

    run = sub.add_parser("run", help="run one purge cycle (or keep running with --follow)")
    common(run)
    run.add_argument("--dry-run", action="store_true", help="plan and audit, delete nothing (checkpointed apart, in <checkpoint>/dry_run)")
    cycles = run.add_mutually_exclusive_group()
    cycles.add_argument("--once", action="store_true", help="one cycle, then exit (the default; for schedulers' command lines)")
    cycles.add_argument("--follow", action="store_true", help="keep running every stream.trigger_interval")
    run.add_argument("--checkpoint", help="override stream.checkpoint_location")

    audit = sub.add_parser("audit", help="report from the Delta audit table")
    common(audit)
    audit.add_argument("--report", choices=("deleted", "blocked", "errors", "all"), default="all")
    audit.add_argument("--days", type=int, default=7, help="deleted/errors: look back this many days (default 7)")
    audit.add_argument(
        "--plot", metavar="FILE", help="also draw bytes and records reclaimed per topic over time and who holds back "
        "now into FILE (.png, .svg or .html; needs the plot extra: pip install 'spark-purge[plot]')",
    )

    why = sub.add_parser("why", help="explain one topic's or partition's cutoff: constraint, consumer, lag, since when")
    why.add_argument("target", metavar="TOPIC[:PARTITION]", help="a topic (every partition) or topic:partition")
    common(why)

    forget = sub.add_parser(
        "forget-group",
        help="forget a group's remembered positions (a vanished group then stops holding its topics); audited",
    )
    forget.add_argument("group", help="the consumer group id")
    common(forget)
    forget.add_argument("--topic", help="only positions on topics fully matching this regex (default: all)")
    forget.add_argument("--checkpoint", help="override stream.checkpoint_location")

    lease = sub.add_parser("lease", help="show the purger lease (holder, generation, expiry), or --release it")
    common(lease)
    lease.add_argument(
        "--release", action="store_true",
        help="release the current generation now (its holder, if still alive, is fenced); the next job takes over at once",
    )
    retire = sub.add_parser("retire", help="retire partitions (ReadWrite -> ReadOnly), or --cancel (back to ReadWrite)")
    retire.add_argument("partitions", help="TOPIC:PARTITION[,TOPIC:PARTITION...]")
    common(retire)
    retire.add_argument("--reason", help="why they are retired (recorded in the registry); required unless --cancel")
    retire.add_argument("--cancel", action="store_true", help="move ReadOnly partitions back to ReadWrite")

    retirements = sub.add_parser("retirements", help="list retiring and retired partitions with their drain progress")
    common(retirements)
    tiering = sub.add_parser("tiering", help="disable tiered storage on a topic, resumably (state beside the audit)")
    actions = tiering.add_subparsers(dest="tiering_command", required=True, parser_class=_Parser)
    disable = actions.add_parser("disable", help="run one topic to DISABLED (resumes a disablement left DISABLING)")
    disable.add_argument("topic", help="the topic")
    # Checked by the state machine (config.check_tiering_policy): an unknown one is a usage error naming it.
    disable.add_argument("--policy", required=True, metavar="retain|delete", help="retain: keep remote data, read-only; delete: remove it")
    common(disable)
    apply = actions.add_parser("apply", help="run the config's tiering entries (and any topic left DISABLING) to DISABLED")
    common(apply)
    status = actions.add_parser("status", help="each topic's tiering state and since when")
    common(status)

    serve = sub.add_parser(
        "serve", help="keep a Spark session warm and run the commands given --server SOCKET, one at a time (spark_purge.server)"
    )
    serve.add_argument("--socket", required=True, help="the Unix socket to listen on (created owner-only)")
    serve.add_argument(
        "-c", "--config",
        help="warm up before serving: plan this config once, and run one dry-run cycle of it on scratch tables (changes nothing)",
    )
    serve.add_argument("--master", help="Spark master for the server's session (default: local[2] outside spark-submit)")
    serve.add_argument(
        "--keep-warm", type=float, default=30.0, metavar="SECONDS",
        help="while idle, run a tiny job this often so that Spark keeps its Python workers (default 30; 0: never)",
    )
    return parser


def load_config(path: str, bootstrap_servers: str | None = None) -> PurgeConfig:
    from spark_purge import config as cfgmod

    cfg = cfgmod.load(path)
    if bootstrap_servers:
        servers = tuple(s.strip() for s in bootstrap_servers.split(",") if s.strip())
        if not servers:
            raise ConfigError(f"--bootstrap-servers: expected host:port[,host:port...], got {bootstrap_servers!r}")
        cfg = dataclasses.replace(cfg, kafka=dataclasses.replace(cfg.kafka, bootstrap_servers=servers))
    return cfg


def main(argv: Sequence[str] | None = None, forward: bool = True) -> int:
    """Run one command line; its exit code. ``forward``: a command given ``--server`` (or
    ``$SPARK_PURGE_SERVER``) runs on that server; the server runs what it is handed with False."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(verbosity_of(args))
    if args.command == "serve":
        if not forward:  # handed to a server
            print("error: serve: a server runs no server of its own", file=sys.stderr)
            return EXIT_USAGE
        return _guarded(lambda: cmd_serve(args))
    server = (args.server or os.environ.get(SERVER_ENV)) if forward else None
    if server:
        return _guarded(lambda: _forward(server, args, argv))
    return _guarded(lambda: _run_here(args))


def _run_here(args: argparse.Namespace) -> int:
    commands = {
        "plan": cmd_plan, "run": cmd_run, "forget-group": cmd_forget_group, "lease": cmd_lease, "retire": cmd_retire,
        "retirements": cmd_retirements, "why": cmd_why, "tiering": cmd_tiering, "audit": cmd_audit,
    }
    return commands[args.command](load_config(args.config, args.bootstrap_servers), args)


def _guarded(command: Callable[[], int]) -> int:
    """``command``'s exit code, or the one its error maps to (module docstring), said on stderr."""
    try:
        return command()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaError as exc:
        print(f"error: Kafka: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    except AuditError as exc:
        print(f"error: audit: {exc}", file=sys.stderr)
        return EXIT_AUDIT
    except FencedError as exc:
        print(f"error: fenced: {exc}", file=sys.stderr)
        return EXIT_FENCED
    except SparkPurgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _forward(server: str, args: argparse.Namespace, argv: Sequence[str]) -> int:
    from spark_purge.server import forward

    if args.master:
        raise ConfigError("--master: a command run on a server (--server / $SPARK_PURGE_SERVER) uses the server's session")
    if args.command == "run" and args.follow:
        raise ConfigError("run --follow never ends and a server runs one command at a time: run it as a job of its own, without --server")
    return forward(server, argv)


def cmd_serve(args: argparse.Namespace) -> int:
    """``spark-purge serve``: bind the socket (clients wait there while Spark starts), start the
    session, warm it up on ``--config`` (``_warm_up``), then serve until SIGINT / SIGTERM (exit 0) or
    until the Spark context stops (exit 5)."""
    from spark_purge.server import Server

    if args.keep_warm < 0:
        raise ConfigError(f"--keep-warm: expected seconds >= 0, got {args.keep_warm}")
    warm_cfg = load_config(args.config) if args.config else None  # a bad one fails now, before Spark starts
    server = Server(args.socket, run=_served, idle_every=args.keep_warm)
    server.bind()
    try:
        spark = _spark(args)
        context = spark.sparkContext
        server.alive = lambda: not context._jsc.sc().isStopped()
        if args.keep_warm:
            from spark_purge.keepwarm import touch

            server.idle = lambda: touch(spark)
        if warm_cfg is not None:
            _warm_up(spark, warm_cfg)
        log.info("serving on %s (pid %d)", server.path, os.getpid())
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            log.info("stopping: %d command(s) served", server.served)
            return EXIT_OK
        log.error("the Spark context stopped: %d command(s) served", server.served)
        return EXIT_OTHER
    finally:
        server.close()


def _served(argv: Sequence[str]) -> int:
    """One command a server runs; after it (also when it was interrupted), no streaming query of
    its may stay active: an interrupt that came between a query's start and the command's wait
    for it would leave it running beside the next command (which would find its name and
    checkpoint taken). Such a query is stopped, as Ctrl-C stops a local run's."""
    from pyspark.sql import SparkSession

    try:
        return main(argv, forward=False)
    finally:
        spark = SparkSession.getActiveSession()
        for query in spark.streams.active if spark is not None else ():
            log.warning("stopping the query %s the command left running", query.name or query.id)
            query.stop()


def _warm_up(spark: SparkSession, cfg: PurgeConfig) -> None:
    """Compile what a client's first commands need in the server's JVM: plan ``cfg`` once
    (``_plan_rows``, what ``plan`` does), then run one dry-run cycle of it (deletes nothing)
    whose audit, checkpoint, lease and progress tables are scratch ones in a temporary folder,
    removed after, so that none of the real tables is touched. A step that fails is logged, not
    raised: it only leaves the first command cold."""
    import shutil
    import tempfile
    import time

    from spark_purge.config import StreamConfig
    from spark_purge.pipeline import start_stream

    t0 = time.monotonic()
    try:
        rows, _ = _plan_rows(spark, cfg)
        log.info("warmed up: planned %d partitions in %.1f s", len(rows), time.monotonic() - t0)
    except Exception as exc:
        log.warning("the warm-up plan failed (the first served plan starts cold): %s", _first_line(exc))
    t0 = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="spark-purge-warm-")
    try:
        checkpoint = os.path.join(scratch, "checkpoint")
        cfg = dataclasses.replace(
            cfg,
            audit=dataclasses.replace(cfg.audit, path=os.path.join(scratch, "audit"), table_name=None),
            stream=dataclasses.replace(cfg.stream, checkpoint_location=checkpoint) if cfg.stream else StreamConfig(checkpoint),
            lease=dataclasses.replace(cfg.lease, path=None),
        )
        query, pipeline = start_stream(spark, cfg, available_now=True, dry_run=True)
        try:
            query.awaitTermination()
        finally:
            pipeline.close()
        log.info("warmed up: a dry run on scratch tables in %.1f s", time.monotonic() - t0)
    except Exception as exc:
        log.warning("the warm-up dry run failed (the first served run starts cold): %s", _first_line(exc))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def verbosity_of(args: argparse.Namespace) -> Verbosity:
    return VERBOSE if args.verbose else QUIET if args.quiet else NORMAL


def _spark(args: argparse.Namespace) -> SparkSession:
    from spark_purge.progress import progress
    from spark_purge.session import get_spark

    with progress("starting Spark"):
        spark = get_spark("spark-purge", master=args.master)
    spark.sparkContext.setLogLevel(verbosity_of(args).spark)
    return spark


def cmd_plan(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    from spark_purge.config import purger_id_of
    from spark_purge.kafka.clock import describe_skew
    from spark_purge.lease import LeaseTable, lease_status
    from spark_purge.pipeline import check_offsets_retention

    spark = _spark(args)
    warning = check_offsets_retention(cfg)  # logged too
    rows, plan = _plan_rows(spark, cfg)
    try:
        lease = lease_status(LeaseTable.of(spark, cfg), purger_id_of(cfg), datetime.now(timezone.utc)) if cfg.lease.enabled else None
    except Exception as exc:
        raise _translate(exc) from exc
    shown = rows if args.all else [r for r in rows if _worth_showing(r)]
    skew = describe_skew(plan.clock if plan else None)
    if args.json:
        for r in shown:
            print(json.dumps(r, default=str))
        for line in (warning, skew):
            if line:
                print(f"warning: {line}", file=sys.stderr)
    else:
        print(format_table(shown, PLAN_COLUMNS))
        total = sum(r["records_to_delete"] for r in rows if r["actionable"])
        print(
            f"\n{len(rows)} partitions planned, {sum(1 for r in rows if r['actionable'])} actionable, "
            f"{total} records would be deleted"
            + ("" if args.all else f" ({len(rows) - len(shown)} with nothing to do hidden; --all shows them)")
        )
        if lease:
            print(f"lease: {lease}")
        if warning:
            print(f"\nwarning: {warning}")
        if skew:
            print(f"\nwarning: {skew}")
    return EXIT_OK


def _worth_showing(row: Mapping[str, Any]) -> bool:
    """A plan row an operator needs without ``--all``: it acts, it is blocked, or it holds records."""
    return bool(row["actionable"] or row["cutoff"] is None or row["high_watermark"] > row["log_start_offset"])


def _plan_rows(spark: SparkSession, cfg: PurgeConfig, topic: str | None = None) -> tuple[list[dict[str, Any]], Plan | None]:
    """A fresh plan's rows (of one topic, or all), ordered, as dicts; and the plan."""
    from pyspark.sql import functions as F

    from spark_purge.kafka import open_client
    from spark_purge.pipeline import collect_table, plan_snapshot, with_producers
    from spark_purge.progress import progress

    try:
        with progress("reading the cluster snapshot and planning"):
            plan = plan_snapshot(spark, cfg)
            if plan is None:
                return [], None
            chosen = plan.rows if topic is None else plan.rows.where(F.col("topic") == topic)
            try:
                collected = collect_table(chosen.orderBy("topic", "partition"))
            finally:
                plan.release()
            if plan.open_transactions:  # name the producers pinning them
                with open_client(cfg) as client:
                    collected = with_producers(plan, collected, lambda: client)
            return collected.to_pylist(), plan
    except Exception as exc:
        raise _translate(exc) from exc


def cmd_run(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    from spark_purge.pipeline import check_offsets_retention, run_continuous, start_stream
    from spark_purge.runner import BatchResult

    spark = _spark(args)
    check_offsets_retention(cfg)  # once per run: logs a warning if Kafka forgets groups first

    def progress(result: BatchResult) -> None:
        print(
            f"batch {result.batch_id}: {result.planned} partitions planned, {result.actionable} actionable, "
            f"{result.deleted} deleted ({result.records_deleted} records), {result.failed} failed",
            file=sys.stderr,
            flush=True,
        )
        for failure in result.failures:
            print(f"  failed: {failure}", file=sys.stderr)

    dry_run = True if args.dry_run else None
    if args.follow:
        pipeline = run_continuous(spark, cfg, dry_run=dry_run, checkpoint_location=args.checkpoint, on_batch=progress)
    else:
        query, pipeline = start_stream(
            spark, cfg, available_now=True, dry_run=dry_run, checkpoint_location=args.checkpoint, on_batch=progress
        )
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
            raise
        except Exception as exc:
            raise _translate(exc) from exc
        finally:
            pipeline.close()
    totals = pipeline.totals
    failed = totals.failed
    print(
        f"done: {totals.batches} batch(es), {totals.records_deleted} records deleted, {failed} partition(s) failed"
        + (" (dry run: nothing deleted)" if pipeline.dry_run else ""),
        file=sys.stderr,
    )
    return EXIT_FAILED if failed else EXIT_OK


def cmd_audit(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from spark_purge.audit import blocked_now, deleted_per_topic_per_day, errors

    if args.plot:
        from spark_purge.plot import check_target

        check_target(args.plot)  # a bad file name fails before Spark starts
    spark = _spark(args)
    path = cfg.audit.path
    if not DeltaTable.isDeltaTable(spark, path):
        raise AuditError(f"audit.path: no Delta audit table at {path} yet (run `spark-purge run` first)")
    audit = spark.read.format("delta").load(path)
    since = (datetime.now(timezone.utc) - timedelta(days=args.days)).strftime("%Y-%m-%d")
    recent = audit.where(F.col("event_date") >= since)
    if args.report in ("deleted", "all"):
        print(f"== records deleted and bytes reclaimed (estimate) per topic per day (since {since})")
        print(format_table(_sized([r.asDict() for r in deleted_per_topic_per_day(recent).collect()])))
    if args.report in ("blocked", "all"):
        print("\n== partitions held back by a consumer group now")
        print(format_table(_sized([r.asDict() for r in blocked_now(audit).collect()])))
    if args.plot:
        print(f"\nplot: {_plot(audit, recent, args.plot)}")
    if args.report in ("errors", "all"):
        print(f"\n== failed deletes (since {since})")
        print(format_table([r.asDict() for r in errors(recent).limit(200).collect()]))
    return EXIT_OK


def _plot(audit: DataFrame, recent: DataFrame, path: str) -> str:
    """Draw ``spark-purge audit --plot``'s picture; returns the absolute path written."""
    from spark_purge.audit import held_back_ranking, reclaimed_over_time
    from spark_purge.plot import draw

    deletes = [r.asDict() for r in reclaimed_over_time(recent).collect()]
    ranking = [r.asDict() for r in held_back_ranking(audit).collect()]
    return str(draw(deletes, ranking, path).resolve())


def _sized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Byte columns (``bytes_*``, ``size_bytes*``) as people read them (``1.5 MiB``)."""
    from spark_purge._units import format_bytes

    return [{k: format_bytes(v) if k.startswith(("bytes_", "size_bytes")) else v for k, v in r.items()} for r in rows]


def cmd_why(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """Explain a topic's (or one partition's) cutoff from a fresh plan and the audit."""
    from delta.tables import DeltaTable

    from spark_purge.why import explain, parse_target, partition_history

    topic, partition = parse_target(args.target)
    spark = _spark(args)
    rows, _ = _plan_rows(spark, cfg, topic)
    rows = [r for r in rows if partition is None or r["partition"] == partition]
    if not rows:
        raise ConfigError(
            f"why: {args.target!r}: no such partition is selected by the config's rules (or the topic does not exist); "
            "`spark-purge plan --all` lists every planned partition"
        )
    history: dict[int, list[dict[str, Any]]] = {}
    if DeltaTable.isDeltaTable(spark, cfg.audit.path):
        history = partition_history(spark.read.format("delta").load(cfg.audit.path), topic, partition)
    else:
        print(f"(no audit table at {cfg.audit.path} yet: the plan alone)")
    print("\n\n".join("\n".join(explain(r, history.get(r["partition"], []))) for r in rows))
    return EXIT_OK


def cmd_forget_group(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """Remove a group's remembered positions from the checkpoint's progress store, audit first
    (one ``forget`` row per position, status ``forgotten``, with the operator), then delete."""
    import re
    import uuid

    from spark_purge.audit import AuditSink, absolute_location, forget_rows
    from spark_purge.config import config_fingerprint
    from spark_purge.fs import HadoopFiles
    from spark_purge.pipeline import progress_store, query_id_of

    checkpoint = args.checkpoint or (cfg.stream.checkpoint_location if cfg.stream is not None else None)
    if not checkpoint:
        raise ConfigError(
            "forget-group: stream.checkpoint_location: expected the purge job's checkpoint (where it remembers "
            "group positions), got nothing: this config keeps no memory, so there is nothing to forget"
        )
    if not args.group.strip():
        raise ConfigError("forget-group: expected a group id, got an empty string")
    if args.topic is not None:
        try:
            re.compile(args.topic)
        except re.error as exc:
            raise ConfigError(f"forget-group --topic: expected a regular expression, got {args.topic!r} ({exc})") from None
    checkpoint = absolute_location(checkpoint)
    spark = _spark(args)
    store = progress_store(spark, checkpoint, app_id="forget-group")
    try:
        positions = store.remembered(args.group, args.topic)
    except Exception as exc:
        raise _translate(exc) from exc
    scope = f" on topics matching {args.topic!r}" if args.topic is not None else ""
    if not positions:
        print(f"group {args.group!r} has no remembered position{scope} in {checkpoint}: nothing to forget")
        return EXIT_OK
    run_id = f"forget-{uuid.uuid4().hex}"
    query_id = query_id_of(HadoopFiles(spark), checkpoint) or "no-query"  # positions without a query: a harness's
    rows = forget_rows(positions, run_id, query_id, datetime.now(timezone.utc), _operator(), config_fingerprint(cfg))
    sink = AuditSink(spark, cfg.audit.path, app_id=run_id, table_name=cfg.audit.table_name)
    try:
        sink.ensure_table()
        sink.write(rows, "forget", 0)  # recorded before the positions go
    except AuditError:
        raise
    except Exception as exc:
        raise AuditError(f"cannot record the forget in the audit at {cfg.audit.path}: {_first_line(exc)}") from exc
    try:
        store.remove(positions)
    except Exception as exc:
        raise _translate(exc) from exc
    print(format_table([p.asDict() for p in positions], FORGET_COLUMNS))
    print(
        f"\nforgot {len(positions)} position(s) of group {args.group!r}{scope} (audit: record_type 'forget'); "
        "a group that still commits is remembered again at its next commit"
    )
    return EXIT_OK


def cmd_retire(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """Retire partitions, or cancel a retirement: every request checked first, nothing changed on
    bad input (``spark_purge.retirement``)."""
    from spark_purge.pipeline import read_snapshot
    from spark_purge.retirement import RetirementRegistry, cancel, check_request, parse_partitions, retire, topic_facts

    requests = parse_partitions(args.partitions)
    check_request(cfg, args.reason, args.cancel)  # before Spark starts
    spark = _spark(args)
    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    now = datetime.now(timezone.utc)
    try:
        if args.cancel:
            rows = cancel(registry, cfg, requests, _operator(), now)
        else:
            topics = sorted({t for t, _ in requests})
            facts = topic_facts(read_snapshot(spark, cfg, topics).select("topic", "partition", "internal", "cleanup_policy").collect())
            rows = retire(registry, cfg, facts, requests, str(args.reason), _operator(), now)
    except SparkPurgeError:
        raise
    except Exception as exc:
        raise _translate(exc) from exc
    print(format_table([_retirement_cells(r.asDict()) for r in rows], RETIREMENT_COLUMNS))
    verb = "moved back to ReadWrite" if args.cancel else "now ReadOnly: keep producers off them (spark_purge.partitioner)"
    print(f"\n{len(rows)} partition(s) {verb}; registry {registry.path}, producers' export {registry.export_path}")
    return EXIT_OK


def cmd_retirements(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """Every partition ever retired, its status and the plan's verdict, then the drain progress
    of each required consumer (position against the high watermark)."""
    from spark_purge.pipeline import plan_snapshot, read_snapshot, with_external
    from spark_purge.retirement import RetirementRegistry, drain_rows

    spark = _spark(args)
    registry = RetirementRegistry.beside(spark, cfg.audit.path)
    try:
        current = registry.current().orderBy("topic", "partition").collect()
        if not current:
            print(f"no partition has been retired (registry {registry.path})")
            return EXIT_OK
        topics = sorted({r["topic"] for r in current})
        snapshot = with_external(spark, cfg, read_snapshot(spark, cfg, topics)).collect()
        plan = plan_snapshot(spark, cfg) if cfg.retirement.enable else None
        verdicts: dict[tuple[str, int], Any] = {}
        if plan is not None:
            try:
                verdicts = {(r["topic"], r["partition"]): r for r in plan.rows.collect()}
            finally:
                plan.release()
    except SparkPurgeError:
        raise
    except Exception as exc:
        raise _translate(exc) from exc
    listed = []
    for r in current:
        cells = _retirement_cells(r.asDict())
        verdict = verdicts.get((r["topic"], r["partition"]))
        cells["verdict"] = None if verdict is None else f"{verdict['binding_constraint']}: {verdict['detail']}"
        listed.append(cells)
    print(format_table(listed, RETIREMENT_COLUMNS + (("reclaimed_to", "reclaimed_to"), ("verdict", "plan"))))
    print("\n== drain progress (required consumers)")
    print(format_table(drain_rows(snapshot, current, cfg), DRAIN_COLUMNS))
    if not cfg.retirement.enable:
        print("\nwarning: retirement.enable is false: the purge job does not reclaim these partitions")
    return EXIT_OK


RETIREMENT_COLUMNS = (("topic", "topic"), ("partition", "part"), ("status_name", "status"), ("event", "event"),
                      ("since", "since"), ("requested_by", "by"), ("reason", "reason"))
DRAIN_COLUMNS = (("topic", "topic"), ("partition", "part"), ("status", "status"), ("consumer", "consumer"), ("type", "type"),
                 ("position", "position"), ("high_watermark", "high_wm"), ("behind", "behind"), ("drained", "drained"))


def _retirement_cells(row: dict[str, object]) -> dict[str, object]:
    from spark_purge.schemas import RETIREMENT_STATUS_NAMES

    status = row.get("status")
    return {**row, "status_name": RETIREMENT_STATUS_NAMES.get(status, str(status)) if isinstance(status, int) else None}


TIERING_COLUMNS = (("topic", "topic"), ("state", "state"), ("policy", "policy"), ("step", "step"), ("since", "since"),
                   ("detail", "detail"))


def cmd_tiering(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """``tiering disable|apply|status``: see ``spark_purge.tiering``."""
    from spark_purge.kafka import open_client
    from spark_purge.tiering import Disabler, TieringTable, check_policy, status_rows

    if args.tiering_command == "disable":
        check_policy(args.topic, args.policy)  # before Spark or Kafka: a bad policy changes nothing
    spark = _spark(args)
    table = TieringTable.beside(spark, cfg.audit.path)
    if args.tiering_command == "status":
        print(format_table(status_rows(table, cfg.tiering), TIERING_COLUMNS))
        return EXIT_OK
    with open_client(cfg) as client:
        disabler = Disabler(client, table, operator=_operator())
        if args.tiering_command == "disable":
            records = [disabler.disable(args.topic, args.policy)]
        else:
            records = disabler.apply(cfg.tiering)
    print(format_table([dataclasses.asdict(r) for r in records], TIERING_COLUMNS))
    return EXIT_OK


FORGET_COLUMNS = (("group_id", "group"), ("group_type", "type"), ("topic", "topic"), ("partition", "part"),
                  ("committed_offset", "position"), ("last_progress_time", "last_progress"))


def _operator() -> str | None:
    """user@host of whoever runs the command, as far as the OS says."""
    from spark_purge.lease import user_at_host

    return user_at_host()


def cmd_lease(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    """Print the purger lease (stdout: one line); ``--release`` ends the current generation."""
    from spark_purge.config import purger_id_of
    from spark_purge.lease import LeaseTable, lease_status, release_current

    table = LeaseTable.of(_spark(args), cfg)
    purger_id = purger_id_of(cfg)
    if args.release:
        released = release_current(table, purger_id)
        print(f"purger {purger_id}: " + (f"released {released.describe()}" if released else "no live lease to release"))
        return EXIT_OK
    print(lease_status(table, purger_id, datetime.now(timezone.utc)))
    return EXIT_OK


def _translate(exc: BaseException) -> BaseException:
    found = from_spark_exception(exc)
    return found if isinstance(found, SparkPurgeError) else SparkPurgeError(_first_line(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def format_table(rows: Sequence[Mapping[str, object]], columns: Sequence[tuple[str, str]] | None = None) -> str:
    """A plain aligned text table (no extra dependency)."""
    if not rows:
        return "(none)"
    cols = list(columns) if columns else [(k, k) for k in rows[0]]
    cells = [[_cell(r.get(key)) for key, _ in cols] for r in rows]
    widths = [max(len(head), *(len(c[i]) for c in cells)) for i, (_, head) in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line([h for _, h in cols]), line(["-" * w for w in widths])] + [line(c) for c in cells])


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
