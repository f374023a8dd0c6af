"""Consumers that keep their positions outside Kafka.

Kafka's group coordinator knows nothing of these, so discovery never sees them; the purge reads
their positions itself:

- **A Spark Structured Streaming query** reading Kafka keeps its offsets in its checkpoint
  (``checkpointLocation``). ``offsets/N`` holds, per source, the end offsets of micro-batch N;
  ``commits/N`` appears once batch N's output is committed. After a restart the query resumes
  at the end offsets of its last committed batch (a planned, uncommitted batch N+1 is re-run
  from there), so that is its position: records below it were processed, records at or above it
  are still needed. Before any batch commits, the query starts from the initial offsets it
  recorded in ``sources/<i>/0``. Read through Hadoop's FileSystem (``spark_purge.fs``), so
  ``s3a://``, ``abfss://``, ``gs://``, ``dbfs:/`` and local paths all work.
- **A static hold** for consumers nothing can read (Flink state, an offline job): a configured
  offset per topic partition that the purge never cuts past.

A checkpoint that cannot be read or parsed raises ``CheckpointError``: the caller blocks every
partition the consumer covers, naming the reason. Nothing here guesses a position.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from spark_purge.errors import CheckpointError
from spark_purge.fs import Files, join

TopicPartition = tuple[str, int]

_VERSION = re.compile(r"v(\d+)")
_BATCH_FILE = re.compile(r"\d+")
# Offset-log format versions this reader understands (Spark 3.x and 4.x write v1).
SUPPORTED_OFFSET_LOG_VERSIONS = (1,)


@dataclass(frozen=True)
class CheckpointPosition:
    """Where a Spark query resumes: per topic partition, the first offset it still needs.

    ``batch_id`` is the last committed micro-batch, or None when no batch has committed yet and
    the position is the query's recorded initial offsets.
    """

    location: str
    batch_id: Optional[int]
    offsets: Mapping[TopicPartition, int]


def _kafka_offsets(doc: Any, where: str) -> Optional[dict[TopicPartition, int]]:
    """A Kafka source's offsets ``{"topic": {"0": 42}}`` as {(topic, 0): 42}; None for a source
    that is not Kafka. Negative offsets (earliest/latest markers) are malformed in a log."""
    if not isinstance(doc, dict) or not doc:
        return None
    if not all(isinstance(v, dict) for v in doc.values()):
        return None
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        for p, offset in parts.items():
            if not (isinstance(p, str) and p.isdigit()) or isinstance(offset, bool) or not isinstance(offset, int):
                raise CheckpointError(f"{where}: expected Kafka offsets like {{\"topic\": {{\"0\": 42}}}}, got {json.dumps(doc)[:200]}")
            if offset < 0:
                raise CheckpointError(f"{where}: offset {offset} for {topic}-{p} is not a resolved position")
            out[(str(topic), int(p))] = offset
    return out


def _json_from(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None


def parse_offset_log_entry(text: str, where: str) -> dict[TopicPartition, int]:
    """Kafka offsets in one ``offsets/N`` file, over every Kafka source of the query (the
    lowest where two sources read one partition). Raises ``CheckpointError`` when malformed."""
    lines = text.splitlines()
    if not lines:
        raise CheckpointError(f"{where}: empty file")
    m = _VERSION.fullmatch(lines[0].strip())
    if m is None:
        raise CheckpointError(f"{where}: expected a version line like 'v1', got {lines[0][:40]!r}")
    if int(m.group(1)) not in SUPPORTED_OFFSET_LOG_VERSIONS:
        raise CheckpointError(f"{where}: offset log version v{m.group(1)} is not supported (this reader knows v1)")
    if len(lines) < 2 or not isinstance(_json_from(lines[1], where), dict):
        raise CheckpointError(f"{where}: expected the batch metadata JSON on line 2")
    found: dict[TopicPartition, int] = {}
    for line in lines[2:]:
        line = line.strip()
        if not line or line == "-":  # "-": a source with no offset yet
            continue
        offsets = _kafka_offsets(_json_from(line, where), where)
        for tp, offset in (offsets or {}).items():
            found[tp] = min(offset, found.get(tp, offset))
    return found


def parse_initial_offsets(text: str, where: str) -> Optional[dict[TopicPartition, int]]:
    """A Kafka source's ``sources/<i>/0`` file (a version marker, then the offsets JSON)."""
    start = text.find("{")
    if start < 0:
        raise CheckpointError(f"{where}: no offsets JSON found")
    return _kafka_offsets(_json_from(text[start:].strip(), where), where)


def _batches(files: Files, directory: str) -> list[int]:
    return sorted(int(n) for n in files.list_names(directory) if _BATCH_FILE.fullmatch(n))


def read_checkpoint_position(files: Files, location: str) -> CheckpointPosition:
    """The position of the Spark query whose checkpoint is at ``location`` (see module doc)."""
    if not files.exists(location):
        raise CheckpointError(f"{location}: checkpoint not found")
    offsets_dir, commits_dir = join(location, "offsets"), join(location, "commits")
    committed = set(_batches(files, commits_dir))
    planned = set(_batches(files, offsets_dir))
    done = sorted(committed & planned)
    if done:
        batch = done[-1]
        where = join(offsets_dir, str(batch))
        offsets = parse_offset_log_entry(files.read_text(where), where)
        if not offsets:
            raise CheckpointError(f"{where}: the query has no Kafka source offsets")
        return CheckpointPosition(location, batch, offsets)
    if committed:
        raise CheckpointError(f"{commits_dir}: batch {max(committed)} is committed but its offsets file is missing")
    # No batch committed yet: the query will start at its recorded initial offsets.
    sources = join(location, "sources")
    initial: dict[TopicPartition, int] = {}
    for index in _source_indexes(files, sources):
        where = join(join(sources, index), "0")
        if files.exists(where):
            for tp, offset in (parse_initial_offsets(files.read_text(where), where) or {}).items():
                initial[tp] = min(offset, initial.get(tp, offset))
    if not initial:
        raise CheckpointError(f"{location}: no committed batch and no recorded initial Kafka offsets yet")
    return CheckpointPosition(location, None, initial)


def _source_indexes(files: Files, sources: str) -> list[str]:
    # Source folders hold one file named "0"; list the folder names by probing 0..n.
    found = []
    index = 0
    while files.exists(join(join(sources, str(index)), "0")):
        found.append(str(index))
        index += 1
    return found
