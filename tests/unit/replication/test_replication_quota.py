"""Replication throttles: the token bucket on virtual time, Kafka's throttled-replica
lists (``partition:broker`` pairs or ``*``) and their validation, and the rate a broker
takes from its own dynamic config or the cluster default."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.replication.quota import (
    FOLLOWER_RATE,
    LEADER_RATE,
    UNLIMITED,
    ReplicationQuota,
    effective_rate,
    is_throttled,
    parse_rate,
    throttled_partitions,
)
from headwater.storage import LogConfig


def test_unlimited_quota_is_never_exceeded_and_counts_nothing() -> None:
    q = ReplicationQuota()
    q.record(10**9, now_ms=0)
    assert not q.is_exceeded(now_ms=0)
    assert q.throttled_bytes == 0


def test_bucket_holds_one_second_and_goes_into_debt() -> None:
    q = ReplicationQuota(rate_bytes_per_s=1000)
    assert q.allowance(now_ms=0) == 1000
    q.record(3000, now_ms=0)
    assert q.is_exceeded(now_ms=0)
    assert q.delay_ms(now_ms=0) == pytest.approx(2000.0)
    assert q.is_exceeded(now_ms=1999)
    assert not q.is_exceeded(now_ms=2000)
    assert q.throttled_bytes == 3000


def test_refill_is_capped_at_one_second_of_rate() -> None:
    q = ReplicationQuota(rate_bytes_per_s=1000)
    q.record(500, now_ms=0)
    assert q.allowance(now_ms=60_000) == 1000


def test_average_rate_over_time_is_the_rate() -> None:
    q = ReplicationQuota(rate_bytes_per_s=10_000)
    sent, now = 0, 0.0
    while now < 10_000:
        if not q.is_exceeded(now):
            q.record(4096, now)
            sent += 4096
        now += 10
    assert 10 * 10_000 <= sent <= 11 * 10_000 + 4096


def test_lowering_the_rate_keeps_the_debt_and_caps_the_bucket() -> None:
    q = ReplicationQuota(rate_bytes_per_s=10_000)
    q.allowance(now_ms=0)
    q.set_rate(100)
    assert q.allowance(now_ms=0) == 100


def test_zero_rate_stops_throttled_replication() -> None:
    q = ReplicationQuota(rate_bytes_per_s=0)
    assert q.is_exceeded(now_ms=0)
    assert q.is_exceeded(now_ms=10**9)


@pytest.mark.parametrize(
    ("value", "broker", "expected"),
    [
        ("*", 1, None),
        ("0:1,1:2,2:1", 1, frozenset({0, 2})),
        ("0:1,1:2", 3, frozenset()),
    ],
)
def test_throttled_partitions_per_broker(
    value: str, broker: int, expected: frozenset[int] | None
) -> None:
    assert throttled_partitions(value, broker) == expected


def test_is_throttled_only_for_listed_replicas() -> None:
    assert is_throttled("0:1", partition=0, broker_id=1)
    assert not is_throttled("0:1", partition=0, broker_id=2)
    assert not is_throttled("0:1", partition=1, broker_id=1)
    assert not is_throttled("", partition=0, broker_id=1)
    assert is_throttled("*", partition=5, broker_id=9)


@pytest.mark.parametrize("bad", ["x", "0:1,", "0-1", "1:2:3", "a:1", "0:b"])
def test_bad_replica_lists_are_refused_as_invalid_config(bad: str) -> None:
    with pytest.raises(
        errors.InvalidConfigError, match=r"leader\.replication\.throttled\.replicas"
    ):
        LogConfig.from_properties({"leader.replication.throttled.replicas": bad})


def test_replica_list_is_normalised() -> None:
    config = LogConfig.from_properties({"follower.replication.throttled.replicas": " 0:1, 2:3 "})
    assert config.follower_replication_throttled_replicas == "0:1,2:3"


def test_rate_parse_refuses_negative_and_garbage() -> None:
    assert parse_rate(" 1048576 ") == 1048576
    with pytest.raises(ValueError):
        parse_rate("-1")
    with pytest.raises(ValueError):
        parse_rate("fast")


def test_broker_rate_overrides_the_cluster_default() -> None:
    assert effective_rate(LEADER_RATE, broker={}, default={}) == UNLIMITED
    assert effective_rate(LEADER_RATE, broker={}, default={LEADER_RATE: "100"}) == 100
    assert effective_rate(LEADER_RATE, broker={LEADER_RATE: "5"}, default={LEADER_RATE: "100"}) == 5
    assert effective_rate(FOLLOWER_RATE, broker={LEADER_RATE: "5"}, default={}) == UNLIMITED
