"""The transaction coordinator's decisions: Kafka's ``TransactionCoordinator`` without the I/O.

Each request handler is a pure function of the id's current
:class:`~headwater.transactions.metadata.TransactionMetadata` (None: the coordinator holds
none for the id), the request, the time and the settings, returning a
:mod:`~headwater.transactions.results` value.  The runtime that will own the
``__transaction_state`` partitions appends the records, writes the markers, answers
the clients and reads the clock; nothing here does.  The one input drawn from outside
is a new producer id, which a decision asks of ``allocate_producer_id`` only when it
needs one (a new transactional id, or an exhausted epoch).

The rules, Kafka's with transaction version 2 (KIP-890):

* a request names the producer id and epoch it holds; a producer id that is not the
  id's is INVALID_PRODUCER_ID_MAPPING, an epoch that is not the current one is
  PRODUCER_FENCED (a zombie, or a late message of an older transaction);
* while a record for the id is being appended, or a transaction's markers are being
  written (PrepareCommit/PrepareAbort), anything that would change the id is
  CONCURRENT_TRANSACTIONS, which the producer retries;
* every transaction end bumps the epoch: EndTxn answers the new epoch, and the markers
  carry it, so nothing the producer sent during the ended transaction is accepted
  afterwards.  A retried EndTxn (it carries the epoch before the bump) is answered as
  the first one was: success if it asks for the same result, INVALID_TXN_STATE if not,
  CONCURRENT_TRANSACTIONS while the markers are still being written;
* InitProducerId for an id with an open transaction fences it: the epoch is bumped
  through PrepareEpochFence, the transaction is aborted, and the caller retries
  (CONCURRENT_TRANSACTIONS) until the abort is complete;
* a transaction open longer than its timeout is aborted by the coordinator the same
  way; an id idle for ``transactional.id.expiration.ms`` with none open is removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set

from headwater.errors import ErrorCode
from headwater.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TransactionConfig,
    TransactionMetadata,
    is_epoch_exhausted,
)
from headwater.transactions.results import Decision, Refuse, Reply, Transition
from headwater.transactions.state import (
    IllegalStateError,
    TransactionResult,
    TransactionState,
    check_transition,
)
from headwater.values import TopicPartition

S = TransactionState

MAX_TRANSACTIONAL_ID_BYTES = 0x7FFF
"""A transactional id is a Kafka ``string``: at most 32767 bytes of UTF-8."""

AllocateProducerId = Callable[[], int]


# -- checks shared by the handlers --------------------------------------------------------


def _check_transactional_id(transactional_id: str) -> Refuse | None:
    if not transactional_id:
        return Refuse(ErrorCode.INVALID_REQUEST, "the transactional id must not be empty")
    if len(transactional_id.encode()) > MAX_TRANSACTIONAL_ID_BYTES:
        return Refuse(
            ErrorCode.INVALID_REQUEST,
            f"the transactional id is longer than {MAX_TRANSACTIONAL_ID_BYTES} bytes",
        )
    return None


def _check_producer(
    current: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> Refuse | None:
    """The request's producer owns the id at the current epoch, and nothing is pending."""
    if current is None:
        return Refuse(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            "no producer id is assigned to this transactional id: call InitProducerId",
        )
    if (
        current.next_producer_id != NO_PRODUCER_ID
        and producer_id == current.next_producer_id
        and producer_epoch == 0
    ):
        # EndTxn moved the id to a new producer id: its markers are still being written.
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, "the previous transaction is completing")
    if producer_id != current.producer_id:
        return Refuse(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            f"producer id {producer_id} is not this transactional id's ({current.producer_id})",
        )
    if producer_epoch != current.producer_epoch:
        return Refuse(
            ErrorCode.PRODUCER_FENCED,
            f"epoch {producer_epoch} is not the current epoch {current.producer_epoch}",
        )
    if current.pending_transition_in_progress:
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"{current.pending_state} is in progress")
    return None


def _illegal(current: TransactionMetadata) -> IllegalStateError:
    return IllegalStateError(
        f"transactional id {current.transactional_id!r} is held in state {current.state}"
    )


def _transition(
    current: TransactionMetadata,
    after: TransactionMetadata,
    *,
    reply: Reply | Refuse | None,
    markers: TransactionResult | None = None,
    via: TransactionState | None = None,
) -> Transition:
    """A checked transition ``current.state -> [via ->] after.state``; ``before`` is pending."""
    if via is not None:
        check_transition(check_transition(current.state, via), after.state)
    else:
        check_transition(current.state, after.state)
    before = current.replace(pending_state=via or after.state)
    return Transition(before, after.replace(pending_state=None), reply, markers)


def _bump_epoch(
    current: TransactionMetadata, allocate_producer_id: AllocateProducerId
) -> tuple[int, int, int]:
    """``(producer_id, epoch, previous_producer_id)`` after one epoch bump: the next epoch,
    or a new producer id at epoch 0 once the next epoch would be exhausted."""
    if is_epoch_exhausted(current.producer_epoch + 1):
        return allocate_producer_id(), 0, current.producer_id
    return current.producer_id, current.producer_epoch + 1, current.previous_producer_id


def _end_bump(
    current: TransactionMetadata, allocate_producer_id: AllocateProducerId
) -> tuple[int, int]:
    """``(epoch, next_producer_id)`` for a transaction end: the markers carry ``epoch``
    (at most MAX_USABLE_EPOCH); at MAX_USABLE_EPOCH the id then moves to a new id."""
    epoch = current.producer_epoch + 1
    return epoch, allocate_producer_id() if is_epoch_exhausted(epoch) else NO_PRODUCER_ID


def _answer(after: TransactionMetadata) -> Reply:
    """The producer id and epoch the producer holds once ``after``'s markers are written."""
    if after.next_producer_id != NO_PRODUCER_ID:
        return Reply(after.next_producer_id, 0)
    return Reply(after.producer_id, after.producer_epoch)


def _prepare_end(
    current: TransactionMetadata,
    result: TransactionResult,
    *,
    now_ms: int,
    allocate_producer_id: AllocateProducerId,
    fenced: bool,
    reply: Reply | Refuse | None,
    bump_epoch: bool = True,
) -> Transition:
    """Ongoing (or, for an abort, Empty/Complete*) -> PrepareCommit/PrepareAbort, epoch bumped.

    ``fenced``: the coordinator ends the transaction itself (timeout, InitProducerId), so
    the old epoch is not remembered as a retry (``last_producer_epoch`` is cleared).
    ``bump_epoch`` False: a transaction version 1 producer's EndTxn, which keeps its epoch
    (the markers carry it, and a retry carries it too).
    """
    if bump_epoch:
        epoch, next_producer_id = _end_bump(current, allocate_producer_id)
    else:
        epoch, next_producer_id = current.producer_epoch, NO_PRODUCER_ID
    target = S.PREPARE_COMMIT if result is TransactionResult.COMMIT else S.PREPARE_ABORT
    after = current.replace(
        state=target,
        producer_epoch=epoch,
        next_producer_id=next_producer_id,
        last_producer_epoch=NO_PRODUCER_EPOCH if fenced else current.producer_epoch,
        txn_last_update_timestamp_ms=now_ms,
    )
    if current.state is not S.ONGOING:
        after = after.replace(partitions=frozenset(), txn_start_timestamp_ms=now_ms)
    if reply is None and not fenced:
        reply = _answer(after)
    return _transition(
        current,
        after,
        reply=reply,
        markers=result,
        via=S.PREPARE_EPOCH_FENCE if fenced else None,
    )


# -- InitProducerId -----------------------------------------------------------------------


def init_producer_id(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    transaction_timeout_ms: int,
    now_ms: int,
    config: TransactionConfig,
    allocate_producer_id: AllocateProducerId,
    expected_producer_id: int = NO_PRODUCER_ID,
    expected_producer_epoch: int = NO_PRODUCER_EPOCH,
) -> Decision:
    """InitProducerId with a transactional id: a producer id and a new epoch for it.

    A new id gets a new producer id at epoch 0.  A known id with no open transaction
    gets its epoch bumped, which fences every older instance of the producer.  An open
    transaction is aborted first (PrepareEpochFence, then PrepareAbort) and the caller
    retries; one whose markers are being written answers CONCURRENT_TRANSACTIONS.
    ``expected_producer_id``/``_epoch`` (KIP-360: a producer recovering its own id) must
    be the current ones, or the ones the last InitProducerId bumped from (a retry of it,
    answered with the current ones); anything else is PRODUCER_FENCED.
    """
    if refused := _check_transactional_id(transactional_id):
        return refused
    if not 0 < transaction_timeout_ms <= config.transaction_max_timeout_ms:
        return Refuse(
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
            f"transaction.timeout.ms {transaction_timeout_ms} is not in "
            f"(0, transaction.max.timeout.ms = {config.transaction_max_timeout_ms}]",
        )
    if (expected_producer_id == NO_PRODUCER_ID) != (expected_producer_epoch == NO_PRODUCER_EPOCH):
        return Refuse(
            ErrorCode.INVALID_REQUEST, "the expected producer id and epoch must be set together"
        )
    if current is None:
        producer_id = allocate_producer_id()
        new = TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=NO_PRODUCER_EPOCH,
            transaction_timeout_ms=transaction_timeout_ms,
            state=S.EMPTY,
            txn_last_update_timestamp_ms=now_ms,
        )
        after = new.replace(producer_epoch=0)
        return _transition(new, after, reply=Reply(producer_id, 0))
    if current.pending_transition_in_progress:
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"{current.pending_state} is in progress")
    retry = False
    if expected_producer_id != NO_PRODUCER_ID:
        owner = (expected_producer_id, expected_producer_epoch) == (
            current.producer_id,
            current.producer_epoch,
        )
        retry = (
            current.last_producer_epoch != NO_PRODUCER_EPOCH
            and expected_producer_epoch == current.last_producer_epoch
            and expected_producer_id in (current.producer_id, current.previous_producer_id)
        )
        if not owner and not retry:
            return Refuse(
                ErrorCode.PRODUCER_FENCED,
                f"producer {expected_producer_id} at epoch {expected_producer_epoch} "
                "is not this transactional id's current producer",
            )
    if current.state.is_completing:
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is in {current.state}")
    if current.state is S.ONGOING:
        return _prepare_end(
            current,
            TransactionResult.ABORT,
            now_ms=now_ms,
            allocate_producer_id=allocate_producer_id,
            fenced=True,
            reply=Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, "aborting the open transaction"),
        )
    if current.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        raise _illegal(current)
    if retry and current.state is S.EMPTY:
        return Reply(current.producer_id, current.producer_epoch)
    producer_id, epoch, previous = _bump_epoch(current, allocate_producer_id)
    after = current.replace(
        state=S.EMPTY,
        producer_id=producer_id,
        producer_epoch=epoch,
        previous_producer_id=previous,
        last_producer_epoch=current.producer_epoch,
        transaction_timeout_ms=transaction_timeout_ms,
        partitions=frozenset(),
        txn_start_timestamp_ms=NO_TIMESTAMP,
        txn_last_update_timestamp_ms=now_ms,
    )
    return _transition(current, after, reply=Reply(producer_id, epoch))


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------


def add_partitions(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Set[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn: open a transaction, or add partitions to the open one.

    Partitions already in the open transaction are answered at once.  The caller has
    checked that each partition exists (UNKNOWN_TOPIC_OR_PARTITION is its answer) and
    that the principal may write it.
    """
    if refused := _check_transactional_id(transactional_id):
        return refused
    if not partitions:
        return Refuse(ErrorCode.INVALID_REQUEST, "no partitions to add")
    if refused := _check_producer(current, producer_id, producer_epoch):
        return refused
    assert current is not None
    if current.state.is_completing:
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is in {current.state}")
    if current.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        raise _illegal(current)
    reply = Reply(current.producer_id, current.producer_epoch)
    if current.state is S.ONGOING:
        if partitions <= current.partitions:
            return reply
        after = current.replace(
            partitions=current.partitions | partitions, txn_last_update_timestamp_ms=now_ms
        )
    else:
        after = current.replace(
            state=S.ONGOING,
            partitions=frozenset(partitions),
            txn_start_timestamp_ms=now_ms,
            txn_last_update_timestamp_ms=now_ms,
        )
    return _transition(current, after, reply=reply)


def add_offsets(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    offsets_partition: TopicPartition,
    now_ms: int,
) -> Decision:
    """AddOffsetsToTxn: add the group's ``__consumer_offsets`` partition to the transaction.

    ``offsets_partition`` is the group's partition of the offsets topic (the group
    coordinator's placement); the offsets themselves follow in TxnOffsetCommit.
    """
    if not group_id:
        return Refuse(ErrorCode.INVALID_GROUP_ID, "the group id must not be empty")
    return add_partitions(
        current,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partitions=frozenset({offsets_partition}),
        now_ms=now_ms,
    )


# -- EndTxn ----------------------------------------------------------------------------------


def end_transaction(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    result: TransactionResult,
    now_ms: int,
    allocate_producer_id: AllocateProducerId,
    bump_epoch: bool = True,
) -> Decision:
    """EndTxn: decide the open transaction's result; the answer carries the bumped epoch.

    With nothing open, an abort is accepted (it bumps the epoch and writes no marker
    anywhere: a producer unsure of its state may always abort) and a commit is
    INVALID_TXN_STATE.  ``bump_epoch`` False is transaction version 1 (Kafka's clients
    before KIP-890 part 2, EndTxn below v5): the epoch stays, so a retry carries the
    current epoch and is answered as the first EndTxn was.
    """
    if refused := _check_transactional_id(transactional_id):
        return refused
    if current is not None and current.ended_by(producer_id, producer_epoch):
        ended = (
            TransactionResult.COMMIT
            if current.state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
            else TransactionResult.ABORT
        )
        if ended is not result:
            return Refuse(
                ErrorCode.INVALID_TXN_STATE,
                f"the transaction already ended with {ended}, not {result}",
            )
        if current.state.is_completing:
            return Refuse(
                ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is in {current.state}"
            )
        return Reply(current.producer_id, current.producer_epoch)
    if refused := _check_producer(current, producer_id, producer_epoch):
        return refused
    assert current is not None
    if current.state.is_completing:
        return Refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is in {current.state}")
    if current.state is S.ONGOING or (
        result is TransactionResult.ABORT
        and current.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
    ):
        return _prepare_end(
            current,
            result,
            now_ms=now_ms,
            allocate_producer_id=allocate_producer_id,
            fenced=False,
            reply=None,
            bump_epoch=bump_epoch,
        )
    if current.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return Refuse(
            ErrorCode.INVALID_TXN_STATE, f"no transaction is open to commit ({current.state})"
        )
    raise _illegal(current)


# -- markers written --------------------------------------------------------------------------


def complete_transaction(current: TransactionMetadata, *, now_ms: int) -> Transition:
    """Every partition has its marker: PrepareCommit/PrepareAbort -> CompleteCommit/Abort.

    The partitions are cleared, and an id whose epoch ran out moves to its next
    producer id at epoch 0.  Raises IllegalStateError from any other state (the runtime
    only writes markers for a completing transaction).
    """
    if current.pending_transition_in_progress or not current.state.is_completing:
        raise _illegal(current)
    target = S.COMPLETE_COMMIT if current.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
    after = current.replace(
        state=target, partitions=frozenset(), txn_last_update_timestamp_ms=now_ms
    )
    if current.next_producer_id != NO_PRODUCER_ID:
        after = after.replace(
            producer_id=current.next_producer_id,
            producer_epoch=0,
            previous_producer_id=current.producer_id,
            next_producer_id=NO_PRODUCER_ID,
        )
    return _transition(current, after, reply=None)


def markers_to_write(current: TransactionMetadata) -> TransactionResult | None:
    """The marker a completing transaction still needs (after a coordinator failover)."""
    if current.state is S.PREPARE_COMMIT:
        return TransactionResult.COMMIT
    if current.state is S.PREPARE_ABORT:
        return TransactionResult.ABORT
    return None


# -- timers ------------------------------------------------------------------------------------


def timed_out(transactions: Iterable[TransactionMetadata], *, now_ms: int) -> list[str]:
    """The ids whose open transaction has outlived ``transaction.timeout.ms``, sorted."""
    return sorted(
        m.transactional_id
        for m in transactions
        if m.state is S.ONGOING
        and not m.pending_transition_in_progress
        and m.txn_start_timestamp_ms + m.transaction_timeout_ms < now_ms
    )


def abort_timed_out(
    current: TransactionMetadata, *, now_ms: int, allocate_producer_id: AllocateProducerId
) -> Transition | None:
    """The coordinator aborts an expired transaction: the producer's epoch is fenced
    (PrepareEpochFence) and the transaction goes to PrepareAbort.  None when the id is
    no longer in a timed-out Ongoing state (it moved on since :func:`timed_out`)."""
    if current.transactional_id not in timed_out([current], now_ms=now_ms):
        return None
    return _prepare_end(
        current,
        TransactionResult.ABORT,
        now_ms=now_ms,
        allocate_producer_id=allocate_producer_id,
        fenced=True,
        reply=None,
    )


def expired(
    transactions: Iterable[TransactionMetadata], *, now_ms: int, config: TransactionConfig
) -> list[str]:
    """The ids idle ``transactional.id.expiration.ms`` with no transaction open, sorted."""
    return sorted(
        m.transactional_id
        for m in transactions
        if m.state.expiration_allowed
        and not m.pending_transition_in_progress
        and m.txn_last_update_timestamp_ms + config.transactional_id_expiration_ms <= now_ms
    )


def expire(
    current: TransactionMetadata, *, now_ms: int, config: TransactionConfig
) -> Transition | None:
    """Remove an idle id: Dead, written as a tombstone.  None if it is no longer idle."""
    if current.transactional_id not in expired([current], now_ms=now_ms, config=config):
        return None
    after = current.replace(state=S.DEAD, txn_last_update_timestamp_ms=now_ms)
    return _transition(current, after, reply=None)


# -- the append's outcome -------------------------------------------------------------------------


def complete(current: TransactionMetadata, transition: Transition) -> TransactionMetadata | None:
    """The record of ``transition`` is written: the id's new state (None: it is removed)."""
    if current != transition.before:
        raise IllegalStateError(
            f"transactional id {current.transactional_id!r} changed while its record was appended"
        )
    return None if transition.after.state is S.DEAD else transition.after


def abandon(current: TransactionMetadata, transition: Transition) -> TransactionMetadata:
    """The append failed: the id is as before the decision, with nothing pending."""
    if current != transition.before:
        raise IllegalStateError(
            f"transactional id {current.transactional_id!r} changed while its record was appended"
        )
    return transition.before.replace(pending_state=None)


# -- partition leaders' verification (KIP-890) -----------------------------------------------


def verify_partition(
    current: TransactionMetadata | None,
    *,
    producer_id: int,
    producer_epoch: int,
    partition: TopicPartition,
) -> ErrorCode:
    """Whether a partition leader may append a transactional batch of this producer.

    The leader asks before the first transactional write of a transaction to a
    partition: NONE only while the transaction is Ongoing at exactly this producer id
    and epoch and ``partition`` was added to it.  A late produce of an ended or fenced
    transaction carries an older epoch (PRODUCER_FENCED); a produce for a partition
    never added, or after the end was decided, is INVALID_TXN_STATE.
    """
    if current is None or producer_id != current.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != current.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if current.state is not S.ONGOING or partition not in current.partitions:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE
