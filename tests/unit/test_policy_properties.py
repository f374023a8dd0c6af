"""Property test: over random snapshots, compute_plan never plans a cut past a safe bound.

Every consumer kind is drawn: classic, KIP-848 consumer, KIP-1071 streams and share groups
(commits / share-partition start offsets, or members holding a partition without a position: -1
rows), groups of a type this version does not know, vanished groups (Kafka
forgot them; the purge remembers their last position), unreadable groups, and external
consumers (a Spark checkpoint, a static hold), which count in every rule.

Time floors: the timestamp lookup (``time_floor_offset``) is drawn anywhere in the log, as
backdated CreateTimes make it; the append history is drawn as observations of a true append
process (the first offset appended after now - min_retention is ``young_from``, which the
oracle knows and the policy does not), plus now and then a row left from an earlier
incarnation of the topic: another topic id (or none: a row written before ids were kept), its
high watermark below, at or above today's, as a topic recreated and refilled between two
batches leaves it; on a snapshot without topic ids (an old broker), only one above today's. No
record at or above ``young_from`` may ever be cut.

Node faults (a broker killed or hung, the controller killed): a partition may have no leader
in the snapshot (null), which moves no safe bound.

Classic groups mid-rebalance: a group a real consumer just joined (``JOINING``: no commit, no row,
nothing remembered) and the drawn groups' unreadable ones may be PreparingRebalance, which
DescribeGroups shows without their subscriptions (``REBALANCE_IN_PROGRESS``): the oracle takes
such a group for one that may read any topic a discovering rule does not exclude it from, from
the log start, so those topics are never cut.

Lineage faults too: commits above the high watermark (another incarnation of the topic) and
commits whose leader epoch the log ends below them (KIP-320 divergence) block the partition.

Partition retirement: a partition may be ReadOnly, or None with a reclaimed offset (retiring
again when written past it). A retiring partition is cut to its high watermark only when
drained and its high watermark has stood still for the retirement delay (the oracle reads the
drawn append history itself); otherwise it is planned as any partition, never to its high
watermark."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spark_purge import policy, schemas
from spark_purge.config import from_dict
from spark_purge.kafka.model import GroupInfo
from spark_purge.kafka.snapshot import held_beside_dropped

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
SNAP = "snap"
GROUPS = ("g0", "g1", "g2", "adhoc-x")
# External consumers by configured name; "adhoc-hold" would be excluded if it were a Kafka group.
EXTERNALS = {"ext-spark": "spark_checkpoint", "adhoc-hold": "static_hold"}
TOPICS = ("t0", "t1", "t2")
# New classic groups caught in their first rebalance: no commit, no row; "adhoc-" ones excluded.
JOINING = ("joiner", "adhoc-joiner")
STALE_AFTER = timedelta(days=7)
MIN_RETENTION = timedelta(hours=1)
RETIRE_DELAY = timedelta(minutes=40)
STILL_AGO = timedelta(minutes=45)  # a history mark at the current high watermark, old enough


@dataclass
class Case:
    rules: list[dict[str, Any]]
    manual: list[dict[str, Any]]
    parts: list[tuple[Any, ...]] = field(default_factory=list)
    groups: list[tuple[Any, ...]] = field(default_factory=list)
    progress: list[tuple[Any, ...]] = field(default_factory=list)
    unreadable: frozenset[str] = frozenset()  # groups the snapshot could not read: no commits seen
    rebalancing: frozenset[str] = frozenset()  # among them (and JOINING), classic groups mid-rebalance
    joining: frozenset[str] = frozenset()  # JOINING groups a member joined just before the snapshot
    history: list[tuple[Any, ...]] = field(default_factory=list)  # APPEND_HISTORY rows
    topic_ids: dict[str, str | None] = field(default_factory=dict)  # the snapshot's, per topic
    young_from: dict[tuple[str, int], int] = field(default_factory=dict)  # first offset appended within min_retention
    retired: dict[tuple[str, int], tuple[int, int | None]] = field(default_factory=dict)  # (status, reclaimed_to)
    transitions: frozenset[str] = frozenset()  # topics whose tiered storage is being disabled (DISABLING)
    dropped: frozenset[tuple[str, int]] = frozenset()  # partitions the snapshot left out (no leader, a failed read)


# Minutes before NOW at which the append history may have observed a partition (60: exactly
# now - min_retention, which counts as old enough).
OBSERVED_AGO = (150, 90, 61, 60, 59, 30, 1)


def draw_history(draw: st.DrawFn, case: Case, topic: str, p: int, hw: int) -> None:
    """Observations (time, high watermark) of a monotone append process up to ``hw``, the true
    ``young_from`` consistent with them, and maybe older rows from a deleted incarnation."""
    tid = case.topic_ids[topic]
    if tid is not None and draw(st.integers(0, 3)) == 0:
        # Deleted and recreated under the same name within min_retention, refilled since: every
        # record of this incarnation is young, and only the old one's marks are old enough
        # (another id, or none), below, at or above today's high watermark.
        ago = sorted(draw(st.lists(st.sampled_from([59, 30, 1]), max_size=2, unique=True)), reverse=True)
        marks = sorted(draw(st.lists(st.integers(0, hw), min_size=len(ago), max_size=len(ago))))
        case.young_from[(topic, p)] = 0
        case.history.extend((topic, p, NOW - timedelta(minutes=m), h, tid) for m, h in zip(ago, marks))
        for m in draw(st.lists(st.sampled_from([200, 150, 90, 61, 60]), min_size=1, max_size=2, unique=True)):
            case.history.append((topic, p, NOW - timedelta(minutes=m), draw(st.integers(0, hw + 50)), draw(st.sampled_from([f"old-{topic}", None]))))
        return
    ago = sorted(draw(st.lists(st.sampled_from(OBSERVED_AGO), max_size=4, unique=True)), reverse=True)
    marks = sorted(draw(st.lists(st.integers(0, hw), min_size=len(ago), max_size=len(ago))))
    seen = [(NOW - timedelta(minutes=m), h) for m, h in zip(ago, marks)]
    floor_time = NOW - MIN_RETENTION
    lower = max([h for t, h in seen if t <= floor_time], default=0)
    upper = min([h for t, h in seen if t > floor_time], default=hw)
    case.young_from[(topic, p)] = draw(st.integers(lower, upper))
    case.history.extend((topic, p, t, h, tid) for t, h in seen)
    if draw(st.integers(0, 5)) == 0:  # recreated long ago: a mark of the old incarnation, older than every one of this
        at = NOW - timedelta(minutes=200)
        if tid is None:  # no ids to tell them apart: only a higher mark shows it
            case.history.append((topic, p, at, hw + draw(st.integers(1, 50)), None))
        else:
            case.history.append((topic, p, at, draw(st.integers(0, hw + 50)), draw(st.sampled_from([f"old-{topic}", None]))))


def own_marks(case: Case, topic: str, p: int) -> list[tuple[datetime, int]]:
    """(time, high watermark) of the history rows of the partition's current incarnation, sorted."""
    tid = case.topic_ids[topic]
    return sorted((t, h) for t_, p_, t, h, id_ in case.history if (t_, p_) == (topic, p) and id_ == tid)


def expected_floor(case: Case, topic: str, p: int, log_start: int, hw: int, ts_floor: int) -> tuple[int, str]:
    """The floor the plan must use (min of the timestamp lookup and the newest old-enough
    mark, unless a later mark or today's high watermark is lower), and its source."""
    floor_time = NOW - MIN_RETENTION
    rows = own_marks(case, topic, p)
    old = [h for t, h in rows if t <= floor_time]
    later = [h for t, h in rows if t > floor_time] + [hw]
    if not old or old[-1] > min(later):
        return min(ts_floor, log_start), "no_history"
    return min(ts_floor, old[-1]), ("append_history" if old[-1] < ts_floor else "timestamp_index")


def draw_retirement(draw: st.DrawFn, case: Case, topic: str, p: int, hw: int) -> None:
    """Maybe a retirement status; for some, a history mark showing the high watermark still
    since STILL_AGO (only where later marks agree: the append process is monotone)."""
    status = draw(st.sampled_from([None, None, schemas.READ_ONLY, schemas.RETIRED]))
    if status is None:
        return
    case.retired[(topic, p)] = (status, draw(st.integers(0, hw)) if status == schemas.RETIRED else None)
    later = [h for t, h in own_marks(case, topic, p) if t > NOW - STILL_AGO]
    if draw(st.booleans()) and all(h == hw for h in later):
        case.history.append((topic, p, NOW - STILL_AGO, hw, case.topic_ids[topic]))


def still_for_delay(case: Case, topic: str, p: int, hw: int) -> bool:
    """The newest history mark shows today's high watermark and is at least RETIRE_DELAY old."""
    rows = own_marks(case, topic, p)
    return bool(rows) and rows[-1][1] == hw and rows[-1][0] <= NOW - RETIRE_DELAY


@st.composite
def cases(draw: st.DrawFn) -> Case:
    rules = []
    for topic in TOPICS:
        rule: dict[str, Any] = {
            "name": f"r-{topic}",
            "topics": topic,
            "on_missing_commit": draw(st.sampled_from(["block", "block", "ignore"])),
            "on_stale_group": draw(st.sampled_from(["block", "ignore"])),
            "stale_after": "7d",
            "min_retention": draw(st.sampled_from(["0s", "1h"])),
            "min_step": draw(st.integers(1, 40)),
        }
        if draw(st.booleans()):
            rule["required_groups"] = draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=3, unique=True))
        else:
            rule["exclude_groups"] = ["adhoc-.*"]
        rules.append(rule)
    rules.append({"name": "misc", "topics": "(__internal|prot)"})
    manual = []
    for topic in TOPICS:
        if draw(st.integers(0, 3)) == 0:
            manual.append({"topic": topic, "offset": draw(st.one_of(st.just("end"), st.integers(0, 250)))})
    everyone = GROUPS + tuple(EXTERNALS)
    # Which topics each external consumer covers (an unreadable one still names its topics).
    covers = {e: set(draw(st.lists(st.sampled_from(TOPICS), max_size=2, unique=True))) for e in EXTERNALS}
    unreadable = draw(st.one_of(st.just(frozenset()), st.frozensets(st.sampled_from(everyone), min_size=1, max_size=2)))
    # The pipeline reads an external consumer only when it covers a snapshot topic, so an
    # unreadable one always comes with its -1 rows.
    unreadable = frozenset(g for g in unreadable if g not in EXTERNALS or covers[g])
    joining = draw(st.frozensets(st.sampled_from(JOINING), max_size=2))
    kafka_unreadable = sorted(unreadable - set(EXTERNALS))
    rebalancing = draw(st.frozensets(st.sampled_from(kafka_unreadable))) if kafka_unreadable else frozenset()
    case = Case(
        rules, manual, unreadable=unreadable | joining, rebalancing=rebalancing | joining, joining=joining,
        transitions=draw(st.frozensets(st.sampled_from(TOPICS), max_size=1)),
    )
    attrs = {
        g: (
            draw(st.sampled_from(["Stable", "Empty", "Dead", "Vanished"])),
            draw(st.sampled_from(["classic", "consumer", "streams", "share", "unknown"])),
            draw(st.integers(0, 2)),
        )
        for g in GROUPS
    }
    attrs.update({e: (None, kind, None) for e, kind in EXTERNALS.items()})
    for topic in TOPICS + ("__internal", "prot"):
        case.topic_ids[topic] = draw(st.sampled_from([f"id-{topic}", f"id-{topic}", None]))  # None: a broker too old to say
        for p in range(draw(st.integers(1, 8))):
            log_start = draw(st.integers(0, 100))
            hw = log_start + draw(st.integers(0, 150))
            last_stable = max(log_start, hw - draw(st.sampled_from([0, 0, 5, 30])))
            floor_time, floor_offset = None, None
            if draw(st.integers(0, 4)) > 0:
                floor_time = NOW - MIN_RETENTION + timedelta(minutes=draw(st.sampled_from([-10, 0, 10])))
                floor_offset = draw(st.integers(log_start, hw))
            cleanup = draw(st.sampled_from(["delete", "delete", "delete", "compact", None, "compact,delete"]))
            internal = topic == "__internal"
            # Tiered storage: the local log start, and the latest tiered offset (-1: nothing
            # copied; None: the snapshot could not read it).
            remote = draw(st.sampled_from([None, False, True]))
            local_start, tiered = None, None
            if remote:
                local_start = draw(st.integers(log_start, hw))
                tiered = draw(st.one_of(st.none(), st.integers(-1, hw)))
            # A node killed or hung, or the controller gone (the checker's node faults): now
            # and then the partition has no leader in the snapshot; it changes no safe bound.
            leader = draw(st.sampled_from([1, 1, 1, None]))
            case.parts.append(
                (SNAP, NOW, topic, p, leader, [1], [1] if leader else [], log_start, hw, last_stable, internal, cleanup, None, remote, floor_time, floor_offset, case.topic_ids[topic],
                 None, local_start, tiered)
            )
            draw_history(draw, case, topic, p, hw)
            draw_retirement(draw, case, topic, p, hw)
            for g in everyone:
                choice = draw(st.integers(0, 5))
                if g in EXTERNALS:
                    if topic not in covers[g]:
                        continue
                    if g in unreadable:
                        choice = 1  # unreadable external: -1 rows name the partitions it covers
                    elif choice == 0:
                        continue  # e.g. a static hold on other partitions of the topic
                elif choice == 0 or g in unreadable:
                    continue  # no row: no commit (or none the snapshot could read)
                offset = -1 if choice == 1 else draw(st.integers(0, hw + 20))  # above hw: beyond the end
                state, kind, members = attrs[g]
                epoch, epoch_end = None, None
                if offset >= 0 and g not in EXTERNALS and draw(st.integers(0, 3)) == 0:
                    # a commit with a leader epoch: the log ends that epoch at, above or below it
                    epoch, epoch_end = draw(st.integers(0, 5)), offset + draw(st.sampled_from([-30, -1, 0, 10]))
                case.groups.append((SNAP, NOW, g, state, kind, members, topic, p, offset, None, epoch, epoch_end))
                if offset >= 0 and draw(st.booleans()):
                    seen = offset if draw(st.integers(0, 4)) else offset + 1
                    age = draw(st.sampled_from([timedelta(hours=1), timedelta(days=10)]))
                    case.progress.append((g, topic, p, seen, NOW - age))
    # The snapshot drops a partition it could not read whole (no leader, a failed read): it is not
    # planned, and its rows go with it; Kafka groups with rows only there are held on the topic's
    # other partitions (``snapshot.held_beside_dropped``). The oracle still sees every row.
    case.dropped = draw(st.frozensets(st.sampled_from([(r[2], r[3]) for r in case.parts if r[2] in TOPICS]), max_size=2))
    return case


def snapshot_rows(case: Case) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(partitions, group rows, the held rows among them) as the snapshot gives them after dropping
    ``case.dropped``: a dropped partition's rows go (Kafka's commits, the store's remembered
    positions, the external consumers' rows are all joined to the snapshot's partitions), and
    the snapshot holds Kafka groups seen only there on the topic's other partitions."""
    kept = {(r[2], r[3]) for r in case.parts} - case.dropped
    kafka = [
        (GroupInfo(g[2], g[3], g[4], g[5]), (g[6], g[7]), g[8], g[9], g[10])
        for g in case.groups if g[2] in GROUPS and g[3] != "Vanished"
    ]
    held = [
        (SNAP, NOW, i.group_id, i.group_state, i.group_type, i.member_count, t, p, offset, meta, epoch, None)
        for i, (t, p), offset, meta, epoch in held_beside_dropped(kafka, kept)
    ]
    parts = [r for r in case.parts if (r[2], r[3]) in kept]
    return parts, [g for g in case.groups if (g[6], g[7]) in kept] + held, held


def stale_groups(case: Case) -> set[str]:
    """Independent oracle for staleness (see the policy docstring)."""
    result = set()
    progress = {(g, t, p): (o, ts) for g, t, p, o, ts in case.progress}
    for g in GROUPS:
        commits = [r for r in case.groups if r[2] == g and r[8] >= 0]
        if not commits:
            continue
        state, kind, members = commits[0][3], commits[0][4], commits[0][5]
        no_members = state in ("Empty", "Vanished") or (kind == "classic" and (state == "Dead" or members == 0))
        known = [progress.get((g, r[6], r[7])) for r in commits]
        unchanged = no_members and all(k is not None and k[0] == r[8] for k, r in zip(known, commits))
        if unchanged and max(k[1] for k in known if k) < NOW - STALE_AFTER:
            result.add(g)
    return result


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases(), nested=st.booleans())
def test_plan_never_cuts_past_a_safe_bound(spark: SparkSession, case: Case, nested: bool) -> None:
    cfg = from_dict(
        {"kafka": {"bootstrap_servers": ["k:9092"]}, "audit": {"path": "a"}, "defaults": {"min_retention": "0s"}, "rules": case.rules, "protected_topics": ["prot"], "manual": case.manual}
    )
    kept_parts, kept_groups, held = snapshot_rows(case)
    parts = spark.createDataFrame(kept_parts, schemas.PARTITION_STATE)
    if nested:  # as the planner plans: group rows nested in their partition's row, vanished ones beside
        own = spark.createDataFrame([g for g in kept_groups if g[3] != "Vanished"], schemas.GROUP_OFFSETS)
        plan_input = (policy.nest_snapshot(parts, own), spark.createDataFrame([g for g in kept_groups if g[3] == "Vanished"], schemas.GROUP_OFFSETS))
    else:  # every group row flat
        plan_input = (parts, spark.createDataFrame(kept_groups, schemas.GROUP_OFFSETS))
    plan = policy.compute_plan(
        *plan_input,
        cfg,
        NOW,
        progress=spark.createDataFrame(case.progress, schemas.GROUP_PROGRESS),
        unreadable_groups={g: "REBALANCE_IN_PROGRESS" if g in case.rebalancing else "GROUP_AUTHORIZATION_FAILED" for g in case.unreadable},
        append_history=spark.createDataFrame(case.history, schemas.APPEND_HISTORY),
        retirement=policy.RetirementInput(
            spark.createDataFrame(
                [(t, p, status, to) for (t, p), (status, to) in case.retired.items()], "topic string, partition int, status int, reclaimed_to long"
            ),
            int(RETIRE_DELAY.total_seconds() * 1000),
        ),
        tiering_transitions=case.transitions,
    ).collect()
    assert len(plan) == len(kept_parts)  # every partition the snapshot kept has exactly one rule here
    assert len({(r.topic, r.partition) for r in plan}) == len(plan)
    stale = stale_groups(case)
    commits = {(r[2], r[6], r[7]): r[8] for r in case.groups if r[8] >= 0}
    epoch_ends = {(r[2], r[6], r[7]): r[11] for r in case.groups if r[11] is not None}
    rows_on = {(r[2], r[6]) for r in case.groups}  # (group, topic) with any row, -1 included
    rows_at = {(r[2], r[6], r[7]) for r in case.groups}  # (group, topic, partition), -1 included
    state_of = {r[2]: r[3] for r in case.groups}
    kind_at = {(r[2], r[6], r[7]): r[4] for r in case.groups + held}  # a held row carries its group's type
    parts = {(r[2], r[3]): r for r in case.parts}
    rules = {r["topics"]: r for r in case.rules}
    manual = {m["topic"]: m["offset"] for m in case.manual}
    for row in plan:
        (_, _, topic, p, _, _, _, log_start, hw, last_stable, _internal, cleanup, _, remote, floor_time, floor_offset, _,
         _size, _local_start, tiered) = parts[(row.topic, row.partition)]
        assert row.binding_constraint in schemas.BINDING_CONSTRAINTS
        assert row.records_to_delete == (row.cutoff - log_start if row.actionable else 0)
        # A cut reaches remote storage when it deletes offsets remote storage holds.
        assert row.cuts_remote == (False if not (row.actionable and remote) else None if tiered is None else tiered >= log_start), row
        status, reclaimed_to = case.retired.get((topic, p), (None, None))
        retiring = status == schemas.READ_ONLY or (status == schemas.RETIRED and hw > (reclaimed_to or 0))
        quiet = still_for_delay(case, topic, p, hw)
        if retiring:
            assert row.binding_constraint == ("retiring" if status == schemas.READ_ONLY else "writes_to_retired_partition"), row
            if row.actionable and row.cutoff == hw:
                assert quiet, row  # never reclaimed while written to within the delay
        else:
            assert row.binding_constraint not in ("retiring", "writes_to_retired_partition"), row
        if topic in ("__internal", "prot") or (cleanup is not None and "delete" not in cleanup):
            assert not row.actionable and row.cutoff is None
            continue
        if topic in case.transitions:  # never cut while its tiered storage is being disabled, not even by force
            if not retiring:  # (a retiring one keeps its retirement label, checked above)
                assert row.binding_constraint == "tiering_transition", row
            assert row.cutoff is None and not row.actionable, row
            continue
        rule = rules[topic]
        listed = rule.get("required_groups")
        on_topic = {g for (g, t) in rows_on if t == topic and g in GROUPS}
        # An external consumer's rows say which partitions it covers: one whose rows are all on
        # dropped partitions covers none the plan has.
        outside = {e for e in EXTERNALS if any((e, topic, q) in rows_at for (t, q) in ((r[2], r[3]) for r in kept_parts) if t == topic)}
        # External consumers count in every rule, on exactly the partitions they have a row on.
        here = {e for e in outside if (e, topic, p) in rows_at}
        required = (set(listed) if listed else {g for g in on_topic if not g.startswith("adhoc-")}) | here
        # Unreadable groups the topic may need: listed ones, or any a discovery would not exclude;
        # and unreadable external consumers covering the topic.
        blind = (set(listed) if listed else {g for g in GROUPS if not g.startswith("adhoc-")}) & case.unreadable
        blind |= outside & case.unreadable
        # A group a member just joined, mid-rebalance: its subscription is unknown, so it may read
        # any topic a discovering rule does not exclude it from, from the log start.
        if not listed:
            blind |= {j for j in case.joining if not j.startswith("adhoc-")}
        # An unreadable external consumer with no row on any partition the snapshot kept cannot be
        # told from a Kafka group of that name: a discovering rule counts it as one (blocked).
        kept_rows = {r[2] for r in kept_groups}
        if not listed:
            blind |= {e for e in EXTERNALS if e in case.unreadable and e not in kept_rows and not e.startswith("adhoc-")}
        assert row.stale_groups == sorted(required & stale), row
        ignored = stale if rule["on_stale_group"] == "ignore" else set()
        have = {g: commits[(g, topic, p)] for g in required if (g, topic, p) in commits}
        missing = required - set(have)
        # Lineage: a Kafka group's commit above the high watermark; a commit the log's end of its
        # leader epoch is below (external positions are read later: ahead of the snapshot is fine).
        beyond = {g for g, offset in have.items() if offset > hw and g not in EXTERNALS}
        diverged = {g for g, offset in have.items() if epoch_ends.get((g, topic, p), offset) < offset}
        needs_floor = rule["min_retention"] != "0s"
        floor_ok = floor_offset is not None and floor_time <= NOW - MIN_RETENTION
        if needs_floor and floor_ok:  # which bound sets the floor, blocked or not (its value: below)
            assert row.time_floor_source == expected_floor(case, topic, p, log_start, hw, floor_offset)[1], row
        if row.actionable:
            # The safety invariant.
            assert row.cutoff > log_start
            assert row.cutoff <= hw and row.cutoff <= last_stable
            assert not blind, row  # what an unreadable group consumed is unknown
            assert not beyond and not diverged, row  # another history says nothing of this one
            for g, offset in have.items():
                if g not in ignored:
                    assert row.cutoff <= offset, (g, offset, row)
            assert have, row  # some required group has read the records
            if rule["on_missing_commit"] == "block":
                assert not missing, row
            assert not (missing & here), row
            if needs_floor:
                assert floor_ok and row.cutoff <= floor_offset
                # Append time: nothing appended within min_retention, whatever its timestamp.
                assert row.cutoff <= case.young_from[(topic, p)], (row, case.young_from[(topic, p)])
        # Exact oracle for the cutoff and the decision.
        blocked = (
            bool(beyond)
            or bool(diverged)
            or bool(blind)
            or not have
            or (missing and rule["on_missing_commit"] == "block")
            or bool(missing & here)  # an external consumer without a position always blocks
            or (needs_floor and not floor_ok)
        )
        if blocked:
            assert row.cutoff is None and not row.actionable, row
            label = row.binding_constraint if not retiring else None  # a retiring one keeps its retirement label
            if beyond:
                assert label in ("commit_beyond_end", None) and row.blocking_group == min(beyond), row
            elif diverged:
                assert label in ("commit_diverged", None) and row.blocking_group == min(diverged), row
            elif blind:
                assert label in ("group_unreadable", None) and row.blocking_group in blind, row
            if row.binding_constraint == "missing_commit" and row.blocking_group is not None:
                # The missing group's type where it has a row (members hold the partition), else none.
                assert row.blocking_group in missing, row
                assert row.blocking_group_type == kind_at.get((row.blocking_group, topic, p)), row
            continue
        counted = [o for g, o in have.items() if g not in ignored]
        floor, source = expected_floor(case, topic, p, log_start, hw, floor_offset) if needs_floor else (None, None)
        assert row.time_floor_source == source, (row, source)
        safe = min(counted + ([floor] if floor is not None else []) + [hw, last_stable])
        target = manual.get(topic)
        if target is not None:
            target = hw if target == "end" else target
            cutoff, step = min(target, safe), 1
        else:
            cutoff, step = safe, rule["min_step"]
        if retiring and cutoff >= hw:  # drained: reclaimed whole once still, else nothing
            assert (row.cutoff, row.actionable) == ((hw, hw > log_start) if quiet else (None, False)), (row, quiet)
            assert row.blocking_group is None, row
            continue
        assert row.cutoff == cutoff, (row, cutoff)
        assert row.actionable == (cutoff - log_start >= step), row
        # The plan names the kind of consumer that binds it.
        if row.binding_constraint == "external":
            assert row.blocking_group in EXTERNALS and row.blocking_group_type == EXTERNALS[row.blocking_group], row
        if row.binding_constraint == "vanished_group":
            assert state_of[row.blocking_group] == "Vanished", row
        if row.binding_constraint == "group":
            assert state_of[row.blocking_group] != "Vanished" and row.blocking_group not in EXTERNALS, row
