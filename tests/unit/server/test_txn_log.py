"""The partition leader's header-only transaction checks (server.runtime.txn_log)."""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.records.control import set_batch_flags
from headwater.server.runtime import txn_log
from headwater.storage.transactions import PartitionTransactions


def batch(*, pid: int = 5, epoch: int = 0, transactional: bool = True) -> bytes:
    raw = build_batch([Record(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    return set_batch_flags(raw, transactional=transactional)


def test_a_transaction_opening_here_needs_verification_once() -> None:
    txns = PartitionTransactions()
    first = txn_log.inspect(txns, batch())
    assert first.error is ErrorCode.NONE and first.needs_verification
    assert first.header is not None
    txns.append(first.header, None)
    assert not txn_log.inspect(txns, batch()).needs_verification


def test_bad_batches_are_refused_with_kafkas_errors() -> None:
    txns = PartitionTransactions()
    control = set_batch_flags(batch(), transactional=True, control=True)
    assert txn_log.inspect(txns, control).error is ErrorCode.INVALID_RECORD
    assert txn_log.inspect(txns, batch(pid=-1)).error is ErrorCode.INVALID_RECORD
    opened = txn_log.inspect(txns, batch(epoch=2))
    assert opened.header is not None
    txns.append(opened.header, None)
    assert txn_log.inspect(txns, batch(epoch=1)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    plain = txn_log.inspect(txns, batch(epoch=2, transactional=False))
    assert plain.error is ErrorCode.INVALID_TXN_STATE  # idempotent write inside its transaction


def test_plain_and_unreadable_batches_are_left_alone() -> None:
    txns = PartitionTransactions()
    plain = txn_log.inspect(txns, build_batch([Record(None, b"v")]))
    assert plain.error is ErrorCode.NONE and not plain.needs_verification
    assert txn_log.inspect(txns, b"garbage").header is None
