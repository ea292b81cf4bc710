"""The consumer's side of the group protocol: join, sync, heartbeat, commit, leave.

Kafka's ``ConsumerCoordinator``.  Threads: joins, syncs, commits and the rebalance
listener callbacks all run on the consumer's thread, inside ``poll()`` (so user
callbacks never race the user's code); a daemon heartbeat thread only sends Heartbeats
every ``heartbeat_interval_ms`` and records what they say (rejoin needed, member lost,
fenced) under the coordinator's lock for the next ``poll`` to act on.  The heartbeat
thread also enforces ``max_poll_interval_ms``: a consumer that has not polled for that
long leaves the group, so its partitions move to members that are making progress.

Eager assignors revoke everything at the start of each rebalance; ``cooperative-sticky``
revokes only what moved and rejoins at once for the follow-up round (KIP-429).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from headwater import errors
from headwater.client import connection
from headwater.client.group import protocol
from headwater.client.group.assignors import COOPERATIVE, Subscription, assign
from headwater.client.group.listener import ConsumerRebalanceListener, OffsetAndMetadata
from headwater.client.metadata import MetadataManager
from headwater.client.retry import Clock, RetryPolicy, monotonic_ms
from headwater.client.subscription import SubscriptionState
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import common_pb2, group_pb2, group_pb2_grpc

log = logging.getLogger(__name__)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], None]

_COORDINATOR_ERRORS = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


class ConsumerCoordinator:
    """Group membership and committed offsets for one consumer (see the module docstring).

    Implements the :class:`headwater.client.subscription.CommittedOffsets` hook.
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
        self.group_id = group_id
        self.client_id = client_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.assignors = assignors
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._subs = subscriptions
        self._metadata = metadata
        self._bootstrap = bootstrap
        self._channels = channels
        self._retry = retry
        self._request_timeout_ms = request_timeout_ms
        self._on_assignment = on_assignment
        self._clock = clock
        self.listener = ConsumerRebalanceListener()

        self._lock = threading.RLock()
        self._coordinator: str | None = None
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self._rejoin_needed = True
        self._lost = False
        self._fenced: errors.HeadwaterError | None = None
        self._last_poll_ms = clock()
        self._next_auto_commit_ms = clock() + auto_commit_interval_ms
        self._closed = threading.Event()
        self._commit_pool = concurrent.futures.ThreadPoolExecutor(1, "headwater-commit")
        self._completed_callbacks: list[Callable[[], None]] = []
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="headwater-heartbeat", daemon=True
        )
        self._heartbeat.start()

    # -- RPC plumbing ---------------------------------------------------------------------

    def _call(self, method: str, request: Any, *, address: str | None = None) -> Any:
        address = address or self._find_coordinator()
        stub = group_pb2_grpc.GroupStub(self._channels.channel(address))
        timeout = self._request_timeout_ms
        if method == "JoinGroup":
            timeout += self.max_poll_interval_ms  # a join is held until the rebalance ends
        return connection.call(getattr(stub, method), request, address=address, timeout_ms=timeout)

    def _find_coordinator(self) -> str:
        with self._lock:
            if self._coordinator is not None:
                return self._coordinator

        def attempt() -> str:
            self._metadata.maybe_refresh()
            known = [b.address for b in self._metadata.current.brokers.values()]
            for address in [*known, *(a for a in self._bootstrap if a not in known)]:
                try:
                    resp = self._call(
                        "FindCoordinator",
                        group_pb2.FindCoordinatorRequest(key=self.group_id, key_type=0),
                        address=address,
                    )
                except errors.HeadwaterError as exc:
                    if exc.retriable:
                        continue
                    raise
                if resp.error_code:
                    raise errors.for_code(resp.error_code, resp.error_message)
                return f"{resp.host}:{resp.port}"
            raise errors.CoordinatorNotAvailableError("no broker answered FindCoordinator")

        found = self._retry.call(attempt, timeout_ms=self._request_timeout_ms * 2)
        with self._lock:
            self._coordinator = found
        return found

    def _coordinator_dead(self) -> None:
        with self._lock:
            self._coordinator = None

    def _with_coordinator(self, fn: Callable[[], Any], *, timeout_ms: float) -> Any:
        """Run ``fn``, rediscovering the coordinator on coordinator and transport errors."""

        def attempt() -> Any:
            try:
                return fn()
            except errors.HeadwaterError as exc:
                if exc.code in _COORDINATOR_ERRORS or exc.retriable:
                    self._coordinator_dead()
                raise

        return self._retry.call(attempt, timeout_ms=timeout_ms)

    # -- CommittedOffsets hook ------------------------------------------------------------

    def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        return {tp: (o.offset if o is not None else None) for tp, o in self.fetch(tps).items()}

    def fetch(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        wanted = list(tps)
        request = group_pb2.OffsetFetchRequest(
            group_id=self.group_id,
            partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in wanted],
        )

        def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            resp = self._call("OffsetFetch", request)
            if resp.error_code:
                raise errors.for_code(resp.error_code, resp.error_message)
            found: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
            for p in resp.partitions:
                if p.committed_offset >= 0:
                    found[TopicPartition(p.topic, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, p.committed_leader_epoch
                    )
            return found

        result: dict[TopicPartition, OffsetAndMetadata | None] = self._with_coordinator(
            attempt, timeout_ms=self._request_timeout_ms * 2
        )
        return result

    # -- commits --------------------------------------------------------------------------

    def current_positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp in self._subs.assigned_list():
            pos = self._subs.position(tp)
            if pos is not None:
                out[tp] = OffsetAndMetadata(pos)
        return out

    def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None
    ) -> None:
        """Commit ``offsets`` (default: every assigned position); raises on refusal."""
        self._run_callbacks()
        offsets = self.current_positions() if offsets is None else offsets
        if not offsets:
            return
        with self._lock:
            generation, member = (self.generation_id, self.member_id) if self.protocol else (-1, "")
        request = group_pb2.OffsetCommitRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=member,
            group_instance_id=self.group_instance_id or "",
            retention_time_ms=-1,
            partitions=[
                group_pb2.OffsetCommitRequestPartition(
                    topic=tp.topic,
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
                for tp, om in offsets.items()
            ],
        )

        def attempt() -> None:
            resp = self._call("OffsetCommit", request)
            codes = [resp.error_code, *(p.error_code for p in resp.partitions)]
            bad = next((c for c in codes if c), 0)
            if bad:
                if bad in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self._mark_lost()
                if bad == ErrorCode.FENCED_INSTANCE_ID:
                    self._mark_fenced()
                raise errors.for_code(bad, f"commit of group {self.group_id} refused")

        self._with_coordinator(attempt, timeout_ms=self._request_timeout_ms * 2)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
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

        self._commit_pool.submit(job)

    def _run_callbacks(self) -> None:
        with self._lock:
            pending, self._completed_callbacks = self._completed_callbacks, []
        for cb in pending:
            cb()

    def _maybe_auto_commit(self, *, force: bool = False) -> None:
        if not self.enable_auto_commit:
            return
        now = self._clock()
        if not force and now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self.auto_commit_interval_ms
        try:
            self.commit_sync()
        except errors.HeadwaterError as exc:
            log.warning("auto-commit for group %s failed: %s", self.group_id, exc)

    # -- membership -----------------------------------------------------------------------

    def _mark_lost(self) -> None:
        with self._lock:
            self._lost = True
            self._rejoin_needed = True

    def _mark_fenced(self) -> None:
        with self._lock:
            self._fenced = errors.FencedInstanceIdError(
                f"group.instance.id {self.group_instance_id!r} was taken over by another consumer"
            )

    def request_rejoin(self) -> None:
        """The subscription changed: rejoin at the next ``poll``."""
        with self._lock:
            self._rejoin_needed = True

    def poll(self) -> None:
        """Called by ``Consumer.poll``: act on heartbeat news, rejoin, auto-commit."""
        self._last_poll_ms = self._clock()
        self._run_callbacks()
        with self._lock:
            fenced, lost = self._fenced, self._lost
            rejoin = self._rejoin_needed
        if fenced is not None:
            raise fenced
        if lost:
            owned = self._subs.assignment()
            with self._lock:
                self._lost = False
                self.generation_id, self.protocol = -1, None
                if not self.group_instance_id:
                    self.member_id = ""
            self._set_assignment(set())
            if owned:
                self.listener.on_partitions_lost(owned)
        if rejoin:
            self._join_and_sync()
        self._maybe_auto_commit()

    def _subscribed_topics(self) -> list[str]:
        self._metadata.maybe_refresh()
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

    def _join_and_sync(self) -> None:
        owned = self._subs.assignment()
        cooperative = any(a in COOPERATIVE for a in self.assignors[:1])
        if owned and not cooperative:
            self._maybe_auto_commit(force=True)
            self.listener.on_partitions_revoked(owned)
            self._set_assignment(set())
            owned = set()
        topics = self._subscribed_topics()
        self._metadata.add_topics(topics)
        deadline = self._clock() + max(self.max_poll_interval_ms, self._request_timeout_ms)
        while not self._closed.is_set():
            if self._clock() > deadline:
                raise errors.RebalanceInProgressError(f"could not join group {self.group_id}")
            try:
                assignment = self._join_once(topics, owned)
            except errors.HeadwaterError as exc:
                if exc.code is ErrorCode.FENCED_INSTANCE_ID:
                    self._mark_fenced()
                    raise
                if exc.code in _COORDINATOR_ERRORS or exc.retriable:
                    self._coordinator_dead()
                elif exc.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    with self._lock:
                        self.member_id = "" if not self.group_instance_id else self.member_id
                        self.generation_id = -1
                        if exc.code is ErrorCode.UNKNOWN_MEMBER_ID:
                            self.member_id = ""
                elif exc.code is not ErrorCode.REBALANCE_IN_PROGRESS:
                    raise
                time.sleep(self._retry.retry_backoff_ms / 1000.0)
                continue
            new = set(assignment)
            with self._lock:
                self._rejoin_needed = False
            if cooperative:
                revoked, added = owned - new, new - owned
                if revoked:
                    self._maybe_auto_commit(force=True)
                    self.listener.on_partitions_revoked(revoked)
                self._set_assignment(new)
                if added:
                    self.listener.on_partitions_assigned(added)
                if revoked:  # the follow-up round hands the revoked partitions over
                    with self._lock:
                        self._rejoin_needed = True
            else:
                self._set_assignment(new)
                self.listener.on_partitions_assigned(new)
            return

    def _join_once(
        self, topics: list[str], owned: set[TopicPartition]
    ) -> tuple[TopicPartition, ...]:
        with self._lock:
            generation = self.generation_id
        metadata = protocol.encode_subscription(
            protocol.ConsumerSubscription(tuple(topics), tuple(sorted(owned)), generation)
        )
        join = group_pb2.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id or "",
            protocol_type="consumer",
            protocols=[
                group_pb2.JoinGroupRequestProtocol(name=a, metadata=metadata)
                for a in self.assignors
            ],
            client_id=self.client_id,
        )
        resp = self._call("JoinGroup", join)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            with self._lock:
                self.member_id = resp.member_id
            resp = self._call(
                "JoinGroup",
                group_pb2.JoinGroupRequest(**{**_fields(join), "member_id": resp.member_id}),
            )
        if resp.error_code:
            raise errors.for_code(resp.error_code, resp.error_message or "JoinGroup")
        with self._lock:
            self.member_id = resp.member_id
            self.generation_id = resp.generation_id
            self.protocol = resp.protocol_name
        assignments: list[group_pb2.SyncGroupRequestAssignment] = []
        if resp.leader == resp.member_id and not resp.skip_assignment:
            assignments = self._assign(resp)
        sync = group_pb2.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=resp.generation_id,
            member_id=resp.member_id,
            group_instance_id=self.group_instance_id or "",
            protocol_type="consumer",
            protocol_name=resp.protocol_name,
            assignments=assignments,
        )
        sresp = self._call("SyncGroup", sync)
        if sresp.error_code:
            raise errors.for_code(sresp.error_code, sresp.error_message or "SyncGroup")
        return protocol.decode_assignment(sresp.assignment).partitions

    def _assign(self, resp: Any) -> list[group_pb2.SyncGroupRequestAssignment]:
        subs: dict[str, Subscription] = {}
        for m in resp.members:
            s = protocol.decode_subscription(m.metadata)
            subs[m.member_id] = Subscription(
                s.topics, s.owned_partitions, s.generation, m.group_instance_id or None
            )
        topics = sorted({t for s in subs.values() for t in s.topics})
        self._metadata.add_topics(topics)
        self._metadata.fetch(topics)
        counts = {t: n for t in topics if (n := self._metadata.current.partition_count(t))}
        result = assign(resp.protocol_name, counts, subs)
        return [
            group_pb2.SyncGroupRequestAssignment(
                member_id=m,
                assignment=protocol.encode_assignment(protocol.ConsumerAssignment(tuple(tps))),
            )
            for m, tps in result.items()
        ]

    # -- heartbeats -----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.heartbeat_interval_ms / 1000.0):
            with self._lock:
                generation, member = self.generation_id, self.member_id
                busy = self._rejoin_needed or self._fenced is not None
            if generation < 0 or busy:
                continue
            if self._clock() - self._last_poll_ms > self.max_poll_interval_ms:
                log.warning(
                    "group %s: no poll() for more than max_poll_interval_ms=%d; leaving",
                    self.group_id,
                    self.max_poll_interval_ms,
                )
                self._leave()
                self._mark_lost()
                continue
            try:
                resp = self._call(
                    "Heartbeat",
                    group_pb2.HeartbeatRequest(
                        group_id=self.group_id,
                        generation_id=generation,
                        member_id=member,
                        group_instance_id=self.group_instance_id or "",
                    ),
                )
            except errors.HeadwaterError:
                self._coordinator_dead()
                continue
            code = resp.error_code
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                with self._lock:
                    self._rejoin_needed = True
            elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                self._mark_lost()
            elif code == ErrorCode.FENCED_INSTANCE_ID:
                self._mark_fenced()
            elif code in _COORDINATOR_ERRORS:
                self._coordinator_dead()

    def _leave(self) -> None:
        with self._lock:
            member = self.member_id
        if not member or self.group_instance_id:
            return  # static members keep their place across restarts (KIP-345)
        try:
            self._call(
                "LeaveGroup",
                group_pb2.LeaveGroupRequest(
                    group_id=self.group_id,
                    members=[group_pb2.MemberIdentity(member_id=member, reason="consumer left")],
                ),
            )
        except errors.HeadwaterError as exc:
            log.info("LeaveGroup for %s failed: %s", self.group_id, exc)

    def close(self) -> None:
        """Auto-commit (if on), leave the group (dynamic members), stop the heartbeat."""
        if self._closed.is_set():
            return
        try:
            if self._fenced is None and self.generation_id >= 0:
                self._maybe_auto_commit(force=True)
                self._leave()
        finally:
            self._closed.set()
            self._commit_pool.shutdown(wait=True)
            self._run_callbacks()
            self._heartbeat.join(5.0)


def _fields(msg: Any) -> dict[str, Any]:
    return {f.name: v for f, v in msg.ListFields()}
