"""A network partition between the leader and its follower, then healed.

The brokers reach each other only through a :class:`headwater.testing.netsplit.LinkProxy`
in front of each broker's INTERNAL listener (advertised at the proxy's port); producers
use the CLIENT listener, which the cut does not touch.  The cut leaves the follower's
fetch in flight on a connection that never answers again: the follower must give it up
(``replica.socket.timeout.ms``, gRPC keepalive), reconnect once the link is back, and
be in the ISR again about a second after the heal, so that ``acks=all`` writes are
accepted again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from headwater.testing.netsplit import LinkProxy
from headwater.testing.zookeeper import ZooKeeperServer

from .helpers import batch, create_topic, produce, produce_to_leader

REJOIN_BOUND_S = 4.0
"""About replica.fetch.backoff.ms (200 ms here) is expected; the rest is room for a loaded
machine."""


@pytest.fixture
def split_pair(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> Iterator[tuple[Cluster, dict[int, LinkProxy]]]:
    """Two brokers whose inter-broker traffic goes through one proxy per broker."""
    cluster = Cluster(
        brokers=2,
        data_dir=tmp_path,
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "min.insync.replicas": "2",
            "replica.lag.time.max.ms": "1500",
        },
    )
    proxies = {b: LinkProxy("127.0.0.1", p.ports["INTERNAL"]) for b, p in cluster.brokers.items()}
    try:
        for b, broker in cluster.brokers.items():
            cluster.broker_overrides[b] = {
                "advertised.listeners": f"CLIENT://{broker.address_of('CLIENT')},"
                f"INTERNAL://{proxies[b].address}"
            }
        with cluster:
            yield cluster, proxies
    finally:
        for proxy in proxies.values():
            proxy.close()


def test_follower_rejoins_isr_soon_after_the_partition_heals(
    split_pair: tuple[Cluster, dict[int, LinkProxy]],
) -> None:
    cluster, proxies = split_pair
    topic = create_topic(cluster, replication_factor=2)
    cluster.wait_for(lambda: len(cluster.isr_for(topic, 0)) == 2, what="both replicas in the ISR")
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    follower = 1 - leader
    address = cluster.brokers[leader].address
    produce_to_leader(cluster, topic, batch([b"before"]))  # the leader knows it leads

    proxies[leader].cut()
    cluster.wait_for(
        lambda: cluster.isr_for(topic, 0) == (leader,), what="the follower out of the ISR"
    )
    refused = produce(address, topic, batch([b"during"]), timeout_ms=1000)
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS, refused
    time.sleep(1.0)  # a partition longer than the follower's lag time, not only just so

    proxies[leader].heal()
    healed = time.monotonic()
    cluster.wait_for(
        lambda: follower in cluster.isr_for(topic, 0), timeout_s=30.0, what="the follower's rejoin"
    )
    rejoined_s = time.monotonic() - healed
    print(f"follower {follower} back in the ISR {rejoined_s:.2f} s after the heal")
    assert rejoined_s < REJOIN_BOUND_S, (
        rejoined_s,
        cluster.brokers[follower].log_tail(),
    )
    after = produce(address, topic, batch([b"after"]))
    assert after.error == ErrorCode.NONE, after
