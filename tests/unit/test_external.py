"""Spark checkpoint positions: parsing and the committed-batch rule, over an in-memory tree."""
from __future__ import annotations

import pytest

from spark_purge.errors import CheckpointError
from spark_purge.external import parse_offset_log_entry, read_checkpoint_position

META = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'


class MemoryFiles:
    def __init__(self, tree: dict[str, str]) -> None:
        self.tree = tree

    def exists(self, path: str) -> bool:
        return path in self.tree or any(k.startswith(path.rstrip("/") + "/") for k in self.tree)

    def list_names(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return sorted(k[len(prefix):] for k in self.tree if k.startswith(prefix) and "/" not in k[len(prefix):])

    def read_text(self, path: str) -> str:
        return self.tree[path]


def offsets(*sources: str) -> str:
    return "\n".join(["v1", META, *sources])


def test_position_is_the_end_of_the_last_committed_batch_not_the_planned_one() -> None:
    files = MemoryFiles(
        {
            "ck/metadata": '{"id":"q"}',
            "ck/offsets/0": offsets('{"orders":{"0":10,"1":7}}'),
            "ck/offsets/1": offsets('{"orders":{"0":25,"1":9}}'),
            "ck/offsets/2": offsets('{"orders":{"0":40,"1":12}}'),  # planned, not committed
            "ck/commits/0": 'v1\n{"nextBatchWatermarkMs":0}',
            "ck/commits/1": 'v1\n{"nextBatchWatermarkMs":0}',
            "ck/commits/.1.crc": "binary",
        }
    )
    pos = read_checkpoint_position(files, "ck")
    assert pos.batch_id == 1
    assert dict(pos.offsets) == {("orders", 0): 25, ("orders", 1): 9}


def test_before_any_commit_the_initial_offsets_hold() -> None:
    files = MemoryFiles(
        {
            "ck/metadata": '{"id":"q"}',
            "ck/sources/0/0": 'v1\n{"orders":{"0":3,"1":0}}',
            "ck/offsets/0": offsets('{"orders":{"0":40,"1":12}}'),
        }
    )
    pos = read_checkpoint_position(files, "ck")
    assert pos.batch_id is None and dict(pos.offsets) == {("orders", 0): 3, ("orders", 1): 0}


def test_several_sources_take_the_lowest_and_skip_non_kafka_ones() -> None:
    got = parse_offset_log_entry(offsets('{"a":{"0":5}}', "-", '{"logOffset":3}', '{"a":{"0":2},"b":{"1":9}}'), "x")
    assert got == {("a", 0): 2, ("b", 1): 9}


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({}, "checkpoint not found"),
        ({"ck/metadata": "{}"}, "no committed batch"),
        ({"ck/offsets/0": "v9\n{}\n{}", "ck/commits/0": "v1"}, "version v9 is not supported"),
        ({"ck/offsets/0": "v1\n{}\n{not json", "ck/commits/0": "v1"}, "not JSON"),
        ({"ck/offsets/0": 'v1\n{}\n{"t":{"0":-1}}', "ck/commits/0": "v1"}, "not a resolved position"),
        ({"ck/offsets/0": "garbage", "ck/commits/0": "v1"}, "expected a version line"),
        ({"ck/commits/3": "v1", "ck/offsets/1": offsets('{"t":{"0":1}}')}, "offsets file is missing"),
    ],
)
def test_unreadable_or_malformed_checkpoints_raise_naming_the_file(tree: dict[str, str], message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint_position(MemoryFiles(tree), "ck")
