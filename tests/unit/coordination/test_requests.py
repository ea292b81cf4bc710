"""Per-broker controller requests: LeaderAndIsr to live replicas only (optionally limited),
with the live leaders to fetch from; the same UpdateMetadata to every live broker;
StopReplica; and each request value sending itself through a channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.coordination import requests
from headwater.coordination.model import NO_LEADER, BrokerRegistration, PartitionState

from .helpers import EPOCH, ORDERS, lai, reg, view


def states(ctx: Any) -> list[PartitionState]:
    return ctx.partition_states(ctx.all_partitions())


def test_leader_and_isr_groups_states_by_live_replica() -> None:
    ctx = view(brokers=(1, 2), topics=ORDERS)
    out = requests.leader_and_isr(ctx, states(ctx))
    assert sorted(out) == [1, 2]
    assert [s.key for s in out[1].states] == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert out[1].controller_epoch == EPOCH.epoch
    # Leaders 1 and 2 are live; 3 (leader of orders-2) is not.
    assert out[1].live_leaders == (reg(1), reg(2))


def test_leader_and_isr_only_to_named_brokers() -> None:
    ctx = view(topics=ORDERS)
    out = requests.leader_and_isr(ctx, states(ctx), to=[3, 9])
    assert list(out) == [3]


def test_leaderless_partitions_name_no_leader_to_fetch_from() -> None:
    ctx = view(topics={"t": {0: (1, 2)}}, states={("t", 0): lai(NO_LEADER, (1,))})
    out = requests.leader_and_isr(ctx, states(ctx))
    assert out[1].live_leaders == () and out[2].live_leaders == ()


def test_duplicate_states_are_kept_in_order() -> None:
    ctx = view(topics={"t": {0: (1,)}})
    a = PartitionState("t", 0, lai(1, (1,), leader_epoch=1), (1,))
    b = PartitionState("t", 0, lai(1, (1,), leader_epoch=2), (1,))
    assert requests.leader_and_isr(ctx, [a, b])[1].states == (a, b)


def test_no_states_no_requests() -> None:
    assert requests.leader_and_isr(view(), []) == {}


def test_update_metadata_is_the_same_for_every_live_broker() -> None:
    ctx = view(brokers=(1, 3), topics=ORDERS)
    out = requests.update_metadata(ctx, states(ctx), deleted_topics=["gone"])
    assert sorted(out) == [1, 3]
    assert out[1] is out[3]
    assert out[1].live_brokers == (reg(1), reg(3))
    assert out[1].deleted_topics == ("gone",)
    assert len(out[1].states) == 3


def test_stop_replica() -> None:
    req = requests.stop_replica(view(), [("t", 0)], delete=True)
    assert req == requests.StopReplicaRequest(EPOCH.epoch, (("t", 0),), True)


class Channel:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []

    def send_leader_and_isr(self, broker: BrokerRegistration, **kw: Any) -> None:
        self.calls.append(("lai", broker.broker_id, kw))

    def send_update_metadata(self, broker: BrokerRegistration, **kw: Any) -> None:
        self.calls.append(("um", broker.broker_id, kw))

    def send_stop_replica(self, broker: BrokerRegistration, **kw: Any) -> None:
        self.calls.append(("stop", broker.broker_id, kw))


def as_lists(kw: dict[str, Any]) -> dict[str, Any]:
    return {
        k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
        for k, v in kw.items()
    }


def test_requests_send_themselves() -> None:
    ctx = view(brokers=(1,), topics={"t": {0: (1,)}})
    channel = Channel()
    sts = states(ctx)
    requests.leader_and_isr(ctx, sts)[1](channel, reg(1))
    requests.update_metadata(ctx, sts, deleted_topics=["d"])[1](channel, reg(1))
    requests.stop_replica(ctx, [("t", 0)], delete=False)(channel, reg(1))
    assert [(kind, b) for kind, b, _ in channel.calls] == [("lai", 1), ("um", 1), ("stop", 1)]
    assert as_lists(channel.calls[0][2]) == {
        "controller_epoch": EPOCH.epoch,
        "states": sts,
        "live_leaders": [reg(1)],
    }
    assert as_lists(channel.calls[1][2]) == {
        "controller_epoch": EPOCH.epoch,
        "states": sts,
        "live_brokers": [reg(1)],
        "deleted_topics": ["d"],
    }
    assert channel.calls[2][2] == {
        "controller_epoch": EPOCH.epoch,
        "partitions": [("t", 0)],
        "delete": False,
    }
