"""A partition's transactions: last stable offset, aborted-transaction index, recovery."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import pytest
from headwater.errors import CorruptRecordError, ErrorCode
from headwater.records import Record, build_batch, read_batches
from headwater.records.batch import Batch
from headwater.records.control import (
    AbortedTransaction,
    ControlRecordType,
    build_control_batch,
    committed_batches,
    set_batch_flags,
)
from headwater.storage.transactions import (
    ENTRY_SIZE,
    AbortedTxn,
    PartitionTransactions,
    TransactionIndex,
    collect_aborted,
    decode_aborted,
    encode_aborted,
    rebuild,
)
from hypothesis import given, settings
from hypothesis import strategies as st

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


@dataclass
class LogBuilder:
    """Appends batches at consecutive offsets and feeds them to a PartitionTransactions,
    as the leader will; segments roll every ``segment_batches`` batches."""

    segment_batches: int = 3
    state: PartitionTransactions = field(default_factory=PartitionTransactions)
    end: int = 0
    segments: list[tuple[int, list[bytes]]] = field(default_factory=list)
    indexes: dict[int, TransactionIndex] = field(default_factory=dict)

    def _append(self, data: bytes) -> Batch:
        (batch,) = read_batches(data)
        h = batch.header
        assert (
            self.state.check_append(
                h.producer_id,
                h.producer_epoch,
                is_transactional=h.is_transactional,
                is_control=h.is_control,
            )
            is ErrorCode.NONE
        )
        if not self.segments or len(self.segments[-1][1]) == self.segment_batches:
            self.segments.append((self.end, []))
            self.indexes[self.end] = TransactionIndex()
        self.segments[-1][1].append(data)
        aborted = self.state.append_batch(batch)
        if aborted is not None:
            self.indexes[self.segments[-1][0]].append(aborted)
        self.end = batch.next_offset
        return batch

    def data(self, pid: int, epoch: int = 0, *, count: int = 2, txn: bool = True) -> int:
        records = [Record(None, b"v%d" % i) for i in range(count)]
        raw = build_batch(
            records, base_offset=self.end, timestamp_ms=1, producer_id=pid, producer_epoch=epoch
        )
        return self._append(set_batch_flags(raw, transactional=txn)).base_offset

    def marker(self, pid: int, control_type: ControlRecordType, epoch: int = 1) -> int:
        raw = build_control_batch(
            control_type,
            producer_id=pid,
            producer_epoch=epoch,
            coordinator_epoch=0,
            timestamp_ms=1,
            base_offset=self.end,
        )
        return self._append(raw).base_offset

    def read_back(self) -> list[tuple[int, list[Batch]]]:
        """The segments as recovery reads them from disk."""
        return [(base, [b for r in raws for b in read_batches(r)]) for base, raws in self.segments]


def entries(indexes: dict[int, TransactionIndex]) -> dict[int, list[AbortedTxn]]:
    return {base: index.entries for base, index in indexes.items()}


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_offset() -> None:
    log = LogBuilder()
    log.data(-1, -1, txn=False)
    first = log.data(1)
    log.data(1)
    assert log.state.first_unstable_offset == first == 2
    assert log.state.last_stable_offset(high_watermark=log.end) == first
    assert log.state.last_stable_offset(high_watermark=1) == 1  # capped at the HW
    # Retention removed the transaction's start: the LSO is the first offset left.
    assert log.state.last_stable_offset(high_watermark=log.end, log_start_offset=3) == 3
    assert log.state.last_stable_offset(high_watermark=3, log_start_offset=5) == 3
    log.marker(1, COMMIT)
    assert log.state.first_unstable_offset is None
    assert log.state.last_stable_offset(high_watermark=log.end) == log.end


def test_an_abort_is_indexed_with_the_lso_of_the_other_open_transactions() -> None:
    log = LogBuilder(segment_batches=100)
    a = log.data(1)
    b = log.data(2)
    end_a = log.marker(1, ABORT)
    end_b = log.marker(2, ABORT)
    assert log.indexes[0].entries == [
        AbortedTxn(1, a, end_a, b),  # producer 2 still open: the LSO stays at its start
        AbortedTxn(2, b, end_b, end_b + 1),
    ]


def test_a_commit_or_a_marker_with_nothing_open_is_not_indexed() -> None:
    log = LogBuilder(segment_batches=100)
    log.data(1)
    log.marker(1, COMMIT)
    log.marker(1, ABORT, epoch=2)  # nothing open: an abort after a commit, or a repeat
    log.marker(3, ABORT)
    assert log.indexes[0].entries == []
    assert log.state.open == {}


def test_a_repeated_marker_is_found_written_until_the_producer_writes_again() -> None:
    log = LogBuilder(segment_batches=100)
    log.data(1)
    assert log.state.written_marker(1, 1, committed=True) is None  # open: not written yet
    end = log.marker(1, COMMIT)
    assert log.state.written_marker(1, 1, committed=True) == end
    assert log.state.written_marker(1, 1, committed=False) is None  # another type
    assert log.state.written_marker(1, 2, committed=True) is None  # another epoch
    assert log.state.written_marker(2, 1, committed=True) is None  # another producer
    log.data(1, epoch=1)  # the next transaction opens: the old marker is no answer to it
    assert log.state.written_marker(1, 1, committed=True) is None


def test_a_late_write_of_an_ended_transaction_is_fenced() -> None:
    """KIP-890: the marker carries epoch E + 1; a delayed produce or marker at E is refused."""
    log = LogBuilder()
    log.data(1, epoch=4)
    log.marker(1, ABORT, epoch=5)
    check = log.state.check_append
    assert check(1, 4, is_transactional=True, is_control=False) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert check(1, 4, is_transactional=True, is_control=True) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert check(1, 5, is_transactional=True, is_control=False) is ErrorCode.NONE


def test_a_plain_write_inside_an_open_transaction_is_invalid_txn_state() -> None:
    log = LogBuilder()
    log.data(1)
    check = log.state.check_append
    assert check(1, 0, is_transactional=False, is_control=False) is ErrorCode.INVALID_TXN_STATE
    assert check(2, 0, is_transactional=False, is_control=False) is ErrorCode.NONE
    assert check(-1, -1, is_transactional=False, is_control=False) is ErrorCode.NONE
    assert check(-1, -1, is_transactional=True, is_control=False) is ErrorCode.INVALID_RECORD


# -- the index ---------------------------------------------------------------------------------


def test_index_entries_are_kafkas_34_byte_layout_and_round_trip() -> None:
    entries = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 7, 8)]
    data = encode_aborted(entries)
    assert ENTRY_SIZE == 34 and len(data) == 68
    assert data[:34] == struct.pack(">hqqqq", 0, 1, 0, 4, 2)
    assert TransactionIndex.from_bytes(data).entries == entries


def test_bad_index_files_are_corrupt() -> None:
    good = encode_aborted([AbortedTxn(1, 0, 4, 2)])
    with pytest.raises(CorruptRecordError, match="not a whole number"):
        decode_aborted(good[:-1])
    with pytest.raises(CorruptRecordError, match="version 1"):
        decode_aborted(b"\x00\x01" + good[2:])
    with pytest.raises(CorruptRecordError, match="before first offset"):
        decode_aborted(encode_aborted([AbortedTxn(1, 9, 4, 2)]))


def test_index_entries_must_follow_each_other() -> None:
    index = TransactionIndex([AbortedTxn(1, 0, 4, 5)])
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(2, 1, 4, 5))


def test_collect_names_the_aborts_overlapping_the_range() -> None:
    index = TransactionIndex([AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10)])
    assert index.collect(5, 8) == ([AbortedTxn(2, 2, 9, 10)], True)
    assert index.collect(0, 2) == ([AbortedTxn(1, 0, 4, 2)], True)
    assert index.collect(10, 20) == ([], False)
    later = TransactionIndex([AbortedTxn(3, 12, 14, 15)])
    assert collect_aborted([index, later], 0, 11) == [
        AbortedTxn(1, 0, 4, 2),
        AbortedTxn(2, 2, 9, 10),
    ]
    assert collect_aborted([index, later], 0, 13) == [
        AbortedTxn(1, 0, 4, 2),
        AbortedTxn(2, 2, 9, 10),
        AbortedTxn(3, 12, 14, 15),
    ]


def test_truncation_drops_the_aborts_whose_marker_is_cut() -> None:
    index = TransactionIndex([AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10)])
    index.truncate_to(9)
    assert index.entries == [AbortedTxn(1, 0, 4, 2)]
    index.truncate_to(0)
    assert index.entries == []


# -- recovery ------------------------------------------------------------------------------------


def test_recovery_rebuilds_every_segments_index_and_the_open_transactions() -> None:
    log = LogBuilder(segment_batches=2)
    log.data(1)
    log.data(2)
    log.marker(1, ABORT)  # segment 2
    log.data(3)
    log.marker(2, COMMIT)  # segment 3
    log.marker(3, ABORT)
    log.data(1, epoch=1)  # a new transaction of producer 1, left open
    state, indexes = rebuild(log.read_back())
    assert entries(indexes) == entries(log.indexes)
    assert sum(len(i.entries) for i in indexes.values()) == 2
    assert state.open == log.state.open and state.epochs == log.state.epochs
    assert state.first_unstable_offset == log.state.first_unstable_offset is not None


# -- property: READ_COMMITTED filtering from the index matches the truth --------------------

actions = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["data", "data", "commit", "abort", "plain"])),
    max_size=40,
)


@settings(deadline=None, max_examples=150)
@given(actions, st.integers(1, 4))
def test_the_index_names_exactly_the_aborted_data_below_the_lso(
    steps: list[tuple[int, str]], segment_batches: int
) -> None:
    log = LogBuilder(segment_batches=segment_batches)
    txn_of: dict[int, list[int]] = {}  # producer -> offsets of its open transaction's data
    aborted_offsets: set[tuple[int, int]] = set()
    data_offsets: list[tuple[int, int]] = []
    epochs = {p: 0 for p in (1, 2, 3)}
    for pid, action in steps:
        if action == "data":
            offset = log.data(pid, epochs[pid])
            txn_of.setdefault(pid, []).append(offset)
            data_offsets.append((pid, offset))
        elif action == "plain":
            if pid not in txn_of:
                data_offsets.append((pid, log.data(pid, epochs[pid], txn=False)))
        else:
            epochs[pid] += 1  # the end bumps the epoch (KIP-890)
            log.marker(pid, COMMIT if action == "commit" else ABORT, epoch=epochs[pid])
            ended = txn_of.pop(pid, [])
            if action == "abort":
                aborted_offsets.update((pid, o) for o in ended)
    lso = log.state.last_stable_offset(high_watermark=log.end)
    if txn_of:
        assert lso == min(min(offsets) for offsets in txn_of.values())
    else:
        assert lso == log.end
    found = collect_aborted([log.indexes[b] for b, _ in log.segments], 0, lso)
    for pid, offset in data_offsets:
        if offset >= lso:
            continue
        in_abort = any(
            a.producer_id == pid and a.first_offset <= offset <= a.last_offset for a in found
        )
        assert in_abort == ((pid, offset) in aborted_offsets), (pid, offset)
    # What a READ_COMMITTED consumer returns from a fetch of [0, LSO) with those aborts.
    below_lso = [b for _, batches in log.read_back() for b in batches if b.base_offset < lso]
    named = [AbortedTransaction(a.producer_id, a.first_offset) for a in found]
    returned = {(b.producer_id, b.base_offset) for b in committed_batches(below_lso, named)}
    assert returned == {
        (pid, o) for pid, o in data_offsets if o < lso and (pid, o) not in aborted_offsets
    }
    _, rebuilt = rebuild(log.read_back())
    assert {b: i.entries for b, i in rebuilt.items()} == {
        b: i.entries for b, i in log.indexes.items()
    }
