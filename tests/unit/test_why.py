"""``spark-purge why``: the target syntax and the explanation of a plan row with its audit history."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_purge.cli import EXIT_USAGE, main
from spark_purge.errors import ConfigError
from spark_purge.testing.workload import purge_config_dict
from spark_purge.why import explain, parse_target

T = [datetime(2026, 11, 23, 8, m, tzinfo=timezone.utc) for m in range(6)]


def plan(**kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict(
        topic="orders", partition=2, log_start_offset=100, high_watermark=500, cutoff=120, records_to_delete=20,
        binding_constraint="group", blocking_group="analytics", blocking_group_type="classic", actionable=True,
        detail="group analytics at 120 holds back 380 records", stale_groups=[], size_bytes=4 * 1024 * 1024,
    )
    row.update(kw)
    return row


def outcome(at: int, constraint: str = "group", group: str | None = "analytics", status: str = "skipped", **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict(planned_at=T[at], executed_at=T[at], batch_id=at, status=status, binding_constraint=constraint,
                               blocking_group=group, records_deleted=0, bytes_reclaimed_estimate=0)
    row.update(kw)
    return row


def test_targets() -> None:
    assert parse_target("orders") == ("orders", None)
    assert parse_target("prod.orders-v2:11") == ("prod.orders-v2", 11)
    for bad in ("", ":3", "orders:x", "orders:-1"):
        with pytest.raises(ConfigError, match="why: expected"):
            parse_target(bad)


def test_a_group_binding_names_the_group_its_lag_in_records_and_bytes_and_since_when() -> None:
    history = [  # newest first: the same reason for the last three decisions; before, billing bound (a delete)
        outcome(5), outcome(4), outcome(3),
        outcome(2, group="billing", status="deleted", records_deleted=50, bytes_reclaimed_estimate=512 * 1024),
        outcome(1, constraint="time_floor", group=None),
    ]
    assert explain(plan(), history) == [
        "orders:2  bound by group (analytics, classic)",
        "  why:          group analytics at 120 holds back 380 records",
        "  log:          start 100, high watermark 500: 400 records, 4.0 MiB on the leader",
        "  cutoff:       120, would delete 20 records now",
        "  lag:          analytics is 380 records (~3.8 MiB) behind the high watermark (position 120)",
        "  since:        2026-11-23 08:03:00 UTC (3 decision(s) in the audit for this reason)",
        "  last delete:  2026-11-23 08:02:00 UTC, 50 records (~512.0 KiB), batch 2",
    ]


def test_a_blocked_partition_holds_everything_and_a_new_reason_is_not_in_the_audit_yet() -> None:
    row = plan(cutoff=None, actionable=False, records_to_delete=0, binding_constraint="missing_commit", blocking_group="billing",
               blocking_group_type="consumer", detail="group billing has no commit", size_bytes=None, stale_groups=["old"])
    lines = explain(row, [outcome(0)])
    assert lines[0] == "orders:2  bound by missing_commit (billing, consumer)"
    assert lines[2:] == [
        "  log:          start 100, high watermark 500: 400 records, ? on the leader",
        "  cutoff:       none (blocked), nothing to do now",
        "  lag:          billing is 400 records (~?) behind the high watermark (blocked: every record from the log start is held)",
        "  since:        not in the audit yet (this is the first decision for this reason)",
        "  last delete:  none in the audit",
        "  stale groups: old",
    ]


def test_a_constraint_without_a_consumer_has_no_lag_line() -> None:
    row = plan(binding_constraint="high_watermark", blocking_group=None, blocking_group_type=None, cutoff=500, detail="everything read")
    lines = explain(row, [outcome(1, constraint="high_watermark", group=None), outcome(0, constraint="high_watermark", group=None)])
    assert lines[0] == "orders:2  bound by high_watermark"
    assert not any(line.lstrip().startswith("lag:") for line in lines)
    assert "  since:        2026-11-23 08:00:00 UTC (2 decision(s) in the audit for this reason)" in lines


def test_bad_targets_and_plot_files_fail_before_spark_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(purge_config_dict(tmp_path, "127.0.0.1:1", "t", ["g"])))
    assert main(["audit", "-c", str(config), "--plot", str(tmp_path / "a.jpg")]) == EXIT_USAGE
    assert "audit --plot: expected a file ending in .png, .svg, .html" in capsys.readouterr().err
    assert main(["why", "orders:x", "-c", str(config)]) == EXIT_USAGE
    assert "why: expected a partition number after ':' in 'orders:x', got 'x'" in capsys.readouterr().err


def test_a_delete_that_got_no_answer_and_is_not_reached_is_named_as_unconfirmed() -> None:
    """The seed-23 case: the cut to 554 timed out at a hung leader (the log start re-read 544);
    that broker may apply it when it leads again, so ``why`` warns against rewinding below it."""
    unanswered = outcome(
        3, status="failed", cutoff=554, topic_id="t1",
        error="REQUEST_TIMED_OUT: DeleteRecords to leader 3 failed: REQUEST_TIMED_OUT; log start offset re-read: 544 (requested 554: not reached); 2 attempt(s)",
    )
    lost_lower = outcome(2, status="failed", cutoff=550, topic_id="t1", error="LEADER_UNREACHABLE: connection lost")
    history = [outcome(4), unanswered, lost_lower]
    lines = explain(plan(log_start_offset=544, cutoff=None, topic_id="t1"), history)
    assert lines[-1] == (
        "  unconfirmed:  the delete to 554 of 2026-11-23 08:03:00 UTC (batch 3) got no answer (REQUEST_TIMED_OUT) and the log "
        "start is 544: a broker that got it may still apply it when it leads again; do not rewind a consumer below 554"
    )
    # Reached since, refused by the broker (an answer), or on an earlier incarnation of the topic: nothing pending.
    assert not any("unconfirmed" in x for x in explain(plan(log_start_offset=554, topic_id="t1"), history))
    refused = outcome(3, status="failed", cutoff=554, error="OFFSET_OUT_OF_RANGE: DeleteRecords on orders-2 at offset 554")
    assert not any("unconfirmed" in x for x in explain(plan(log_start_offset=544), [refused]))
    assert not any("unconfirmed" in x for x in explain(plan(log_start_offset=0, topic_id="t2"), history))
