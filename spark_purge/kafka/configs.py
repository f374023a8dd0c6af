"""DescribeConfigs for the selected topics, and the Cluster Describe ACL check.

DescribeConfigs is 1 request for every selected topic, with only the keys the policy reads; the
broker answers with defaults included (kafka-python's ``describe_configs`` filters to
"modified" and ignores per-resource error codes; we do neither).
"""
from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Optional

from kafka.protocol.admin import DescribeClusterRequest, DescribeConfigsRequest

from spark_purge.errors import AuthorizationError
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name

log = logging.getLogger(__name__)

TOPIC_CONFIG_KEYS = ("cleanup.policy", "retention.ms", "remote.storage.enable")
_TOPIC_RESOURCE = 2
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


__all__ = ["TOPIC_CONFIG_KEYS", "TopicConfigs", "bool_or_none", "check_cluster_describe", "int_or_none", "topic_configs"]
