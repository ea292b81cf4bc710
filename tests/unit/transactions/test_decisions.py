"""The transaction coordinator's decisions: every edge reached, every error path answered."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.transactions import decisions as d
from headwater.transactions.metadata import (
    MAX_USABLE_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
)
from headwater.transactions.results import Decision, Refuse, Reply, Transition
from headwater.transactions.state import (
    VALID_PREVIOUS_STATES,
    IllegalStateError,
    TransactionResult,
    TransactionState,
)

from tests.unit.transactions.helpers import (
    CONFIG,
    OFFSETS,
    T0,
    T1,
    TID,
    ProducerIds,
    add,
    applied,
    end,
    init,
    ongoing,
)

S = TransactionState
COMMIT = TransactionResult.COMMIT
ABORT = TransactionResult.ABORT


def refused(decision: Decision, error: ErrorCode) -> Refuse:
    assert isinstance(decision, Refuse), decision
    assert decision.error is error, decision
    return decision


def completed(current: TransactionMetadata) -> TransactionMetadata:
    return applied(current, d.complete_transaction(current, now_ms=5))


def reach(state: TransactionState) -> TransactionMetadata:
    if state is S.EMPTY:
        return init()
    txn = ongoing()
    if state is S.ONGOING:
        return txn
    result = COMMIT if state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) else ABORT
    prepared = applied(txn, end(txn, result))
    return prepared if state.is_completing else completed(prepared)


def init_decision(current: TransactionMetadata | None, **kw: int) -> Decision:
    args: dict[str, int] = {"transaction_timeout_ms": 10_000, "now_ms": 1} | kw
    return d.init_producer_id(
        current, transactional_id=TID, config=CONFIG, allocate_producer_id=ProducerIds(), **args
    )


def step(current: TransactionMetadata, target: TransactionState) -> Transition:
    """The decision that moves ``current`` towards ``target``."""
    decision: Decision | None
    if target is S.EMPTY:
        decision = init_decision(current)
    elif target is S.ONGOING:
        decision = add(current, T1)
    elif target is S.PREPARE_COMMIT:
        decision = end(current, COMMIT)
    elif target is S.PREPARE_EPOCH_FENCE:
        decision = init_decision(current)  # fencing an open transaction
    elif target is S.PREPARE_ABORT:
        decision = end(current, ABORT)
    elif target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        decision = d.complete_transaction(current, now_ms=9)
    else:
        decision = d.expire(current, now_ms=10**9, config=CONFIG)
    assert isinstance(decision, Transition), decision
    return decision


EDGES = [(prev, target) for target, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs]


@pytest.mark.parametrize(("previous", "target"), EDGES, ids=lambda s: s.value)
def test_every_edge_of_the_table_is_taken_by_a_decision(
    previous: TransactionState, target: TransactionState
) -> None:
    if previous is S.PREPARE_EPOCH_FENCE:
        t = step(reach(S.ONGOING), S.PREPARE_EPOCH_FENCE)  # the fence continues into the abort
        assert t.before.pending_state is S.PREPARE_EPOCH_FENCE
        assert t.after.state is target
        return
    t = step(reach(previous), target)
    assert t.before.state is previous
    if target is S.PREPARE_EPOCH_FENCE:
        assert t.before.pending_state is S.PREPARE_EPOCH_FENCE
        assert t.after.state is S.PREPARE_ABORT
    else:
        assert t.before.pending_state is target
        assert t.after.state is target and t.after.pending_state is None


# -- InitProducerId -------------------------------------------------------------------------


def test_a_new_transactional_id_gets_a_new_producer_id_at_epoch_0() -> None:
    ids = ProducerIds(7)
    t = d.init_producer_id(
        None,
        transactional_id=TID,
        transaction_timeout_ms=10_000,
        now_ms=3,
        config=CONFIG,
        allocate_producer_id=ids,
    )
    assert isinstance(t, Transition)
    assert t.reply == Reply(7, 0)
    assert (t.after.producer_id, t.after.producer_epoch, t.after.state) == (7, 0, S.EMPTY)
    assert t.after.transaction_timeout_ms == 10_000
    assert t.after.txn_last_update_timestamp_ms == 3


@pytest.mark.parametrize("bad_id", ["", "x" * 40_000])
def test_init_with_an_empty_or_too_long_id_is_an_invalid_request(bad_id: str) -> None:
    decision = d.init_producer_id(
        None,
        transactional_id=bad_id,
        transaction_timeout_ms=10_000,
        now_ms=0,
        config=CONFIG,
        allocate_producer_id=ProducerIds(),
    )
    refused(decision, ErrorCode.INVALID_REQUEST)


@pytest.mark.parametrize("timeout_ms", [0, -1, CONFIG.transaction_max_timeout_ms + 1])
def test_a_timeout_outside_the_maximum_is_invalid_transaction_timeout(timeout_ms: int) -> None:
    refused(
        init_decision(None, transaction_timeout_ms=timeout_ms),
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    )


def test_the_largest_timeout_allowed_is_transaction_max_timeout_ms() -> None:
    t = init_decision(None, transaction_timeout_ms=CONFIG.transaction_max_timeout_ms)
    assert isinstance(t, Transition)


def test_an_expected_producer_id_without_its_epoch_is_an_invalid_request() -> None:
    refused(init_decision(init(), expected_producer_id=1000), ErrorCode.INVALID_REQUEST)


def test_init_on_a_known_id_bumps_the_epoch() -> None:
    empty = init()
    t = init_decision(empty)
    assert isinstance(t, Transition)
    assert t.reply == Reply(empty.producer_id, 1)
    assert (t.after.producer_epoch, t.after.last_producer_epoch) == (1, 0)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_markers_are_written_is_concurrent_transactions(state: TransactionState) -> None:
    refused(init_decision(reach(state)), ErrorCode.CONCURRENT_TRANSACTIONS)


def test_init_while_a_record_is_appended_is_concurrent_transactions() -> None:
    pending = step(init(), S.ONGOING).before
    refused(init_decision(pending), ErrorCode.CONCURRENT_TRANSACTIONS)


def test_init_with_an_open_transaction_fences_and_aborts_it() -> None:
    txn = ongoing()
    t = init_decision(txn)
    assert isinstance(t, Transition)
    assert t.before.pending_state is S.PREPARE_EPOCH_FENCE
    assert t.after.state is S.PREPARE_ABORT and t.markers is ABORT
    assert t.after.partitions == {T0}
    assert t.after.producer_epoch == txn.producer_epoch + 1
    refused(t.reply or Reply(0, 0), ErrorCode.CONCURRENT_TRANSACTIONS)  # the caller retries
    aborting = applied(txn, t)
    refused(init_decision(aborting), ErrorCode.CONCURRENT_TRANSACTIONS)
    # The fenced producer's own requests carry the old epoch.
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    refused(end(aborting, COMMIT, **old), ErrorCode.PRODUCER_FENCED)
    refused(end(aborting, ABORT, **old), ErrorCode.PRODUCER_FENCED)
    aborted = completed(aborting)
    assert aborted.state is S.COMPLETE_ABORT and aborted.partitions == frozenset()
    refused(end(aborted, ABORT, **old), ErrorCode.PRODUCER_FENCED)
    retried = init_decision(aborted)
    assert isinstance(retried, Transition)
    assert retried.reply == Reply(txn.producer_id, txn.producer_epoch + 2)


def test_init_expecting_a_stale_producer_is_producer_fenced() -> None:
    empty = init_decision_applied(init())
    refused(
        init_decision(empty, expected_producer_id=empty.producer_id, expected_producer_epoch=5),
        ErrorCode.PRODUCER_FENCED,
    )
    refused(
        init_decision(empty, expected_producer_id=42, expected_producer_epoch=empty.producer_epoch),
        ErrorCode.PRODUCER_FENCED,
    )


def init_decision_applied(current: TransactionMetadata, **kw: int) -> TransactionMetadata:
    return applied(current, init_decision(current, **kw))


def test_init_expecting_the_current_producer_bumps_and_a_retry_of_it_changes_nothing() -> None:
    empty = init()
    mine = {"expected_producer_id": empty.producer_id, "expected_producer_epoch": 0}
    bumped = init_decision_applied(empty, **mine)
    assert bumped.producer_epoch == 1
    assert init_decision(bumped, **mine) == Reply(empty.producer_id, 1)


def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id() -> None:
    ids = ProducerIds(500)
    empty = init().replace(producer_epoch=MAX_USABLE_EPOCH - 1)
    t = d.init_producer_id(
        empty,
        transactional_id=TID,
        transaction_timeout_ms=10_000,
        now_ms=0,
        config=CONFIG,
        allocate_producer_id=ids,
    )
    assert isinstance(t, Transition)
    assert t.reply == Reply(500, 0)
    assert (t.after.producer_id, t.after.previous_producer_id) == (500, empty.producer_id)


# -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------


def test_add_partitions_opens_a_transaction_and_grows_it() -> None:
    empty = init()
    t = add(empty, T0, now_ms=4)
    assert isinstance(t, Transition)
    assert t.reply == Reply(empty.producer_id, 0)
    txn = applied(empty, t)
    assert (txn.state, txn.partitions, txn.txn_start_timestamp_ms) == (S.ONGOING, {T0}, 4)
    grown = applied(txn, add(txn, T1, now_ms=6))
    assert grown.partitions == {T0, T1} and grown.txn_start_timestamp_ms == 4


def test_partitions_already_in_the_transaction_are_answered_without_a_write() -> None:
    txn = ongoing()
    assert add(txn, T0) == Reply(txn.producer_id, txn.producer_epoch)


def test_a_new_transaction_after_a_completed_one_starts_with_only_its_partitions() -> None:
    done = reach(S.COMPLETE_COMMIT)
    txn = applied(done, add(done, T1, now_ms=50))
    assert txn.partitions == {T1} and txn.txn_start_timestamp_ms == 50


def test_add_partitions_error_paths() -> None:
    txn = ongoing()
    kw = {"transactional_id": TID, "now_ms": 0, "partitions": frozenset({T1})}
    pid, epoch = txn.producer_id, txn.producer_epoch
    refused(
        d.add_partitions(None, producer_id=pid, producer_epoch=epoch, **kw),
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    )
    refused(
        d.add_partitions(txn, producer_id=pid + 1, producer_epoch=epoch, **kw),
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    )
    for stale in (epoch - 1, epoch + 1):
        refused(
            d.add_partitions(txn, producer_id=pid, producer_epoch=stale, **kw),
            ErrorCode.PRODUCER_FENCED,
        )
    refused(
        d.add_partitions(
            txn,
            transactional_id=TID,
            producer_id=pid,
            producer_epoch=epoch,
            partitions=frozenset(),
            now_ms=0,
        ),
        ErrorCode.INVALID_REQUEST,
    )
    refused(add(step(txn, S.ONGOING).before, T1), ErrorCode.CONCURRENT_TRANSACTIONS)
    for state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        refused(add(reach(state), T1), ErrorCode.CONCURRENT_TRANSACTIONS)


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    empty = init()
    t = d.add_offsets(
        empty,
        transactional_id=TID,
        producer_id=empty.producer_id,
        producer_epoch=0,
        group_id="g",
        offsets_partition=OFFSETS,
        now_ms=0,
    )
    assert isinstance(t, Transition) and t.after.partitions == {OFFSETS}


def test_add_offsets_with_no_group_is_invalid_group_id() -> None:
    empty = init()
    decision = d.add_offsets(
        empty,
        transactional_id=TID,
        producer_id=empty.producer_id,
        producer_epoch=0,
        group_id="",
        offsets_partition=OFFSETS,
        now_ms=0,
    )
    refused(decision, ErrorCode.INVALID_GROUP_ID)


# -- EndTxn ---------------------------------------------------------------------------------


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_end_txn_prepares_the_result_and_bumps_the_epoch(result: TransactionResult) -> None:
    txn = ongoing()
    t = end(txn, result, now_ms=8)
    assert isinstance(t, Transition)
    assert t.after.state is (S.PREPARE_COMMIT if result is COMMIT else S.PREPARE_ABORT)
    assert t.markers is result and t.after.partitions == {T0}
    assert t.after.producer_epoch == txn.producer_epoch + 1
    assert t.reply == Reply(txn.producer_id, txn.producer_epoch + 1)
    done = completed(applied(txn, t))
    assert done.state is (S.COMPLETE_COMMIT if result is COMMIT else S.COMPLETE_ABORT)
    assert done.partitions == frozenset() and done.producer_epoch == txn.producer_epoch + 1


def test_end_txn_for_an_unknown_id_or_another_producer_is_invalid_producer_id_mapping() -> None:
    txn = ongoing()
    refused(
        end(txn, COMMIT, producer_id=txn.producer_id + 1), ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    decision = d.end_transaction(
        None,
        transactional_id=TID,
        producer_id=1,
        producer_epoch=0,
        result=COMMIT,
        now_ms=0,
        allocate_producer_id=ProducerIds(),
    )
    refused(decision, ErrorCode.INVALID_PRODUCER_ID_MAPPING)


def test_end_txn_with_an_empty_id_is_an_invalid_request() -> None:
    decision = d.end_transaction(
        None,
        transactional_id="",
        producer_id=1,
        producer_epoch=0,
        result=COMMIT,
        now_ms=0,
        allocate_producer_id=ProducerIds(),
    )
    refused(decision, ErrorCode.INVALID_REQUEST)


@pytest.mark.parametrize("delta", [-1, 1])
def test_end_txn_with_another_epoch_is_producer_fenced(delta: int) -> None:
    empty = init_decision_applied(init())
    txn = applied(empty, add(empty, T0))
    refused(end(txn, COMMIT, producer_epoch=txn.producer_epoch + delta), ErrorCode.PRODUCER_FENCED)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_commit_with_nothing_open_is_invalid_txn_state(state: TransactionState) -> None:
    refused(end(reach(state), COMMIT), ErrorCode.INVALID_TXN_STATE)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_abort_with_nothing_open_bumps_the_epoch_and_writes_no_marker(
    state: TransactionState,
) -> None:
    current = reach(state)
    t = end(current, ABORT, now_ms=3)
    assert isinstance(t, Transition)
    assert t.after.state is S.PREPARE_ABORT and t.after.partitions == frozenset()
    assert t.after.producer_epoch == current.producer_epoch + 1


def test_end_txn_while_a_record_is_appended_is_concurrent_transactions() -> None:
    refused(end(step(ongoing(), S.ONGOING).before, COMMIT), ErrorCode.CONCURRENT_TRANSACTIONS)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_a_new_end_txn_while_markers_are_written_is_concurrent_transactions(
    state: TransactionState,
) -> None:
    refused(end(reach(state), ABORT), ErrorCode.CONCURRENT_TRANSACTIONS)


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_a_retried_end_txn_is_answered_as_the_first_was(result: TransactionResult) -> None:
    txn = ongoing()
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    other = ABORT if result is COMMIT else COMMIT
    prepared = applied(txn, end(txn, result))
    refused(end(prepared, result, **old), ErrorCode.CONCURRENT_TRANSACTIONS)
    refused(end(prepared, other, **old), ErrorCode.INVALID_TXN_STATE)
    done = completed(prepared)
    assert end(done, result, **old) == Reply(done.producer_id, done.producer_epoch)
    refused(end(done, other, **old), ErrorCode.INVALID_TXN_STATE)


def test_a_late_end_txn_of_an_older_transaction_is_fenced_and_changes_nothing() -> None:
    """KIP-890: the delayed EndTxn(commit) of transaction 1 cannot end transaction 2."""
    first = ongoing()
    old = {"producer_id": first.producer_id, "producer_epoch": first.producer_epoch}
    aborted = completed(applied(first, end(first, ABORT)))
    second = applied(aborted, add(aborted, T1))
    for result in (COMMIT, ABORT):
        refused(end(second, result, **old), ErrorCode.PRODUCER_FENCED)
    third = applied(second, end(second, COMMIT))
    refused(end(third, COMMIT, **old), ErrorCode.PRODUCER_FENCED)
    late_add = d.add_partitions(
        second, transactional_id=TID, partitions=frozenset({T0}), now_ms=0, **old
    )
    refused(late_add, ErrorCode.PRODUCER_FENCED)
    assert second.partitions == {T1}


def test_an_end_at_the_last_usable_epoch_moves_the_id_to_a_new_producer_id() -> None:
    ids = ProducerIds(900)
    empty = init().replace(producer_epoch=MAX_USABLE_EPOCH - 1)
    txn = applied(empty, add(empty, T0))
    t = end(txn, COMMIT, ids=ids)
    assert isinstance(t, Transition)
    assert t.reply == Reply(900, 0)
    assert (t.after.producer_id, t.after.producer_epoch) == (txn.producer_id, MAX_USABLE_EPOCH)
    assert t.after.next_producer_id == 900
    prepared = applied(txn, t)
    # The producer already holds the new id; its next transaction waits for the markers.
    new_id = {"producer_id": 900, "producer_epoch": 0}
    refused(
        d.add_partitions(
            prepared, transactional_id=TID, partitions=frozenset({T1}), now_ms=0, **new_id
        ),
        ErrorCode.CONCURRENT_TRANSACTIONS,
    )
    done = completed(prepared)
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (
        900,
        0,
        txn.producer_id,
    )
    assert done.next_producer_id == NO_PRODUCER_ID
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    assert end(done, COMMIT, **old) == Reply(900, 0)
    assert isinstance(
        d.add_partitions(
            done, transactional_id=TID, partitions=frozenset({T1}), now_ms=0, **new_id
        ),
        Transition,
    )


# -- markers, timeouts, expiration ----------------------------------------------------------


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_markers_complete_only_a_completing_transaction(state: TransactionState) -> None:
    with pytest.raises(IllegalStateError):
        d.complete_transaction(reach(state), now_ms=0)


def test_markers_to_write_after_a_failover() -> None:
    assert d.markers_to_write(reach(S.PREPARE_COMMIT)) is COMMIT
    assert d.markers_to_write(reach(S.PREPARE_ABORT)) is ABORT
    assert d.markers_to_write(reach(S.ONGOING)) is None


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator() -> None:
    txn = ongoing(now_ms=100)  # transaction.timeout.ms 10 s
    assert d.timed_out([txn, init()], now_ms=10_100) == []
    assert d.timed_out([txn, init()], now_ms=10_101) == [TID]
    assert d.abort_timed_out(txn, now_ms=10_100, allocate_producer_id=ProducerIds()) is None
    t = d.abort_timed_out(txn, now_ms=10_101, allocate_producer_id=ProducerIds())
    assert t is not None and t.reply is None and t.markers is ABORT
    assert t.before.pending_state is S.PREPARE_EPOCH_FENCE and t.after.state is S.PREPARE_ABORT
    assert t.after.last_producer_epoch == NO_PRODUCER_EPOCH
    aborted = completed(applied(txn, t))
    old = {"producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch}
    refused(end(aborted, COMMIT, **old), ErrorCode.PRODUCER_FENCED)
    refused(end(aborted, ABORT, **old), ErrorCode.PRODUCER_FENCED)
    refused(
        d.add_partitions(
            aborted, transactional_id=TID, partitions=frozenset({T0}), now_ms=0, **old
        ),
        ErrorCode.PRODUCER_FENCED,
    )


def test_a_transaction_with_a_pending_append_is_not_timed_out() -> None:
    pending = step(ongoing(), S.ONGOING).before
    assert d.timed_out([pending], now_ms=10**9) == []


def test_idle_ids_with_nothing_open_expire_as_dead() -> None:
    idle = {s: reach(s) for s in (S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_ABORT)}
    expiry = CONFIG.transactional_id_expiration_ms
    for state, m in idle.items():
        expected = [TID] if state.expiration_allowed else []
        assert (
            d.expired([m], now_ms=m.txn_last_update_timestamp_ms + expiry, config=CONFIG)
            == expected
        )
        assert (
            d.expired([m], now_ms=m.txn_last_update_timestamp_ms + expiry - 1, config=CONFIG) == []
        )
    empty = idle[S.EMPTY]
    assert d.expire(empty, now_ms=expiry - 1, config=CONFIG) is None
    t = d.expire(empty, now_ms=expiry, config=CONFIG)
    assert t is not None and t.after.state is S.DEAD
    assert d.complete(t.before, t) is None


def test_a_failed_append_leaves_the_id_as_it_was() -> None:
    txn = ongoing()
    t = end(txn, COMMIT)
    assert isinstance(t, Transition)
    assert d.abandon(t.before, t) == txn


def test_completing_an_append_on_changed_metadata_is_a_coordinator_bug() -> None:
    txn = ongoing()
    t = end(txn, COMMIT)
    assert isinstance(t, Transition)
    with pytest.raises(IllegalStateError):
        d.complete(txn, t)
    with pytest.raises(IllegalStateError):
        d.abandon(txn, t)
