"""Divergent-suffix truncation, ZooKeeper session expiry, controlled shutdown."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from .helpers import batch, create_topic, produce, produce_to_leader, read_all

pytestmark = pytest.mark.e2e


@pytest.fixture
def loose(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """min.insync.replicas=1 and a long lag time, so a brief pause keeps the ISR."""
    overrides = {"min.insync.replicas": "1", "replica.lag.time.max.ms": "20000"}
    with Cluster(
        brokers=3, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        yield cluster


def test_divergent_follower_truncates(loose: Cluster) -> None:
    topic = create_topic(loose, replication_factor=3)
    produce_to_leader(loose, topic, batch([b"common"]))
    old_leader = loose.leader_for(topic, 0)
    assert old_leader is not None
    followers = [b for b in loose.brokers if b != old_leader]
    # Followers stop fetching (still in the ISR): acks=1 writes reach the leader only.
    for f in followers:
        loose.pause(f)
    try:
        address = loose.brokers[old_leader].address
        for value in (b"lost-1", b"lost-2", b"lost-3"):
            assert produce(address, topic, batch([value]), acks=1).error == ErrorCode.NONE
        loose.kill(old_leader)
    finally:
        for f in followers:
            loose.resume(f)
    loose.wait_for(
        lambda: loose.leader_for(topic, 0) in followers, what="a new leader", timeout_s=60
    )
    produce_to_leader(loose, topic, batch([b"new-1"]))
    produce_to_leader(loose, topic, batch([b"new-2"]))
    new_leader = loose.leader_for(topic, 0)
    assert new_leader is not None
    # A fetch parked on the old leader may have delivered lost-1 to a follower on resume;
    # the last acks=1 write cannot have left the old leader.
    expected = [v for _, v in read_all(loose.brokers[new_leader].address, topic)]
    assert expected[0] == b"common" and expected[-2:] == [b"new-1", b"new-2"]
    assert b"lost-3" not in expected
    # The old leader returns, truncates its divergent suffix and catches up.
    loose.start_broker(old_leader)
    loose.wait_for(
        lambda: old_leader in loose.isr_for(topic, 0), what="old leader in ISR", timeout_s=60
    )
    for f in followers:
        loose.kill(f)
    loose.wait_for(lambda: loose.leader_for(topic, 0) == old_leader, what="old leader leads")
    values = [v for _, v in read_all(loose.brokers[old_leader].address, topic)]
    assert values == expected


def test_session_expiry_reregisters_and_recovers(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    produce_to_leader(trio, topic, batch([b"a"]))
    leader = trio.leader_for(topic, 0)
    assert leader is not None
    trio.expire_session(leader)
    assert leader in trio.live_broker_ids()
    produce_to_leader(trio, topic, batch([b"b"]))
    trio.wait_for(lambda: len(trio.isr_for(topic, 0)) == 3, what="full ISR", timeout_s=60)
    now_leader = trio.leader_for(topic, 0)
    assert now_leader is not None
    assert [v for _, v in read_all(trio.brokers[now_leader].address, topic)] == [b"a", b"b"]


def test_controlled_shutdown_moves_leadership_first(trio: Cluster) -> None:
    topic = create_topic(trio, replication_factor=3)
    produce_to_leader(trio, topic, batch([b"a"]))
    leader = trio.leader_for(topic, 0)
    assert leader is not None
    started = time.monotonic()
    assert trio.stop(leader) == 0
    # Leadership moved while the broker was still alive: no session timeout to wait for.
    new_leader = trio.leader_for(topic, 0)
    assert new_leader is not None and new_leader != leader
    assert trio.brokers[new_leader].running
    assert leader not in trio.live_broker_ids()
    produce_to_leader(trio, topic, batch([b"b"]), timeout_s=5)
    print(f"controlled shutdown took {time.monotonic() - started:.2f}s")
    assert [v for _, v in read_all(trio.brokers[new_leader].address, topic)] == [b"a", b"b"]


def test_a_broker_shutting_down_does_not_rejoin_the_isr_on_its_way_out(trio: Cluster) -> None:
    """Its controlled shutdown takes a leader out of the ISR and makes it a follower of
    the partitions it led; the fetches it makes until it stops must not put it back
    (Kafka's KIP-841), or the ISR would name a stopped broker and hold every acks=all
    produce until replica.lag.time.max.ms shrank it out."""
    topic = create_topic(trio, replication_factor=3)
    for round_ in range(3):  # the last fetches race the stop: three rounds to catch it
        produce_to_leader(trio, topic, batch([f"r{round_}".encode()]))
        stopping = trio.leader_for(topic, 0)
        assert stopping is not None
        assert trio.stop(stopping) == 0
        isr = trio.isr_for(topic, 0)
        assert stopping not in isr and len(isr) == 2, (round_, stopping, isr)
        trio.start_broker(stopping)
        trio.wait_for(
            lambda: stopping in trio.isr_for(topic, 0),  # noqa: B023 (used at once)
            what="the restarted broker back in the ISR",
            timeout_s=60,
        )
