"""The partition leader's KIP-890 check: may this producer write this partition now?"""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.transactions import decisions as d
from headwater.transactions.metadata import TransactionMetadata
from headwater.transactions.state import TransactionResult
from headwater.values import TopicPartition

from tests.unit.transactions.helpers import T0, T1, applied, end, init, ongoing


def verify(
    current: TransactionMetadata | None,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    partition: TopicPartition = T0,
) -> ErrorCode:
    assert current is not None or producer_id is not None
    return d.verify_partition(
        current,
        producer_id=current.producer_id if producer_id is None and current else producer_id or 0,
        producer_epoch=(
            current.producer_epoch if producer_epoch is None and current else producer_epoch or 0
        ),
        partition=partition,
    )


def test_a_partition_added_to_the_open_transaction_is_accepted() -> None:
    assert verify(ongoing()) is ErrorCode.NONE


def test_a_partition_never_added_is_invalid_txn_state() -> None:
    assert verify(ongoing(), partition=T1) is ErrorCode.INVALID_TXN_STATE


def test_no_transaction_open_is_invalid_txn_state() -> None:
    assert verify(init()) is ErrorCode.INVALID_TXN_STATE


def test_an_older_epoch_is_producer_fenced() -> None:
    current = ongoing()
    assert verify(current, producer_epoch=current.producer_epoch - 1) is ErrorCode.PRODUCER_FENCED


def test_a_late_write_after_the_end_was_decided_is_refused() -> None:
    current = ongoing()
    prepared = applied(current, end(current, TransactionResult.COMMIT))
    # The ended transaction's epoch is behind the bumped one: fenced.
    late = verify(prepared, producer_epoch=current.producer_epoch)
    assert late is ErrorCode.PRODUCER_FENCED
    # Even at the bumped epoch nothing may be written until a new transaction adds it.
    assert verify(prepared) is ErrorCode.INVALID_TXN_STATE


def test_an_unknown_id_or_another_producer_id_is_invalid_producer_id_mapping() -> None:
    assert verify(None, producer_id=5, producer_epoch=0) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    current = ongoing()
    assert (
        verify(current, producer_id=current.producer_id + 1)
        is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
