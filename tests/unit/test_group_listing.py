"""The group listing is used only when the coordinators' leaders were stable around ListGroups:
``check_group_listing``, a pure function, over scripted broker answers — no Kafka, no client."""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any, Optional

import pytest

from spark_purge.errors import AuthorizationError
from spark_purge.kafka.groups import check_group_listing

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


def run(script: dict[int, tuple[Any, Any, Any]]) -> tuple[Optional[dict[str, Any]], str]:
    """Each broker's (Metadata before, ListGroups, Metadata after), as the listing sends them."""
    result = check_group_listing([(broker, *answers) for broker, answers in sorted(script.items())])
    return result.groups, result.problem


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


def test_without_describe_on_the_offsets_topic_the_listing_is_taken_unchecked() -> None:
    denied = meta({}, error=29)  # TOPIC_AUTHORIZATION_FAILED on __consumer_offsets
    result = check_group_listing([(1, denied, listing("a"), denied)])
    assert result.groups is not None and sorted(result.groups) == ["a"]
    assert result.problem == "" and result.leaders_checked is False


def test_group_types_default_by_listgroups_version() -> None:
    old = NS(error_code=0, API_VERSION=4, groups=[NS(group_id="g", protocol_type="consumer")])
    leaders = {0: (1, 5)}
    groups, _ = run({1: (meta(leaders), old, meta(leaders))})
    assert groups == {"g": (None, "classic", "consumer")}
