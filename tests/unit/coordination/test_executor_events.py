"""The executor's event handlers end to end over in-memory ZooKeeper: what each reads (and
which watches it re-arms), and what ZooKeeper, the view and the brokers end up with, for a
failover, broker changes, topics created, grown and deleted, ISR changes, controlled
shutdown and preferred elections."""

from __future__ import annotations

from headwater.coordination import requests
from headwater.coordination.model import NO_LEADER, LeaderAndIsr, new_topic_id
from headwater.errors import ErrorCode

from .executor_harness import Harness, harness
from .helpers import ORDERS, reg


def active(**kw: object) -> Harness:
    h = harness(**kw)  # type: ignore[arg-type]
    h.executor.on_failover()
    h.sender.log.clear()
    h.zk.watched.clear()
    return h


def leaders(h: Harness) -> dict[tuple[str, int], int]:
    return {tp: s.leader for tp, s in sorted(h.zk.states.items())}


def test_failover_loads_zookeeper_and_tells_every_broker() -> None:
    h = harness(topics=ORDERS)
    h.executor.on_failover()
    assert h.ctx.cluster_id == "cluster-1"
    assert set(h.ctx.live_brokers) == {1, 2, 3}
    assert h.ctx.states == h.zk.states
    assert h.zk.watched == [
        "brokers",
        "topics",
        "topic:orders",
        "deletions",
        "isr_changes",
        "preferred",
    ]
    assert h.sender.log[:3] == [("add", 1), ("add", 2), ("add", 3)]
    assert len(h.sender.sent(requests.UpdateMetadataRequest)) == 3
    assert len(h.sender.sent(requests.LeaderAndIsrRequest)) == 3


def test_failover_repairs_a_partition_whose_leader_died_meanwhile() -> None:
    h = harness(brokers=(2, 3), topics=ORDERS)
    h.executor.on_failover()
    assert leaders(h)[("orders", 0)] == 2
    assert h.zk.states[("orders", 0)].isr == (2, 3)


def test_failover_creates_missing_states() -> None:
    h = harness(topics=ORDERS, states={})
    h.zk.states.clear()
    h.executor.on_failover()
    assert leaders(h) == {("orders", 0): 1, ("orders", 1): 2, ("orders", 2): 3}


def test_failover_runs_pending_deletions_isr_changes_and_elections() -> None:
    h = harness(topics={**ORDERS, "gone": {0: (1,)}})
    h.zk.deletions = ["gone"]
    h.zk.isr_notes = {"isr_change_1": [("orders", 1)]}
    h.zk.put_state(("orders", 0), LeaderAndIsr(2, 1, (1, 2, 3), 0))
    h.zk.preferred = []
    h.executor.on_failover()
    assert "gone" not in h.zk.topics and h.zk.isr_notes == {} and h.zk.preferred is None
    assert leaders(h)[("orders", 0)] == 1


def test_broker_death() -> None:
    h = active(topics=ORDERS)
    del h.zk.brokers[1]
    h.executor.on_broker_change()
    assert h.zk.watched == ["brokers"]
    assert leaders(h)[("orders", 0)] == 2
    assert all(1 not in s.isr for s in h.zk.states.values())
    assert ("remove", 1) in h.sender.log


def test_broker_death_with_nothing_left_to_lead() -> None:
    h = active(topics={"t": {0: (1,)}})
    del h.zk.brokers[1]
    h.executor.on_broker_change()
    assert h.zk.states[("t", 0)].leader == NO_LEADER


def test_spurious_broker_watch_changes_nothing() -> None:
    h = active(topics=ORDERS)
    before = dict(h.zk.states)
    h.executor.on_broker_change()
    assert h.zk.states == before and h.sender.log == []


def test_broker_returns_and_leaderless_partition_recovers() -> None:
    h = active(topics={"t": {0: (1,)}})
    gone = h.zk.brokers.pop(1)
    h.executor.on_broker_change()
    h.zk.brokers[1] = reg(1, epoch=gone.epoch + 1000)
    h.executor.on_broker_change()
    assert h.zk.states[("t", 0)].leader == 1
    assert h.zk.states[("t", 0)].leader_epoch == 2


def test_new_topic() -> None:
    h = active()
    h.zk.topics["t"] = {0: (1, 2), 1: (2, 3)}
    h.executor.on_topic_change()
    assert h.zk.watched == ["topics", "topic:t"]
    assert leaders(h) == {("t", 0): 1, ("t", 1): 2}
    assert {b for b, _ in h.sender.sent(requests.LeaderAndIsrRequest)} == {1, 2, 3}


def _ids_sent(h: Harness, kind: type) -> set[tuple[str, str]]:
    return {(s.topic, s.topic_id) for _, req in h.sender.sent(kind) for s in req.states}


def test_every_broker_is_sent_the_id_in_the_topic_znode() -> None:
    h = harness(topics=ORDERS)
    h.zk.topic_ids["orders"] = tid = new_topic_id()
    h.executor.on_failover()
    assert h.ctx.topic_ids == {"orders": tid}
    assert _ids_sent(h, requests.UpdateMetadataRequest) == {("orders", tid)}
    assert _ids_sent(h, requests.LeaderAndIsrRequest) == {("orders", tid)}
    assert ("topic_id", "orders") not in h.zk.writes  # it had one: nothing written


def test_a_topic_created_before_ids_is_given_one_once_on_failover() -> None:
    h = harness(topics=ORDERS)
    h.zk.topic_ids["orders"] = ""
    h.executor.on_failover()
    tid = h.zk.topic_ids["orders"]
    assert tid and h.ctx.topic_ids == {"orders": tid}
    assert h.zk.writes.count(("topic_id", "orders")) == 1
    assert _ids_sent(h, requests.UpdateMetadataRequest) == {("orders", tid)}
    h.executor.on_failover()  # a later controller reads the id written
    assert h.zk.topic_ids["orders"] == tid and h.zk.writes.count(("topic_id", "orders")) == 1


def test_a_topic_created_again_is_announced_with_its_new_id() -> None:
    h = active(topics=ORDERS)
    old = h.zk.topic_ids["orders"]
    h.zk.deletions = ["orders"]
    h.executor.on_topic_deletion()
    assert "orders" not in h.ctx.topic_ids
    h.executor.on_topic_change()
    h.zk.topics["orders"] = {0: (1, 2)}
    h.zk.topic_ids["orders"] = new = new_topic_id()
    h.sender.log.clear()
    h.executor.on_topic_change()
    assert new != old and h.ctx.topic_ids == {"orders": new}
    assert _ids_sent(h, requests.UpdateMetadataRequest) == {("orders", new)}
    # the added partitions of a known topic keep its id
    h.zk.topics["orders"][1] = (2, 3)
    h.sender.log.clear()
    h.executor.on_partition_modifications("orders")
    assert _ids_sent(h, requests.LeaderAndIsrRequest) == {("orders", new)}


def test_topic_znode_gone_before_it_was_read() -> None:
    h = active(topics=ORDERS)
    h.zk.topics.pop("orders")
    h.executor.on_topic_change()
    assert "orders" not in h.ctx.assignments


def test_added_partitions() -> None:
    h = active(topics=ORDERS)
    h.zk.topics["orders"][3] = (1, 2, 3)
    h.executor.on_partition_modifications("orders")
    assert h.zk.watched == ["topic:orders"]
    assert leaders(h)[("orders", 3)] == 1
    assert h.ctx.replicas(("orders", 3)) == (1, 2, 3)


def test_added_partitions_of_a_vanished_topic() -> None:
    h = active(topics=ORDERS)
    h.zk.topics.pop("orders")
    h.executor.on_partition_modifications("orders")
    assert h.sender.log == []


def test_topic_deletion() -> None:
    h = active(topics={**ORDERS, "keep": {0: (2,)}})
    h.zk.deletions = ["orders", "ghost"]
    h.executor.on_topic_deletion()
    assert list(h.zk.topics) == ["keep"]
    assert h.zk.deletions == []
    assert list(h.ctx.assignments) == ["keep"]
    stops = h.sender.sent(requests.StopReplicaRequest)
    assert sorted(b for b, _ in stops) == [1, 2, 3] and all(s.delete for _, s in stops)


def test_deletion_marker_of_a_topic_not_loaded_yet_is_kept() -> None:
    h = active()
    h.zk.topics["late"] = {0: (1,)}
    h.zk.deletions = ["late"]
    h.executor.on_topic_deletion()
    assert h.zk.deletions == ["late"]


def test_isr_change_notifications() -> None:
    h = active(topics=ORDERS)
    h.zk.put_state(("orders", 1), LeaderAndIsr(2, 0, (2,), 0))
    h.zk.isr_notes = {"isr_change_1": [("orders", 1), ("gone", 0)]}
    h.executor.on_isr_change()
    assert h.ctx.states[("orders", 1)].isr == (2,)
    assert h.zk.isr_notes == {}
    ums = h.sender.sent(requests.UpdateMetadataRequest)
    assert [s.key for s in ums[0][1].states] == [("orders", 1)]


def test_no_isr_change_notifications() -> None:
    h = active(topics=ORDERS)
    h.executor.on_isr_change()
    assert h.sender.log == [] and h.zk.watched == ["isr_changes"]


def test_controlled_shutdown_answers_what_is_still_led() -> None:
    h = active(topics={**ORDERS, "single": {0: (1,)}})
    assert h.executor.controlled_shutdown(1, 101) == []
    assert all(s.leader != 1 for tp, s in h.zk.states.items() if tp[0] == "orders")
    assert h.zk.states[("single", 0)].leader == 1
    assert h.ctx.shutting_down == {1}


def test_controlled_shutdown_when_no_successor_is_in_sync() -> None:
    h = active(topics={"t": {0: (1, 2)}}, states={("t", 0): LeaderAndIsr(1, 0, (1,), 0)})
    assert h.executor.controlled_shutdown(1, 101) == [("t", 0)]


def test_preferred_election_on_request() -> None:
    h = active(topics=ORDERS)
    h.zk.put_state(("orders", 0), LeaderAndIsr(2, 1, (1, 2, 3), 0))
    h.ctx.record_state(("orders", 0), h.zk.states[("orders", 0)])
    out = h.executor.preferred_election([("orders", 0), ("orders", 1), ("x", 0)])
    assert out == {
        ("orders", 0): ErrorCode.NONE,
        ("orders", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert leaders(h)[("orders", 0)] == 1


def test_preferred_election_reads_fresh_states_first() -> None:
    h = active(topics={"t": {0: (1, 2)}}, states={("t", 0): LeaderAndIsr(2, 0, (2,), 0)})
    h.zk.put_state(("t", 0), LeaderAndIsr(2, 0, (2, 1), 0))  # 1 caught up; cache is stale
    assert h.executor.preferred_election(None) == {("t", 0): ErrorCode.NONE}


def test_preferred_election_from_zookeeper() -> None:
    h = active(topics=ORDERS)
    h.zk.put_state(("orders", 2), LeaderAndIsr(1, 1, (1, 2, 3), 0))
    h.zk.preferred = [("orders", 2)]
    out = h.executor.preferred_election(None, from_zk=True)
    assert out == {("orders", 2): ErrorCode.NONE}
    assert h.zk.preferred is None and h.zk.watched == ["preferred"]


def test_preferred_election_from_zookeeper_already_handled() -> None:
    h = active(topics=ORDERS)
    assert h.executor.preferred_election(None, from_zk=True) == {}


def test_auto_rebalance() -> None:
    h = active(topics=ORDERS)
    h.zk.put_state(("orders", 1), LeaderAndIsr(3, 1, (1, 2, 3), 0))
    h.ctx.record_state(("orders", 1), h.zk.states[("orders", 1)])
    h.executor.auto_rebalance()
    assert leaders(h)[("orders", 1)] == 2


def test_unclean_election_is_a_setting() -> None:
    topics = {"t": {0: (1, 2)}}
    states = {("t", 0): LeaderAndIsr(1, 0, (1,), 0)}
    for unclean, leader in ((False, NO_LEADER), (True, 2)):
        h = active(topics=topics, states=states, unclean=unclean)
        del h.zk.brokers[1]
        h.executor.on_broker_change()
        assert h.zk.states[("t", 0)].leader == leader
