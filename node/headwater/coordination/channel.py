"""How the controller talks to brokers: a Protocol, and per-broker send queues.

The controller never blocks on a broker.  Like Kafka's
``ControllerChannelManager``, each live broker has its own queue and sender
thread; the controller thread only enqueues.  A dead or slow broker therefore
delays only its own requests, never the controller's event loop.

What a failed send means decides what happens to it, as in Kafka's
``RequestSendThread``:

* the broker could not be reached, refused the connection's authentication or
  did not answer in time (any exception but :class:`RequestRefused`): the request is
  retried, backing off as a :class:`headwater.retry.RetryPolicy` says, for as
  long as the sender runs, that is while the broker stays registered with the
  same epoch.  A request that is dropped instead could leave the broker with
  state the controller believes it sent (a deleted topic still served);
* the broker answered the request with an error code (:class:`RequestRefused`:
  a stale controller or broker epoch, not authorized): retrying cannot change
  the answer, so the request is logged and dropped at once.

A broker that re-registers gets a new sender (the old one's queue is dropped)
and fresh state from the controller's broker-startup handling; broker-side
epochs make a late or repeated request harmless.

The :class:`ControllerChannel` implementation (gRPC, in ``headwater.server``)
must bound each call with a timeout, raise :class:`RequestRefused` for an answer
with an error code and anything else for a failure to get an answer.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from headwater.coordination.model import BrokerRegistration, PartitionState
from headwater.retry import RetryPolicy

log = logging.getLogger(__name__)


class RequestRefused(Exception):
    """The broker answered a controller request with an error code."""


class ControllerChannel(Protocol):
    """Controller -> broker requests; called from a per-broker sender thread."""

    def send_leader_and_isr(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_leaders: Sequence[BrokerRegistration],
    ) -> None: ...

    def send_stop_replica(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        partitions: Sequence[tuple[str, int]],
        delete: bool,
    ) -> None: ...

    def send_update_metadata(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_brokers: Sequence[BrokerRegistration],
        deleted_topics: Sequence[str],
    ) -> None: ...


Request = Callable[[ControllerChannel, BrokerRegistration], None]

_STOP = object()


class _BrokerSender:
    """One broker's queue and the thread that drains it in order."""

    def __init__(
        self,
        broker: BrokerRegistration,
        channel: ControllerChannel,
        *,
        retry: RetryPolicy,
    ) -> None:
        self.broker = broker
        self._channel = channel
        self._queue: queue.Queue[object] = queue.Queue()
        self._retry = retry
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-send-{broker.broker_id}", daemon=True
        )
        self._thread.start()

    def enqueue(self, request: Request) -> None:
        self._queue.put(request)

    def stop(self) -> None:
        self._stopped.set()
        self._queue.put(_STOP)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP or self._stopped.is_set():
                return
            request: Request = item  # type: ignore[assignment]
            self._deliver(request)

    def _deliver(self, request: Request) -> None:
        """Send ``request`` until it succeeds, is refused, runs out of retries or the
        sender stops."""
        attempt = 0
        while True:
            attempt += 1
            try:
                request(self._channel, self.broker)
                return
            except RequestRefused as e:
                log.warning(
                    "controller request to broker %d refused, dropped: %s",
                    self.broker.broker_id,
                    e,
                )
                return
            except Exception as e:  # a transport failure must not kill the sender
                if attempt > self._retry.retries or self._stopped.wait(
                    self._retry.backoff_ms(attempt) / 1000.0
                ):
                    log.warning(
                        "controller request to broker %d dropped after %d attempts: %s",
                        self.broker.broker_id,
                        attempt,
                        e,
                    )
                    return
                if attempt == 1 or attempt % 10 == 0:
                    log.info(
                        "controller request to broker %d failed (attempt %d), retrying: %s",
                        self.broker.broker_id,
                        attempt,
                        e,
                    )


class RequestSender(Protocol):
    """Where the controller thread puts requests (:class:`ControllerChannelManager`)."""

    def add_broker(self, broker: BrokerRegistration) -> None: ...
    def remove_broker(self, broker_id: int) -> None: ...
    def send(self, broker_id: int, request: Request) -> None: ...


class ControllerChannelManager:
    """Per-broker senders; all methods are called from the controller thread only."""

    DEFAULT_RETRY = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=1000, jitter=0)
    """Retry an unreachable broker until it is deregistered or re-registers, 0.1 s
    growing to 1 s apart (Kafka's controller retries while the broker is live)."""

    def __init__(self, channel: ControllerChannel, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._channel = channel
        self._retry = retry
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        current = self._senders.get(broker.broker_id)
        if current is not None and current.broker == broker:
            return
        if current is not None:
            current.stop()
        self._senders[broker.broker_id] = _BrokerSender(broker, self._channel, retry=self._retry)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, broker_id: int, request: Request) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.debug("no sender for broker %d; request dropped", broker_id)
            return
        sender.enqueue(request)

    def shutdown(self, timeout_s: float = 2.0) -> None:
        senders = list(self._senders.values())
        self._senders.clear()
        for s in senders:
            s.stop()
        for s in senders:
            s.join(timeout_s)
