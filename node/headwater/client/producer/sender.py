"""The producer's background I/O thread: drain ready batches, send, handle answers.

One thread per producer owns all mutable sending state (in-flight counts,
sequence numbers, the producer id); gRPC completion callbacks only put the
answer on a queue and wake the thread, so no lock guards that state.  Each loop:

1. refresh metadata if requested or stale; obtain a producer id if idempotent;
2. handle finished requests (acknowledge, retry with backoff, or fail);
3. fail queued batches older than ``delivery_timeout_ms``;
4. group the ready partitions by leader and send **one request per broker**
   carrying one batch of every ready partition, while that broker has fewer
   than ``max_in_flight_requests_per_connection`` requests outstanding; a
   partition's next batch may go in the next request while the previous one
   is in flight (up to the accumulator's per-partition window);
5. sleep until the next batch may be ready, a request finishes or ``send``
   wakes it.

**Inline calls.**  A request normally goes to a pool worker
(:class:`connection.CallPool`), which makes the blocking call and queues its
answer for this thread.  When that request is the only work there is (nothing
in flight to any broker, one broker to send to, nothing else queued:
:func:`inline_calls.may_produce_inline`), this thread makes the call itself and
handles the answer at once, two thread hand-offs less per request for a
producer sending one record at a time; records appended meanwhile wait for the
call (:mod:`headwater.client.transport.inline_calls` says why that is safe).  An inline
request is a message on a long-lived ``ProduceStream`` to its broker
(:mod:`headwater.client.transport.streams`), not a unary call of its own.

Every outcome goes through :meth:`RecordAccumulator.finish`, which resolves a
partition's futures in send order whatever order the answers arrive in.  An
OUT_OF_ORDER_SEQUENCE_NUMBER answer for a batch sent while an earlier batch of
its partition was unresolved is what pipelining produces when that earlier batch
failed (or arrived second): the batch is retried, after its predecessors, with
the same sequence numbers.  The same answer for the oldest unresolved batch means
the broker lost the producer's state: that is fatal for the batch, as in Kafka.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from typing import Any, NamedTuple

from headwater import errors, records
from headwater.client.producer.accumulator import Outcome, ProducerBatch, RecordAccumulator
from headwater.client.producer.idempotence import IdempotenceState, ProducerIdAndEpoch
from headwater.client.producer.transactions import TransactionManager
from headwater.client.settings import ProducerSettings
from headwater.client.transport import connection, inline_calls, rpc_errors
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.v1 import broker_pb2

log = logging.getLogger(__name__)

_IDLE_WAIT_MS = 100.0


class _ExpectedOutOfOrderError(errors.OutOfOrderSequenceNumberError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent behind an unresolved one: retriable."""

    retriable = True


_OK = Outcome(base_offset=-1, timestamp_ms=None, error=None)


class _Finished(NamedTuple):
    address: str
    batches: list[ProducerBatch]
    response: Any
    error: errors.HeadwaterError | None


class Sender:
    """Runs :meth:`run` on its own thread; other threads call only :meth:`wakeup`
    and :meth:`initiate_close`/:meth:`force_close`."""

    def __init__(
        self,
        *,
        settings: ProducerSettings,
        accumulator: RecordAccumulator,
        metadata: MetadataManager,
        channels: connection.Channels,
        clock: Clock = monotonic_ms,
        allow_inline: bool = True,
        transactions: TransactionManager | None = None,
    ) -> None:
        """``allow_inline=False``: every request through the pool (tests that answer
        requests in an order of their choosing)."""
        self._settings = settings
        self._acc = accumulator
        self._metadata = metadata
        self._channels = channels
        self._clock = clock
        self._wakeup = threading.Event()
        self._finished: queue.SimpleQueue[_Finished] = queue.SimpleQueue()
        self._in_flight: dict[str, int] = defaultdict(int)
        self._allow_inline = allow_inline
        self._inline = channels.inline_caller("Produce")
        self._answered: set[str] = set()
        """Addresses whose last Produce got an answer (not a transport error)."""
        self._idempotence = IdempotenceState() if settings.sequenced else None
        if self._idempotence is not None:
            accumulator.may_pipeline = self._idempotence.may_pipeline
        self._running = True
        self._forced = False
        self._pid_retry_after_ms = 0.0
        self._pid_attempts = 0
        self._fatal: errors.HeadwaterError | None = None
        """An InitProducerId refused for good (authorization): every record fails with it."""
        self._transactions = transactions
        self._transactional_id = transactions.transactional_id if transactions else ""
        self._add_retry_after_ms = 0.0

    def wakeup(self) -> None:
        self._wakeup.set()

    def initiate_close(self) -> None:
        """Send what is queued, then stop."""
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now, failing whatever is unsent."""
        self._forced = True
        self._running = False
        self.wakeup()

    # -- the loop -------------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._running:
                self.run_once()
            while not self._forced and (self._acc.has_incomplete() or self._pending()):
                self.run_once()
        except Exception:
            log.exception("producer sender thread failed")
            self._forced = True
        self._inline.close()
        if self._forced:
            self._abort(errors.HeadwaterError("producer closed before the record was sent"))

    def _pending(self) -> bool:
        return any(self._in_flight.values())

    def run_once(self) -> None:
        self._metadata.maybe_refresh()
        self._handle_finished()
        now = self._clock()
        for batch in self._acc.expire(now):
            self._fail(
                batch,
                errors.RequestTimedOutError(
                    f"{len(batch)} record(s) for {batch.tp} expired: not acknowledged within "
                    f"delivery_timeout_ms={self._settings.delivery_timeout_ms}"
                ),
            )
        wait_ms = self._send_ready(now)
        if self._wakeup.wait(max(0.0, wait_ms) / 1000.0):
            self._wakeup.clear()

    def _send_ready(self, now: float) -> float:
        check = self._acc.ready(now)
        wait_ms = min(check.next_check_ms, _IDLE_WAIT_MS)
        if not check.ready:
            return wait_ms
        if self._fatal is not None:
            self._abort(self._fatal)
            return wait_ms
        if self._idempotence is not None and not self._ensure_producer_id(now):
            if self._fatal is not None:
                self._abort(self._fatal)
                return wait_ms
            return min(wait_ms, max(1.0, self._pid_retry_after_ms - now))
        ready = check.ready
        if self._transactions is not None:
            ready = self._add_to_transaction(ready, now)
            if not ready:
                return min(wait_ms, max(1.0, self._add_retry_after_ms - now))
        meta = self._metadata.current
        by_broker: dict[str, list[TopicPartition]] = defaultdict(list)
        leaderless = False
        for tp in ready:
            leader = meta.leader(tp)
            if leader is None:
                self._metadata.request_update()
                wait_ms = min(wait_ms, float(self._settings.retry.retry_backoff_ms))
                leaderless = True
                continue
            by_broker[leader.address].append(tp)
        for address, tps in by_broker.items():
            if self._in_flight[address] >= self._settings.max_in_flight_requests_per_connection:
                continue
            batches = self._acc.drain(tps)
            if batches:
                inline = self._allow_inline and inline_calls.may_produce_inline(
                    acks=self._settings.acks,
                    requests_in_flight=sum(self._in_flight.values()),
                    brokers_to_send=len(by_broker),
                    leaderless=leaderless,
                    answered_before=address in self._answered,
                    queued=self._acc.has_queued(),
                    request_bytes=sum(b.size_bytes for b in batches),
                )
                self._send(address, batches, now, inline=inline)
        return wait_ms

    def _add_to_transaction(self, ready: Any, now: float) -> list[TopicPartition]:
        """The ready partitions the coordinator has added to the open transaction, after
        adding the new ones, with every other partition that has records waiting
        (AddPartitionsToTxn); a refusal that fails the transaction fails their batches
        with its cause."""
        txn = self._transactions
        assert txn is not None
        new = txn.needs_adding(ready)
        if not new:
            return list(ready)
        if now < self._add_retry_after_ms:
            return [tp for tp in ready if tp not in new]
        # Every partition with records waiting goes in the same call: each call is a
        # coordinator round trip (and a __transaction_state append) this thread waits for.
        new = txn.needs_adding({*ready, *self._acc.queued_partitions()})
        added = txn.maybe_add_partitions(new)
        if added.added:
            return list(ready)
        if added.error is None:
            self._add_retry_after_ms = now + txn.add_retry_backoff_ms(
                added.code, self._settings.retry.retry_backoff_ms
            )
        else:
            for batch in self._acc.drain(new):
                self._fail(batch, added.error)
        return [tp for tp in ready if tp not in new]

    # -- producing ------------------------------------------------------------------

    def _encode(self, batch: ProducerBatch) -> bytes:
        producer_id, epoch, base_sequence = -1, -1, -1
        if self._idempotence is not None:
            state = self._idempotence
            if batch.encoded is not None and batch.producer == state.producer:
                return batch.encoded
            producer_id, epoch = state.producer
            base_sequence = state.assign(batch.tp, len(batch))
            batch.producer = state.producer
        elif batch.encoded is not None:
            return batch.encoded
        batch.base_sequence = base_sequence
        batch.encoded = records.finish_batch(
            batch.builder,
            compression=self._settings.compression_type,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=base_sequence,
            transactional=self._transactions is not None,
        )
        return batch.encoded

    def _send(
        self, address: str, batches: list[ProducerBatch], now: float, *, inline: bool = False
    ) -> None:
        acks = self._settings.acks
        try:
            request = broker_pb2.ProduceRequest(
                acks=acks,
                timeout_ms=self._settings.request_timeout_ms,
                transactional_id=self._transactional_id,
            )
            # add() writes each batch into the request once; building the sub-messages
            # first and passing a list deep-copies every MiB batch a second time.
            add = request.partitions.add
            for b in batches:
                add(topic=b.tp.topic, partition=b.tp.partition, records=self._encode(b))
        except Exception as exc:  # an encoding failure fails these records, not the thread
            for b in batches:
                self._fail(b, exc)
            return
        for b in batches:
            b.attempts += 1
        idle = not self._in_flight[address]
        self._in_flight[address] += 1

        def done(response: Any, error: errors.HeadwaterError | None) -> None:
            self._finished.put(_Finished(address, batches, response, error))
            self._wakeup.set()

        timeout_s = self._settings.request_timeout_ms / 1000.0
        if inline:
            # Made here, answered here: no pool worker, no queue hand-off back.
            try:
                response, error = self._inline.call(address, request, timeout_s=timeout_s), None
            except Exception as exc:
                response, error = None, rpc_errors.as_error(exc, address)
            self._finished.put(_Finished(address, batches, response, error))
            self._handle_finished()
            return
        try:
            if self._acc.max_in_flight_per_partition == 1 or (self._settings.sequenced and idle):
                # The pool's persistent workers: no thread started per request (see
                # connection.CallPool), which is what a trickle of records pays for
                # most.  Calls from different workers may overtake one another on the
                # way, so the pool takes a request only when nothing else of its
                # partitions can be overtaken: one batch per partition in flight, or
                # nothing in flight to this broker at all.
                self._channels.pool.submit(
                    self._channels.broker(address).Produce,
                    request,
                    address=address,
                    timeout_s=timeout_s,
                    done=done,
                )
            else:
                # Pipelined batches start on this thread, in drain order (one gRPC
                # channel keeps that order in practice; from pool threads about 5% of
                # 1 MiB requests overtook one another, each costing a resend).  With
                # sequence numbers the rare overtaking left (a pool call not started
                # yet) is refused by the leader and resent; without them (retries=0 or
                # acks=0) this is as ordered as one channel makes it.  grpc's
                # channel-spin thread starts with the first of these and stays while
                # one is in flight: one thread per burst, not one per request.
                call = self._channels.broker(address).Produce.future(request, timeout=timeout_s)
                call.add_done_callback(lambda fut: _report(fut, address, done))
        except errors.HeadwaterError as exc:
            self._finished.put(_Finished(address, batches, None, exc))
            return
        if acks == 0:  # nothing will be answered: the records are sent, as in Kafka
            for b in batches:
                self._finish(b, _OK)

    def _handle_finished(self) -> None:
        while True:
            try:
                fin = self._finished.get_nowait()
            except queue.Empty:
                return
            self._in_flight[fin.address] -= 1
            if isinstance(fin.error, errors.NetworkError | errors.RequestTimedOutError):
                self._answered.discard(fin.address)
            else:
                self._answered.add(fin.address)
            if fin.error is not None:
                self._channels_failed(fin)
                for b in fin.batches:
                    if b.outcome is None:
                        self._retry_or_fail(b, fin.error)
                continue
            answers = {(p.topic, p.partition): p for p in fin.response.partitions}
            for b in fin.batches:
                if b.outcome is not None:
                    continue  # acks=0: finished when sent
                p = answers.get(b.tp)
                if p is None:
                    self._retry_or_fail(b, errors.UnknownServerError(f"no answer for {b.tp}"))
                elif p.error == 0 or (
                    self._idempotence is not None and self._idempotence.is_duplicate(p.error)
                ):
                    log_append = p.log_append_time_ms if p.log_append_time_ms >= 0 else None
                    if self._idempotence is not None and b.producer == self._idempotence.producer:
                        self._idempotence.acknowledged(b.tp)
                    self._finish(b, Outcome(p.base_offset, log_append, None))
                else:
                    message = p.error_message or f"producing to {b.tp}"
                    error: errors.HeadwaterError
                    if (
                        p.error == errors.ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                        and b.predecessor_unresolved
                    ):
                        error = _ExpectedOutOfOrderError(message)
                    else:
                        error = errors.for_code(p.error, message)
                    self._retry_or_fail(b, error)

    def _channels_failed(self, fin: _Finished) -> None:
        if isinstance(fin.error, errors.NetworkError):
            self._metadata.request_update()

    def _retry_or_fail(self, batch: ProducerBatch, error: errors.HeadwaterError) -> None:
        now = self._clock()
        deadline = batch.created_ms + self._settings.delivery_timeout_ms
        if self._settings.acks != 0 and self._settings.retry.should_retry(
            error, attempt=batch.attempts, now_ms=now, deadline_ms=deadline
        ):
            if isinstance(
                error,
                errors.NotLeaderOrFollowerError
                | errors.NetworkError
                | errors.UnknownTopicOrPartitionError
                | errors.LeaderNotAvailableError
                | errors.FencedLeaderEpochError,
            ):
                self._metadata.request_update()
            log.debug("retrying %s after %s (attempt %d)", batch.tp, error, batch.attempts)
            if isinstance(error, _ExpectedOutOfOrderError):
                # It overtook its predecessor on the way (separate gRPC calls have no
                # order): nothing is wrong with the broker, so no backoff.  The retry
                # still waits until every earlier batch of its partition has come back.
                backoff_ms = 0.0
            else:
                backoff_ms = self._settings.retry.backoff_ms(batch.attempts)
            self._acc.reenqueue(batch, retry_after_ms=now + backoff_ms)
            return
        self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        log.debug("failing %d record(s) of %s: %s", len(batch), batch.tp, error)
        if self._idempotence is not None and batch.base_sequence >= 0:
            self._idempotence.batch_failed(error)
        if self._transactions is not None:
            self._transactions.batch_failed(error)
        self._finish(batch, Outcome(-1, None, error))

    def _finish(self, batch: ProducerBatch, outcome: Outcome) -> None:
        for b in self._acc.finish(batch, outcome):
            b.resolve()
            self._acc.done(b)

    def _abort(self, error: BaseException) -> None:
        for batch in self._acc.abort_all():
            batch.fail(error)
            self._acc.done(batch)

    # -- producer id ----------------------------------------------------------------

    def _ensure_producer_id(self, now: float) -> bool:
        state = self._idempotence
        assert state is not None
        if self._transactions is not None:
            # The transaction manager owns the id: InitProducerId and every EndTxn move it.
            producer = self._transactions.producer
            if producer is None:
                return False
            if producer != state.producer:
                if self._pending():
                    return False
                state.transaction_ended(producer)
            return True
        if state.has_producer_id:
            return True
        if self._pending() or now < self._pid_retry_after_ms:
            return False  # let in-flight batches finish under the old epoch first
        current = state.producer
        request = broker_pb2.InitProducerIdRequest(
            producer_id=current.producer_id, producer_epoch=current.epoch
        )
        meta = self._metadata.current
        addresses = [b.address for b in meta.brokers.values()] or list(
            self._settings.bootstrap_servers
        )
        self._pid_attempts += 1
        for address in addresses:
            try:
                resp = connection.call(
                    self._channels.broker(address).InitProducerId,
                    request,
                    address=address,
                    timeout_ms=self._settings.request_timeout_ms,
                )
            except errors.HeadwaterError as exc:
                log.debug("InitProducerId via %s failed: %s", address, exc)
                continue
            if resp.error:
                refused = errors.for_code(resp.error, resp.error_message)
                if refused.code in _FATAL_INIT_ERRORS:  # Kafka: fatal, never retried
                    log.error("InitProducerId refused: %s", refused)
                    self._fatal = refused
                    return False
                log.debug("InitProducerId refused: %s", refused)
                break
            state.set_producer_id(ProducerIdAndEpoch(resp.producer_id, resp.producer_epoch))
            self._pid_attempts = 0
            return True
        self._metadata.request_update()
        self._pid_retry_after_ms = now + self._settings.retry.backoff_ms(self._pid_attempts)
        return False


_FATAL_INIT_ERRORS = frozenset(
    {
        errors.ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        errors.ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
"""InitProducerId answers that no retry can change: the producer fails every record."""


def _report(fut: Any, address: str, done: connection.Done) -> None:
    """A finished ``future()`` call, reported the way ``CallPool`` reports its calls."""
    try:
        response, error = fut.result(), None
    except Exception as exc:
        response, error = None, rpc_errors.as_error(exc, address)
    done(response, error)
