"""Derived topic ids (headwater.kafka.topic_ids)."""

from __future__ import annotations

import uuid

from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.kafka.topic_ids import TopicIds, topic_id
from headwater.server.runtime.metadata_cache import MetadataCache


def test_an_id_is_the_same_on_every_broker_and_differs_by_cluster_and_name() -> None:
    assert topic_id("c1", "orders") == topic_id("c1", "orders")
    assert topic_id("c1", "orders") != topic_id("c2", "orders")
    assert topic_id("c1", "orders") != topic_id("c1", "payments")


def test_an_id_is_never_one_kafka_reserves() -> None:
    reserved = {uuid.UUID(int=0), uuid.UUID(int=1)}
    assert all(topic_id("c", f"t{i}") not in reserved for i in range(1000))


def test_names_are_found_by_id_for_the_topics_the_cache_holds() -> None:
    cache = MetadataCache()
    ids = TopicIds(cache)
    assert ids.name_of(topic_id("", "orders")) is None
    cache.update(
        controller_id=0,
        controller_epoch=1,
        states=[PartitionState("orders", 0, LeaderAndIsr(0, 1, (0,), 1), (0,))],
        live_brokers=None,
        cluster_id="abc",
    )
    assert ids.name_of(topic_id("abc", "orders")) == "orders"
    assert ids.id_of("orders") == topic_id("abc", "orders")
    assert ids.name_of(topic_id("", "orders")) is None  # the id before the cluster id came
    assert ids.name_of(None) is None
    cache.update(
        controller_id=0, controller_epoch=1, states=[], live_brokers=None, deleted_topics=["orders"]
    )
    assert ids.name_of(topic_id("abc", "orders")) is None


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
