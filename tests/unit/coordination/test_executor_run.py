"""ControllerExecutor.run: effects carried out in order against ZooKeeper (fenced), view
updates applied, partition state writes that adopt an existing znode, re-decide after a lost
conditional write or give up, and requests resolved from the view when they are reached."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination import requests
from headwater.coordination import results as r
from headwater.coordination.executor import MAX_WRITE_ATTEMPTS
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.coordination.partitions import Plan, RemoveFromIsr

from .executor_harness import Harness, harness
from .helpers import lai, reg

T0 = ("t", 0)


def loaded(**kw: object) -> Harness:
    h = harness(topics={"t": {0: (1, 2, 3)}}, **kw)  # type: ignore[arg-type]
    h.ctx.apply(r.SetLiveBrokers(tuple(h.zk.brokers.values())))
    h.ctx.apply(r.AddPartitions("t", {0: (1, 2, 3)}))
    h.ctx.apply(r.LoadStates({T0: h.zk.states[T0]}))
    return h


def shrink(h: Harness, broker: int) -> r.UpdatePartitionState:
    plan = Plan(h.ctx)
    plan.elect([T0], RemoveFromIsr(broker, h.ctx.controller_epoch))
    (write,) = plan.result().of(r.UpdatePartitionState)
    return write


def test_view_updates_change_the_context() -> None:
    h = harness()
    h.executor.run(
        r.ControllerResult((r.SetLiveBrokers((reg(2),)), r.AddPartitions("x", {0: (2,)})))
    )
    assert list(h.ctx.live_brokers) == [2]
    assert h.ctx.assignments == {"x": {0: (2,)}}


def test_sender_changes() -> None:
    h = harness()
    h.executor.run(r.ControllerResult((r.AddBroker(reg(4)), r.RemoveBroker(2))))
    assert h.sender.log == [("add", 4), ("remove", 2)]


def test_a_decided_write_lands_as_predicted() -> None:
    h = loaded()
    write = shrink(h, 3)
    written = h.executor.run(r.ControllerResult((write,)))
    assert written == {T0}
    assert h.zk.states[T0] == h.ctx.states[T0]
    assert h.ctx.states[T0].isr == (1, 2) and h.ctx.states[T0].zk_version == 1


def test_a_lost_write_is_decided_again_on_the_fresh_state() -> None:
    h = loaded()
    write = shrink(h, 3)
    # The leader shrank broker 2 out meanwhile.
    h.zk.race(T0, lai(1, (1, 3)))
    assert h.executor.run(r.ControllerResult((write,))) == {T0}
    assert h.zk.states[T0].isr == (1,)
    assert h.zk.states[T0].zk_version == 2
    assert [w[0] for w in h.zk.writes if w[0] in ("conflict", "update")] == ["conflict", "update"]


def test_a_write_whose_reason_went_away_is_dropped() -> None:
    h = loaded()
    write = shrink(h, 3)
    h.zk.race(T0, lai(1, (1, 2)))  # the leader removed 3 itself
    assert h.executor.run(r.ControllerResult((write, r.Announce((T0,))))) == set()
    assert h.ctx.states[T0].isr == (1, 2)  # the fresh state is cached
    assert h.sender.sent() == []  # nothing written, nothing announced


def test_gives_up_after_max_attempts() -> None:
    h = loaded()
    write = shrink(h, 3)
    for _ in range(MAX_WRITE_ATTEMPTS):
        h.zk.race(T0, lai(1, (1, 2, 3)))
    assert h.executor.run(r.ControllerResult((write,))) == set()
    conflicts = [w for w in h.zk.writes if w[0] == "conflict"]
    assert len(conflicts) == MAX_WRITE_ATTEMPTS


def test_a_view_that_moved_on_is_not_overwritten_with_the_stale_decision() -> None:
    h = loaded()
    write = shrink(h, 3)
    # Another result re-read the partition before this write was reached.
    fresh = h.zk.put_state(T0, lai(1, (1, 2, 3), leader_epoch=5))
    h.ctx.record_state(T0, fresh)
    h.executor.run(r.ControllerResult((write,)))
    assert h.zk.states[T0].leader_epoch == 6 and h.zk.states[T0].isr == (1, 2)


def test_a_vanished_state_is_not_written() -> None:
    h = loaded()
    write = shrink(h, 3)
    del h.zk.states[T0]
    before = h.ctx.states[T0]
    assert h.executor.run(r.ControllerResult((write,))) == set()
    assert h.ctx.states[T0] == before  # the topic watch will forget it


def test_create_writes_a_new_state() -> None:
    h = loaded()
    state = lai(2, (2, 3), controller_epoch=h.ctx.controller_epoch, zk_version=-1)
    assert h.executor.run(r.ControllerResult((r.CreatePartitionState(("t", 1), state),))) == {
        ("t", 1)
    }
    assert h.ctx.states[("t", 1)].zk_version == 0


def test_create_adopts_an_existing_state() -> None:
    h = loaded()
    existing = h.zk.states[T0]
    state = lai(3, (3,), zk_version=-1)
    assert h.executor.run(r.ControllerResult((r.CreatePartitionState(T0, state),))) == {T0}
    assert h.ctx.states[T0] == existing


def test_fenced_writes_raise_stale_controller_epoch() -> None:
    h = loaded()
    write = shrink(h, 3)
    h.zk.elect_other_controller()
    for effect in (
        write,
        r.CreatePartitionState(("t", 5), lai(1, (1,))),
        r.DeleteTopicZnodes("t"),
        r.RemoveDeletionMarker("t"),
        r.DeleteIsrChangeNotifications(("n",)),
        r.DeletePreferredElection(),
    ):
        with pytest.raises(errors.StaleControllerEpochError):
            h.executor.run(r.ControllerResult((effect,)))


def test_znode_deletions() -> None:
    h = loaded()
    h.zk.deletions = ["t", "ghost"]
    h.zk.isr_notes = {"n1": [T0], "n2": []}
    h.zk.preferred = []
    h.executor.run(
        r.ControllerResult(
            (
                r.DeleteTopicZnodes("t"),
                r.RemoveDeletionMarker("ghost"),
                r.DeleteIsrChangeNotifications(("n1", "n2")),
                r.DeletePreferredElection(),
            )
        )
    )
    assert h.zk.topics == {} and h.zk.states == {} and h.zk.deletions == []
    assert h.zk.isr_notes == {} and h.zk.preferred is None


def test_announce_sends_the_states_written_since_the_previous_one() -> None:
    h = loaded()
    first = shrink(h, 3)
    h.executor.run(r.ControllerResult((first, r.Announce((T0,)))))
    expected = [PartitionState("t", 0, h.ctx.states[T0], (1, 2, 3))]
    lais = h.sender.sent(requests.LeaderAndIsrRequest)
    ums = h.sender.sent(requests.UpdateMetadataRequest)
    assert [b for b, _ in lais] == [1, 2, 3]
    assert all(list(req.states) == expected for _, req in lais + ums)
    assert [b for b, _ in ums] == [1, 2, 3]


def test_announce_keeps_every_write_of_a_partition_in_order() -> None:
    h = loaded()
    plan = Plan(h.ctx)
    plan.elect([T0], RemoveFromIsr(3, h.ctx.controller_epoch))
    plan.elect([T0], RemoveFromIsr(2, h.ctx.controller_epoch))
    plan.add(r.Announce((T0, T0)))
    h.executor.run(plan.result())
    (_, req), *_ = h.sender.sent(requests.LeaderAndIsrRequest)
    assert [s.leader_and_isr.isr for s in req.states] == [(1, 2), (1,)]


def test_a_second_announce_only_sends_newer_writes() -> None:
    h = loaded()
    plan = Plan(h.ctx)
    plan.elect([T0], RemoveFromIsr(3, h.ctx.controller_epoch))
    plan.add(r.Announce((T0,)))
    plan.add(r.Announce((T0,)))
    h.executor.run(plan.result())
    assert len(h.sender.sent(requests.UpdateMetadataRequest)) == 3


def test_announce_of_nothing_written_sends_nothing() -> None:
    h = loaded()
    h.executor.run(r.ControllerResult((r.Announce((T0,)),)))
    assert h.sender.sent() == []


def test_requests_carry_the_state_as_it_is_when_reached() -> None:
    h = loaded()
    write = shrink(h, 3)
    h.executor.run(
        r.ControllerResult(
            (
                r.SendUpdateMetadata((T0,)),
                write,
                r.SendLeaderAndIsr((T0,), to=frozenset({2})),
                r.SendUpdateMetadata((), deleted_topics=("old",)),
                r.SendStopReplica(3, (T0,), delete=False),
            )
        )
    )
    um_before = h.sender.sent(requests.UpdateMetadataRequest)[0][1]
    assert um_before.states[0].leader_and_isr.isr == (1, 2, 3)
    ((to, lai_req),) = h.sender.sent(requests.LeaderAndIsrRequest)
    assert to == 2 and lai_req.states[0].leader_and_isr.isr == (1, 2)
    um_deleted = h.sender.sent(requests.UpdateMetadataRequest)[-1][1]
    assert um_deleted.deleted_topics == ("old",) and um_deleted.states == ()
    ((b, stop),) = h.sender.sent(requests.StopReplicaRequest)
    assert b == 3 and stop == requests.StopReplicaRequest(h.ctx.controller_epoch, (T0,), False)


def test_an_unknown_effect_is_refused() -> None:
    with pytest.raises(TypeError):
        harness().executor.run(r.ControllerResult((object(),)))  # type: ignore[arg-type]


def test_state_written_equals_state_predicted() -> None:
    h = loaded()
    plan = Plan(h.ctx)
    plan.elect([T0], RemoveFromIsr(3, h.ctx.controller_epoch))
    plan.elect([T0], RemoveFromIsr(2, h.ctx.controller_epoch))
    h.executor.run(plan.result())
    assert h.ctx == plan.view
    assert isinstance(h.zk.states[T0], LeaderAndIsr)
