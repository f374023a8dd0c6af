"""``spark_purge._gc.gc_paused``: the cyclic collector off inside, back as it was after."""
from __future__ import annotations

import gc

import pytest

from spark_purge._gc import gc_paused


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_and_on_after():
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_blocks_leave_it_off_until_the_outermost_ends():
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_on_after_an_error():
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_left_off_when_it_was_off_before():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_the_clients_snapshot_decodes_with_the_collector_paused(monkeypatch):
    from types import SimpleNamespace

    from spark_purge.kafka import client as client_module

    seen = []

    def fake_take_snapshot(*args):
        seen.append(gc.isenabled())
        return "snapshot"

    monkeypatch.setattr(client_module, "take_snapshot", fake_take_snapshot)
    wire = SimpleNamespace(run=lambda fn, *args: fn(*args))
    fake = SimpleNamespace(wire=wire, config=None, _offsets=None, _groups=None)
    assert client_module.KafkaPythonClient.snapshot(fake) == "snapshot"  # type: ignore[arg-type]
    assert seen == [False]
    assert gc.isenabled()
