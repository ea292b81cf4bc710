"""Subscription state: assign vs subscribe, positions and their epochs, resets, pause."""

from __future__ import annotations

import pytest
from headwater.client.subscription import NoCommittedOffsets, SubscriptionState
from headwater.client.types import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def test_assign_keeps_positions_of_kept_partitions() -> None:
    s = SubscriptionState(default_reset="latest")
    s.assign([A, B])
    s.seek(A, 5)
    s.assign([A])
    assert s.position(A) == 5
    assert s.assignment() == {A}
    with pytest.raises(ValueError, match="not assigned"):
        s.position(B)


def test_assign_and_subscribe_are_exclusive() -> None:
    s = SubscriptionState(default_reset="latest")
    s.assign([A])
    with pytest.raises(ValueError, match="unsubscribe"):
        s.subscribe(["t"])
    s.unsubscribe()
    s.subscribe(pattern=r"t.*")
    assert s.matches("tx") and not s.matches("x")
    with pytest.raises(ValueError, match="unsubscribe"):
        s.assign([A])


def test_seek_bumps_epoch_and_advance_checks_expected() -> None:
    s = SubscriptionState(default_reset="latest")
    s.assign([A])
    assert s.missing_positions() == [A]
    s.seek(A, 10)
    e = s.epoch(A)
    assert s.fetchable() == {A: (10, e)}
    assert s.advance(A, expected=10, to=15)
    assert not s.advance(A, expected=10, to=20)  # someone sought meanwhile
    s.seek(A, 0)
    assert s.epoch(A) != e


def test_reset_request_clears_position() -> None:
    s = SubscriptionState(default_reset="latest")
    s.assign([A])
    s.seek(A, 3)
    s.request_reset([A], "earliest")
    assert s.position(A) is None and s.pending_reset(A) == "earliest"
    s.seek(A, 0)
    assert s.pending_reset(A) is None


def test_paused_partitions_are_not_fetchable() -> None:
    s = SubscriptionState(default_reset="latest")
    s.assign([A, B])
    s.seek(A, 0)
    s.seek(B, 0)
    s.pause([A])
    assert set(s.fetchable()) == {B} and s.paused() == {A}
    s.resume([A])
    assert set(s.fetchable()) == {A, B}


def test_no_committed_offsets() -> None:
    assert NoCommittedOffsets().committed([A]) == {A: None}
