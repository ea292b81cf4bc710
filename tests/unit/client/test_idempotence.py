"""Idempotent producer state: per-partition sequence numbering, wrap-around and resets."""

from __future__ import annotations

from headwater.client.producer.idempotence import (
    MAX_SEQUENCE,
    IdempotenceState,
    ProducerIdAndEpoch,
    increment_sequence,
)
from headwater.client.types import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def test_sequences_are_per_partition_and_count_records() -> None:
    s = IdempotenceState()
    assert not s.has_producer_id
    s.set_producer_id(ProducerIdAndEpoch(7, 0))
    assert s.has_producer_id
    assert s.assign(A, 10) == 0
    assert s.assign(A, 5) == 10
    assert s.assign(B, 3) == 0
    assert s.next_sequence(A) == 15


def test_sequence_wraps_like_kafka() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert increment_sequence(5, 3) == 8


def test_failed_batch_forces_new_epoch_and_restart_at_zero() -> None:
    s = IdempotenceState()
    s.set_producer_id(ProducerIdAndEpoch(7, 0))
    s.assign(A, 10)
    s.batch_failed(None)
    assert s.needs_reset and not s.has_producer_id
    s.set_producer_id(ProducerIdAndEpoch(7, 1))
    assert s.assign(A, 1) == 0
    assert IdempotenceState.is_duplicate(46)


def test_an_end_txn_epoch_bump_keeps_pipelining_for_the_same_producer_id() -> None:
    s = IdempotenceState()
    s.set_producer_id(ProducerIdAndEpoch(7, 0))
    s.assign(A, 10)
    s.acknowledged(A)
    s.transaction_ended(ProducerIdAndEpoch(7, 1))
    assert s.producer == ProducerIdAndEpoch(7, 1)
    assert s.assign(A, 1) == 0
    assert s.may_pipeline(A) and not s.may_pipeline(B)
    s.transaction_ended(ProducerIdAndEpoch(8, 0))  # a new producer id: leaders may not know it
    assert not s.may_pipeline(A)
