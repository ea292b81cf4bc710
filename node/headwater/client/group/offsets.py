"""A consumer's committed offsets in its group: fetch them, commit them (sync, async, auto).

The offsets half of Kafka's ``ConsumerCoordinator``, kept apart from the membership half
(:class:`~headwater.client.group.classic.coordinator.ConsumerCoordinator`, which extends
:class:`GroupOffsets`).  Both fetches and commits go to the group's coordinator through
:class:`~headwater.client.group.calls.CoordinatorCalls`, which finds it again when a
coordinator error marks it dead.

- ``fetch`` waits (within its timeout, retried with the client's
  :class:`~headwater.retry.RetryPolicy`); ``fetch_for_poll`` never waits past the poll's
  deadline and carries an unanswered OffsetFetch over to the next ``poll``.
- ``commit_sync`` retries retriable refusals within its own timeout; ``commit_async``
  runs it on a one-thread pool and queues the user's callback for the next ``poll``
  (``_run_callbacks``), so callbacks run on the consumer's thread.
- The auto-commit runs in the background every ``auto_commit_interval_ms`` (never more
  than one at a time), and synchronously before partitions are revoked.

What a commit carries and what a refusal does to the membership depend on the group
protocol: subclasses provide ``_commit_identity`` and ``_commit_refused``, and may
override ``_offset_fetch_request`` and ``_fetched``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from headwater import errors
from headwater.client.group import calls, requests
from headwater.client.group.classic.member import COORDINATOR_ERRORS
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import TopicPartition
from headwater.clock import Clock
from headwater.errors import ErrorCode
from headwater.retry import RetryPolicy

log = logging.getLogger(__name__)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], None]


class GroupOffsets:
    """Committed offsets for one consumer (see the module docstring).

    Implements the :class:`headwater.client.subscription.CommittedOffsets` hook.
    ``_completed_callbacks`` is only touched holding ``_lock`` (shared with the
    subclass's membership); ``_offset_fetch`` only on the consumer's thread.
    """

    def __init__(
        self,
        *,
        group_id: str,
        group_instance_id: str | None,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        bootstrap: tuple[str, ...],
        channels: connection.Channels,
        retry: RetryPolicy,
        request_timeout_ms: int,
        clock: Clock,
    ) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._subs = subscriptions
        self._retry = retry
        self._request_timeout_ms = request_timeout_ms
        self._clock = clock
        self._calls = calls.CoordinatorCalls(
            group_id=group_id,
            metadata=metadata,
            bootstrap=bootstrap,
            channels=channels,
            retry=retry,
            request_timeout_ms=request_timeout_ms,
            clock=clock,
        )
        self._lock = threading.RLock()
        self._offset_fetch: tuple[frozenset[TopicPartition], calls.Future[Any]] | None = None
        self._next_auto_commit_ms = clock() + auto_commit_interval_ms
        self._commit_pool = concurrent.futures.ThreadPoolExecutor(1, "headwater-commit")
        self._auto_commit: concurrent.futures.Future[None] | None = None
        self._completed_callbacks: list[Callable[[], None]] = []
        self.require_stable = False
        """KIP-447, set for a read_committed consumer: an offset whose transactional
        commit is pending is fetched again (UNSTABLE_OFFSET_COMMIT) rather than used."""

    # -- CommittedOffsets hook ------------------------------------------------------------

    def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        return {tp: (o.offset if o is not None else None) for tp, o in self.fetch(tps).items()}

    def fetch(
        self, tps: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of ``tps``, waiting up to ``timeout_ms``."""
        wanted = frozenset(tps)
        timeout = self._request_timeout_ms * 2 if timeout_ms is None else timeout_ms
        deadline = self._clock() + timeout

        def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            resp = self._calls.call(
                "OffsetFetch", self._offset_fetch_request(wanted), deadline_ms=deadline
            )
            return self._fetched(resp, wanted)

        result: dict[TopicPartition, OffsetAndMetadata | None] = self._retry.call(
            attempt, timeout_ms=timeout, clock=self._clock
        )
        return result

    def fetch_for_poll(
        self, tps: Iterable[TopicPartition], *, deadline_ms: float
    ) -> dict[TopicPartition, int | None] | None:
        """The committed offsets of ``tps`` if known by ``deadline_ms``; else None, and
        the OffsetFetch stays in flight for the next ``poll``."""
        wanted = frozenset(tps)
        pending = self._offset_fetch
        if pending is None or not wanted <= pending[0]:
            address = self._calls.coordinator(deadline_ms=deadline_ms)
            if address is None:
                return None
            future = self._calls.submit(
                "OffsetFetch",
                self._offset_fetch_request(wanted),
                address=address,
                timeout_ms=self._request_timeout_ms,
            )
            pending = self._offset_fetch = (wanted, future)
        if not calls.wait(pending[1], deadline_ms=deadline_ms, clock=self._clock):
            return None
        self._offset_fetch = None
        try:
            found = self._fetched(pending[1].result(), pending[0])
        except errors.HeadwaterError as exc:
            if exc.retriable:
                return None  # the next poll asks again
            raise
        return {
            tp: (o.offset if o is not None else None) for tp, o in found.items() if tp in wanted
        }

    def _offset_fetch_request(self, wanted: frozenset[TopicPartition]) -> Any:
        """The OffsetFetch for ``wanted`` (a classic member does not name itself)."""
        return requests.offset_fetch(self.group_id, wanted, require_stable=self.require_stable)

    def _fetched(
        self, resp: Any, wanted: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if resp.error_code in COORDINATOR_ERRORS:
            self._calls.mark_dead()
        return requests.parse_offset_fetch(resp, wanted)

    # -- commits --------------------------------------------------------------------------

    def current_positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp in self._subs.assigned_list():
            pos = self._subs.position(tp)
            if pos is not None:
                out[tp] = OffsetAndMetadata(pos)
        return out

    def commit_sync(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: every assigned position) within ``timeout_ms``
        (default: twice the request timeout); raises on refusal or when time is up."""
        self._run_callbacks()
        offsets = self.current_positions() if offsets is None else offsets
        if not offsets:
            return
        timeout = self._request_timeout_ms * 2 if timeout_ms is None else timeout_ms
        deadline = self._clock() + timeout

        def attempt() -> None:
            generation, member = self._commit_identity()  # again on each try: it may move
            request = requests.offset_commit(
                group_id=self.group_id,
                generation_id=generation,
                member_id=member,
                group_instance_id=self.group_instance_id,
                offsets=offsets,
            )
            resp = self._calls.call("OffsetCommit", request, deadline_ms=deadline)
            codes = [resp.error_code, *(p.error_code for p in resp.partitions)]
            bad = next((c for c in codes if c), 0)
            if not bad:
                return
            if bad in COORDINATOR_ERRORS:
                self._calls.mark_dead()
            raise self._commit_refused(
                ErrorCode(bad), errors.for_code(bad, f"commit of group {self.group_id} refused")
            )

        self._retry.call(attempt, timeout_ms=timeout, clock=self._clock)

    def _commit_identity(self) -> tuple[int, str]:
        """``(generation or member epoch, member_id)`` for a commit; ``(-1, "")`` outside
        a generation.  Provided by the membership subclass."""
        raise NotImplementedError

    def _commit_refused(
        self, code: ErrorCode, error: errors.HeadwaterError
    ) -> errors.HeadwaterError:
        """Apply a refused commit to the membership; the error to raise (retriable ones
        are tried again within the commit's timeout).  Provided by the membership
        subclass."""
        raise NotImplementedError

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> concurrent.futures.Future[None]:
        """Commit in the background; ``callback(offsets, error)`` runs in a later ``poll``."""
        offsets = dict(self.current_positions() if offsets is None else offsets)

        def job() -> None:
            error: Exception | None = None
            try:
                self.commit_sync(offsets)
            except Exception as exc:  # handed to the callback
                error = exc
            if callback is not None:
                with self._lock:
                    self._completed_callbacks.append(lambda: callback(offsets, error))
            elif error is not None:
                log.warning("async commit for group %s failed: %s", self.group_id, error)

        return self._commit_pool.submit(job)

    def _run_callbacks(self) -> None:
        with self._lock:
            pending, self._completed_callbacks = self._completed_callbacks, []
        for cb in pending:
            cb()

    def _maybe_auto_commit(self) -> None:
        """The periodic auto-commit: in the background, so ``poll`` never waits for it."""
        if not self.enable_auto_commit or self._clock() < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = self._clock() + self.auto_commit_interval_ms
        if self._auto_commit is not None and not self._auto_commit.done():
            return  # the last one is still trying: no queue of stale commits
        if self.current_positions():
            self._auto_commit = self.commit_async()

    def _commit_before_revoke(self, *, deadline_ms: float) -> None:
        """Auto-commit what is about to be revoked, within the poll's time (at least
        ``retry_backoff_ms``: a commit given no time at all would never be tried)."""
        if not self.enable_auto_commit:
            return
        timeout = max(deadline_ms - self._clock(), float(self._retry.retry_backoff_ms))
        try:
            self.commit_sync(timeout_ms=min(timeout, float(self._request_timeout_ms)))
        except errors.HeadwaterError as exc:
            log.warning("auto-commit for group %s failed: %s", self.group_id, exc)
