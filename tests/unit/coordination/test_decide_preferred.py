"""Preferred leader elections on request: the request is split into known and unknown
partitions, fresh states are loaded, preferred replicas that can lead are elected and
announced, the ZooKeeper request is deleted, and each partition gets its error code."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.decisions.leaders import (
    on_preferred_election,
    preferred_election_errors,
    preferred_targets,
)
from headwater.errors import ErrorCode

from .helpers import lai, view

TOPICS = {"t": {0: (1, 2), 1: (2, 1), 2: (3, 1)}, "del": {0: (1, 2)}}
# t-0 led by its non-preferred replica 2; t-1 balanced; t-2's preferred replica 3 is out of sync.
STATES = {
    ("t", 0): lai(2, (1, 2)),
    ("t", 1): lai(2, (2, 1)),
    ("t", 2): lai(1, (1,)),
    ("del", 0): lai(2, (1, 2)),
}


def ctx() -> ControllerContext:
    return view(topics=TOPICS, states=STATES, deleting=("del",))


def test_targets_default_to_every_partition() -> None:
    valid, unknown = preferred_targets(ctx(), None)
    assert valid == [("t", 0), ("t", 1), ("t", 2)]
    assert unknown == [("del", 0)]


def test_targets_of_a_request() -> None:
    valid, unknown = preferred_targets(ctx(), [("t", 1), ("x", 0), ("t", 9)])
    assert valid == [("t", 1)]
    assert unknown == [("x", 0), ("t", 9)]


def test_election_moves_only_what_can_move() -> None:
    result = on_preferred_election(ctx(), [("t", 0), ("t", 1), ("t", 2)], fresh={}, from_zk=False)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.topic_partition == ("t", 0) and update.state.leader == 1
    assert result.effects[-1] == r.Announce((("t", 0),))


def test_fresh_states_are_decided_on() -> None:
    # The leader of t-2 let broker 3 back into the ISR since the controller cached it.
    fresh = {("t", 2): lai(1, (1, 3), zk_version=1)}
    result = on_preferred_election(ctx(), [("t", 2)], fresh=fresh, from_zk=False)
    assert result.effects[0] == r.LoadStates(fresh)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.base == fresh[("t", 2)] and update.state.leader == 3


def test_a_request_from_zookeeper_is_deleted_even_when_nothing_moves() -> None:
    result = on_preferred_election(ctx(), [("t", 1)], fresh={}, from_zk=True)
    assert result.effects == (r.DeletePreferredElection(),)


def test_nothing_to_do() -> None:
    assert on_preferred_election(ctx(), [], fresh={}, from_zk=False) == r.EMPTY


def test_error_codes() -> None:
    c = ctx()
    errors = preferred_election_errors(
        c, [("t", 0), ("t", 1), ("t", 2)], [("del", 0)], written={("t", 0)}
    )
    assert errors == {
        ("del", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 2): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    }


def test_a_partition_whose_write_was_given_up_is_not_available() -> None:
    errors = preferred_election_errors(ctx(), [("t", 0)], [], written=set())
    assert errors == {("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
