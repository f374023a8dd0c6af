"""DescribeConfigs for the selected topics (and one broker), and the Cluster Describe ACL check.

DescribeConfigs is 1 request for every selected topic, with only the keys the policy reads; the
broker answers with defaults included (kafka-python's ``describe_configs`` filters to
"modified" and ignores per-resource error codes; we do neither). The same request asks the
broker it is sent to for its ``offsets.retention.minutes`` (how long Kafka keeps an empty
group's offsets; a BROKER resource must be sent to that broker). That needs Cluster
DescribeConfigs; without it the value is just unknown (logged), nothing fails.
"""
from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Optional

from kafka import errors as Errors
from kafka.protocol.admin import DescribeClusterRequest, DescribeConfigsRequest

from spark_purge.errors import AuthorizationError
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name

log = logging.getLogger(__name__)

TOPIC_CONFIG_KEYS = ("cleanup.policy", "retention.ms", "remote.storage.enable")
OFFSETS_RETENTION_KEY = "offsets.retention.minutes"
_TOPIC_RESOURCE = 2
_BROKER_RESOURCE = 4
_ACL_DESCRIBE = 8  # AclOperation DESCRIBE: its code in the authorized-operations set

TopicConfigs = dict[str, dict[str, Optional[str]]]


async def topic_configs(wire: Wire, topics: Collection[str]) -> tuple[TopicConfigs, dict[str, str]]:
    """({topic: {key: value}}, {topic: "ERROR_NAME: message"} for topics the broker refused)."""
    if not topics:
        return {}, {}
    _Res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            _Res(resource_type=_TOPIC_RESOURCE, resource_name=t, configuration_keys=list(TOPIC_CONFIG_KEYS))
            for t in sorted(topics)
        ],
        include_synonyms=False,
    )
    response = await wire.send_any(request)
    configs: TopicConfigs = {}
    errors: dict[str, str] = {}
    for result in response.results:
        err = error_name(result.error_code)
        if err is not None:  # kafka-python's describe_configs ignores this; we do not
            errors[result.resource_name] = f"{err}: {result.error_message or ''}".rstrip(": ")
            continue
        configs[result.resource_name] = {c.name: c.value for c in result.configs}
    return configs, errors


async def snapshot_configs(
    wire: Wire, topics: Collection[str], brokers: Collection[int]
) -> tuple[TopicConfigs, dict[str, str], Optional[int]]:
    """``topic_configs`` plus the broker's ``offsets.retention.minutes`` in ms (None: unknown),
    in one DescribeConfigs sent to the lowest-numbered broker; if that broker cannot be reached,
    the topics alone go to any broker and the retention is unknown."""
    if not brokers:
        found, errors = await topic_configs(wire, topics)
        return found, errors, None
    broker = min(brokers)
    _Res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            _Res(resource_type=_TOPIC_RESOURCE, resource_name=t, configuration_keys=list(TOPIC_CONFIG_KEYS))
            for t in sorted(topics)
        ]
        + [_Res(resource_type=_BROKER_RESOURCE, resource_name=str(broker), configuration_keys=[OFFSETS_RETENTION_KEY])],
        include_synonyms=False,
    )
    try:
        response = await wire.send(request, node_id=broker)
    except Errors.KafkaError as exc:  # that broker is down or moving: the topics go to any broker
        log.info("DescribeConfigs to broker %d failed (%s); %s unknown for this snapshot", broker, type(exc).__name__, OFFSETS_RETENTION_KEY)
        found, errors = await topic_configs(wire, topics)
        return found, errors, None
    configs: TopicConfigs = {}
    errors = {}
    retention_ms: Optional[int] = None
    for result in response.results:
        err = error_name(result.error_code)
        if result.resource_type == _BROKER_RESOURCE:
            if err is not None:
                log.warning(
                    "cannot read the broker's %s (%s: %s): grant the purge principal Cluster DescribeConfigs "
                    "to be warned when Kafka forgets empty groups before stale_after", OFFSETS_RETENTION_KEY, err,
                    result.error_message or "",
                )
                continue
            values = {c.name: c.value for c in result.configs}
            minutes = int_or_none(values.get(OFFSETS_RETENTION_KEY))
            retention_ms = minutes * 60_000 if minutes is not None else None
        elif err is not None:
            errors[result.resource_name] = f"{err}: {result.error_message or ''}".rstrip(": ")
        else:
            configs[result.resource_name] = {c.name: c.value for c in result.configs}
    return configs, errors, retention_ms


async def check_cluster_describe(wire: Wire) -> None:
    """Raise ``AuthorizationError`` unless the principal has Describe on the cluster.

    Without it the broker answers ListGroups with only the groups the principal may describe,
    silently: a consumer group the purge cannot see could then never hold a topic back.
    """
    if not wire.has_api(DescribeClusterRequest):  # brokers before 2.8
        log.warning("broker has no DescribeCluster API: cannot check the Cluster Describe ACL")
        return
    answer = await wire.send_any(DescribeClusterRequest(include_cluster_authorized_operations=True))
    err = error_name(answer.error_code)
    if err in AUTH_ERRORS:
        raise AuthorizationError(f"Describe on the cluster denied ({err}, DescribeCluster)")
    # kafka-python decodes the bitfield into a set of AclOperation codes (None: not computed).
    ops = answer.authorized_operations
    if err is None and ops is not None and _ACL_DESCRIBE not in ops:
        raise AuthorizationError(
            "Describe on the cluster denied to the purge principal: ListGroups would then silently hide "
            "every consumer group it may not describe, and a hidden group could not hold its topics back; "
            "grant it Cluster Describe (kafka-acls --operation Describe --cluster)"
        )


def int_or_none(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def bool_or_none(value: Optional[str]) -> Optional[bool]:
    if value is None:
        return None
    return value.strip().lower() == "true"


__all__ = ["OFFSETS_RETENTION_KEY", "TOPIC_CONFIG_KEYS", "TopicConfigs", "bool_or_none", "check_cluster_describe", "int_or_none", "snapshot_configs", "topic_configs"]
