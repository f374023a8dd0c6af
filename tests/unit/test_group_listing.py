"""The group listing is used only when the coordinators' leaders were stable around ListGroups
(``KafkaPythonClient._list_groups_once``), over scripted broker answers — no Kafka."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any, Optional

import pytest

from spark_purge.errors import AuthorizationError
from spark_purge.kafka.client import KafkaPythonClient

TOPIC = "__consumer_offsets"


def meta(leaders: dict[int, tuple[int, int]], error: int = 0) -> NS:
    """Metadata(__consumer_offsets): partition -> (leader, leader epoch)."""
    parts = [NS(partition_index=p, leader_id=lead, leader_epoch=epoch) for p, (lead, epoch) in sorted(leaders.items())]
    return NS(topics=[NS(name=TOPIC, error_code=error, partitions=parts)])


def listing(*groups: str, error: int = 0) -> NS:
    return NS(
        error_code=error,
        API_VERSION=5,
        groups=[NS(group_id=g, group_type="classic", group_state="Stable", protocol_type="consumer") for g in groups],
    )


class Scripted(KafkaPythonClient):
    """A client whose requests are answered from a script: broker -> (before, listing, after)."""

    def __init__(self, script: dict[int, tuple[Any, Any, Any]]) -> None:  # no connection at all
        self._script = {b: list(answers) for b, answers in script.items()}
        self._warned_offsets_acl = False

    def _send(self, request: Any, node_id: Optional[int] = None, timeout_ms: Optional[int] = None) -> Any:
        return self._script[node_id].pop(0)

    async def _gather(self, futures: Any) -> list[Any]:
        return list(futures)


def run(script: dict[int, tuple[Any, Any, Any]]) -> tuple[Optional[dict[str, Any]], str]:
    client = Scripted(script)
    return asyncio.run(client._list_groups_once(sorted(script)))


def test_stable_leaders_give_the_union_of_every_brokers_groups() -> None:
    leaders = {0: (1, 5), 1: (2, 3), 2: (1, 5)}
    groups, problem = run({1: (meta(leaders), listing("a", "b"), meta(leaders)), 2: (meta(leaders), listing("c"), meta(leaders))})
    assert problem == "" and sorted(groups or {}) == ["a", "b", "c"]


def test_a_partition_whose_leader_moved_during_listgroups_is_not_trusted() -> None:
    before = {0: (1, 5), 1: (2, 3)}
    after = {0: (2, 6), 1: (2, 3)}  # partition 0 moved from broker 1 to broker 2 meanwhile
    groups, problem = run({1: (meta(before), listing("a"), meta(after)), 2: (meta(before), listing(), meta(after))})
    assert groups is None and "partitions 0 had no stable leader" in problem


def test_a_dead_leader_gone_from_metadata_before_its_successor_knows_is_not_trusted() -> None:
    # Broker 3 died and left the metadata; broker 2 does not lead its partition 1 yet: nobody
    # listed that partition's groups. This is the case the invariant checker caught.
    view = {0: (1, 5), 1: (3, 7)}
    groups, problem = run({1: (meta(view), listing("a"), meta(view)), 2: (meta(view), listing(), meta(view))})
    assert groups is None and "partitions 1 had no stable leader" in problem


def test_a_broker_that_does_not_answer_or_still_loads_means_retry() -> None:
    leaders = {0: (1, 5)}
    down = run({1: (meta(leaders), ConnectionError("refused"), meta(leaders))})
    assert down[0] is None and "broker 1 did not answer" in down[1]
    loading = run({1: (meta(leaders), listing(error=14), meta(leaders))})  # COORDINATOR_LOAD_IN_PROGRESS
    assert loading[0] is None and "COORDINATOR_LOAD_IN_PROGRESS" in loading[1]


def test_no_offsets_topic_yet_means_no_group_to_miss() -> None:
    none = meta({}, error=3)  # UNKNOWN_TOPIC_OR_PARTITION: no group ever committed
    groups, problem = run({1: (none, listing(), none)})
    assert groups == {} and problem == ""


def test_listgroups_denied_names_the_acl() -> None:
    leaders = {0: (1, 5)}
    with pytest.raises(AuthorizationError, match="Describe on cluster denied"):
        run({1: (meta(leaders), listing(error=31), meta(leaders))})  # CLUSTER_AUTHORIZATION_FAILED
