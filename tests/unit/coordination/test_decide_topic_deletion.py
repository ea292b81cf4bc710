"""The topic-deletion decision: a marked topic is first named deleted in UpdateMetadata,
then gets StopReplica (delete) on its live replicas, its znodes removed and is forgotten;
markers of unknown topics are dropped unless the topic exists after all."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.topics import on_topic_deletion, unknown_deletions

from .helpers import ORDERS, view

TOPICS = {**ORDERS, "keep": {0: (1,)}}


def test_unknown_deletions() -> None:
    assert unknown_deletions(view(topics=TOPICS), ["x", "orders", "a"]) == ["x", "a"]


def test_no_markers_no_effects() -> None:
    assert on_topic_deletion(view(topics=TOPICS), []) == r.EMPTY


def test_deleting_a_known_topic() -> None:
    result = on_topic_deletion(view(topics=TOPICS), ["orders"])
    all3 = (("orders", 0), ("orders", 1), ("orders", 2))
    assert result.effects == (
        r.MarkTopicDeleting("orders"),
        r.SendUpdateMetadata((), deleted_topics=("orders",)),
        r.SendStopReplica(1, all3, delete=True),
        r.SendStopReplica(2, all3, delete=True),
        r.SendStopReplica(3, all3, delete=True),
        r.DeleteTopicZnodes("orders"),
        r.ForgetTopic("orders"),
    )


def test_brokers_learn_of_the_deletion_before_their_logs_are_deleted() -> None:
    """A broker's requests are sent in order: a slow log deletion must not hold up its metadata."""
    effects = on_topic_deletion(view(topics=TOPICS), ["orders"]).effects
    first_stop = next(i for i, e in enumerate(effects) if isinstance(e, r.SendStopReplica))
    deleted = [
        i
        for i, e in enumerate(effects)
        if isinstance(e, r.SendUpdateMetadata) and "orders" in e.deleted_topics
    ]
    assert deleted and deleted[0] < first_stop


def test_stop_replica_goes_to_live_replicas_only() -> None:
    result = on_topic_deletion(view(brokers=(2,), topics=TOPICS), ["orders"])
    assert [s.broker_id for s in result.of(r.SendStopReplica)] == [2]


def test_stop_replica_per_broker_lists_only_its_partitions() -> None:
    topics = {"t": {0: (1, 2), 1: (2, 3)}}
    result = on_topic_deletion(view(topics=topics), ["t"])
    assert result.of(r.SendStopReplica) == [
        r.SendStopReplica(1, (("t", 0),), delete=True),
        r.SendStopReplica(2, (("t", 0), ("t", 1)), delete=True),
        r.SendStopReplica(3, (("t", 1),), delete=True),
    ]


def test_marker_of_a_topic_that_does_not_exist_is_removed() -> None:
    assert on_topic_deletion(view(topics=TOPICS), ["ghost"]).effects == (
        r.RemoveDeletionMarker("ghost"),
    )


def test_marker_of_a_topic_the_controller_has_not_loaded_yet_stays() -> None:
    assert on_topic_deletion(view(topics=TOPICS), ["fresh"], still_exists=["fresh"]) == r.EMPTY


def test_several_markers_in_order() -> None:
    result = on_topic_deletion(view(topics=TOPICS), ["keep", "ghost", "orders"])
    assert result.of(r.DeleteTopicZnodes) == [
        r.DeleteTopicZnodes("keep"),
        r.DeleteTopicZnodes("orders"),
    ]
    assert result.of(r.RemoveDeletionMarker) == [r.RemoveDeletionMarker("ghost")]
    assert result.of(r.ForgetTopic) == [r.ForgetTopic("keep"), r.ForgetTopic("orders")]


def test_a_topic_marked_twice_is_deleted_once() -> None:
    result = on_topic_deletion(view(topics=TOPICS), ["keep", "keep"])
    assert result.of(r.DeleteTopicZnodes) == [r.DeleteTopicZnodes("keep")]
    assert result.of(r.RemoveDeletionMarker) == [r.RemoveDeletionMarker("keep")]
