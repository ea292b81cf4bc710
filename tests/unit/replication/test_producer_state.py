"""The idempotent producer state machine (``replication.producer_state``): in-sequence
appends, duplicates of the last five batches answered with their original offsets,
out-of-order and stale-epoch refusals, new epochs, sequence wrap-around, unknown
producers, rebuilding from log headers, and the bound on producer ids."""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.replication.producer_state import (
    MAX_SEQUENCE,
    ProducerBatch,
    ProducerStateManager,
    Verdict,
    increment_sequence,
)

PID = 7


def batch(seq: int, count: int = 1, *, epoch: int = 0, pid: int = PID) -> ProducerBatch:
    return ProducerBatch(pid, epoch, seq, count - 1)


def appended(manager: ProducerStateManager, b: ProducerBatch, offset: int) -> None:
    assert manager.check(b).verdict is Verdict.APPEND
    manager.update(b, base_offset=offset)


def test_in_sequence_batches_append() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, 3), 0)
    appended(m, batch(3, 2), 3)
    entry = m.entry(PID)
    assert entry is not None and entry.last_sequence == 4


def test_unknown_producer_is_accepted_at_any_sequence() -> None:
    m = ProducerStateManager()
    assert m.check(batch(42)).verdict is Verdict.APPEND


def test_batches_without_producer_id_are_not_tracked() -> None:
    m = ProducerStateManager()
    b = ProducerBatch(-1, -1, -1, 9)
    appended(m, b, 0)
    appended(m, b, 10)
    assert len(m) == 0


def test_duplicate_of_a_recent_batch_gets_its_original_offset() -> None:
    m = ProducerStateManager()
    for i in range(5):
        appended(m, batch(i * 2, 2), 100 + i * 2)
    result = m.check(batch(4, 2))
    assert result.verdict is Verdict.DUPLICATE
    assert result.duplicate_of is not None and result.duplicate_of.base_offset == 104
    assert result.duplicate_of.last_offset == 105


def test_only_the_last_five_batches_are_remembered() -> None:
    m = ProducerStateManager()
    for i in range(6):
        appended(m, batch(i), i)
    assert m.check(batch(1)).verdict is Verdict.DUPLICATE
    old = m.check(batch(0))
    assert old.verdict is Verdict.REFUSE
    assert old.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_gap_in_sequences_is_out_of_order() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, 5), 0)
    result = m.check(batch(6))
    assert result.verdict is Verdict.REFUSE
    assert result.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "expected 5" in result.message


def test_a_partial_overlap_is_not_a_duplicate() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, 5), 0)
    assert m.check(batch(0, 3)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_an_older_epoch_is_fenced() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, epoch=3), 0)
    result = m.check(batch(1, epoch=2))
    assert result.verdict is Verdict.REFUSE
    assert result.error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_duplicate_from_an_older_epoch_is_still_fenced() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, epoch=0), 0)
    appended(m, batch(0, epoch=1), 1)
    assert m.check(batch(0, epoch=0)).error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_epoch_must_restart_at_zero_and_forgets_old_batches() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, 10), 0)
    assert m.check(batch(10, epoch=1)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(m, batch(0, 2, epoch=1), 10)
    entry = m.entry(PID)
    assert entry is not None and entry.producer_epoch == 1
    assert [b.base_offset for b in entry.batches] == [10]


def test_stale_epoch_update_changes_nothing() -> None:
    m = ProducerStateManager()
    appended(m, batch(0, epoch=2), 0)
    m.update(batch(5, epoch=1), base_offset=9)
    entry = m.entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_sequence == 0


def test_sequences_wrap_after_the_maximum() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    m = ProducerStateManager()
    appended(m, batch(MAX_SEQUENCE - 1, 2), 0)
    assert m.check(batch(0, 1)).verdict is Verdict.APPEND
    wrapping = batch(MAX_SEQUENCE - 1, 4)
    assert wrapping.last_sequence == 1


def test_replay_rebuilds_the_same_state_as_live_appends() -> None:
    live = ProducerStateManager()
    logged: list[tuple[ProducerBatch, int]] = []
    offset = 0
    for i, pid in enumerate([1, 2, 1, 1, 2, 3, 1]):
        entry = live.entry(pid)
        seq = 0 if entry is None else entry.last_sequence + 1
        b = batch(seq, 1 + i % 3, pid=pid)
        appended(live, b, offset)
        logged.append((b, offset))
        offset += b.last_offset_delta + 1
    rebuilt = ProducerStateManager()
    rebuilt.replay(logged)
    for pid in (1, 2, 3):
        assert rebuilt.entry(pid) == live.entry(pid)
    b, original = logged[-1]
    result = rebuilt.check(b)
    assert result.duplicate_of is not None and result.duplicate_of.base_offset == original


def test_clear_forgets_everything() -> None:
    m = ProducerStateManager()
    appended(m, batch(0), 0)
    m.clear()
    assert len(m) == 0 and m.check(batch(9)).verdict is Verdict.APPEND


def test_least_recently_used_producers_are_evicted_beyond_the_bound() -> None:
    m = ProducerStateManager(max_producers=2)
    appended(m, batch(0, pid=1), 0)
    appended(m, batch(0, pid=2), 1)
    appended(m, batch(1, pid=1), 2)
    appended(m, batch(0, pid=3), 3)
    assert m.entry(2) is None
    assert m.entry(1) is not None and m.entry(3) is not None
