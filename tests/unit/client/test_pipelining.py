"""Several batches of one partition in flight (Kafka's idempotent producer), driven step
by step: the real Sender and RecordAccumulator on a virtual clock, a fake channel whose
calls the test answers in any order, and a broker deciding with the real producer-state
logic (duplicates of its last 5 batches, OUT_OF_ORDER_SEQUENCE_NUMBER for gaps).

Covers: consecutive sequences for pipelined batches; a retriable failure of the first
of three sending all three again, one at a time, in sequence order with the same bytes;
OUT_OF_ORDER for a batch behind a failed one retried, not fatal (and fatal for the
oldest unresolved batch); a lost answer resolved as a duplicate with the original
offset while later batches wait; futures resolving in send order whatever order the
answers arrive in; the window of 5 unresolved batches; one batch at a time without
idempotence unless retries=0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from headwater import errors
from headwater.client.producer.accumulator import RecordAccumulator
from headwater.client.producer.idempotence import ProducerIdAndEpoch
from headwater.client.producer.sender import Sender
from headwater.client.settings import ProducerSettings
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.streams import UnaryCalls
from headwater.client.types import RecordMetadata, TopicPartition
from headwater.errors import ErrorCode
from headwater.records import Record, parse_header
from headwater.replication.producer_state import ProducerStateManager, Verdict
from headwater.retry import RetryPolicy
from headwater.server.runtime.idempotence import check_produce
from headwater.v1 import broker_pb2

TP = TopicPartition("t", 0)
ADDRESS = "leader:9092"
BACKOFF_MS = 10


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeCall:
    """One Produce call; the test delivers its answer (or loses it) when it wants."""

    def __init__(self, request: Any) -> None:
        self.request = request
        self._callbacks: list[Callable[[FakeCall], object]] = []
        self._response: Any = None
        self._error: BaseException | None = None

    @property
    def base_sequence(self) -> int:
        (p,) = self.request.partitions
        return parse_header(p.records, 0).base_sequence

    @property
    def records(self) -> bytes:
        (p,) = self.request.partitions
        return bytes(p.records)

    def add_done_callback(self, fn: Callable[[FakeCall], object]) -> None:
        self._callbacks.append(fn)

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._response

    def deliver(self, response: Any) -> None:
        self._response = response
        for fn in self._callbacks:
            fn(self)

    def lose(self) -> None:
        self._error = errors.NetworkError("injected: connection lost")
        for fn in self._callbacks:
            fn(self)


class FakeBroker:
    """The partition leader: a log of (base_offset, batch bytes) and producer state."""

    def __init__(self) -> None:
        self.calls: list[FakeCall] = []
        self.log: list[bytes] = []
        self.log_end = 0
        self.producers = ProducerStateManager()
        self.epoch = -1
        self.Produce = self  # the stub's attribute, called through FakePool

    def future(self, request: Any, timeout: float) -> FakeCall:
        call = FakeCall(request)
        self.calls.append(call)
        return call

    def InitProducerId(self, request: Any, timeout: float) -> Any:
        self.epoch += 1
        return broker_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=self.epoch)

    def process(self, call: FakeCall) -> Any:
        """The request reaches the broker: append or refuse, as the leader would."""
        (p,) = call.request.partitions
        check, batch = check_produce(self.producers, p.records)
        error, base = ErrorCode.NONE, -1
        if check.verdict is Verdict.REFUSE:
            error = check.error
        elif check.duplicate_of is not None:
            base = check.duplicate_of.base_offset
        else:
            base = self.log_end
            if batch is not None:  # None: not idempotent
                self.producers.update(batch, base_offset=base)
            self.log.append(bytes(p.records))
            self.log_end += parse_header(p.records, 0).last_offset_delta + 1
        return answer(error, base)

    def answer(self, call: FakeCall) -> None:
        call.deliver(self.process(call))


def answer(error: ErrorCode, base_offset: int = -1) -> Any:
    return broker_pb2.ProduceResponse(
        partitions=[
            broker_pb2.ProducePartitionResponse(
                topic=TP.topic,
                partition=TP.partition,
                error=int(error),
                base_offset=base_offset,
                log_append_time_ms=-1,
            )
        ]
    )


class FakePool:
    """Stands in for ``connection.CallPool``: the call is made when submitted and its
    outcome reported when the test delivers (or loses) the answer."""

    def submit(
        self, method: Any, request: Any, *, address: str, timeout_s: float, done: Any
    ) -> None:
        call = method.future(request, timeout=timeout_s)

        def finished(c: FakeCall) -> None:
            try:
                done(c.result(), None)
            except errors.HeadwaterError as exc:
                done(None, exc)

        call.add_done_callback(finished)


class FakeChannels:
    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker
        self.pool = FakePool()

    def broker(self, address: str) -> FakeBroker:
        assert address == ADDRESS
        return self._broker

    def inline_caller(self, method: str) -> UnaryCalls:
        return UnaryCalls(self, method)  # the stub's unary method, as over a SASL channel


class _Leader:
    address = ADDRESS


class _Cluster:
    brokers = {1: _Leader()}

    def leader(self, tp: TopicPartition) -> _Leader:
        return _Leader()


class FakeMetadata:
    current = _Cluster()

    def maybe_refresh(self) -> None:
        pass

    def request_update(self) -> None:
        pass


class Harness:
    """A producer without its threads: ``send`` appends, ``step`` runs one sender loop."""

    def __init__(self, *, retries: int = 2**31 - 1, **settings: Any) -> None:
        self.clock = Clock()
        self.broker = FakeBroker()
        self.settings = ProducerSettings(
            bootstrap_servers=(ADDRESS,),
            linger_ms=0,
            batch_size=100,  # one 60-byte record per batch
            retry=RetryPolicy(retries=retries, retry_backoff_ms=BACKOFF_MS, jitter=0.0),
            **settings,
        )
        self.acc = RecordAccumulator(
            batch_size=self.settings.batch_size,
            linger_ms=0,
            buffer_memory=1 << 20,
            delivery_timeout_ms=self.settings.delivery_timeout_ms,
            max_in_flight_per_partition=self.settings.max_in_flight_per_partition,
            clock=self.clock,
            wait=lambda cond, ms: None,
        )
        self.sender = Sender(
            settings=self.settings,
            accumulator=self.acc,
            metadata=cast(MetadataManager, FakeMetadata()),
            channels=cast(Any, FakeChannels(self.broker)),
            clock=self.clock,
            allow_inline=False,  # every call through FakePool, answered when the test says
        )
        self.resolved: list[int] = []
        """The record numbers whose futures resolved, in resolution order."""
        self._sent = 0

    def send(self, n: int) -> list[Any]:
        """Append ``n`` records numbered on from the last; each fills its own batch."""
        futures = []
        for number in range(self._sent, self._sent + n):
            fut = self.acc.append(TP, Record(None, b"%040d" % number, (), 0), max_block_ms=0)
            fut.future.add_done_callback(lambda _f, number=number: self.resolved.append(number))
            futures.append(fut.future)
        self._sent += n
        return futures

    def step(self, times: int = 1) -> None:
        for _ in range(times):
            self.sender.wakeup()  # never block on the event: time is virtual
            self.sender.run_once()

    def values(self) -> list[int]:
        from headwater.records import read_batches

        return [
            int(r.value or b"")
            for b in read_batches(b"".join(self.broker.log))
            for r in b.records()
        ]

    def offsets(self, futures: list[Any]) -> list[int]:
        return [cast(RecordMetadata, f.result(0)).offset for f in futures]


SEQUENCED = pytest.mark.parametrize(
    "settings",
    [{}, {"acks": 1, "enable_idempotence": False, "sequence_acks_1": True}],
    ids=["idempotent", "acks-1-sequenced"],
)


def first_acknowledged(h: Harness) -> Any:
    """One batch appended and acknowledged, so the broker has the producer's state."""
    (fut,) = h.send(1)
    h.step()
    h.broker.answer(h.broker.calls[-1])
    h.step()
    assert fut.result(0).offset == 0
    return fut


def test_an_init_producer_id_refused_by_acls_fails_every_record_at_once() -> None:
    """Kafka treats CLUSTER_AUTHORIZATION_FAILED on InitProducerId as fatal: no retry
    until delivery_timeout_ms, and records sent afterwards fail the same way."""
    h = Harness()
    asked = []

    def refuse(request: Any, timeout: float) -> Any:
        asked.append(request)
        return broker_pb2.InitProducerIdResponse(
            error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="no IDEMPOTENT_WRITE"
        )

    h.broker.InitProducerId = refuse  # type: ignore[method-assign]
    futs = h.send(2)
    h.step()
    for fut in futs:
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            fut.result(0)
    later = h.send(1)
    h.step()
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        later[0].result(0)
    assert len(asked) == 1 and h.broker.calls == []  # asked once, nothing produced


def test_batches_of_one_partition_pipeline_with_consecutive_sequences() -> None:
    h = Harness()
    first_acknowledged(h)
    h.send(3)
    h.step(3)
    assert [c.base_sequence for c in h.broker.calls] == [0, 1, 2, 3]
    assert h.acc.in_flight(TP) == 3


@SEQUENCED
def test_a_partition_pipelines_only_after_its_first_batch_is_acknowledged(
    settings: dict[str, Any],
) -> None:
    """A leader with no state for the producer accepts any sequence: had batch 2 gone
    out beside batch 1 and overtaken it, it would be appended first, and batch 1 then
    refused for good."""
    h = Harness(**settings)
    futs = h.send(3)
    h.step(3)
    assert len(h.broker.calls) == 1 and h.acc.in_flight(TP) == 1
    h.broker.answer(h.broker.calls[0])
    h.step(3)
    assert [c.base_sequence for c in h.broker.calls] == [0, 1, 2]
    for call in h.broker.calls[1:]:
        h.broker.answer(call)
    h.step()
    assert h.offsets(futs) == [0, 1, 2]
    # A new producer epoch starts over: its first batch goes alone again.
    h.sender._idempotence.set_producer_id(ProducerIdAndEpoch(7, 1))  # type: ignore[union-attr]
    h.broker.epoch = 1
    h.send(2)
    h.step(3)
    assert len(h.broker.calls) == 4


@SEQUENCED
def test_retriable_failure_resends_it_and_its_followers_in_sequence_order(
    settings: dict[str, Any],
) -> None:
    h = Harness(**settings)
    first_acknowledged(h)
    futs = h.send(3)
    h.step(3)
    one, two, three = h.broker.calls[1:]
    sent = [c.records for c in (one, two, three)]
    # The leader moved before batch 1 arrived; 2 and 3 then arrive out of sequence.
    refusals = [h.broker.process(two), h.broker.process(three)]
    assert [r.partitions[0].error for r in refusals] == [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER] * 2
    three.deliver(refusals[1])  # answers come back in any order
    h.step()
    one.deliver(answer(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    h.step()
    two.deliver(refusals[0])
    h.step()
    assert not any(f.done() for f in futs)  # OUT_OF_ORDER behind a retried batch: not fatal
    h.clock.now += 4 * BACKOFF_MS
    resent: list[FakeCall] = []
    for _ in range(3):
        h.step(2)  # a retry goes alone: the second loop sends nothing more
        assert len(h.broker.calls) == 4 + len(resent) + 1
        resent.append(h.broker.calls[-1])
        h.broker.answer(resent[-1])
    h.step()
    assert [c.records for c in resent] == sent  # same batches, same sequences, in order
    assert h.offsets(futs) == [1, 2, 3]
    assert h.values() == [0, 1, 2, 3]
    assert h.resolved == [0, 1, 2, 3]
    assert h.broker.epoch == 0  # no producer reset


def test_lost_answer_is_a_duplicate_and_later_batches_resolve_after_it() -> None:
    h = Harness()
    first_acknowledged(h)
    futs = h.send(3)
    h.step(3)
    one, two, three = h.broker.calls[1:]
    h.broker.process(one)  # appended; the answer is lost on the way back
    two.deliver(h.broker.process(two))
    three.deliver(h.broker.process(three))
    one.lose()
    h.step()
    assert [f.done() for f in futs] == [False, False, False]  # 2 and 3 wait for 1
    h.clock.now += 4 * BACKOFF_MS
    h.step()
    retry = h.broker.calls[-1]
    assert retry.records == one.records
    h.broker.answer(retry)  # a duplicate of the broker's last 5: the original offset
    h.step()
    assert h.offsets(futs) == [1, 2, 3]
    assert h.values() == [0, 1, 2, 3]  # appended once
    assert h.resolved == [0, 1, 2, 3]


def test_futures_resolve_in_send_order_when_answers_arrive_reversed() -> None:
    h = Harness()
    first_acknowledged(h)
    futs = h.send(3)
    h.step(3)
    calls = h.broker.calls[1:]
    for call in calls:
        h.broker.process(call)
    for call, base in zip(reversed(calls), (3, 2, 1), strict=True):
        call.deliver(answer(ErrorCode.NONE, base))
        h.step()
        assert futs[0].done() == (base == 1)
    assert h.resolved == [0, 1, 2, 3]
    assert h.offsets(futs) == [1, 2, 3]


def test_out_of_order_for_the_oldest_unresolved_batch_is_fatal() -> None:
    h = Harness()
    first_acknowledged(h)
    (fut,) = h.send(1)
    h.step()
    # Nothing before it is unresolved: the broker lost the producer's state.
    h.broker.calls[-1].deliver(answer(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER))
    h.step()
    assert isinstance(fut.exception(0), errors.OutOfOrderSequenceNumberError)
    (after,) = h.send(1)
    h.step()
    assert h.broker.epoch == 1  # a new epoch, numbering from 0 again
    assert h.broker.calls[-1].base_sequence == 0
    h.broker.answer(h.broker.calls[-1])
    h.step()
    assert after.result(0).offset == 1


def test_window_of_five_unresolved_batches_per_partition() -> None:
    h = Harness()
    first_acknowledged(h)
    futs = h.send(7)
    h.step(7)
    calls = h.broker.calls[1:]
    assert len(calls) == 5
    answers = [h.broker.process(call) for call in calls]  # all five appended
    calls[0].lose()
    for call, response in zip(calls[1:], answers[1:], strict=True):
        call.deliver(response)
    h.step(2)
    # Acknowledged batches behind the lost answer still hold the window: batch 6 waits,
    # so the broker cannot get more than 4 batches past the one to retry.
    assert len(h.broker.calls) == 6
    assert not any(f.done() for f in futs)
    h.clock.now += 4 * BACKOFF_MS
    h.step()
    retry = h.broker.calls[-1]
    assert retry.records == calls[0].records
    h.broker.answer(retry)  # still among the broker's last 5 batches: a duplicate
    h.step(3)
    assert len(h.broker.calls) == 9
    for call in h.broker.calls[-2:]:
        h.broker.answer(call)
    h.step()
    assert h.offsets(futs) == [1, 2, 3, 4, 5, 6, 7]
    assert h.values() == list(range(8))


@pytest.mark.parametrize(("retries", "depth"), [(2**31 - 1, 1), (0, 5)])
def test_without_idempotence_pipelines_only_when_nothing_is_retried(
    retries: int, depth: int
) -> None:
    h = Harness(retries=retries, acks=1, enable_idempotence=False)
    futs = h.send(6)
    h.step(6)
    assert len(h.broker.calls) == depth
    assert all(c.base_sequence == -1 for c in h.broker.calls)
    answered = 0
    for _ in range(6):  # answer what is in flight, oldest first, until all is sent
        for call in h.broker.calls[answered:]:
            h.broker.answer(call)
        answered = len(h.broker.calls)
        h.step(6)
    assert h.offsets(futs) == [0, 1, 2, 3, 4, 5]
    assert h.resolved == [0, 1, 2, 3, 4, 5]
