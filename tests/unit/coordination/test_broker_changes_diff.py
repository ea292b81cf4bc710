"""broker_changes: dead, new and bounced brokers (a new registration epoch) between the
controller's live set and /brokers/ids."""

from __future__ import annotations

import dataclasses

from headwater.coordination.decisions.brokers import BrokerChanges, broker_changes

from .helpers import reg


def regs(*ids: int, bounced: tuple[int, ...] = ()) -> dict:
    return {b: reg(b, epoch=999 if b in bounced else None) for b in ids}


def test_no_change() -> None:
    changes = broker_changes(regs(1, 2), regs(1, 2))
    assert changes == BrokerChanges((), (), ())
    assert not changes


def test_dead_and_new_are_sorted() -> None:
    changes = broker_changes(regs(3, 1, 2), regs(2, 5, 4))
    assert changes == BrokerChanges(dead=(1, 3), new=(4, 5), bounced=())
    assert changes


def test_a_new_epoch_is_a_bounce() -> None:
    changes = broker_changes(regs(1, 2, 3), regs(1, 2, 3, bounced=(3, 1)))
    assert changes == BrokerChanges(dead=(), new=(), bounced=(1, 3))


def test_a_changed_host_with_the_same_epoch_is_not_a_bounce() -> None:
    moved = {1: dataclasses.replace(reg(1), host="10.0.0.1")}
    assert not broker_changes(regs(1), moved)


def test_everything_at_once() -> None:
    changes = broker_changes(regs(1, 2, 3), regs(2, 3, 4, bounced=(2,)))
    assert changes == BrokerChanges(dead=(1,), new=(4,), bounced=(2,))
