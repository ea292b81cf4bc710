"""AdminProbe: the roll's view of the cluster from the public Admin API.

Covers that each broker's software and protocol version come from
``Admin.describe_cluster()`` (``BrokerDescription.version``/``protocol_version``),
partitions with their replicas and ISR from ``describe_topics``, each topic's
``min.insync.replicas`` from ``describe_configs``, and the refusal of an answer
that lacks a topic the probe has seen and that still exists (a restarted broker
answering before it has loaded its metadata), while a really deleted topic is
forgotten.  The Admin is an in-memory stand-in for the three read calls.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from headwater import errors
from headwater.client.admin.values import (
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    TopicDescription,
)
from headwater.client.types import PartitionMetadata
from headwater.roll.engine import BrokerVersion, PartitionState
from headwater.roll.probe import AdminProbe


class StubAdmin:
    """Answers the probe's three read calls from fields a test sets."""

    def __init__(self) -> None:
        self.brokers = (
            BrokerDescription(0, "b0", 9092, None, "0.2.0", "2"),
            BrokerDescription(1, "b1", 9092, "a", "0.1.0", "2"),
        )
        self.topics: dict[str, TopicDescription] = {}
        self.existing: set[str] = set()
        self.min_isr: dict[str, str] = {}

    def add(self, name: str, isr: tuple[int, ...], *, min_isr: str | None = None) -> None:
        pm = PartitionMetadata(name, 0, isr[0], 0, (0, 1), isr)
        self.topics[name] = TopicDescription(name, False, (pm,))
        self.existing.add(name)
        if min_isr is not None:
            self.min_isr[name] = min_isr

    def describe_cluster(self) -> ClusterDescription:
        return ClusterDescription("c", 1, self.brokers)

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        assert names is None
        return dict(self.topics)

    def describe_configs(
        self, topics: Iterable[str] = (), *, brokers: Iterable[int] = ()
    ) -> dict[str, dict[str, ConfigEntry]]:
        out: dict[str, dict[str, ConfigEntry]] = {}
        for t in topics:
            if t not in self.existing:
                raise errors.UnknownTopicOrPartitionError(t)
            entries = {}
            if t in self.min_isr:
                entries["min.insync.replicas"] = ConfigEntry("min.insync.replicas", self.min_isr[t])
            out[t] = entries
        return out


def test_broker_versions_come_from_describe_cluster() -> None:
    admin = StubAdmin()
    controller, versions = AdminProbe(admin).brokers()
    assert controller == 1
    assert versions == {0: BrokerVersion("0.2.0", "2"), 1: BrokerVersion("0.1.0", "2")}


def test_state_has_partitions_and_min_isr() -> None:
    admin = StubAdmin()
    admin.add("orders", (0, 1), min_isr="2")
    admin.add("logs", (0,))
    state = AdminProbe(admin).state()
    assert state.controller_id == 1
    assert set(state.brokers) == {0, 1}
    assert sorted(state.partitions) == [
        PartitionState("logs", 0, (0, 1), (0,)),
        PartitionState("orders", 0, (0, 1), (0, 1)),
    ]
    assert state.min_isr == {"orders": 2}


def test_answer_missing_a_live_topic_is_refused_and_a_deleted_one_forgotten() -> None:
    admin = StubAdmin()
    admin.add("orders", (0, 1))
    admin.add("gone", (0, 1))
    probe = AdminProbe(admin)
    probe.state()
    # A broker that has not loaded its metadata yet answers without "orders".
    del admin.topics["orders"]
    with pytest.raises(errors.LeaderNotAvailableError, match="orders"):
        probe.state()
    # "gone" is really deleted: the probe forgets it and answers.
    admin.topics["orders"] = TopicDescription(
        "orders", False, (PartitionMetadata("orders", 0, 0, 0, (0, 1), (0, 1)),)
    )
    del admin.topics["gone"]
    admin.existing.discard("gone")
    assert [p.topic for p in probe.state().partitions] == ["orders"]
