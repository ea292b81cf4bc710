"""The consumer's side of the group protocol: join, sync, heartbeat, commit, leave.

Kafka's ``ConsumerCoordinator``, as the I/O around a sans-I/O
:class:`~headwater.client.group.classic.member.GroupMember`: the member decides what to send
and what an answer means; this class sends, waits no longer than its caller allows, and
runs the rebalance listener.

``poll(timeout_ms)`` never waits past its deadline.  A JoinGroup is held by
the broker until every member has rejoined, and a follower's SyncGroup until the leader
has synced, so both are sent on the client's call pool and the unanswered call is
carried over to the next ``poll`` (as Kafka's consumer does); the coordinator lookup and
the OffsetFetch that positions newly assigned partitions are carried over the same way.
Many consumers polled alternately from one thread therefore all get their JoinGroup in
and the group settles in a few polls.  Commits wait, within their own timeout; they and
offset fetches are :class:`~headwater.client.group.offsets.GroupOffsets`'s, which this
class extends with the membership (what a commit carries, what a refusal means).

Threads: answers are applied and the listener runs on the consumer's thread, inside
``poll()`` (so user callbacks never race the user's code); a daemon heartbeat thread
sends Heartbeats every ``heartbeat_interval_ms`` and applies their answers to the member
under the lock, for the next ``poll`` to act on.  The heartbeat thread also enforces
``max_poll_interval_ms``: a consumer that has not polled for that long leaves the group,
so its partitions move to members that are making progress.

Eager rebalancing revokes everything before each JoinGroup, and the new assignment starts
every partition at its committed offset (Kafka's ``onJoinPrepare``); a consumer whose
assignors are all cooperative (``cooperative-sticky``) revokes only what moved and rejoins
at once for the follow-up round (KIP-429).
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from headwater import errors
from headwater.client import connection
from headwater.client.group import calls, requests
from headwater.client.group.classic import protocol
from headwater.client.group.classic.assignors import RebalanceProtocol, rebalance_protocol
from headwater.client.group.classic.member import (
    AssignmentChange,
    GroupMember,
    MemberState,
    Outcome,
)
from headwater.client.group.listener import ConsumerRebalanceListener
from headwater.client.group.offsets import GroupOffsets
from headwater.client.metadata import MetadataManager
from headwater.client.subscription import SubscriptionState
from headwater.client.types import TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.errors import ErrorCode
from headwater.retry import RetryPolicy
from headwater.v1 import group_pb2

log = logging.getLogger(__name__)


class _Kind(enum.Enum):
    JOIN = "JoinGroup"
    SYNC = "SyncGroup"


class _InFlight(NamedTuple):
    """A JoinGroup or SyncGroup sent and not yet applied (the consumer's thread only)."""

    kind: _Kind
    future: concurrent.futures.Future[Any]
    generation_id: int


class ConsumerCoordinator(GroupOffsets):
    """Group membership and committed offsets for one consumer (see the module docstring).

    Committed offsets are :class:`~headwater.client.group.offsets.GroupOffsets`'s.
    ``_member`` is only touched holding ``_lock``; ``_inflight`` only on the consumer's
    thread.
    """

    def __init__(
        self,
        *,
        group_id: str,
        client_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        assignors: tuple[str, ...],
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
        super().__init__(
            group_id=group_id,
            group_instance_id=group_instance_id,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            subscriptions=subscriptions,
            metadata=metadata,
            bootstrap=bootstrap,
            channels=channels,
            retry=retry,
            request_timeout_ms=request_timeout_ms,
            clock=clock,
        )
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.assignors = assignors
        self._metadata = metadata
        self._on_assignment = on_assignment
        self.listener = ConsumerRebalanceListener()
        self._member = GroupMember(
            group_instance_id=group_instance_id,
            cooperative=rebalance_protocol(assignors) is RebalanceProtocol.COOPERATIVE,
            retry_backoff_ms=retry.retry_backoff_ms,
            now_ms=clock(),
        )
        self._inflight: _InFlight | None = None
        self._last_poll_ms = clock()
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="headwater-heartbeat", daemon=True
        )
        self._heartbeat.start()

    @property
    def state(self) -> MemberState:
        with self._lock:
            return self._member.state

    @property
    def busy(self) -> bool:
        """Whether a rebalance is under way (a call in flight or a JoinGroup due)."""
        with self._lock:
            return self._inflight is not None or self._member.state is not MemberState.STABLE

    # -- commits: what the membership says about them -----------------------------------

    def _commit_identity(self) -> tuple[int, str]:
        """``(generation, member_id)`` for a commit: (-1, "") outside a generation."""
        with self._lock:
            m = self._member
            return (m.generation_id, m.member_id) if m.has_generation else (-1, "")

    def _commit_refused(
        self, code: ErrorCode, error: errors.HeadwaterError
    ) -> errors.HeadwaterError:
        """Apply a refused commit to the membership; the error to raise (retriable ones
        are tried again within the commit's timeout)."""
        with self._lock:
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self._member.mark_lost(reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                self._member.fence()
        return error

    # -- membership, on the consumer's thread --------------------------------------------

    def request_rejoin(self) -> None:
        """The subscription changed: rejoin at the next ``poll``."""
        with self._lock:
            self._member.request_rejoin()

    def unsubscribe(self) -> None:
        """The consumer unsubscribes.  A classic member stays in the group (and owns
        nothing once the next rebalance ran); the consumer protocol's member leaves."""

    def poll(self, *, deadline_ms: float) -> None:
        """Called by ``Consumer.poll``: apply answers, (re)join, auto-commit, by
        ``deadline_ms`` (waiting for the group only while this member owns nothing)."""
        self._last_poll_ms = self._clock()
        self._run_callbacks()
        self._raise_if_fenced()
        with self._lock:
            lost = self._member.take_lost()
        if lost:
            self._set_assignment(set())
            self.listener.on_partitions_lost(set(lost))
        wait_until = deadline_ms if not self._subs.assignment() else self._clock()
        for _ in range(8):  # a join answer, a sync answer, a rejoin: each step progresses
            if self._closed.is_set() or not self._step(wait_until, deadline_ms):
                break
        self._raise_if_fenced()
        self._maybe_auto_commit()

    def _raise_if_fenced(self) -> None:
        if self.state is MemberState.FENCED:
            raise errors.FencedInstanceIdError(
                f"group.instance.id {self.group_instance_id!r} was taken over by another consumer"
            )

    def _step(self, wait_until: float, deadline_ms: float) -> bool:
        """Apply an answer or send the next call; False when there is nothing to do yet.

        Waits for an answer or the coordinator until ``wait_until``; commits before a
        revocation get until ``deadline_ms`` (the poll's)."""
        flight = self._inflight
        if flight is not None:
            if not calls.wait(flight.future, deadline_ms=wait_until, clock=self._clock):
                return False
            self._inflight = None
            if flight.kind is _Kind.JOIN:
                self._joined(flight)
            else:
                self._synced(flight, deadline_ms)
            return True
        with self._lock:
            due = self._member.join_due(self._clock())
            revoke = set(self._member.owned) if not self._member.cooperative else set()
        if not due:
            return False
        address = self._calls.coordinator(deadline_ms=wait_until)
        if address is None:
            return False
        if revoke:  # eager: give everything up (committing first) before rejoining
            self._commit_before_revoke(deadline_ms=deadline_ms)
            self.listener.on_partitions_revoked(revoke)
            self._set_assignment(set())
        topics = self._subscribed_topics()
        self._metadata.add_topics(topics)
        with self._lock:
            start = self._member.start_join()
        join = requests.join_group(
            group_id=self.group_id,
            start=start,
            topics=topics,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            group_instance_id=self.group_instance_id,
            assignors=self.assignors,
            client_id=self.client_id,
        )
        self._send(_Kind.JOIN, join, address=address, generation_id=start.generation_id)
        return True

    def _send(self, kind: _Kind, request: Any, *, address: str, generation_id: int) -> None:
        # The broker holds a JoinGroup (and a follower's SyncGroup) until the rebalance
        # ends, which may take up to the rebalance timeout (max_poll_interval_ms).
        timeout_ms = self._request_timeout_ms + self.max_poll_interval_ms
        future = self._calls.submit(kind.value, request, address=address, timeout_ms=timeout_ms)
        self._inflight = _InFlight(kind, future, generation_id)

    def _call_failed(self, exc: errors.HeadwaterError) -> None:
        with self._lock:
            outcome = self._member.on_call_failed(retriable=exc.retriable, now_ms=self._clock())
        self._act(outcome, exc)

    def _act(self, outcome: Outcome, error: errors.HeadwaterError) -> None:
        if outcome is Outcome.FIND_COORDINATOR:
            self._calls.mark_dead()
        elif outcome is Outcome.FENCED:
            self._raise_if_fenced()
        elif outcome is Outcome.FATAL:
            raise error
        else:
            log.debug("group %s: %s; rejoining", self.group_id, error)

    def _joined(self, flight: _InFlight) -> None:
        try:
            resp = flight.future.result()
        except errors.HeadwaterError as exc:
            self._call_failed(exc)
            return
        with self._lock:
            joined = self._member.on_join_response(
                error_code=ErrorCode(resp.error_code),
                member_id=resp.member_id,
                generation_id=resp.generation_id,
                protocol=resp.protocol_name,
                leader=resp.leader,
                now_ms=self._clock(),
            )
        if isinstance(joined, Outcome):
            self._act(joined, errors.for_code(resp.error_code, resp.error_message or "JoinGroup"))
            return
        address = self._calls.address
        try:
            if address is None:
                raise errors.CoordinatorNotAvailableError("the coordinator moved")
            assignments = (
                self._assign(resp) if joined.is_leader and not resp.skip_assignment else []
            )
        except errors.HeadwaterError as exc:
            self._call_failed(exc)
            return
        sync = group_pb2.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=self.group_instance_id or "",
            protocol_type="consumer",
            protocol_name=joined.protocol,
            assignments=assignments,
        )
        self._send(_Kind.SYNC, sync, address=address, generation_id=joined.generation_id)

    def _synced(self, flight: _InFlight, deadline_ms: float) -> None:
        try:
            resp = flight.future.result()
        except errors.HeadwaterError as exc:
            self._call_failed(exc)
            return
        tps = () if resp.error_code else protocol.decode_assignment(resp.assignment).partitions
        with self._lock:
            change = self._member.on_sync_response(
                generation_id=flight.generation_id,
                error_code=ErrorCode(resp.error_code),
                assignment=tps,
                now_ms=self._clock(),
            )
        if isinstance(change, Outcome):
            self._act(change, errors.for_code(resp.error_code, resp.error_message or "SyncGroup"))
            return
        self._apply(change, deadline_ms)

    def _apply(self, change: AssignmentChange, deadline_ms: float) -> None:
        if change.revoked:  # cooperative: only what moved (eager revoked before joining)
            self._commit_before_revoke(deadline_ms=deadline_ms)
            self.listener.on_partitions_revoked(set(change.revoked))
        self._set_assignment(set(change.assignment))
        if self._member.cooperative:
            if change.added:
                self.listener.on_partitions_assigned(set(change.added))
        else:
            self.listener.on_partitions_assigned(set(change.assignment))

    def _subscribed_topics(self) -> list[str]:
        """The topics to join with: named ones need no metadata (a refresh could wait on
        an unresponsive broker); a pattern is matched against every topic."""
        if self._subs.pattern is not None:
            self._metadata.fetch(None)
            meta = self._metadata.current
            return sorted(
                t
                for t in meta.partitions
                if self._subs.matches(t) and t not in meta.internal_topics
            )
        return sorted(self._subs.subscription())

    def _set_assignment(self, new: set[TopicPartition]) -> None:
        before = self._subs.assignment()
        self._subs.assign_from_subscription(sorted(new))
        self._on_assignment(before, new)

    def _assign(self, resp: Any) -> list[group_pb2.SyncGroupRequestAssignment]:
        """The leader's assignment of every member (metadata of their topics first)."""
        topics = requests.subscribed_topics(resp)
        self._metadata.add_topics(topics)
        if any(not self._metadata.current.partition_count(t) for t in topics):
            self._metadata.fetch(topics)  # a topic only another member subscribes to
        counts = {t: n for t in topics if (n := self._metadata.current.partition_count(t))}
        return requests.leader_assignments(resp, counts)

    # -- heartbeats -----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.heartbeat_interval_ms / 1000.0):
            with self._lock:
                due = self._member.heartbeat_due()
            if due is None:
                continue
            generation, member = due
            now = self._clock()
            if now - self._last_poll_ms > self.max_poll_interval_ms:
                log.warning(
                    "group %s: no poll() for more than max_poll_interval_ms=%d; leaving",
                    self.group_id,
                    self.max_poll_interval_ms,
                )
                self._leave()
                with self._lock:
                    self._member.mark_lost()
                continue
            if self._calls.address is None:
                try:
                    self._calls.coordinator(deadline_ms=now)  # start a lookup; poll may wait
                except errors.GroupAuthorizationFailedError as exc:  # poll raises it
                    log.debug("group %s: %s", self.group_id, exc)
                continue
            request = group_pb2.HeartbeatRequest(
                group_id=self.group_id,
                generation_id=generation,
                member_id=member,
                group_instance_id=self.group_instance_id or "",
            )
            try:
                resp = self._calls.call(
                    "Heartbeat", request, deadline_ms=now + self._request_timeout_ms
                )
            except errors.HeadwaterError as exc:
                log.debug("heartbeat for group %s failed: %s", self.group_id, exc)
                continue
            with self._lock:
                outcome = self._member.on_heartbeat_response(
                    generation_id=generation, error_code=ErrorCode(resp.error_code)
                )
            if outcome is Outcome.FIND_COORDINATOR:
                self._calls.mark_dead()

    def _leave(self) -> None:
        with self._lock:
            member = self._member.member_id
        if not member or self.group_instance_id:
            return  # static members keep their place across restarts (KIP-345)
        request = group_pb2.LeaveGroupRequest(
            group_id=self.group_id,
            members=[group_pb2.MemberIdentity(member_id=member, reason="consumer left")],
        )
        try:
            deadline = self._clock() + self._request_timeout_ms
            self._calls.call("LeaveGroup", request, deadline_ms=deadline)
        except errors.HeadwaterError as exc:
            log.info("LeaveGroup for %s failed: %s", self.group_id, exc)

    def close(self) -> None:
        """Auto-commit (if on), leave the group (dynamic members), stop the heartbeat."""
        if self._closed.is_set():
            return
        try:
            with self._lock:
                was_member = self._member.state is not MemberState.FENCED
                stable = self._member.state is MemberState.STABLE
            if stable and self.enable_auto_commit:
                self._commit_before_revoke(deadline_ms=self._clock() + self._request_timeout_ms)
            if was_member:
                self._leave()
        finally:
            with self._lock:
                self._member.close()
            self._closed.set()
            self._commit_pool.shutdown(wait=True)
            self._run_callbacks()
            self._heartbeat.join(5.0)
