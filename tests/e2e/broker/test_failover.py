"""Three brokers, RF=3, min.insync.replicas=2: leader death, controller death, pauses.

Every record acknowledged with acks=all must survive a leader SIGKILL, in
order; writes resume on the new leader; a paused follower leaves the ISR
after replica.lag.time.max.ms and rejoins after SIGCONT while the high
watermark never moves backwards.
"""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.testing import Cluster

from .helpers import batch, create_topic, fetch, produce, produce_to_leader, read_all

pytestmark = pytest.mark.e2e


def test_acked_records_survive_leader_kill(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    acked: list[bytes] = []
    for i in range(30):
        value = b"before-%d" % i
        produce_to_leader(trio, topic, batch([value]))
        acked.append(value)
    old_leader = trio.leader_for(topic, 0)
    assert old_leader is not None
    trio.kill(old_leader)
    for i in range(30):
        value = b"after-%d" % i
        produce_to_leader(trio, topic, batch([value]))
        acked.append(value)
    new_leader = trio.leader_for(topic, 0)
    assert new_leader is not None and new_leader != old_leader
    values = [v for _, v in read_all(trio.brokers[new_leader].address, topic)]
    assert values == acked
    # The killed broker comes back as a follower and catches up into the ISR.
    trio.start_broker(old_leader)
    trio.wait_for(lambda: old_leader in trio.isr_for(topic, 0), what="the old leader to rejoin")


def test_paused_follower_leaves_and_rejoins_isr(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    leader = trio.leader_for(topic, 0)
    assert leader is not None
    follower = next(b for b in trio.brokers if b != leader)
    address = trio.brokers[leader].address
    produce_to_leader(trio, topic, batch([b"one"]))
    trio.pause(follower)
    try:
        trio.wait_for(lambda: follower not in trio.isr_for(topic, 0), what="ISR shrink")
        watermarks = [fetch(address, topic, 0).high_watermark]
        # Two replicas remain in the ISR, which satisfies min.insync.replicas=2.
        for i in range(5):
            assert produce(address, topic, batch([b"v%d" % i])).error == ErrorCode.NONE
            watermarks.append(fetch(address, topic, 0).high_watermark)
    finally:
        trio.resume(follower)
    trio.wait_for(lambda: follower in trio.isr_for(topic, 0), what="ISR expand", timeout_s=60)
    watermarks.append(
        fetch(trio.brokers[trio.leader_for(topic, 0) or 0].address, topic, 0).high_watermark
    )
    assert watermarks == sorted(watermarks)
    assert watermarks[-1] == 6


def test_acks_all_refused_below_min_isr(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    leader = trio.leader_for(topic, 0)
    assert leader is not None
    followers = [b for b in trio.brokers if b != leader]
    for f in followers:
        trio.kill(f)
    trio.wait_for(lambda: trio.isr_for(topic, 0) == (leader,), what="ISR of the leader alone")
    address = trio.brokers[leader].address
    result = produce(address, topic, batch([b"x"]), acks=-1)
    assert result.error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(address, topic, batch([b"y"]), acks=1).error == ErrorCode.NONE


def test_produce_to_follower_is_refused(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    leader = trio.leader_for(topic, 0)
    follower = next(b for b in trio.brokers if b != leader)
    result = produce(trio.brokers[follower].address, topic, batch([b"x"]))
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_controller_death_then_leader_death(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    controller = trio.controller_id()
    assert controller is not None
    trio.kill(controller)
    trio.wait_for(lambda: trio.controller_id() not in (None, controller), what="a new controller")
    produce_to_leader(trio, topic, batch([b"a"]))
    leader = trio.leader_for(topic, 0)
    assert leader is not None
    if trio.brokers[leader].running:
        trio.kill(leader)
    # One broker left: ISR {survivor} < min.insync.replicas, so use acks=1.
    produce_to_leader(trio, topic, batch([b"b"]), acks=1)
    survivor = trio.leader_for(topic, 0)
    assert survivor is not None and trio.brokers[survivor].running
    values = [v for _, v in read_all(trio.brokers[survivor].address, topic)]
    assert values == [b"a", b"b"]
