"""The broker's replication quotas: rates from its own dynamic config over the cluster
default, changed at once; only out-of-sync replicas listed in the topic's throttled
replicas are throttled, and nothing is while no rate is set."""

from __future__ import annotations

from headwater.replication.quota import UNLIMITED
from headwater.server.runtime.replication_quotas import DEFAULT_ENTITY, ReplicationQuotas
from headwater.storage import LogConfig

LISTED = LogConfig.from_properties(
    {
        "leader.replication.throttled.replicas": "0:1,1:2",
        "follower.replication.throttled.replicas": "0:1",
    }
)


def quotas() -> ReplicationQuotas:
    return ReplicationQuotas(broker_id=1, clock=lambda: 0.0)


def test_default_then_own_rate_then_back_to_default() -> None:
    q = quotas()
    q.apply(DEFAULT_ENTITY, {"leader.replication.throttled.rate": "1000"})
    assert q.leader.rate_bytes_per_s == 1000
    assert q.follower.rate_bytes_per_s == UNLIMITED
    q.apply("1", {"leader.replication.throttled.rate": "10"})
    assert q.leader.rate_bytes_per_s == 10
    q.apply("1", {})
    assert q.leader.rate_bytes_per_s == 1000


def test_other_brokers_configs_are_ignored() -> None:
    q = quotas()
    q.apply("2", {"leader.replication.throttled.rate": "10"})
    assert q.leader.unlimited


def test_only_listed_out_of_sync_replicas_are_throttled() -> None:
    q = quotas()
    q.apply(DEFAULT_ENTITY, {"leader.replication.throttled.rate": "1000"})
    assert q.leader_throttled(LISTED, partition=0, in_sync=False)
    assert not q.leader_throttled(LISTED, partition=0, in_sync=True)
    assert not q.leader_throttled(LISTED, partition=1, in_sync=False)  # 1:2 is broker 2's
    assert not q.leader_throttled(LogConfig(), partition=0, in_sync=False)


def test_no_rate_no_throttle() -> None:
    q = quotas()
    assert not q.leader_throttled(LISTED, partition=0, in_sync=False)
    assert not q.follower_throttled(LISTED, partition=0, in_sync=False)
    q.apply(DEFAULT_ENTITY, {"follower.replication.throttled.rate": "5"})
    assert q.follower_throttled(LISTED, partition=0, in_sync=False)
