"""What the plan says about open transactions (pure: producer facts -> plan row annotations).

A partition bound at its last stable offset is pinned by the producer whose open transaction
starts there; the plan names it (id, epoch, the transaction's first offset, its last write). A
transaction whose producer has not written for longer than the broker's
``transaction.max.timeout.ms`` is *hanging* (its coordinator should have aborted it): flagged,
because it otherwise stops the partition from ever being purged. See ``kafka.producers``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Optional

from spark_purge.kafka.messages import PartitionProducers, ProducerState
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.kafka.producers import TXN_MAX_TIMEOUT_KEY, OpenTransactions


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds") if ms >= 0 else "unknown"


def is_hanging(producer: ProducerState, now_ms: int, max_timeout_ms: Optional[int]) -> bool:
    """Open, and silent for longer than ``transaction.max.timeout.ms`` (unknown: never flagged)."""
    return (
        producer.txn_start_offset is not None and max_timeout_ms is not None
        and producer.last_timestamp >= 0 and now_ms - producer.last_timestamp > max_timeout_ms
    )


def transaction_note(found: PartitionProducers, last_stable_offset: int, now_ms: int, max_timeout_ms: Optional[int]) -> Optional[str]:
    """The producer pinning the partition at ``last_stable_offset`` (the open transaction that
    starts there, else the oldest), and any hanging transaction; None: no transaction open."""
    if found.error is not None:
        return f"active producers unknown (DescribeProducers: {found.error})"
    opened = found.open_transactions
    if not opened:
        return None
    pin = next((p for p in opened if p.txn_start_offset == last_stable_offset), opened[0])
    note = (
        f"pinned at last stable offset {last_stable_offset} by producer {pin.producer_id} epoch {pin.producer_epoch} "
        f"(transaction open since offset {pin.txn_start_offset}, last write {_when(pin.last_timestamp)})"
    )
    for p in opened:
        if is_hanging(p, now_ms, max_timeout_ms):
            note += (
                f"; HANGING transaction: producer {p.producer_id} epoch {p.producer_epoch} silent for "
                f"{now_ms - p.last_timestamp} ms > {TXN_MAX_TIMEOUT_KEY} {max_timeout_ms} ms: the partition is never purged "
                f"past offset {p.txn_start_offset} until it is aborted (kafka-transactions.sh abort)"
            )
    return note


def annotate(
    rows: Sequence[Mapping[str, Any]], lsos: Mapping[TopicPartitionKey, int], found: OpenTransactions, now_ms: int
) -> list[dict[str, Any]]:
    """Plan rows with ``active_producers`` (the count for partitions with an open transaction,
    None elsewhere) and the transaction note appended to ``detail``."""
    out = []
    for row in rows:
        values = dict(row)
        tp = (values["topic"], values["partition"])
        producers = found.producers.get(tp)
        values["active_producers"] = len(producers.producers) if producers is not None and producers.error is None else None
        note = transaction_note(producers, lsos[tp], now_ms, found.max_timeout_ms) if producers is not None and tp in lsos else None
        if note:
            values["detail"] = f"{values['detail']}; {note}" if values.get("detail") else note
        out.append(values)
    return out


__all__ = ["annotate", "is_hanging", "transaction_note"]
