"""The invariant checker's oracle for the share group (no Kafka: its knowledge set by hand)."""
from __future__ import annotations

from spark_purge.testing.invariants import InvariantWorkload

TP = ("inv-b", 0)


def _oracle(joined: int, accepted: set[int], floor: int | None) -> InvariantWorkload:
    oracle = object.__new__(InvariantWorkload)  # only the share group's knowledge is read
    oracle.share_joined = {TP: joined}
    oracle.share_accepted = {TP: accepted}
    oracle.log_floor = {} if floor is None else {TP: floor}
    return oracle


def test_the_share_group_holds_at_its_first_unaccepted_record() -> None:
    assert _oracle(0, set(range(0, 111)) | set(range(120, 130)), floor=50)._share_position(TP) == 111
    assert _oracle(5, set(range(5, 9)), floor=None)._share_position(TP) == 9


def test_records_gone_from_the_log_no_longer_hold_the_share_group() -> None:
    # Kafka deleted 111-294 itself (tiered storage disabled with `delete`): its share group
    # moved up to the log start, and the consumer accepted 295-698 since.
    accepted = set(range(0, 111)) | set(range(295, 699))
    assert _oracle(0, accepted, floor=295)._share_position(TP) == 699
    # A log start under the first unaccepted record changes nothing.
    assert _oracle(0, accepted, floor=100)._share_position(TP) == 111
