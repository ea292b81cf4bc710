"""Topic ids: drawn at creation, kept in the znode, answered from the metadata cache."""

from __future__ import annotations

import uuid

from headwater.coordination import model
from headwater.coordination.model import LeaderAndIsr, PartitionState, decode_topic_id, new_topic_id
from headwater.kafka.topic_ids import ZERO_ID, TopicIds, derived_topic_id
from headwater.server.runtime.metadata_cache import MetadataCache


def _state(topic: str, tid: str, partition: int = 0) -> PartitionState:
    return PartitionState(topic, partition, LeaderAndIsr(0, 1, (0,), 1), (0,), tid)


def _update(cache: MetadataCache, *states: PartitionState, deleted: tuple[str, ...] = ()) -> None:
    cache.update(
        controller_id=0,
        controller_epoch=1,
        states=list(states),
        live_brokers=None,
        deleted_topics=deleted,
        cluster_id="abc",
    )


def test_a_new_id_is_random_and_never_one_kafka_reserves() -> None:
    reserved = {uuid.UUID(int=0), uuid.UUID(int=1)}
    drawn = [new_topic_id() for _ in range(1000)]
    assert len(set(drawn)) == 1000
    assert all(len(t) == 22 and not t.startswith("-") for t in drawn)
    assert all(decode_topic_id(t) not in reserved | {None} for t in drawn)
    tid = uuid.UUID("5b0c7f0e-2f55-4d8c-9a43-6b1f1c0e7a11")
    assert decode_topic_id(model.encode_topic_id(tid)) == tid
    assert model.encode_topic_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's form
    assert decode_topic_id("") is None and decode_topic_id("not-an-id") is None


def test_the_id_travels_in_the_topic_znode() -> None:
    tid = new_topic_id()
    data = model.encode_assignment({0: [1, 2]}, topic_id=tid)
    assert b'"topic_id":"' + tid.encode() + b'"' in data and b'"version":3' in data
    assert model.decode_assignment("t", data).topic_id == tid
    old = model.encode_assignment({0: [1, 2]})  # a topic written before ids: version 2
    assert b"topic_id" not in old and model.decode_assignment("t", old).topic_id == ""


def test_ids_come_from_the_cache_and_a_recreated_topic_changes_id() -> None:
    cache = MetadataCache()
    ids = TopicIds(cache)
    first, second = new_topic_id(), new_topic_id()
    assert ids.id_of("orders") == ZERO_ID  # unknown topic: Kafka's zero id
    _update(cache, _state("orders", first), _state("orders", first, 1))
    assert ids.id_of("orders") == decode_topic_id(first)
    assert ids.name_of(decode_topic_id(first)) == "orders"
    assert ids.name_of(None) is None
    _update(cache, deleted=("orders",))
    assert ids.name_of(decode_topic_id(first)) is None and ids.id_of("orders") == ZERO_ID
    _update(cache, _state("orders", second))
    assert ids.id_of("orders") == decode_topic_id(second)
    assert ids.name_of(decode_topic_id(first)) is None


def test_a_state_with_a_new_id_drops_the_old_topics_partitions() -> None:
    """A broker that missed the deletion learns of the re-creation from the new id."""
    cache = MetadataCache()
    first, second = new_topic_id(), new_topic_id()
    _update(cache, _state("t", first, 0), _state("t", first, 1))
    _update(cache, _state("t", second, 0))
    assert list(cache.topics["t"]) == [0] and cache.topic_ids["t"] == second


def test_a_topic_without_an_id_answers_the_derived_one() -> None:
    """States from a controller that predates stored ids (a rolling upgrade)."""
    cache = MetadataCache()
    ids = TopicIds(cache)
    _update(cache, _state("legacy", ""))
    assert ids.id_of("legacy") == derived_topic_id("abc", "legacy")
    assert ids.name_of(derived_topic_id("abc", "legacy")) == "legacy"


def test_client_quota_filters_are_checked_as_kafka_checks_them() -> None:
    from headwater.kafka.user_apis import invalid_quota_filter

    assert invalid_quota_filter([]) is None
    assert invalid_quota_filter([("user", 0, "alice"), ("client-id", 2, None)]) is None
    assert invalid_quota_filter([("ip", 1, None)]) is None
    assert "not supported" in (invalid_quota_filter([("group", 2, None)]) or "")
    assert "Duplicate" in (invalid_quota_filter([("user", 2, None)] * 2) or "")
    assert "no match" in (invalid_quota_filter([("user", 0, None)]) or "")
    assert "with a match" in (invalid_quota_filter([("user", 1, "alice")]) or "")
    assert "Unexpected match type" in (invalid_quota_filter([("user", 7, None)]) or "")
