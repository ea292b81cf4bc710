"""The ``__transaction_state`` records: Kafka's layout, round trips, bad input, replay."""

from __future__ import annotations

import struct

import pytest
from headwater.errors import ErrorCode
from headwater.transactions import decisions as d
from headwater.transactions import records as rec
from headwater.transactions.metadata import MAX_USABLE_EPOCH, TransactionMetadata
from headwater.transactions.results import Refuse, Reply
from headwater.transactions.state import TransactionResult, TransactionState
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.transactions.helpers import T0, T1, TID, ProducerIds, add, applied, end, init

S = TransactionState
WRITTEN_STATES = [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)]


def meta(**kw: object) -> TransactionMetadata:
    base = TransactionMetadata(
        transactional_id=TID,
        producer_id=4242,
        producer_epoch=7,
        transaction_timeout_ms=60_000,
        state=S.ONGOING,
        partitions=frozenset({T0, T1, TopicPartition("other", 3)}),
        txn_start_timestamp_ms=1_000,
        txn_last_update_timestamp_ms=2_000,
    )
    return base.replace(**kw)


def test_the_key_is_kafkas_version_0_layout() -> None:
    assert rec.encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert rec.decode_key(b"\x00\x00\x00\x04tx-1") == "tx-1"


def test_a_version_1_value_is_kafkas_flexible_layout() -> None:
    m = meta(state=S.EMPTY, partitions=frozenset(), txn_start_timestamp_ms=-1)
    expected = (
        struct.pack(">hqhib", 1, 4242, 7, 60_000, 0)
        + b"\x01"  # compact array: no topics
        + struct.pack(">qq", 2_000, -1)
        + b"\x01\x02\x02\x00\x02"  # one tagged field: ClientTransactionVersion (tag 2) = 2
    )
    assert rec.encode_value(m) == expected


def test_a_version_1_value_with_partitions_and_producer_ids() -> None:
    m = meta(partitions=frozenset({T0}), previous_producer_id=9, next_producer_id=10)
    expected = (
        struct.pack(">hqhib", 1, 4242, 7, 60_000, 1)
        + b"\x02"  # one topic
        + b"\x02t"  # compact string "t"
        + b"\x02"
        + struct.pack(">i", 0)
        + b"\x00"  # the topic entry's tagged fields
        + struct.pack(">qq", 2_000, 1_000)
        + b"\x03"
        + b"\x00\x08"
        + struct.pack(">q", 9)
        + b"\x01\x08"
        + struct.pack(">q", 10)
        + b"\x02\x02\x00\x02"
    )
    assert rec.encode_value(m) == expected


def test_a_version_0_value_is_kafkas_layout() -> None:
    m = meta(partitions=frozenset({T0, T1}))
    expected = (
        struct.pack(">hqhib", 0, 4242, 7, 60_000, 1)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 2_000, 1_000)
    )
    assert rec.encode_value(m, version=0) == expected


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("state", WRITTEN_STATES, ids=str)
def test_every_written_state_round_trips(version: int, state: TransactionState) -> None:
    m = meta(state=state)
    back = rec.decode_value(TID, rec.encode_value(m, version=version))
    assert back.replace(last_producer_epoch=m.last_producer_epoch) == m


def test_version_0_drops_the_producer_ids_of_version_1() -> None:
    m = meta(previous_producer_id=9, next_producer_id=10)
    back = rec.decode_value(TID, rec.encode_value(m, version=0))
    assert (back.previous_producer_id, back.next_producer_id) == (-1, -1)


def test_dead_is_a_tombstone_and_a_pending_fence_is_never_written() -> None:
    assert rec.record(meta(state=S.DEAD)) == rec.TransactionRecord(rec.encode_key(TID), None)
    with pytest.raises(ValueError, match="never written"):
        rec.encode_value(meta(state=S.PREPARE_EPOCH_FENCE))


def test_unknown_tagged_fields_are_skipped() -> None:
    data = rec.encode_value(meta(state=S.EMPTY, partitions=frozenset()))
    extended = data[:-5] + b"\x02\x02\x02\x00\x02\x09\x01\xff"  # and tag 9, one byte
    assert rec.decode_value(TID, extended).state is S.EMPTY


@settings(deadline=None, max_examples=150)
@given(
    producer_id=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, MAX_USABLE_EPOCH),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from(WRITTEN_STATES),
    partitions=st.frozensets(
        st.builds(TopicPartition, st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)),
        max_size=8,
    ),
    previous=st.integers(-1, 2**63 - 1),
    next_id=st.integers(-1, 2**63 - 1),
    times=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
)
def test_any_metadata_round_trips(
    producer_id: int,
    epoch: int,
    timeout: int,
    state: TransactionState,
    partitions: frozenset[TopicPartition],
    previous: int,
    next_id: int,
    times: tuple[int, int],
) -> None:
    m = meta(
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_timeout_ms=timeout,
        state=state,
        partitions=partitions,
        previous_producer_id=previous,
        next_producer_id=next_id,
        txn_start_timestamp_ms=times[0],
        txn_last_update_timestamp_ms=times[1],
    )
    back = rec.decode_value(TID, rec.encode_value(m))
    assert back.replace(last_producer_epoch=m.last_producer_epoch) == m


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_every_truncation_of_a_value_is_a_clear_error(version: int) -> None:
    data = rec.encode_value(meta(previous_producer_id=9), version=version)
    for cut in range(len(data)):
        with pytest.raises(rec.TransactionLogFormatError, match="truncated"):
            rec.decode_value(TID, data[:cut])


def test_every_truncation_of_a_key_is_a_clear_error() -> None:
    data = rec.encode_key(TID)
    for cut in range(len(data)):
        with pytest.raises(rec.TransactionLogFormatError, match="truncated"):
            rec.decode_key(data[:cut])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x01\x00\x01x", "unknown __transaction_state key version 1"),
        (b"\x00\x00\xff\xff", "null string"),
        (b"\x00\x00\x00\x01x!", "1 bytes after the __transaction_state key"),
        (b"\x00\x00\x00\x01\xff", "not UTF-8"),
    ],
)
def test_bad_keys_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(rec.TransactionLogFormatError, match=message):
        rec.decode_key(data)


def test_bad_values_are_refused() -> None:
    good = rec.encode_value(meta())
    cases = {
        "unknown __transaction_state value version 2": b"\x00\x02" + good[2:],
        "unknown transaction state id 9": good[:16] + b"\x09" + good[17:],
        "state Dead is never written": good[:16] + b"\x06" + good[17:],
        "bytes after the __transaction_state value": good + b"\x00",
    }
    for message, data in cases.items():
        with pytest.raises(rec.TransactionLogFormatError, match=message):
            rec.decode_value(TID, data)
    short_tag = rec.encode_value(meta(state=S.EMPTY, partitions=frozenset()))[:-5] + (
        b"\x01\x00\x01\x07"
    )
    with pytest.raises(rec.TransactionLogFormatError, match="tagged field of 1 bytes"):
        rec.decode_value(TID, short_tag)


def test_a_bad_record_changes_nothing_on_replay() -> None:
    loaded = {TID: meta()}
    with pytest.raises(rec.TransactionLogFormatError):
        rec.replay(loaded, rec.encode_key(TID), b"\x00\x01\x00")
    assert loaded == {TID: meta()}


# -- replay -----------------------------------------------------------------------------------


def written(transitions: list[TransactionMetadata]) -> list[rec.TransactionRecord]:
    return [rec.record(m) for m in transitions]


def test_replay_keeps_the_last_record_of_each_id_and_tombstones_remove() -> None:
    other = meta(transactional_id="other", state=S.EMPTY, partitions=frozenset())
    log = written(
        [
            meta(state=S.EMPTY, partitions=frozenset()),
            meta(state=S.ONGOING),
            other,
            meta(state=S.PREPARE_COMMIT, producer_epoch=8),
            other.replace(state=S.DEAD),
        ]
    )
    loaded: dict[str, TransactionMetadata] = {}
    for key, value in log:
        rec.replay(loaded, key, value)
    assert list(loaded) == [TID]
    assert loaded[TID].state is S.PREPARE_COMMIT and loaded[TID].producer_epoch == 8
    assert rec.markers_to_resend(loaded.values()) == [(TID, TransactionResult.COMMIT)]


def test_a_coordinator_that_failed_over_in_prepare_commit_finishes_the_commit() -> None:
    """Replayed from the log, the new coordinator writes the markers, and the producer's
    retried EndTxn is answered as the first one was."""
    empty = init()
    txn = applied(empty, add(empty, T0))
    prepared = applied(txn, end(txn, TransactionResult.COMMIT))
    loaded: dict[str, TransactionMetadata] = {}
    for m in (empty, txn, prepared):
        rec.replay(loaded, *rec.record(m))
    restored = loaded[TID]
    assert restored == prepared
    assert rec.markers_to_resend([restored]) == [(TID, TransactionResult.COMMIT)]
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    retry = end(restored, TransactionResult.COMMIT, **old)
    assert isinstance(retry, Refuse) and retry.error is ErrorCode.CONCURRENT_TRANSACTIONS
    done = applied(restored, d.complete_transaction(restored, now_ms=9))
    rec.replay(loaded, *rec.record(done))
    again = end(loaded[TID], TransactionResult.COMMIT, **old)
    assert again == Reply(txn.producer_id, txn.producer_epoch + 1)


def test_an_end_that_moved_to_a_new_producer_id_is_still_recognised_after_replay() -> None:
    ids = ProducerIds(77)
    empty = init().replace(producer_epoch=MAX_USABLE_EPOCH - 1)
    txn = applied(empty, add(empty, T0))
    prepared = applied(txn, end(txn, TransactionResult.ABORT, ids=ids))
    done = applied(prepared, d.complete_transaction(prepared, now_ms=9))
    loaded: dict[str, TransactionMetadata] = {}
    rec.replay(loaded, *rec.record(done))
    assert loaded[TID] == done
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    assert end(loaded[TID], TransactionResult.ABORT, **old) == Reply(77, 0)


def test_after_a_failover_a_fenced_producers_late_end_txn_changes_nothing() -> None:
    """The record cannot say who ended the transaction: the fenced producer's EndTxn is
    answered as a retry (documented in the module), and the state stays as it is."""
    empty = init()
    txn = applied(empty, add(empty, T0))
    aborting = d.abort_timed_out(txn, now_ms=10**6, allocate_producer_id=ProducerIds())
    assert aborting is not None
    done = applied(applied(txn, aborting), d.complete_transaction(aborting.after, now_ms=10**6))
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    before = end(done, TransactionResult.COMMIT, **old)
    assert isinstance(before, Refuse) and before.error is ErrorCode.PRODUCER_FENCED
    loaded: dict[str, TransactionMetadata] = {}
    rec.replay(loaded, *rec.record(done))
    commit = end(loaded[TID], TransactionResult.COMMIT, **old)
    assert isinstance(commit, Refuse) and commit.error is ErrorCode.INVALID_TXN_STATE
    assert end(loaded[TID], TransactionResult.ABORT, **old) == Reply(
        done.producer_id, done.producer_epoch
    )
