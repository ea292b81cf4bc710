"""The transactional producer's client state machine: Kafka's states, the split between
fatal and abortable errors, the epoch EndTxn hands back, coordinator errors retried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from headwater import errors
from headwater.client.producer.idempotence import ProducerIdAndEpoch
from headwater.client.producer.transactions import (
    AddVerdict,
    TransactionManager,
    TransactionState,
    judge_add,
)
from headwater.client.transport import connection
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import broker_pb2, common_pb2, transaction_pb2

T0 = TopicPartition("t", 0)


class Scripted(TransactionManager):
    """The manager with its coordinator calls answered by ``answers[method]``."""

    def __init__(self, answers: dict[str, list[Any]]) -> None:
        super().__init__(
            transactional_id="tx",
            transaction_timeout_ms=10_000,
            channels=connection.Channels(),
            addresses=lambda: ["127.0.0.1:1"],
            request_timeout_ms=100,
            max_block_ms=500,
        )
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def _answer(self, method: str, request: Any) -> Any:
        self.calls.append((method, request))
        answer = self.answers[method].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _init_call(self, request: broker_pb2.InitProducerIdRequest) -> Any:
        return self._answer("InitProducerId", request)

    def _coordinator_rpc(self, method: str, request: Any) -> Any:
        return self._answer(method, request)


def init_ok(pid: int = 7, epoch: int = 0) -> broker_pb2.InitProducerIdResponse:
    return broker_pb2.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


def add_answer(code: ErrorCode = ErrorCode.NONE) -> transaction_pb2.AddPartitionsToTxnResponse:
    return transaction_pb2.AddPartitionsToTxnResponse(
        error=code, partitions=[common_pb2.PartitionError(topic="t", partition=0, error=code)]
    )


def end_ok(pid: int = 7, epoch: int = 1) -> transaction_pb2.EndTxnResponse:
    return transaction_pb2.EndTxnResponse(producer_id=pid, producer_epoch=epoch)


NO_FLUSH: Callable[[], None] = lambda: None  # noqa: E731


def ready(answers: dict[str, list[Any]]) -> Scripted:
    m = Scripted({"InitProducerId": [init_ok()], **answers})
    m.init_transactions()
    return m


def test_init_retries_concurrent_transactions_then_is_ready() -> None:
    m = Scripted(
        {
            "InitProducerId": [
                broker_pb2.InitProducerIdResponse(error=ErrorCode.CONCURRENT_TRANSACTIONS),
                broker_pb2.InitProducerIdResponse(error=ErrorCode.NOT_COORDINATOR),
                init_ok(9, 3),
            ]
        }
    )
    m.init_transactions()
    assert m.state is TransactionState.READY
    assert m.producer == ProducerIdAndEpoch(9, 3)
    assert m.calls[0][1].transactional_id == "tx"
    assert m.calls[0][1].transaction_timeout_ms == 10_000


def test_send_outside_a_transaction_is_refused() -> None:
    m = ready({})
    with pytest.raises(errors.InvalidTxnStateError, match="begin_transaction"):
        m.check_send()
    m.begin_transaction()
    m.check_send()
    with pytest.raises(errors.InvalidTxnStateError):
        m.begin_transaction()


def test_commit_sends_end_txn_and_takes_the_bumped_epoch() -> None:
    m = ready({"AddPartitionsToTxn": [add_answer()], "EndTxn": [end_ok(7, 1)]})
    m.begin_transaction()
    assert m.needs_adding([T0]) == [T0]
    assert m.maybe_add_partitions([T0]).code is ErrorCode.NONE
    assert m.needs_adding([T0]) == []
    flushed: list[bool] = []
    m.end_transaction(commit=True, flush=lambda: flushed.append(True))
    assert flushed == [True]
    assert m.state is TransactionState.READY
    assert m.producer == ProducerIdAndEpoch(7, 1)
    ((_, end),) = [c for c in m.calls if c[0] == "EndTxn"]
    assert end.committed and (end.producer_id, end.producer_epoch) == (7, 0)


def test_a_transaction_that_sent_nothing_ends_without_the_coordinator() -> None:
    m = ready({})
    m.begin_transaction()
    m.end_transaction(commit=True, flush=NO_FLUSH)
    assert m.state is TransactionState.READY and [c for c, _ in m.calls] == ["InitProducerId"]


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    m = ready({"AddPartitionsToTxn": [add_answer()], "EndTxn": [end_ok(7, 1)]})
    m.begin_transaction()
    m.maybe_add_partitions([T0])
    m.batch_failed(errors.for_code(ErrorCode.MESSAGE_TOO_LARGE, "too large"))
    assert m.state is TransactionState.ABORTABLE_ERROR
    with pytest.raises(errors.HeadwaterError, match="too large"):
        m.end_transaction(commit=True, flush=NO_FLUSH)
    with pytest.raises(errors.HeadwaterError, match="too large"):
        m.check_send()
    m.end_transaction(commit=False, flush=NO_FLUSH)  # abort: allowed, and READY again
    assert m.state is TransactionState.READY
    ((_, end),) = [c for c in m.calls if c[0] == "EndTxn"]
    assert not end.committed


def test_producer_fenced_is_fatal() -> None:
    m = ready({"AddPartitionsToTxn": [add_answer()], "EndTxn": [end_ok()]})
    m.answers["EndTxn"] = [transaction_pb2.EndTxnResponse(error=ErrorCode.PRODUCER_FENCED)]
    m.begin_transaction()
    m.maybe_add_partitions([T0])
    with pytest.raises(errors.ProducerFencedError):
        m.end_transaction(commit=True, flush=NO_FLUSH)
    assert m.state is TransactionState.FATAL_ERROR
    with pytest.raises(errors.ProducerFencedError):
        m.begin_transaction()
    with pytest.raises(errors.ProducerFencedError):
        m.end_transaction(commit=False, flush=NO_FLUSH)


def test_add_partitions_retriable_and_abortable_answers() -> None:
    m = ready(
        {
            "AddPartitionsToTxn": [
                add_answer(ErrorCode.CONCURRENT_TRANSACTIONS),
                add_answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ]
        }
    )
    m.begin_transaction()
    assert m.maybe_add_partitions([T0]).code is ErrorCode.CONCURRENT_TRANSACTIONS
    assert m.state is TransactionState.IN_TRANSACTION  # retried later
    assert m.maybe_add_partitions([T0]).code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert m.state is TransactionState.ABORTABLE_ERROR


def test_a_first_add_refused_concurrent_transactions_is_retried_sooner() -> None:
    t1 = TopicPartition("t", 1)
    m = ready({"AddPartitionsToTxn": [add_answer(ErrorCode.CONCURRENT_TRANSACTIONS), add_answer()]})
    m.begin_transaction()
    assert m.maybe_add_partitions([T0]).code is ErrorCode.CONCURRENT_TRANSACTIONS
    # nothing in the transaction yet: the previous one is finishing its markers
    assert m.add_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, 100) == 20
    assert m.add_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, 5) == 5  # never longer
    assert m.add_retry_backoff_ms(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 100) == 100
    assert m.maybe_add_partitions([T0]).code is ErrorCode.NONE
    # a partition is in the transaction: the configured backoff
    assert m.needs_adding([t1]) == [t1]
    assert m.add_retry_backoff_ms(ErrorCode.CONCURRENT_TRANSACTIONS, 100) == 100


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="transactional_id"):
        TransactionManager(
            transactional_id="",
            transaction_timeout_ms=1,
            channels=connection.Channels(),
            addresses=list,
            request_timeout_ms=1,
            max_block_ms=1,
        )
    with pytest.raises(ValueError, match="transaction_timeout_ms"):
        TransactionManager(
            transactional_id="x",
            transaction_timeout_ms=0,
            channels=connection.Channels(),
            addresses=list,
            request_timeout_ms=1,
            max_block_ms=1,
        )


def test_partitions_are_still_added_during_the_flush_before_end_txn() -> None:
    m = ready({"AddPartitionsToTxn": [add_answer()], "EndTxn": [end_ok(7, 1)]})
    m.begin_transaction()
    added: list[ErrorCode] = []
    # A record sent just before commit: its partition is added while commit flushes.
    m.end_transaction(commit=True, flush=lambda: added.append(m.maybe_add_partitions([T0]).code))
    assert added == [ErrorCode.NONE]
    assert [c for c, _ in m.calls] == ["InitProducerId", "AddPartitionsToTxn", "EndTxn"]


def partition_answers(*codes: ErrorCode) -> transaction_pb2.AddPartitionsToTxnResponse:
    return transaction_pb2.AddPartitionsToTxnResponse(
        partitions=[
            common_pb2.PartitionError(topic="t", partition=i, error=c) for i, c in enumerate(codes)
        ]
    )


E = ErrorCode


@pytest.mark.parametrize(
    ("codes", "verdict", "code"),
    [
        ([E.NONE, E.NONE], AddVerdict.ADDED, E.NONE),
        ([E.PRODUCER_FENCED, E.PRODUCER_FENCED], AddVerdict.FATAL, E.PRODUCER_FENCED),
        (
            [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED],
            AddVerdict.FATAL,
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        ([E.NOT_COORDINATOR], AddVerdict.RETRY_ELSEWHERE, E.NOT_COORDINATOR),
        (
            [E.NONE, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS],
            AddVerdict.RETRY_ELSEWHERE,
            E.COORDINATOR_LOAD_IN_PROGRESS,
        ),
        ([E.NONE, E.CONCURRENT_TRANSACTIONS], AddVerdict.RETRY, E.CONCURRENT_TRANSACTIONS),
        # the coordinator does not know a new topic yet (Kafka retries it too)
        (
            [E.NONE, E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION],
            AddVerdict.RETRY,
            E.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            [E.NONE, E.TOPIC_AUTHORIZATION_FAILED, E.UNKNOWN_TOPIC_OR_PARTITION],
            AddVerdict.RETRY,
            E.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            [E.NONE, E.OPERATION_NOT_ATTEMPTED, E.TOPIC_AUTHORIZATION_FAILED],
            AddVerdict.ABORTABLE,
            E.TOPIC_AUTHORIZATION_FAILED,
        ),
        ([E.NONE, E.OPERATION_NOT_ATTEMPTED], AddVerdict.ABORTABLE, E.OPERATION_NOT_ATTEMPTED),
        ([E.NONE, E.INVALID_REQUEST], AddVerdict.ABORTABLE, E.INVALID_REQUEST),
    ],
)
def test_judge_add(codes: list[ErrorCode], verdict: AddVerdict, code: ErrorCode) -> None:
    assert judge_add(codes) == (verdict, code)


def test_a_partition_the_coordinator_does_not_know_yet_is_asked_again() -> None:
    t1 = TopicPartition("t", 1)
    m = ready(
        {
            "AddPartitionsToTxn": [
                partition_answers(E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION),
                partition_answers(E.NONE, E.NONE),
            ]
        }
    )
    m.begin_transaction()
    first = m.maybe_add_partitions([T0, t1])
    assert first.code is E.UNKNOWN_TOPIC_OR_PARTITION and first.error is None
    assert m.state is TransactionState.IN_TRANSACTION
    assert m.needs_adding([T0, t1]) == [T0, t1]
    assert m.maybe_add_partitions([T0, t1]).added
    assert m.needs_adding([T0, t1]) == []


def test_a_refused_add_fails_the_transaction_with_its_cause() -> None:
    m = ready({"AddPartitionsToTxn": [partition_answers(E.TOPIC_AUTHORIZATION_FAILED)]})
    m.begin_transaction()
    refused = m.maybe_add_partitions([T0])
    assert refused.code is E.TOPIC_AUTHORIZATION_FAILED
    assert isinstance(refused.error, errors.TopicAuthorizationFailedError)
    assert m.state is TransactionState.ABORTABLE_ERROR
    # Asked again while abortable: nothing is sent, the batches fail with the cause.
    again = m.maybe_add_partitions([TopicPartition("t", 1)])
    assert again.error is refused.error
    assert [c for c, _ in m.calls].count("AddPartitionsToTxn") == 1


def test_the_first_abortable_error_stays_the_cause_and_a_fatal_one_replaces_it() -> None:
    m = ready({})
    m.begin_transaction()
    first = errors.for_code(E.MESSAGE_TOO_LARGE, "too large")
    m.batch_failed(first)
    m.batch_failed(errors.for_code(E.INVALID_TXN_STATE, "a consequence"))
    with pytest.raises(errors.HeadwaterError, match="too large"):
        m.end_transaction(commit=True, flush=NO_FLUSH)
    m.batch_failed(errors.for_code(E.PRODUCER_FENCED, "fenced"))
    assert m.state is TransactionState.FATAL_ERROR
    with pytest.raises(errors.ProducerFencedError):
        m.end_transaction(commit=False, flush=NO_FLUSH)
