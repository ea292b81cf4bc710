"""Calls to a group's coordinator broker, none of which blocks past its caller's deadline.

The consumer must return from ``poll(timeout_ms)`` in time whatever the coordinator is
doing: moving, down, or holding a JoinGroup until the rebalance ends.  So the coordinator
is looked up (FindCoordinator) on the client's call pool and callers *wait* for the
answer only until their own deadline; a lookup that is still in flight is picked up by
the next caller.  Long calls (JoinGroup, SyncGroup, OffsetFetch from ``poll``) are
:meth:`CoordinatorCalls.submit`-ted the same way and return a future that the consumer
carries over from one ``poll`` to the next.  Short calls that a caller waits for
(OffsetCommit, Heartbeat, LeaveGroup) run on the caller's thread with an RPC deadline no
later than the caller's.

Thread-safe: the consumer's thread, the heartbeat thread and the commit thread share one.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

from headwater import errors
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.clock import Clock
from headwater.retry import RetryPolicy
from headwater.v1 import group_pb2, group_pb2_grpc

Future = concurrent.futures.Future


def wait(future: Future[Any], *, deadline_ms: float, clock: Clock) -> bool:
    """Whether ``future`` is done by ``deadline_ms`` (waiting for it until then)."""
    remaining_s = max(0.0, deadline_ms - clock()) / 1000.0
    done, _ = concurrent.futures.wait([future], timeout=remaining_s)
    return bool(done)


class CoordinatorCalls:
    """The coordinator's address and the calls to it (see the module docstring)."""

    def __init__(
        self,
        *,
        group_id: str,
        metadata: MetadataManager,
        bootstrap: tuple[str, ...],
        channels: connection.Channels,
        retry: RetryPolicy,
        request_timeout_ms: int,
        clock: Clock,
    ) -> None:
        self.group_id = group_id
        self._metadata = metadata
        self._bootstrap = bootstrap
        self._channels = channels
        self._retry = retry
        self.request_timeout_ms = request_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._address: str | None = None
        self._lookup: Future[str] | None = None
        self._attempts = 0
        """Lookups that failed in a row: picks the next broker to ask and the backoff."""
        self._next_lookup_ms = 0.0

    # -- the coordinator's address ---------------------------------------------------

    @property
    def address(self) -> str | None:
        with self._lock:
            return self._address

    def mark_dead(self, address: str | None = None) -> None:
        """The coordinator moved or failed: look it up again before the next call."""
        with self._lock:
            if address is None or address == self._address:
                self._address = None

    def coordinator(self, *, deadline_ms: float) -> str | None:
        """The coordinator's address, looking it up until ``deadline_ms``; None if unknown
        by then (the lookup goes on, for the next caller)."""
        for _ in range(64):  # each round waits for a lookup or a backoff; bounded anyway
            wait_ms = 0.0
            with self._lock:
                if self._address is not None:
                    return self._address
                lookup = self._lookup
                if lookup is None or lookup.done():
                    wait_ms = self._next_lookup_ms - self._clock()
                    if wait_ms <= 0:
                        lookup = self._lookup = self._start_lookup()
            if lookup is not None and lookup.done():
                self._raise_if_refused()
            if lookup is None or lookup.done():  # backing off before the next lookup
                if self._clock() + max(wait_ms, 0.0) > deadline_ms:
                    return None
                time.sleep(max(wait_ms, 0.0) / 1000.0)
                continue
            if not wait(lookup, deadline_ms=deadline_ms, clock=self._clock):
                return None
            self._raise_if_refused()
        return None

    def _raise_if_refused(self) -> None:
        """A lookup refused by the authorizer raises GroupAuthorizationFailedError once
        (Kafka's consumer raises it from poll/commit); the next call looks up again."""
        with self._lock:
            lookup = self._lookup
            refused = lookup.exception() if lookup is not None and lookup.done() else None
            if not isinstance(refused, errors.GroupAuthorizationFailedError):
                return
            self._lookup = None
        raise refused

    def _start_lookup(self) -> Future[str]:
        """Send FindCoordinator to the next candidate broker; called holding the lock."""
        known = [b.address for b in self._metadata.current.brokers.values()]
        candidates = [*known, *(a for a in self._bootstrap if a not in known)]
        address = candidates[self._attempts % len(candidates)]
        future: Future[str] = Future()

        def done(resp: Any, error: errors.HeadwaterError | None) -> None:
            if error is None and resp.error_code:
                error = errors.for_code(resp.error_code, resp.error_message or "FindCoordinator")
            with self._lock:
                if error is None:
                    self._address, self._attempts = f"{resp.host}:{resp.port}", 0
                else:
                    self._attempts += 1
                    self._next_lookup_ms = self._clock() + self._retry.backoff_ms(
                        min(self._attempts, 16)
                    )
            if error is None:
                future.set_result(f"{resp.host}:{resp.port}")
            else:
                future.set_exception(error)

        stub = group_pb2_grpc.GroupStub(self._channels.channel(address))
        self._channels.pool.submit(
            stub.FindCoordinator,
            group_pb2.FindCoordinatorRequest(key=self.group_id, key_type=0),
            address=address,
            timeout_s=self.request_timeout_ms / 1000.0,
            done=done,
        )
        return future

    # -- calls -----------------------------------------------------------------------

    def submit(self, method: str, request: Any, *, address: str, timeout_ms: float) -> Future[Any]:
        """Start ``method`` on the call pool; the future fails with the Kafka error of a
        failed call (and the coordinator is then looked up again)."""
        future: Future[Any] = Future()

        def done(resp: Any, error: errors.HeadwaterError | None) -> None:
            if error is not None:
                if error.retriable:
                    self.mark_dead(address)
                future.set_exception(error)
            else:
                future.set_result(resp)

        stub = group_pb2_grpc.GroupStub(self._channels.channel(address))
        self._channels.pool.submit(
            getattr(stub, method),
            request,
            address=address,
            timeout_s=timeout_ms / 1000.0,
            done=done,
        )
        return future

    def call(self, method: str, request: Any, *, deadline_ms: float) -> Any:
        """``method`` on the coordinator, on this thread, answered by ``deadline_ms``."""
        address = self.coordinator(deadline_ms=deadline_ms)
        if address is None:
            raise errors.CoordinatorNotAvailableError(
                f"no coordinator found for group {self.group_id} in time"
            )
        stub = group_pb2_grpc.GroupStub(self._channels.channel(address))
        timeout_ms = min(float(self.request_timeout_ms), deadline_ms - self._clock())
        try:
            return connection.call(
                getattr(stub, method), request, address=address, timeout_ms=timeout_ms
            )
        except errors.HeadwaterError as exc:
            if exc.retriable:
                self.mark_dead(address)
            raise
