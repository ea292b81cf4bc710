"""The topic-change decision: topics gone from /brokers/topics are forgotten, new ones are
loaded with whatever states ZooKeeper already holds, and their partitions without state get
an initial leader and ISR, announced to brokers."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.topics import TopicSnapshot, on_topic_change, topics_to_load

from .helpers import EPOCH, ORDERS, lai, view


def test_topics_to_load_are_the_unknown_ones_sorted() -> None:
    ctx = view(topics=ORDERS)
    assert topics_to_load(ctx, ["orders", "z", "a"]) == ["a", "z"]
    assert topics_to_load(ctx, ["orders"]) == []


def test_no_change_decides_nothing() -> None:
    assert on_topic_change(view(topics=ORDERS), ["orders"], {}) == r.EMPTY


def test_a_gone_topic_is_forgotten() -> None:
    result = on_topic_change(view(topics=ORDERS), [], {})
    assert result.effects == (r.ForgetTopic("orders"),)


def test_a_new_topic_is_loaded_created_and_announced() -> None:
    snapshot = TopicSnapshot({0: (1, 2), 1: (2, 3)})
    result = on_topic_change(view(), ["t"], {"t": snapshot})
    assert result.effects == (
        r.AddPartitions("t", {0: (1, 2), 1: (2, 3)}),
        r.CreatePartitionState(
            ("t", 0), lai(1, (1, 2), controller_epoch=EPOCH.epoch, zk_version=-1)
        ),
        r.CreatePartitionState(
            ("t", 1), lai(2, (2, 3), controller_epoch=EPOCH.epoch, zk_version=-1)
        ),
        r.Announce((("t", 0), ("t", 1))),
    )


def test_existing_states_are_loaded_not_created() -> None:
    known = lai(2, (2, 1), leader_epoch=3, zk_version=4)
    snapshot = TopicSnapshot({0: (1, 2), 1: (2, 1)}, {1: known})
    result = on_topic_change(view(), ["t"], {"t": snapshot})
    assert r.LoadStates({("t", 1): known}) in result.effects
    assert [c.topic_partition for c in result.of(r.CreatePartitionState)] == [("t", 0)]
    assert result.effects[-1] == r.Announce((("t", 0),))


def test_a_topic_that_vanished_before_it_was_read_is_skipped() -> None:
    assert on_topic_change(view(), ["t"], {}) == r.EMPTY


def test_a_new_topic_on_dead_brokers_is_loaded_but_waits_for_a_replica() -> None:
    result = on_topic_change(view(brokers=(1,)), ["t"], {"t": TopicSnapshot({0: (5, 6)})})
    assert result.effects == (r.AddPartitions("t", {0: (5, 6)}),)


def test_replicas_shutting_down_do_not_become_initial_leaders() -> None:
    result = on_topic_change(view(shutting_down=(1,)), ["t"], {"t": TopicSnapshot({0: (1, 2)})})
    (create,) = result.of(r.CreatePartitionState)
    assert (create.state.leader, create.state.isr) == (2, (2,))


def test_forget_and_create_in_one_event() -> None:
    result = on_topic_change(view(topics=ORDERS), ["new"], {"new": TopicSnapshot({0: (3,)})})
    assert result.effects[0] == r.ForgetTopic("orders")
    assert result.effects[-1] == r.Announce((("new", 0),))


def test_a_topic_created_again_is_forgotten_then_loaded_with_its_new_id() -> None:
    """Deleting forgets the topic (and its id); its next znode is a new topic, new id."""
    ctx = view()
    ctx.apply(r.AddPartitions("t", {0: (1, 2)}, "AAAAAAAAAAAAAAAAAAAAAg"))
    assert on_topic_change(ctx, [], {}).effects == (r.ForgetTopic("t"),)
    ctx.apply(r.ForgetTopic("t"))
    assert ctx.topic_ids == {}
    again = TopicSnapshot({0: (1, 2)}, topic_id="AAAAAAAAAAAAAAAAAAAAAw")
    result = on_topic_change(ctx, ["t"], {"t": again})
    assert result.effects[0] == r.AddPartitions("t", {0: (1, 2)}, "AAAAAAAAAAAAAAAAAAAAAw")
