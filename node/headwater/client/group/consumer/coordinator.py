"""The consumer's side of the consumer group protocol (KIP-848, ``group_protocol="consumer"``).

The I/O around a sans-I/O :class:`~headwater.client.group.consumer.member.ConsumerMember`,
the sibling of the classic :class:`~headwater.client.group.classic.coordinator.ConsumerCoordinator`
(whose commits, offset fetches, auto-commit and listener plumbing it inherits; only the
membership differs):

- the heartbeat thread sends every ``ConsumerGroupHeartbeat``: the join (epoch 0), one
  every ``heartbeat_interval_ms`` the broker names, one at once whenever the member owns
  less or more, and the leave of a member that stopped polling for
  ``max_poll_interval_ms``.  The broker answers at once (no barrier), so a heartbeat
  waits at most ``request_timeout_ms``, and only on that thread;
- ``poll`` reconciles on the consumer's thread: it revokes first what the broker took
  away (auto-committing, then ``on_partitions_revoked``), which the next heartbeat
  reports at once, and then takes what was added (``on_partitions_assigned``; positions
  come from an OffsetFetch naming the member and its epoch, carried over across polls).
  It sends nothing itself but the commit before a revocation, within the poll's
  deadline, so ``poll`` never blocks past its timeout;
- commits carry the member epoch (as ``generation_id``); STALE_MEMBER_EPOCH is retried
  after the next heartbeat, within the commit's timeout;
- ``close`` and ``unsubscribe`` revoke, then leave with epoch -1 (-2 for a static member).

The broker hands a partition to a new owner only after the old one reported it revoked,
so no partition is fetched by two members at once.  There are no client-side assignors:
``group_remote_assignor`` names the broker's (``uniform``, ``range``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from headwater import errors
from headwater.client.group import requests
from headwater.client.group.classic.coordinator import ConsumerCoordinator
from headwater.client.group.consumer.member import (
    ConsumerMember,
    HeartbeatPlan,
    MemberState,
    Outcome,
    Subscription,
)
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.errors import ErrorCode
from headwater.retry import RetryPolicy

log = logging.getLogger(__name__)


class _StaleEpoch(errors.StaleMemberEpochError):
    """A commit or fetch carried an epoch the next heartbeat will have moved past."""

    retriable = True


class ConsumerProtocolCoordinator(ConsumerCoordinator):
    """Consumer-protocol membership and committed offsets (see the module docstring).

    ``_cmember`` is only touched holding ``_lock``; the listener runs on the consumer's
    thread only.  The classic ``GroupMember`` the base class holds stays UNJOINED.
    """

    def __init__(
        self,
        *,
        group_id: str,
        client_id: str,
        group_instance_id: str | None,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        remote_assignor: str | None,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        bootstrap: tuple[str, ...],
        channels: connection.Channels,
        retry: RetryPolicy,
        request_timeout_ms: int,
        on_assignment: Callable[[set[TopicPartition], set[TopicPartition]], None],
        clock: Clock = monotonic_ms,
    ) -> None:
        # Set before the base class starts the heartbeat thread, which reads them.
        self._cmember = ConsumerMember(
            group_instance_id=group_instance_id,
            rebalance_timeout_ms=max_poll_interval_ms,
            server_assignor=remote_assignor,
            retry_backoff_ms=retry.retry_backoff_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            now_ms=clock(),
        )
        self._wake = threading.Event()
        super().__init__(
            group_id=group_id,
            client_id=client_id,
            group_instance_id=group_instance_id,
            session_timeout_ms=max(heartbeat_interval_ms + 1, 45000),
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            assignors=("range",),  # unused: the broker assigns
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            subscriptions=subscriptions,
            metadata=metadata,
            bootstrap=bootstrap,
            channels=channels,
            retry=retry,
            request_timeout_ms=request_timeout_ms,
            on_assignment=on_assignment,
            clock=clock,
        )

    @property
    def member_state(self) -> MemberState:
        with self._lock:
            return self._cmember.state

    @property
    def busy(self) -> bool:
        """Whether the member is joining or reconciling (poll comes back sooner)."""
        with self._lock:
            return self._cmember.state is not MemberState.STABLE

    # -- commits and fetches carry the member epoch -----------------------------------

    def _commit_identity(self) -> tuple[int, str]:
        with self._lock:
            m = self._cmember
            return (m.member_epoch, m.member_id) if m.joined else (-1, "")

    def _commit_refused(
        self, code: ErrorCode, error: errors.HeadwaterError
    ) -> errors.HeadwaterError:
        if code is ErrorCode.STALE_MEMBER_EPOCH:
            self._heartbeat_now()
            return _StaleEpoch(str(error))
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            with self._lock:
                self._cmember.fence()
        return error

    def _offset_fetch_request(self, wanted: frozenset[TopicPartition]) -> Any:
        with self._lock:
            m = self._cmember
            member, epoch = (m.member_id, m.member_epoch) if m.joined else ("", -1)
        return requests.offset_fetch(
            self.group_id,
            wanted,
            member_id=member,
            member_epoch=epoch,
            require_stable=self.require_stable,
        )

    def _fetched(
        self, resp: Any, wanted: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """STALE_MEMBER_EPOCH: asked again after the next heartbeat; an unknown member's
        partitions are lost (the next poll releases them and rejoins)."""
        if resp.error_code in (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                with self._lock:
                    self._cmember.fence()
            self._heartbeat_now()
            raise _StaleEpoch(resp.error_message or "OffsetFetch: stale member epoch")
        return super()._fetched(resp, wanted)

    # -- membership, on the consumer's thread ------------------------------------------

    def request_rejoin(self) -> None:
        """The subscription changed: the next heartbeat (sent at once) says so."""
        pattern = self._subs.pattern
        sub = Subscription(
            topics=frozenset() if pattern is not None else frozenset(self._subs.subscription()),
            regex=pattern.pattern if pattern is not None else None,
        )
        with self._lock:
            self._cmember.subscribe(sub)
        self._heartbeat_now()

    def poll(self, *, deadline_ms: float) -> None:
        """Called by ``Consumer.poll``: release lost partitions, reconcile, auto-commit;
        raises the group's fatal error.  Sends nothing but a commit before revoking."""
        now = self._clock()
        self._last_poll_ms = now
        self._run_callbacks()
        with self._lock:
            lost = self._cmember.take_lost(now)
            fatal = self._cmember.fatal_error, self._cmember.fatal_message
        if lost:
            self._set_assignment(self._subs.assignment() - lost)
            self.listener.on_partitions_lost(set(lost))
            self._heartbeat_now()  # the rejoin
        if fatal[0] is not None:
            raise errors.for_code(fatal[0], fatal[1] or f"group {self.group_id}")
        for _ in range(4):  # a new target may arrive while the listener runs
            if self._closed.is_set() or not self._reconcile(deadline_ms):
                break
        self._maybe_auto_commit()

    def _reconcile(self, deadline_ms: float) -> bool:
        """One reconciliation toward the broker's assignment: revoke, report, take."""
        with self._lock:
            revoke, assign = self._cmember.reconciliation()
        if not revoke and not assign:
            return False
        if revoke:
            self._commit_before_revoke(deadline_ms=deadline_ms)
            self.listener.on_partitions_revoked(set(revoke))
            self._set_assignment(self._subs.assignment() - revoke)
            with self._lock:
                self._cmember.revoked(revoke)
            self._heartbeat_now()  # report the smaller set at once
        if assign:
            self._metadata.add_topics({tp.topic for tp in assign})
            self._set_assignment(self._subs.assignment() | assign)
            self.listener.on_partitions_assigned(set(assign))
            with self._lock:
                self._cmember.assigned(assign)
            self._heartbeat_now()
        return True

    def unsubscribe(self) -> None:
        """Revoke everything (auto-committing first), then leave the group."""
        self._give_up_and_leave(closing=False)

    def _give_up_and_leave(self, *, closing: bool) -> None:
        owned = self._subs.assignment()
        if owned:
            deadline = self._clock() + self._request_timeout_ms
            self._commit_before_revoke(deadline_ms=deadline)
            self.listener.on_partitions_revoked(owned)
            self._set_assignment(set())
        with self._lock:
            plan = self._cmember.leave(closing=closing)
        if plan is not None:
            self._send_heartbeat(plan)
            with self._lock:
                self._cmember.on_left()

    def _heartbeat_now(self) -> None:
        self._wake.set()

    # -- heartbeats ---------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        idle = False
        while not self._closed.is_set():
            with self._lock:
                due_in_ms = self._cmember.next_heartbeat_ms - self._clock()
            interval = float(self.heartbeat_interval_ms)
            wait_ms = interval if idle else min(max(due_in_ms, 0.0), interval)
            self._wake.wait(wait_ms / 1000.0)
            self._wake.clear()  # before reading the member: a later wake is kept
            if self._closed.is_set():
                return
            now = self._clock()
            with self._lock:
                expired = now - self._last_poll_ms > self.max_poll_interval_ms
                plan = self._cmember.poll_expired() if expired else self._cmember.heartbeat_due(now)
            idle = plan is None
            if plan is None:
                continue
            if expired:
                log.warning(
                    "group %s: no poll() for more than max_poll_interval_ms=%d; leaving",
                    self.group_id,
                    self.max_poll_interval_ms,
                )
                self._send_heartbeat(plan)
                continue
            self._beat(plan)

    def _beat(self, plan: HeartbeatPlan) -> None:
        """Send ``plan`` and apply its answer (the heartbeat thread)."""
        try:
            resp = self._send_heartbeat(plan, raise_errors=True)
        except Exception as exc:  # any failure: the member must not stay in flight
            log.debug("heartbeat of group %s failed: %s", self.group_id, exc)
            with self._lock:
                self._cmember.on_call_failed(now_ms=self._clock())
            self._calls.mark_dead()
            return
        with self._lock:
            outcome = self._cmember.on_heartbeat_response(
                sent_epoch=plan.member_epoch,
                error_code=ErrorCode.from_wire(resp.error_code),
                error_message=resp.error_message,
                member_id=resp.member_id,
                member_epoch=resp.member_epoch,
                heartbeat_interval_ms=resp.heartbeat_interval_ms,
                assignment=requests.heartbeat_assignment(resp),
                now_ms=self._clock(),
            )
        if outcome is Outcome.FIND_COORDINATOR:
            self._calls.mark_dead()

    def _send_heartbeat(self, plan: HeartbeatPlan, *, raise_errors: bool = False) -> Any:
        request = requests.consumer_group_heartbeat(self.group_id, plan)
        deadline = self._clock() + self._request_timeout_ms
        try:
            return self._calls.call("ConsumerGroupHeartbeat", request, deadline_ms=deadline)
        except errors.HeadwaterError as exc:
            if raise_errors:
                raise
            log.info("leaving group %s failed: %s", self.group_id, exc)
            return None

    def close(self) -> None:
        """Revoke (auto-committing first), leave the group, stop the heartbeat."""
        if self._closed.is_set():
            return
        try:
            with self._lock:
                member = self._cmember.state not in (MemberState.FATAL, MemberState.CLOSED)
            if member:
                self._give_up_and_leave(closing=True)
        finally:
            with self._lock:
                self._cmember.close()
            self._closed.set()
            self._wake.set()
            self._commit_pool.shutdown(wait=True)
            self._run_callbacks()
            self._heartbeat.join(5.0)
