"""``spark-purge`` — the operator's command line.

    spark-purge plan  -c conf/prod.yaml              # what would be deleted, and why not more
    spark-purge run   -c conf/prod.yaml [--once] [--dry-run]  # one purge cycle (Trigger.AvailableNow)
    spark-purge run   -c conf/prod.yaml --follow     # keep purging every stream.trigger_interval
    spark-purge audit -c conf/prod.yaml [--report deleted|blocked|errors|all] [--days N]
    spark-purge forget-group GROUP -c conf/prod.yaml [--topic REGEX]  # a vanished group stops holding
    spark-purge tiering disable TOPIC --policy retain|delete -c conf/prod.yaml  # resumable (spark_purge.tiering)
    spark-purge tiering apply  -c conf/prod.yaml      # the config's tiering entries, and any left DISABLING
    spark-purge tiering status -c conf/prod.yaml      # each topic's tiering state and since when

stdout carries the command's output only; log lines go to stderr: ours at INFO, Spark's at WARN
with its start-up noise silenced (``-q``: warnings and errors only; ``-v``: debug, Spark at INFO;
see ``spark_purge.logs``).

Exit codes (like ``rpk``: non-zero when anything failed):

    0  all good
    1  at least one partition's DeleteRecords failed (each is in the audit with its error)
    2  bad arguments or configuration (the message names the key)
    3  the Kafka cluster could not be reached or read
    4  the Delta audit table could not be read or written
    5  any other spark-purge error
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NoReturn

from spark_purge.errors import AuditError, ConfigError, KafkaError, SparkPurgeError, from_spark_exception
from spark_purge.logs import NORMAL, QUIET, VERBOSE, Verbosity, configure_logging

if TYPE_CHECKING:  # the CLI imports Spark only once a command needs it
    from pyspark.sql import SparkSession

    from spark_purge.config import PurgeConfig

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_KAFKA, EXIT_AUDIT, EXIT_OTHER = 0, 1, 2, 3, 4, 5

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

    forget = sub.add_parser(
        "forget-group",
        help="forget a group's remembered positions (a vanished group then stops holding its topics); audited",
    )
    forget.add_argument("group", help="the consumer group id")
    common(forget)
    forget.add_argument("--topic", help="only positions on topics fully matching this regex (default: all)")
    forget.add_argument("--checkpoint", help="override stream.checkpoint_location")

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


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(verbosity_of(args))
    try:
        cfg = load_config(args.config, args.bootstrap_servers)
        if args.command == "plan":
            return cmd_plan(cfg, args)
        if args.command == "run":
            return cmd_run(cfg, args)
        if args.command == "forget-group":
            return cmd_forget_group(cfg, args)
        if args.command == "tiering":
            return cmd_tiering(cfg, args)
        return cmd_audit(cfg, args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaError as exc:
        print(f"error: Kafka: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    except AuditError as exc:
        print(f"error: audit: {exc}", file=sys.stderr)
        return EXIT_AUDIT
    except SparkPurgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def verbosity_of(args: argparse.Namespace) -> Verbosity:
    return VERBOSE if args.verbose else QUIET if args.quiet else NORMAL


def _spark(args: argparse.Namespace) -> SparkSession:
    from spark_purge.session import get_spark

    spark = get_spark("spark-purge", master=args.master)
    spark.sparkContext.setLogLevel(verbosity_of(args).spark)
    return spark


def cmd_plan(cfg: PurgeConfig, args: argparse.Namespace) -> int:
    from spark_purge.kafka.clock import describe_skew
    from spark_purge.pipeline import check_offsets_retention, plan_snapshot

    spark = _spark(args)
    warning = check_offsets_retention(cfg)  # logged too
    try:
        plan = plan_snapshot(spark, cfg)
        rows = [] if plan is None else [r.asDict() for r in plan.rows.orderBy("topic", "partition").collect()]
    except Exception as exc:
        raise _translate(exc) from exc
    shown = rows if args.all else [r for r in rows if r["binding_constraint"] != "nothing_to_do"]
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
        if warning:
            print(f"\nwarning: {warning}")
        if skew:
            print(f"\nwarning: {skew}")
    return EXIT_OK


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

    spark = _spark(args)
    path = cfg.audit.path
    if not DeltaTable.isDeltaTable(spark, path):
        raise AuditError(f"audit.path: no Delta audit table at {path} yet (run `spark-purge run` first)")
    audit = spark.read.format("delta").load(path)
    since = (datetime.now(timezone.utc) - timedelta(days=args.days)).strftime("%Y-%m-%d")
    recent = audit.where(F.col("event_date") >= since)
    if args.report in ("deleted", "all"):
        print(f"== records deleted per topic per day (since {since})")
        print(format_table([r.asDict() for r in deleted_per_topic_per_day(recent).collect()]))
    if args.report in ("blocked", "all"):
        print("\n== partitions held back by a consumer group now")
        print(format_table([r.asDict() for r in blocked_now(audit).collect()]))
    if args.report in ("errors", "all"):
        print(f"\n== failed deletes (since {since})")
        print(format_table([r.asDict() for r in errors(recent).limit(200).collect()]))
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
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    try:
        return f"{user}@{socket.gethostname()}"
    except OSError:
        return user


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
