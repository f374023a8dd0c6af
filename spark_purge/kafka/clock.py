"""The broker's clock, measured: one tiny record to a ``LogAppendTime`` topic.

Kafka offers no "what time is it" request; the one place a broker tells its clock is the
timestamp it assigns a record appended to a topic with ``message.timestamp.type=LogAppendTime``
(returned in the ProduceResponse). So, when ``kafka.clock_probe_topic`` is configured, each batch
appends one empty record there (created on first use: 1 partition, LogAppendTime, 1h
retention) and compares the broker's timestamp with the driver's clock around the request:

    skew = broker time - midpoint(sent, acknowledged)     (positive: the broker is ahead)

good to within half the round trip. (ListOffsets' max-timestamp spec, KIP-734, tells the
timestamp of the latest record: the time of the last append, not now, and in producer time on
``CreateTime`` topics.) The record is sent with timestamp 1 (ms after the epoch): a topic that keeps it (``CreateTime``)
is refused with an error naming the topic, rather than measuring the producer's clock.

    with BrokerClock(settings, "spark-purge-clock") as clock:
        reading = clock.read()
        reading.skew_ms, reading.uncertainty_ms
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Optional

from spark_purge.errors import ConfigError, KafkaError
from spark_purge.kafka.settings import ConnectionSettings

PROBE_STAMP_MS = 1  # the probe's own timestamp: a broker answer this low means CreateTime
PROBE_CONFIGS = {"message.timestamp.type": "LogAppendTime", "retention.ms": "3600000", "cleanup.policy": "delete"}


@dataclass(frozen=True)
class ClockReading:
    """One measurement: the broker's append time of the probe and the driver's clock around it (ms)."""

    broker_ms: int
    sent_ms: int
    acked_ms: int

    @property
    def skew_ms(self) -> int:
        """Broker clock minus driver clock (positive: the broker is ahead)."""
        return self.broker_ms - (self.sent_ms + self.acked_ms) // 2

    @property
    def uncertainty_ms(self) -> int:
        return (self.acked_ms - self.sent_ms + 1) // 2


def describe_skew(reading: ClockReading | None, threshold_ms: int = 1000) -> str | None:
    """A line for the plan output when the clocks differ by more than ``threshold_ms``, else None."""
    if reading is None or abs(reading.skew_ms) <= threshold_ms:
        return None
    side = "ahead of" if reading.skew_ms > 0 else "behind"
    return (
        f"broker clock is {abs(reading.skew_ms) / 1000:.1f}s {side} the driver's (+/- {reading.uncertainty_ms}ms); "
        "time floors compare driver time with driver time (append history), record timestamps are the broker's or producers'"
    )


class BrokerClock:
    """Measures the broker's clock through ``topic`` (see the module docstring); reuses one
    producer for its lifetime. ``clock`` returns the driver's time in seconds."""

    def __init__(self, settings: ConnectionSettings, topic: str, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.topic = topic
        self.clock = clock
        self._producer: Optional[Any] = None

    def read(self) -> ClockReading:
        producer = self._open()
        timeout_s = self.settings.request_timeout_ms / 1000
        sent = int(self.clock() * 1000)
        try:
            meta = producer.send(self.topic, value=b"", partition=0, timestamp_ms=PROBE_STAMP_MS).get(timeout=timeout_s)
        except Exception as exc:
            raise KafkaError(f"clock probe: producing to {self.topic!r} failed: {type(exc).__name__}: {exc}") from exc
        acked = int(self.clock() * 1000)
        if meta.timestamp <= PROBE_STAMP_MS:
            raise ConfigError(
                f"kafka.clock_probe_topic: topic {self.topic!r} keeps producer timestamps (CreateTime); "
                "expected a topic with message.timestamp.type=LogAppendTime (or a name that does not exist yet)"
            )
        return ClockReading(int(meta.timestamp), sent, acked)

    def _open(self) -> Any:
        if self._producer is None:
            from kafka import KafkaProducer

            self._create_topic()
            self._producer = KafkaProducer(acks=1, linger_ms=0, **self.settings.kafka_kwargs())
        return self._producer

    def _create_topic(self) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(**self.settings.kafka_kwargs())
        try:
            admin.create_topics([NewTopic(self.topic, 1, -1, topic_configs=PROBE_CONFIGS)])
        except TopicAlreadyExistsError:
            pass
        except Exception as exc:
            raise KafkaError(f"clock probe: creating topic {self.topic!r} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            admin.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def __enter__(self) -> BrokerClock:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()


__all__ = ["PROBE_CONFIGS", "PROBE_STAMP_MS", "BrokerClock", "ClockReading", "describe_skew"]
