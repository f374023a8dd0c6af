"""The invariant checker's ``tiering_disable`` kind: tiered storage disabled on topic B while the
purge runs (issue 14, seed 004), on a cluster started with ``LocalKafka(tiered=True)``.

Topic B is created tiered (``TIERED_TOPIC_CONFIGS``: a segment rolls every ``segment.ms`` and
one byte is kept locally, so B's older records live in remote storage only and the purge's cuts
reach into it). When the kind is drawn, the checker runs ``spark-purge``'s own state machine
(``spark_purge.tiering.Disabler``) on B with a drawn policy and kills it right after a drawn
step before ``confirm``, so B stays DISABLING for one whole cycle; the disablement starts either
before the cycle's snapshot or in the middle of the batch (after its intents, before
DeleteRecords). At the start of the next cycle the disablement is resumed and runs to DISABLED.
The first run disables with ``retain`` or ``delete``; after DISABLED(retain) the next one is
``delete``; after DISABLED(delete) the kind is spent.

The oracle for the cycle B spends DISABLING is what the checker itself did, never the purge's
state table: no ``deleted`` outcome on B in that batch, and no log start of B past where it was
before the cycle — except that after ``storage_disable`` (policy ``delete``) Kafka itself may
move it up to the local log start, which the checker reads from Kafka (ListOffsets
EARLIEST_LOCAL) after the cycle. Every other cycle is checked as any cycle is; the summary
notes how many of the purge's cuts reached remote storage.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from kafka import KafkaAdminClient
from kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from spark_purge.config import PurgeConfig
from spark_purge.kafka.model import TopicPartitionKey
from spark_purge.testing import workload
from spark_purge.testing.errors import HarnessError
from spark_purge.tiering import STEPS, STORAGE_DISABLE, Disabler, TieringRecord, TieringTable

#: B's configs under the kind: segments roll by time (the checker's records are small) and only
#: one byte stays local, so rolled segments move to remote storage within seconds.
TIERED_TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.ms": "2000", "local.retention.bytes": "1"}
DISABLE_TIMEOUT_S = 120.0

ENABLED, DISABLING = "ENABLED", "DISABLING"


class DisablerKilled(HarnessError):
    """The checker's simulated death of a ``tiering disable`` job right after a step."""


@dataclass
class TieringDisablement:
    """The kind's state across cycles: where B stands, and what happened to it."""

    spark: SparkSession
    config: PurgeConfig
    admin: KafkaAdminClient
    topic: str
    rng: random.Random
    state: str = ENABLED  # ENABLED, DISABLING, or "DISABLED(<policy>)"
    policy: Optional[str] = None
    stopped_at: Optional[str] = None
    during: Optional[int] = None  # the cycle B spends DISABLING
    mid_cycle: bool = False  # drawn: start at the batch's intents rather than before the snapshot
    pending: bool = False  # a mid-batch start still to happen in this cycle
    runs: Counter[str] = field(default_factory=Counter)
    remote_cuts: int = 0

    @property
    def spent(self) -> bool:
        """Nothing left to disable (DISABLED with ``delete``), or a disablement under way."""
        return self.state in (DISABLING, "DISABLED(delete)")

    def plan(self, cycle: int) -> None:
        """Draw the policy, the step the job dies after, and when it starts; before the snapshot
        it starts now, else at the batch's intents (``start_mid_cycle``)."""
        self.policy = "delete" if self.state == "DISABLED(retain)" or self.rng.random() < 0.5 else "retain"
        self.stopped_at = self.rng.choice(STEPS[self.policy][:-1])  # never after confirm: it would be DISABLED
        self.during = cycle
        self.mid_cycle = self.rng.random() < 0.5
        self.pending = self.mid_cycle
        if not self.mid_cycle:
            self._start()

    def start_mid_cycle(self) -> None:
        """At the batch's intents (the checker's fault hook): the drawn mid-batch start, once."""
        if self.pending:
            self.pending = False
            self._start()

    def _start(self) -> None:
        assert self.policy is not None and self.stopped_at is not None
        stop = self.stopped_at

        def die(step: str) -> None:
            if step == stop:
                raise DisablerKilled(f"tiering disable {self.topic}: job killed after {step}")

        try:
            self._disable(die)
        except DisablerKilled:
            pass
        else:
            raise HarnessError(f"tiering disable {self.topic} ({self.policy}) ran past {stop}: the kill never came")
        self.state = DISABLING
        self.runs[f"{self.policy} killed after {stop}{' mid-batch' if self.mid_cycle else ''}"] += 1

    def resume(self) -> None:
        """A DISABLING topic's job restarted: it runs to DISABLED with the recorded policy."""
        if self.state != DISABLING:
            return
        assert self.policy is not None
        record = self._disable(None)
        if record.state != "DISABLED" or record.policy != self.policy:
            raise HarnessError(f"tiering disable {self.topic}: resumed to {record.state}/{record.policy}, expected DISABLED/{self.policy}")
        self.state, self.during = f"DISABLED({self.policy})", None

    def _disable(self, hook: Optional[Callable[[str], None]]) -> TieringRecord:
        """``spark-purge tiering disable`` of B with the drawn policy, in this process."""
        from spark_purge.kafka import open_client

        assert self.policy is not None
        table = TieringTable.beside(self.spark, self.config.audit.path)
        with open_client(self.config) as client:
            return Disabler(client, table, operator="invariant checker", timeout_s=DISABLE_TIMEOUT_S, fault_hook=hook).disable(
                self.topic, self.policy
            )

    def check(
        self, cycle: int, before: Mapping[TopicPartitionKey, int], after: Mapping[TopicPartitionKey, int], rows: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """Violations of the DISABLING cycle's oracle (none in other cycles); counts remote cuts."""
        self.pending = False  # a batch that died before its intents never started it
        self.remote_cuts += sum(1 for r in rows if r["record_type"] == "outcome" and r["status"] == "deleted" and r["cuts_remote"])
        if cycle != self.during or self.state != DISABLING:
            return []
        found = []
        for r in rows:
            if r["record_type"] == "outcome" and r["topic"] == self.topic and r["status"] == "deleted":
                found.append(f"cycle {cycle}: {self.topic}-{r['partition']} cut to {r['cutoff']} while its tiered storage was DISABLING")
        tps = [tp for tp in after if tp[0] == self.topic]
        kafka_moved = self.kafka_moves(cycle)
        local = self.local_starts(tps) if kafka_moved else {}
        for tp in tps:
            allowed = max(before.get(tp, 0), local.get(tp, 0))
            if after[tp] > allowed:
                found.append(
                    f"cycle {cycle}: {tp[0]}-{tp[1]} log start {after[tp]} > {allowed} while DISABLING "
                    f"(before {before.get(tp, 0)}, Kafka's own local log start {local.get(tp)})"
                )
        return found

    def kafka_moves(self, cycle: int) -> bool:
        """Whether Kafka itself may move the topic's log starts up to its local log starts in
        ``cycle``: its DISABLING cycle, the ``delete`` job killed after ``storage_disable``
        (Kafka then deletes the remote data on its own, whenever it gets to it)."""
        return cycle == self.during and self.state == DISABLING and self.policy == "delete" and self.stopped_at == STORAGE_DISABLE

    def local_starts(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Kafka's own local log starts of ``tps`` (where its delete of remote data stops)."""
        return workload.list_offsets(self.admin, list(tps), OffsetSpec.EARLIEST_LOCAL) if tps else {}

    def note(self) -> str:
        runs = ", ".join(f"{k}: {v}" for k, v in sorted(self.runs.items())) or "none"
        return f"tiering_disable: {runs}; {self.topic} ends {self.state}; {self.remote_cuts} cut(s) reached remote storage"


__all__ = ["DISABLING", "ENABLED", "TIERED_TOPIC_CONFIGS", "DisablerKilled", "TieringDisablement"]
