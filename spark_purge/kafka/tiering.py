"""Tiered storage, as the disablement state machine (``spark_purge.tiering``) reads and drives it.

- ``read_tiering``: Metadata (1 request), DescribeConfigs of the tiering keys sent to *every*
  broker leading one of the topic's partitions (a topic config change reaches brokers one by
  one: a key counts as applied once every leader reports it), and ListOffsets EARLIEST,
  EARLIEST_LOCAL (-4) and LATEST_TIERED (-5) per leader.
- ``alter_topic_configs``: one IncrementalAlterConfigs (SET) for one topic (any broker forwards
  it to the controller). Needs AlterConfigs on the topic.

Kafka's admin API reports no remote log size per partition (DescribeLogDirs lists local log
directories only; no API returns remote segment sizes), so remote bytes are never measured.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from spark_purge._time import Deadline
from spark_purge.errors import AuthorizationError, KafkaError, TieringRefused
from spark_purge.kafka.model import TopicTiering
from spark_purge.kafka.offsets import EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, OffsetReader, describe_failed
from spark_purge.kafka.wire import AUTH_ERRORS, Wire, error_name, exc_name

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_COPY_DISABLE = "remote.log.copy.disable"
REMOTE_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
LOCAL_RETENTION_MS = "local.retention.ms"
LOCAL_RETENTION_BYTES = "local.retention.bytes"
TIERING_KEYS = (REMOTE_STORAGE_ENABLE, REMOTE_COPY_DISABLE, REMOTE_DELETE_ON_DISABLE, LOCAL_RETENTION_MS, LOCAL_RETENTION_BYTES)
_TOPIC_RESOURCE = 2
_SET = 0  # IncrementalAlterConfigs operation SET


async def read_tiering(reader: OffsetReader, topic: str, timeout_ms: int) -> TopicTiering:
    """The topic's tiering configs (as every leader sees them) and per-partition offsets.

    Raises ``TieringRefused`` naming the topic when it does not exist, ``AuthorizationError``
    when Describe/DescribeConfigs is denied, ``KafkaError`` when offsets could not be read.
    """
    wire = reader.wire
    deadline = Deadline(timeout_ms / 1000)
    meta = await reader.metadata([topic])
    err = meta.topic_errors.get(topic)
    if err in AUTH_ERRORS:
        raise AuthorizationError(f"Describe on topic {topic!r} denied ({err}, Metadata)")
    tps = sorted(tp for tp in meta.partitions if tp[0] == topic)
    if err is not None or not tps:
        raise TieringRefused(f"topic {topic!r}: no such topic ({err or 'no partitions'})")
    leaders = {tp: meta.partitions[tp][0] for tp in tps}
    queries = {
        "earliest": (0, dict.fromkeys(tps, EARLIEST)),
        "local": (0, dict.fromkeys(tps, EARLIEST_LOCAL)),
        "tiered": (0, dict.fromkeys(tps, LATEST_TIERED)),
    }
    offsets, failed = await reader.list_offsets(queries, dict(leaders), deadline)
    unread = {tp: e for tp, e in failed.items() if tp not in offsets["earliest"]}
    if unread:  # the tiered offsets may be missing (left out below); the log start may not
        raise KafkaError(f"ListOffsets for topic {topic!r} failed for {describe_failed(unread)}")
    brokers: list[Optional[int]] = [*sorted({b for b in leaders.values() if b is not None})] or [None]
    seen = [await _describe(wire, topic, broker) for broker in brokers]
    configs = {key: _agreed([s.get(key) for s in seen]) for key in TIERING_KEYS}

    def by_partition(name: str) -> dict[int, int]:
        return {p: v[0] for (_, p), v in offsets[name].items()}

    return TopicTiering(
        topic, meta.ids_by_name().get(topic), configs, by_partition("earliest"), by_partition("local"), by_partition("tiered")
    )


def _agreed(values: list[Optional[str]]) -> Optional[str]:
    return values[0] if len(set(values)) == 1 else None


async def _describe(wire: Wire, topic: str, broker: Optional[int]) -> dict[str, Optional[str]]:
    """The tiering keys of ``topic`` as ``broker`` sees them (None: any broker)."""
    _Res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[_Res(resource_type=_TOPIC_RESOURCE, resource_name=topic, configuration_keys=list(TIERING_KEYS))],
        include_synonyms=False,
    )
    try:
        response = await (wire.send_any(request) if broker is None else wire.send(request, node_id=broker))
    except Exception as exc:  # that broker is unreachable: its view is unknown, so nothing is agreed
        return dict.fromkeys(TIERING_KEYS, f"<unknown: {exc_name(exc)}>")
    result = response.results[0]
    err = error_name(result.error_code)
    if err in AUTH_ERRORS:
        raise AuthorizationError(f"DescribeConfigs on topic {topic!r} denied ({err})")
    if err is not None:
        raise KafkaError(f"DescribeConfigs on topic {topic!r}: {err}: {result.error_message or ''}".rstrip(": "))
    return {c.name: c.value for c in result.configs}


def set_configs_request(resource_type: int, name: str, values: Mapping[str, str]) -> IncrementalAlterConfigsRequest:
    """IncrementalAlterConfigs SETting ``values`` on one resource (``resource_type``: Kafka's
    ConfigResource type id: 2 a topic, 32 a group)."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(
        resources=[
            resource(
                resource_type=resource_type,
                resource_name=name,
                configs=[resource.AlterableConfig(name=k, config_operation=_SET, value=v) for k, v in values.items()],
            )
        ],
        validate_only=False,
    )


async def alter_topic_configs(wire: Wire, topic: str, values: Mapping[str, str]) -> None:
    """SET ``values`` on ``topic`` (IncrementalAlterConfigs). Raises ``AuthorizationError``
    (needs AlterConfigs on the topic), ``TieringRefused`` when the broker refuses the values
    (INVALID_CONFIG, with its message), ``KafkaError`` otherwise (retriable errors marked so)."""
    response = await wire.send_any(set_configs_request(_TOPIC_RESOURCE, topic, values))
    result = response.responses[0]
    err = error_name(result.error_code)
    if err is None:
        return
    settings = ", ".join(f"{k}={v}" for k, v in values.items())
    text = f"IncrementalAlterConfigs {settings} on topic {topic!r}: {err}: {result.error_message or ''}".rstrip(": ")
    if err in AUTH_ERRORS:
        raise AuthorizationError(f"AlterConfigs on topic {topic!r} denied ({err}); grant it to the purge principal")
    if err in ("INVALID_CONFIG", "INVALID_REQUEST", "POLICY_VIOLATION"):
        raise TieringRefused(text)
    if err == "UNKNOWN_TOPIC_OR_PARTITION":
        raise TieringRefused(f"topic {topic!r}: no such topic ({err})")
    failure = KafkaError(text)
    failure.retriable = True  # e.g. NOT_CONTROLLER, REQUEST_TIMED_OUT: the state machine tries again
    raise failure


__all__ = [
    "LOCAL_RETENTION_BYTES",
    "LOCAL_RETENTION_MS",
    "REMOTE_COPY_DISABLE",
    "REMOTE_DELETE_ON_DISABLE",
    "REMOTE_STORAGE_ENABLE",
    "TIERING_KEYS",
    "alter_topic_configs",
    "read_tiering",
]
