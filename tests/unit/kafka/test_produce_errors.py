"""Produce errors as Kafka's broker answers them, by request version: the transaction
coordinator's retriable answers to the partition leader's check become
NOT_ENOUGH_REPLICAS, except CONCURRENT_TRANSACTIONS for a transaction version 2
producer (Produce v12+), which retries it."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.kafka.apis import produce_error

E = ErrorCode


@pytest.mark.parametrize(
    ("code", "version", "answered"),
    [
        (E.CONCURRENT_TRANSACTIONS, 11, E.NOT_ENOUGH_REPLICAS),
        (E.CONCURRENT_TRANSACTIONS, 12, E.CONCURRENT_TRANSACTIONS),
        (E.COORDINATOR_NOT_AVAILABLE, 9, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_NOT_AVAILABLE, 12, E.NOT_ENOUGH_REPLICAS),
        (E.NOT_COORDINATOR, 12, E.NOT_ENOUGH_REPLICAS),
        (E.COORDINATOR_LOAD_IN_PROGRESS, 3, E.NOT_ENOUGH_REPLICAS),
        (E.NETWORK_EXCEPTION, 12, E.NOT_ENOUGH_REPLICAS),
        (E.INVALID_TXN_STATE, 11, E.INVALID_TXN_STATE),
        (E.INVALID_PRODUCER_EPOCH, 12, E.INVALID_PRODUCER_EPOCH),
        (E.NOT_LEADER_OR_FOLLOWER, 12, E.NOT_LEADER_OR_FOLLOWER),
        (E.NONE, 12, E.NONE),
    ],
)
def test_produce_error(code: ErrorCode, version: int, answered: ErrorCode) -> None:
    assert produce_error(code, version) is answered
