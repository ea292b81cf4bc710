"""The transactional producer's client side: Kafka's ``TransactionManager``, simplified.

A producer with a ``transactional_id`` is idempotent and writes its records in
transactions: ``init_transactions()`` finds the id's transaction coordinator
(FindCoordinator, key type 1) and gets the producer id and epoch (InitProducerId with
the id, which fences every older producer with the same id and aborts its open
transaction); ``begin_transaction()`` opens one locally; before the first batch of a
partition in a transaction the sender thread adds the partition with
AddPartitionsToTxn (:meth:`TransactionManager.maybe_add_partitions`); and
``commit_transaction()`` / ``abort_transaction()`` flush, then send EndTxn.  With
transaction version 2 (KIP-890) every EndTxn answers a bumped epoch, which the next
transaction's batches carry, so nothing of an ended transaction is accepted later.

States (Kafka's names)::

    UNINITIALIZED -init_transactions-> READY -begin-> IN_TRANSACTION
    IN_TRANSACTION -commit-> COMMITTING_TRANSACTION -EndTxn-> READY
    IN_TRANSACTION | ABORTABLE_ERROR -abort-> ABORTING_TRANSACTION -EndTxn-> READY
    IN_TRANSACTION -a batch or AddPartitionsToTxn fails-> ABORTABLE_ERROR
    any -PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, not authorized-> FATAL_ERROR

Errors split as Kafka splits them: *fatal* ones (fenced by a newer producer with the
same id, not authorized) leave the producer unusable -- close it; *abortable* ones
(a batch failed, a partition could not be added) require ``abort_transaction()``,
after which the producer may begin again.  Coordinator errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, ...) are retried inside the
call, until ``max_block_ms``.

Thread model: the caller's thread makes the coordinator calls of init/commit/abort/
send_offsets; the sender thread makes AddPartitionsToTxn and reads the producer id.  A
lock guards the shared state.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from headwater import errors
from headwater.client.producer.idempotence import ProducerIdAndEpoch
from headwater.client.transport import connection
from headwater.client.transport.coordinator import find_coordinator
from headwater.client.types import ConsumerGroupMetadata, TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import (
    broker_pb2,
    common_pb2,
    group_pb2,
    group_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
RETRY_BACKOFF_S = 0.05
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20.0
"""The wait before retrying a transaction's first AddPartitionsToTxn refused
CONCURRENT_TRANSACTIONS (Kafka's TransactionManager uses the same 20 ms)."""

_FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
"""Errors after which the producer cannot go on (Kafka's fatal errors)."""

_RETRY_ELSEWHERE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
"""Coordinator errors: find the coordinator again and retry."""


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_SENDING = frozenset(
    {
        TransactionState.IN_TRANSACTION,
        TransactionState.COMMITTING_TRANSACTION,  # the flush before EndTxn
        TransactionState.ABORTING_TRANSACTION,
    }
)
"""States in which the sender still sends the transaction's batches."""

_RETRY_ADD = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        # The coordinator's metadata has not caught up with a new topic yet.
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
"""AddPartitionsToTxn answers asked again of the same coordinator (Kafka's)."""


class AddVerdict(enum.Enum):
    """What an AddPartitionsToTxn answer means for the open transaction."""

    ADDED = "added"
    RETRY = "retry"
    RETRY_ELSEWHERE = "find the coordinator, then retry"
    ABORTABLE = "abortable"
    FATAL = "fatal"


_ADD_KINDS = (
    (AddVerdict.FATAL, _FATAL),
    (AddVerdict.RETRY_ELSEWHERE, _RETRY_ELSEWHERE),
    (AddVerdict.RETRY, _RETRY_ADD),
)


def judge_add(codes: Iterable[ErrorCode]) -> tuple[AddVerdict, ErrorCode]:
    """The verdict on an AddPartitionsToTxn answer (its error, then its partitions'),
    with the code that decided it.

    The gravest kind among the codes decides, in this order: a fatal code; a coordinator
    error (find the coordinator again); a code asked again as it is (:data:`_RETRY_ADD`);
    any other error makes the transaction abortable, for the first error that is not
    OPERATION_NOT_ATTEMPTED (the cause).  As in Kafka's ``AddPartitionsToTxnHandler``, a
    retriable partition error wins over TOPIC_AUTHORIZATION_FAILED.  Nothing is added
    unless every code is NONE.
    """
    failed = [c for c in codes if c is not ErrorCode.NONE]
    if not failed:
        return AddVerdict.ADDED, ErrorCode.NONE
    for verdict, kind in _ADD_KINDS:
        for code in failed:
            if code in kind:
                return verdict, code
    causes = [c for c in failed if c is not ErrorCode.OPERATION_NOT_ATTEMPTED]
    return AddVerdict.ABORTABLE, (causes or failed)[0]


class AddResult(NamedTuple):
    """What :meth:`TransactionManager.maybe_add_partitions` tells the sender."""

    code: ErrorCode
    error: errors.HeadwaterError | None = None
    """Set: the transaction has failed, and the partitions' batches fail with this.
    None while ``code`` is an error: ask again after a backoff."""

    @property
    def added(self) -> bool:
        return self.code is ErrorCode.NONE


class TransactionManager:
    """See the module docstring."""

    def __init__(
        self,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        channels: connection.Channels,
        addresses: Callable[[], list[str]],
        request_timeout_ms: int,
        max_block_ms: int,
    ) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        if transaction_timeout_ms <= 0:
            raise ValueError(f"transaction_timeout_ms must be > 0, not {transaction_timeout_ms}")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._channels = channels
        self._addresses = addresses
        self._request_timeout_ms = request_timeout_ms
        self._max_block_ms = max_block_ms
        self._lock = threading.Lock()
        self._state = TransactionState.UNINITIALIZED
        self._producer = ProducerIdAndEpoch(-1, -1)
        self._added: set[TopicPartition] = set()
        self._offsets_added = False
        self._error: errors.HeadwaterError | None = None
        self._coordinator: str | None = None

    # -- what the sender reads ---------------------------------------------------------

    @property
    def state(self) -> TransactionState:
        return self._state

    @property
    def producer(self) -> ProducerIdAndEpoch | None:
        """The producer id and epoch batches carry now (None: not initialized)."""
        with self._lock:
            return None if self._producer.producer_id < 0 else self._producer

    def needs_adding(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp in tps if tp not in self._added]

    def add_retry_backoff_ms(self, code: ErrorCode, retry_backoff_ms: float) -> float:
        """How long the sender waits before retrying AddPartitionsToTxn refused ``code``.

        CONCURRENT_TRANSACTIONS while no partition is in the transaction yet means the
        previous transaction is still writing its markers, which takes milliseconds:
        retry after :data:`ADD_PARTITIONS_RETRY_BACKOFF_MS`, not ``retry.backoff.ms``,
        so that back-to-back transactions are not paced by the backoff.
        """
        with self._lock:
            first = not self._added
        if code is ErrorCode.CONCURRENT_TRANSACTIONS and first:
            return min(retry_backoff_ms, ADD_PARTITIONS_RETRY_BACKOFF_MS)
        return retry_backoff_ms

    def maybe_add_partitions(self, tps: list[TopicPartition]) -> AddResult:
        """Sender thread: AddPartitionsToTxn for ``tps``, judged by :func:`judge_add`.

        Outside a sending state nothing is asked: the batches fail with the error that
        ended the transaction (or INVALID_TXN_STATE)."""
        with self._lock:
            if self._state not in _SENDING:
                error = self._error or errors.InvalidTxnStateError(
                    f"cannot add partitions in state {self._state.value}"
                )
                return AddResult(error.code, error)
            producer = self._producer
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            partitions=[
                common_pb2.TopicPartition(topic=t.topic, partition=t.partition) for t in tps
            ],
        )
        try:
            resp = self._coordinator_rpc("AddPartitionsToTxn", request)
        except errors.HeadwaterError as exc:
            verdict, code = judge_add([exc.code])
            message = str(exc)
        else:
            verdict, code = judge_add(
                [ErrorCode(resp.error), *(ErrorCode(p.error) for p in resp.partitions)]
            )
            message = resp.error_message or f"AddPartitionsToTxn {tps}"
        if verdict is AddVerdict.ADDED:
            with self._lock:
                self._added.update(tps)
            return AddResult(ErrorCode.NONE)
        if verdict in (AddVerdict.RETRY, AddVerdict.RETRY_ELSEWHERE):
            log.debug("AddPartitionsToTxn %s: %s, retrying", tps, code.name)
            if verdict is AddVerdict.RETRY_ELSEWHERE:
                self._coordinator = None
            return AddResult(code)
        error = errors.for_code(code, message)
        self._fail(error)
        return AddResult(code, self._error or error)

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the open transaction failed for good: the transaction must abort."""
        if isinstance(error, errors.HeadwaterError):
            self._fail(error)
        else:
            self._fail(errors.HeadwaterError(f"a batch of the transaction failed: {error}"))

    def _fail(self, error: errors.HeadwaterError) -> None:
        with self._lock:
            if self._state is TransactionState.FATAL_ERROR:
                return
            fatal = error.code in _FATAL
            if self._state is TransactionState.ABORTABLE_ERROR and not fatal:
                return  # the first failure is the reason the transaction must abort
            self._state = (
                TransactionState.FATAL_ERROR if fatal else TransactionState.ABORTABLE_ERROR
            )
            self._error = error

    # -- the caller's operations --------------------------------------------------------

    def init_transactions(self) -> None:
        with self._lock:
            if self._state is not TransactionState.UNINITIALIZED:
                raise errors.InvalidTxnStateError(
                    f"init_transactions() in state {self._state.value}"
                )
            self._state = TransactionState.INITIALIZING
        request = broker_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        try:
            resp = self._retrying("InitProducerId", lambda _address: self._init_call(request))
        except errors.HeadwaterError as exc:
            with self._lock:
                fatal = exc.code in _FATAL
                self._state = (
                    TransactionState.FATAL_ERROR if fatal else TransactionState.UNINITIALIZED
                )
                self._error = exc if fatal else None
            raise
        with self._lock:
            self._producer = ProducerIdAndEpoch(resp.producer_id, resp.producer_epoch)
            self._state = TransactionState.READY

    def begin_transaction(self) -> None:
        with self._lock:
            self._raise_if_fatal()
            if self._state is not TransactionState.READY:
                raise errors.InvalidTxnStateError(
                    f"begin_transaction() in state {self._state.value}"
                )
            self._state = TransactionState.IN_TRANSACTION
            self._added.clear()
            self._offsets_added = False

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction (Kafka's rule)."""
        state = self._state
        if state is TransactionState.IN_TRANSACTION:
            return
        with self._lock:
            self._raise_if_fatal()
            if self._state is TransactionState.ABORTABLE_ERROR and self._error is not None:
                raise self._error
            raise errors.InvalidTxnStateError(
                f"cannot send in state {self._state.value}: call begin_transaction() first"
            )

    def send_offsets(
        self, offsets: Mapping[TopicPartition, Any], group: ConsumerGroupMetadata
    ) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator."""
        with self._lock:
            self._raise_if_fatal()
            if self._state is not TransactionState.IN_TRANSACTION:
                raise errors.InvalidTxnStateError(
                    f"send_offsets_to_transaction() in state {self._state.value}"
                )
            producer = self._producer
        add = transaction_pb2.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            group_id=group.group_id,
        )
        self._end_or_add("AddOffsetsToTxn", add)
        with self._lock:
            self._offsets_added = True
        commit = transaction_pb2.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id or "",
            partitions=[
                transaction_pb2.TxnOffsetCommitPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    committed_offset=_offset(o),
                    committed_leader_epoch=getattr(o, "leader_epoch", -1),
                    committed_metadata=getattr(o, "metadata", "") or "",
                )
                for tp, o in offsets.items()
            ],
        )
        resp = self._group_rpc(group.group_id, "TxnOffsetCommit", commit)
        code = ErrorCode(resp.error) or next(
            (ErrorCode(p.error) for p in resp.partitions if p.error), ErrorCode.NONE
        )
        if code is not ErrorCode.NONE:
            error = errors.for_code(code, resp.error_message or "TxnOffsetCommit")
            self._fail(error)
            raise error

    def end_transaction(self, *, commit: bool, flush: Callable[[], None]) -> None:
        """Flush, then EndTxn; on success the producer is READY with the bumped epoch."""
        with self._lock:
            self._raise_if_fatal()
            if commit:
                if self._state is TransactionState.ABORTABLE_ERROR and self._error is not None:
                    raise self._error
                if self._state is not TransactionState.IN_TRANSACTION:
                    raise errors.InvalidTxnStateError(
                        f"commit_transaction() in state {self._state.value}"
                    )
                self._state = TransactionState.COMMITTING_TRANSACTION
            else:
                if self._state not in (
                    TransactionState.IN_TRANSACTION,
                    TransactionState.ABORTABLE_ERROR,
                ):
                    raise errors.InvalidTxnStateError(
                        f"abort_transaction() in state {self._state.value}"
                    )
                self._state = TransactionState.ABORTING_TRANSACTION
        flush()
        with self._lock:
            if commit and self._state is TransactionState.ABORTABLE_ERROR:
                assert self._error is not None
                raise self._error  # a batch failed during the flush: abort instead
            self._raise_if_fatal()
            producer = self._producer
            started = bool(self._added) or self._offsets_added
        if started:
            request = transaction_pb2.EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=producer.producer_id,
                producer_epoch=producer.epoch,
                committed=commit,
            )
            resp = self._end_or_add("EndTxn", request)
            new_producer = ProducerIdAndEpoch(resp.producer_id, resp.producer_epoch)
        else:
            new_producer = producer  # nothing reached the coordinator: nothing to end
        with self._lock:
            self._producer = new_producer
            self._added.clear()
            self._offsets_added = False
            self._error = None
            self._state = TransactionState.READY

    def _raise_if_fatal(self) -> None:
        if self._state is TransactionState.FATAL_ERROR:
            assert self._error is not None
            raise self._error

    # -- coordinator calls ----------------------------------------------------------------

    def _end_or_add(self, method: str, request: Any) -> Any:
        """A coordinator call retried on coordinator errors; other errors fail the
        transaction (fatal or abortable) and are raised."""
        try:
            return self._retrying(method, lambda _address: self._coordinator_rpc(method, request))
        except errors.HeadwaterError as exc:
            self._fail(exc)
            raise

    def _retrying(self, what: str, call: Callable[[str], Any]) -> Any:
        deadline = time.monotonic() + self._max_block_ms / 1000.0
        last: errors.HeadwaterError | None = None
        while True:
            addresses = self._addresses()
            for address in addresses:
                try:
                    resp = call(address)
                except errors.HeadwaterError as exc:
                    if exc.code not in _RETRY_ELSEWHERE:
                        raise
                    self._coordinator = None
                    last = exc
                    continue
                code = ErrorCode(resp.error)
                if code is ErrorCode.NONE:
                    return resp
                last = errors.for_code(code, resp.error_message or what)
                if code in _RETRY_ELSEWHERE:
                    self._coordinator = None
                elif code is not ErrorCode.CONCURRENT_TRANSACTIONS:
                    raise last
                break
            if time.monotonic() >= deadline:
                raise last or errors.RequestTimedOutError(f"{what} not answered in max_block_ms")
            time.sleep(RETRY_BACKOFF_S)

    def _find_coordinator(self) -> str:
        if self._coordinator is None:
            self._coordinator = find_coordinator(
                self._channels,
                self._addresses(),
                key=self.transactional_id,
                key_type=TRANSACTION_KEY_TYPE,
                timeout_ms=self._request_timeout_ms,
            )
        return self._coordinator

    def _init_call(self, request: broker_pb2.InitProducerIdRequest) -> Any:
        """InitProducerId with the id, on its coordinator's Broker service."""
        address = self._find_coordinator()
        return connection.call(
            self._channels.broker(address).InitProducerId,
            request,
            address=address,
            timeout_ms=self._request_timeout_ms,
        )

    def _coordinator_rpc(self, method: str, request: Any) -> Any:
        address = self._find_coordinator()
        stub = transaction_pb2_grpc.TransactionStub(self._channels.channel(address))
        return connection.call(
            getattr(stub, method), request, address=address, timeout_ms=self._request_timeout_ms
        )

    def _group_rpc(self, group_id: str, method: str, request: Any) -> Any:
        deadline = time.monotonic() + self._max_block_ms / 1000.0
        while True:
            address = None
            for candidate in self._addresses():
                stub = group_pb2_grpc.GroupStub(self._channels.channel(candidate))
                try:
                    found = connection.call(
                        stub.FindCoordinator,
                        group_pb2.FindCoordinatorRequest(key=group_id, key_type=0),
                        address=candidate,
                        timeout_ms=self._request_timeout_ms,
                    )
                except errors.NetworkError:
                    continue
                if not found.error_code:
                    address = f"{found.host}:{found.port}"
                    break
            if address is not None:
                stub_t = transaction_pb2_grpc.TransactionStub(self._channels.channel(address))
                resp = connection.call(
                    getattr(stub_t, method),
                    request,
                    address=address,
                    timeout_ms=self._request_timeout_ms,
                )
                if ErrorCode(resp.error) not in _RETRY_ELSEWHERE:
                    return resp
            if time.monotonic() >= deadline:
                raise errors.CoordinatorNotAvailableError(f"{method}: no group coordinator")
            time.sleep(RETRY_BACKOFF_S)


def _offset(o: Any) -> int:
    return int(o if isinstance(o, int) else o.offset)
