"""Groups of every type: a complete ListGroups, FindCoordinator, then each group's reads.

- ListGroups: per broker, in parallel, trusted only when every group coordinator had caught up
  with its predecessor's commits before it (``caught_up``) and was stable around it
  (``check_group_listing``, a pure function over the brokers' answers); the group reads below
  are kept only when the coordinators' leadership still holds after them;
- FindCoordinator: 1 batched request (v4; one per group before);
- per coordinator, in parallel, one request per API: OffsetFetch v8 (classic, consumer and
  streams groups), DescribeGroups (classic), ConsumerGroupDescribe (KIP-848 consumer groups),
  StreamsGroupDescribe (KIP-1071 streams groups), DescribeShareGroupOffsets and
  ShareGroupDescribe (KIP-932 share groups); which group needs which read, the requests, the
  answers and the rows they make are in ``members``.
  NOT_COORDINATOR drops our coordinator entry (and kafka-python's, which it never invalidates)
  and looks it up again, until the deadline.
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from spark_purge._time import Backoff, Deadline
from spark_purge.errors import AuthorizationError, GroupsUnsettled
from spark_purge.kafka.caught_up import (
    OFFSETS_TOPIC,
    PROBE_PREFIX,
    Leadership,
    coordinators_caught_up,
    leadership_changed,
    offsets_metadata,
)
from spark_purge.kafka.configs import check_cluster_describe
from spark_purge.kafka.members import (
    CommitRows,
    GroupReads,
    ListedGroups,
    assemble_groups,
    build_requests,
    parse_answer,
    reads_for,
)
from spark_purge.kafka.model import GroupInfo, SnapshotIssue
from spark_purge.kafka.offsets import OffsetReader, retry_backoff, retry_rounds
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name, exc_name

log = logging.getLogger(__name__)

COORDINATOR_RETRY = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"})
_MAX_LISTING_ATTEMPTS = 1_000  # in practice the deadline ends the listing loop

# group id -> (state, type, protocol type)
Listed = dict[str, tuple[Optional[str], Optional[str], str]]


# ---- the listing's stability check (pure) ----------------------------------------------------


@dataclass(frozen=True)
class GroupListing:
    """What one round of ListGroups proves: ``groups`` when complete, else None and ``problem``.

    ``leaders_checked`` is False when the principal may not describe ``__consumer_offsets``: the
    listing is then taken as it is (nothing to compare leaders with), and the caller warns.
    """

    groups: Optional[Listed]
    problem: str = ""
    leaders_checked: bool = True


def check_group_listing(
    answers: Sequence[tuple[int, Any, Any, Any]], caught_up: Optional[Leadership] = None
) -> GroupListing:
    """Decide whether the ListGroups answers of every broker form a complete group list.

    ``answers``: per broker, ``(broker id, Metadata(__consumer_offsets) before, ListGroups,
    Metadata(__consumer_offsets) after)``, each a response or the exception its request ended
    with, all three sent on one connection (a broker handles a connection's requests in order).

    ListGroups answers only for the ``__consumer_offsets`` partitions a broker leads *and* knows
    it leads. While coordinators move, a broker that already left the metadata and its successor
    that has not yet taken over both miss that partition's groups, silently. So a partition
    counts as covered only when the same broker led it, at the same leader epoch, before and
    after its ListGroups; the listing is complete when every partition is covered. Raises
    ``AuthorizationError`` when ListGroups is denied.

    ``caught_up``: the (leader, epoch) per partition whose high watermark was seen to reach its
    epoch's start before ListGroups (``caught_up.coordinators_caught_up``); when given, a
    partition also needs that same leader and epoch around ListGroups, or a new leader could have
    listed from a state older than the commits its predecessor acknowledged.
    """
    groups: Listed = {}
    covered: set[int] = set()
    unchecked: set[int] = set()  # stable around ListGroups, but not the leadership checked before it
    all_partitions: set[int] = set()
    leaders_checked = True
    for broker, before, answer, after in answers:
        for reply in (before, answer, after):
            if isinstance(reply, Exception):
                return GroupListing(None, f"broker {broker} did not answer ({exc_name(reply)})")
        err = error_name(answer.error_code)
        if err in AUTH_ERRORS:
            raise AuthorizationError(f"Describe on cluster denied ({err}, ListGroups on broker {broker})")
        if err is not None:  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, ...
            return GroupListing(None, f"ListGroups on broker {broker}: {err}")
        for g in answer.groups:
            gtype = (getattr(g, "group_type", None) or "").lower() or ("classic" if answer.API_VERSION < 5 else "unknown")
            state = getattr(g, "group_state", None) or None
            groups[g.group_id] = (state, gtype, g.protocol_type or "")
        led: list[dict[int, int]] = []
        for meta in (before, after):
            topic = next((t for t in meta.topics if t.name == OFFSETS_TOPIC), None)
            t_err = error_name(topic.error_code) if topic is not None else "UNKNOWN_TOPIC_OR_PARTITION"
            if t_err == "UNKNOWN_TOPIC_OR_PARTITION":
                led.append({})  # no group has ever committed: nothing to miss
                continue
            if t_err in AUTH_ERRORS:
                leaders_checked = False  # cannot see who leads: say so, do not guess
                led.append({})
                continue
            if t_err is not None:
                return GroupListing(None, f"Metadata for {OFFSETS_TOPIC} from broker {broker}: {t_err}")
            assert topic is not None  # t_err is None only for a topic in the answer
            all_partitions.update(p.partition_index for p in topic.partitions)
            led.append({p.partition_index: p.leader_epoch for p in topic.partitions if p.leader_id == broker})
        stable = {p for p, epoch in led[0].items() if led[1].get(p) == epoch}
        if caught_up is not None:
            unchecked.update(p for p in stable if caught_up.get(p) != (broker, led[0][p]))
        covered.update(stable)
    if not leaders_checked:
        return GroupListing(groups, "", leaders_checked=False)
    moving = sorted(all_partitions - covered)
    if moving:
        shown = ", ".join(map(str, moving[:10])) + (" ..." if len(moving) > 10 else "")
        return GroupListing(
            None, f"group coordinators moving: {OFFSETS_TOPIC} partitions {shown} had no stable leader during ListGroups"
        )
    if unchecked & all_partitions:
        shown = ", ".join(map(str, sorted(unchecked & all_partitions)[:10]))
        return GroupListing(
            None, f"{OFFSETS_TOPIC} partitions {shown} changed leader since their high-watermark check"
        )
    return GroupListing(groups)


# ---- the reads -------------------------------------------------------------------------------


class GroupReader:
    """Group listing, coordinators and committed offsets over one ``Wire``."""

    def __init__(self, wire: Wire, offsets: OffsetReader) -> None:
        self.wire = wire
        self.offsets = offsets
        self._coordinators: dict[str, int] = {}
        self._lock = threading.Lock()
        self._warned_offsets_acl = False
        self._warned_probe_acl = False

    async def read_groups(
        self,
        brokers: Collection[int],
        topics: Collection[str],
        issues: list[SnapshotIssue],
        deadline: Deadline,
        selects_group: Callable[[str], bool],
        topic_names: Optional[Mapping[uuid.UUID, str]] = None,
        partitions: Optional[Mapping[str, Collection[int]]] = None,
    ) -> tuple[list[GroupInfo], CommitRows, list[str]]:
        """(groups, their rows on ``topics``, groups that could not be read): every group type
        ListGroups returns, share groups included; rows as ``members.assemble_groups`` makes
        them. ``topic_names``: topic id -> name (KIP-848 and share assignments name topics by id);
        ``partitions``: topic -> partitions (a rebalancing classic group holds its subscription).
        """
        await check_cluster_describe(self.wire)
        backoff = Backoff(first=0.5, cap=2.0)
        for attempt in range(_MAX_LISTING_ATTEMPTS):
            if attempt:
                await self.wire.sleep(backoff.within(deadline))
            listed, checked = await self.list_groups(brokers, deadline)
            selected = sorted(g for g in listed if selects_group(g))
            if not selected:
                return [], CommitRows(), []
            reads, unread = await self.fetch_group_state(selected, listed, deadline, topic_names)
            moved = "" if checked is None else leadership_changed(checked, await self.wire.send_any(offsets_metadata()))
            if not moved:
                return assemble_groups(selected, listed, reads, unread, topics, issues, partitions)
            # a read may have gone to a new coordinator not yet caught up: read again
            if deadline.expired():
                raise GroupsUnsettled(f"could not read consumer groups completely before the deadline: {moved}")
            log.info("%s; reading the groups again", moved)
        raise GroupsUnsettled("could not read consumer groups completely: too many coordinator moves")

    # ---- ListGroups --------------------------------------------------------------------------
    async def list_groups(self, brokers: Collection[int], deadline: Deadline) -> tuple[Listed, Optional[Leadership]]:
        """A group list known to be complete (see ``check_group_listing``), and the coordinators'
        leadership it was checked under (None when it could not be: no Describe on
        ``__consumer_offsets``).

        Each attempt first checks that every coordinator serves what its predecessor acknowledged
        (``caught_up.coordinators_caught_up``), then lists. Until every partition is covered (and
        while a broker is unreachable or still loading), the listing is retried with fresh
        metadata until the deadline; then ``GroupsUnsettled`` rather than plan from a list that
        may lack a group.
        """
        order = sorted(brokers)
        last_problem = "no attempt"
        backoff = Backoff(first=0.5, cap=2.0)
        for attempt in range(_MAX_LISTING_ATTEMPTS):
            if attempt:
                if deadline.expired():
                    break
                await self.wire.sleep(backoff.within(deadline))
                order = sorted((await self.offsets.metadata(())).brokers)
            catch_up = await coordinators_caught_up(self.wire, deadline)
            if catch_up.lagging:
                last_problem = catch_up.problem
                log.info("group listing not trustworthy yet (%s); retrying", last_problem)
                continue
            if catch_up.probe_denied and not self._warned_probe_acl:
                self._warned_probe_acl = True
                log.warning(
                    "no Describe on groups %s*: cannot probe whether each group coordinator is active before ListGroups "
                    "(only the coordinators' high watermarks are checked); grant it to the purge principal (a prefixed "
                    "ACL; these groups are only read, never created)",
                    PROBE_PREFIX,
                )
            listing = check_group_listing(await self._list_groups_once(order), catch_up.checked)
            if listing.groups is not None:
                checked = catch_up.checked if listing.leaders_checked else None
                if checked is None and not self._warned_offsets_acl:
                    self._warned_offsets_acl = True
                    log.warning(
                        "no Describe on topic %s: cannot verify that group coordinators were stable and caught up "
                        "during ListGroups (a group could be missed while coordinators move); grant it to the purge "
                        "principal",
                        OFFSETS_TOPIC,
                    )
                return listing.groups, checked
            last_problem = listing.problem
            log.info("group listing not trustworthy yet (%s); retrying", last_problem)
        raise GroupsUnsettled(f"could not list consumer groups completely before the deadline: {last_problem}")

    async def _list_groups_once(self, order: Sequence[int]) -> list[tuple[int, Any, Any, Any]]:
        """Metadata(__consumer_offsets), ListGroups, Metadata(__consumer_offsets) per broker."""
        sends = []
        for b in order:
            sends += [
                self.wire.send(offsets_metadata(), node_id=b),
                self.wire.send(ListGroupsRequest(min_version=0), node_id=b),
                self.wire.send(offsets_metadata(), node_id=b),
            ]
        answers = await self.wire.gather(sends)
        return [(b, *answers[3 * i : 3 * i + 3]) for i, b in enumerate(order)]

    # ---- coordinators ------------------------------------------------------------------------
    async def find_coordinators(
        self, group_ids: Collection[str], issues: list[SnapshotIssue], deadline: Deadline,
        refused: Optional[set[str]] = None,
    ) -> dict[str, int]:
        """group -> coordinator node; groups without one get an issue (and, when the lookup was
        refused rather than not available yet, are added to ``refused``)."""
        with self._lock:
            out = {g: self._coordinators[g] for g in group_ids if g in self._coordinators}
        unknown = sorted(g for g in group_ids if g not in out)
        backoff = retry_backoff(self.wire)
        for _ in range(retry_rounds(self.wire)):
            if not unknown:
                break
            rows = await self._find_coordinator_rows(unknown)
            retry = []
            for key, code, node_id, message in rows:
                err = error_name(code)
                if err is None:
                    out[key] = node_id
                elif err in COORDINATOR_RETRY:
                    retry.append(key)
                else:
                    issues.append(SnapshotIssue("coordinator", key, err, f"FindCoordinator for group {key!r}: {message or err}"))
                    if refused is not None:
                        refused.add(key)
            unknown = retry
            if unknown:
                await self.wire.sleep(backoff.within(deadline))
        for g in unknown:
            issues.append(SnapshotIssue("coordinator", g, "COORDINATOR_NOT_AVAILABLE", f"no coordinator for group {g!r}"))
        with self._lock:
            self._coordinators.update(out)
        return out

    async def _find_coordinator_rows(self, groups: list[str]) -> list[tuple[str, int, int, Optional[str]]]:
        """(group, error code, node id, error message) per group: one request (v4+) or one each."""
        if self.wire.api_version(FindCoordinatorRequest) >= 4:
            answer = await self.wire.send_any(FindCoordinatorRequest(key_type=0, coordinator_keys=groups, min_version=4))
            return [(c.key, c.error_code, c.node_id, c.error_message) for c in answer.coordinators]
        futures = [self.wire.send(FindCoordinatorRequest(key=g, key_type=0, max_version=3)) for g in groups]
        rows: list[tuple[str, int, int, Optional[str]]] = []
        for g, a in zip(groups, await self.wire.gather(futures)):
            if isinstance(a, Exception):
                rows.append((g, 15, -1, str(a)))  # 15: COORDINATOR_NOT_AVAILABLE
            else:
                rows.append((g, a.error_code, a.node_id, a.error_message))
        return rows

    def forget_coordinators(self, group_ids: Collection[str]) -> None:
        with self._lock:
            for g in group_ids:
                self._coordinators.pop(g, None)
        self.wire.forget_coordinators(group_ids)

    # ---- OffsetFetch, DescribeGroups and the member reads ------------------------------------
    async def fetch_group_state(
        self, group_ids: Sequence[str], listed: ListedGroups, deadline: Deadline,
        topic_names: Optional[Mapping[uuid.UUID, str]] = None,
    ) -> tuple[GroupReads, dict[str, SnapshotIssue]]:
        """Every read each group's type needs (``members.reads_for``), per coordinator: one
        request per API and coordinator, all in parallel, in rounds until everything is read or
        the deadline passes. A moved coordinator (NOT_COORDINATOR, ..., an unreachable one) is
        looked up again and only the missing reads are re-sent. Returns what was read and, per
        group not completely read (refused, unsupported, malformed, out of time), the issue that
        says why: the caller reports those groups as unreadable.
        """
        names = dict(topic_names or {})
        reads = GroupReads()
        todo: set[tuple[str, str]] = {(r, g) for g in group_ids for r in reads_for(listed.get(g, (None, None, ""))[1])}
        last: dict[str, SnapshotIssue] = {}  # the latest transient problem per group
        failed: dict[str, SnapshotIssue] = {}  # a problem retrying will not fix

        def give_up(group: str, issue: SnapshotIssue) -> None:
            failed.setdefault(group, issue)
            todo.difference_update([(r, g) for r, g in todo if g == group])

        v8 = self.wire.api_version(OffsetFetchRequest) >= 8
        backoff = retry_backoff(self.wire)
        while todo:
            lookups: list[SnapshotIssue] = []
            refused: set[str] = set()
            coords = await self.find_coordinators(sorted({g for _, g in todo}), lookups, deadline, refused)
            for issue in lookups:
                if issue.resource in refused:
                    give_up(issue.resource, issue)
                else:
                    last[issue.resource] = issue
            by_coord: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
            for read, g in sorted(todo):
                if g in coords:
                    by_coord[coords[g]][read].append(g)
            sends: list[tuple[str, list[str], Any]] = []
            for coord, per_read in sorted(by_coord.items()):
                for read, gs in sorted(per_read.items()):
                    for req_groups, request in build_requests(read, gs, v8):
                        future = self.wire.send(request, node_id=coord, timeout_ms=deadline.remaining_ms())
                        sends.append((read, req_groups, future))
            answers = await self.wire.gather([f for _, _, f in sends])
            for (read, gs, _), answer in zip(sends, answers):
                if isinstance(answer, Exception):
                    name = exc_name(answer)
                    for g in gs:
                        issue = SnapshotIssue("group", g, name, f"{read} for group {g!r} failed: {name}")
                        if name == "UNSUPPORTED_VERSION":  # the broker lacks the API: retrying will not help
                            give_up(g, issue)
                        else:
                            last[g] = issue
                    self.forget_coordinators(gs)
                    continue
                for g, outcome in parse_answer(read, gs, answer, v8, names).items():
                    if outcome.error is None:
                        assert outcome.payload is not None
                        reads.store(read, g, outcome.payload)
                        todo.discard((read, g))
                        continue
                    issue = SnapshotIssue("group", g, outcome.error, outcome.message)
                    if outcome.error in COORDINATOR_RETRY:
                        last[g] = issue
                        self.forget_coordinators([g])
                    else:
                        give_up(g, issue)
            if not todo or deadline.expired():
                break
            await self.wire.sleep(backoff.within(deadline))
        unread = dict(failed)
        for _, g in sorted(todo):
            unread.setdefault(
                g, last.get(g) or SnapshotIssue("group", g, "REQUEST_TIMED_OUT", f"group {g!r} not read before the deadline")
            )
        return reads, unread


__all__ = ["COORDINATOR_RETRY", "OFFSETS_TOPIC", "GroupListing", "GroupReader", "Listed", "check_group_listing"]
