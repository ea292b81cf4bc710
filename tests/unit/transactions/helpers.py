"""Shared values for the transaction coordinator's unit tests."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from headwater.transactions import decisions as d
from headwater.transactions.metadata import TransactionConfig, TransactionMetadata
from headwater.transactions.results import Decision, Transition
from headwater.transactions.state import TransactionResult
from headwater.values import TopicPartition

TID = "tx-1"
CONFIG = TransactionConfig(
    transaction_max_timeout_ms=60_000, transactional_id_expiration_ms=1_000_000
)
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
OFFSETS = TopicPartition("__consumer_offsets", 7)


class ProducerIds:
    """A producer id allocator that counts what it handed out (1000, 1001, ...)."""

    def __init__(self, start: int = 1000) -> None:
        self._ids: Iterator[int] = itertools.count(start)
        self.handed_out: list[int] = []

    def __call__(self) -> int:
        pid = next(self._ids)
        self.handed_out.append(pid)
        return pid


def applied(current: TransactionMetadata | None, decision: Decision) -> TransactionMetadata:
    """The id's state once ``decision`` (a Transition) is written and acknowledged."""
    assert isinstance(decision, Transition), decision
    if current is not None:
        assert decision.before.pending_state is not None
    after = d.complete(decision.before, decision)
    assert after is not None
    return after


def init(
    current: TransactionMetadata | None = None,
    *,
    ids: ProducerIds | None = None,
    now_ms: int = 0,
    timeout_ms: int = 10_000,
) -> TransactionMetadata:
    decision = d.init_producer_id(
        current,
        transactional_id=TID,
        transaction_timeout_ms=timeout_ms,
        now_ms=now_ms,
        config=CONFIG,
        allocate_producer_id=ids or ProducerIds(),
    )
    return applied(current, decision)


def add(current: TransactionMetadata, *partitions: TopicPartition, now_ms: int = 0) -> Decision:
    return d.add_partitions(
        current,
        transactional_id=TID,
        producer_id=current.producer_id,
        producer_epoch=current.producer_epoch,
        partitions=frozenset(partitions or (T0,)),
        now_ms=now_ms,
    )


def end(
    current: TransactionMetadata,
    result: TransactionResult,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    ids: ProducerIds | None = None,
    now_ms: int = 0,
) -> Decision:
    return d.end_transaction(
        current,
        transactional_id=TID,
        producer_id=current.producer_id if producer_id is None else producer_id,
        producer_epoch=current.producer_epoch if producer_epoch is None else producer_epoch,
        result=result,
        now_ms=now_ms,
        allocate_producer_id=ids or ProducerIds(),
    )


def ongoing(now_ms: int = 0) -> TransactionMetadata:
    """A new id with a transaction open on T0 since ``now_ms``."""
    empty = init()
    return applied(empty, add(empty, T0, now_ms=now_ms))
