"""ControllerResult values: concatenation, emptiness, selecting effects by kind, and equality
of effects (a write's election is not part of its identity)."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.partitions import PreferredElection, RemoveFromIsr

from .helpers import lai, reg

TP = ("orders", 0)


def test_empty_result_is_falsy_and_has_no_effects() -> None:
    assert not r.EMPTY
    assert r.EMPTY.effects == ()
    assert r.ControllerResult() == r.EMPTY


def test_a_result_with_effects_is_truthy() -> None:
    assert r.ControllerResult((r.DeletePreferredElection(),))


def test_adding_results_keeps_order() -> None:
    a = r.ControllerResult((r.AddBroker(reg(1)), r.RemoveBroker(2)))
    b = r.ControllerResult((r.SendStopReplica(1, (TP,), delete=False),))
    assert (a + b).effects == a.effects + b.effects
    assert (b + a).effects == b.effects + a.effects
    assert a + r.EMPTY == a


def test_of_selects_one_kind_in_order() -> None:
    result = r.ControllerResult(
        (
            r.SendUpdateMetadata((TP,)),
            r.RemoveDeletionMarker("a"),
            r.SendUpdateMetadata(()),
            r.RemoveDeletionMarker("b"),
        )
    )
    assert result.of(r.RemoveDeletionMarker) == [
        r.RemoveDeletionMarker("a"),
        r.RemoveDeletionMarker("b"),
    ]
    assert len(result.of(r.SendUpdateMetadata)) == 2
    assert result.of(r.Announce) == []


def test_update_equality_ignores_the_election() -> None:
    base = lai(1, (1, 2))
    state = lai(2, (1, 2), leader_epoch=1)
    a = r.UpdatePartitionState(TP, base, state, PreferredElection(frozenset({2}), 3))
    b = r.UpdatePartitionState(TP, base, state, RemoveFromIsr(1, 3))
    assert a == b
    assert a != r.UpdatePartitionState(TP, state, state, RemoveFromIsr(1, 3))


def test_effects_are_immutable_values() -> None:
    effect = r.SendLeaderAndIsr((TP,), to=frozenset({1}))
    assert effect == r.SendLeaderAndIsr((TP,), to=frozenset({1}))
    assert hash(effect) == hash(r.SendLeaderAndIsr((TP,), to=frozenset({1})))
    assert r.SendLeaderAndIsr((TP,)).to is None
    assert r.SendUpdateMetadata((TP,)).deleted_topics == ()
