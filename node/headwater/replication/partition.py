"""One partition's replication state on one broker: role, ISR, high watermark.

This is Kafka's ``Partition`` without the I/O (docs/style.md, "State machines without
I/O"): the asyncio
runtime in :mod:`headwater.server` owns the log and ZooKeeper, feeds this class
events (role changes from the controller, local appends, follower fetches, the
clock) and executes the decisions it returns (:class:`IsrChange`,
:class:`ProduceCompletion`).  Nothing here sleeps, reads a clock or touches disk.

Invariants, for a leader:

* the high watermark never decreases while this broker stays leader for an epoch;
* the high watermark is the minimum log end offset over the *maximal* ISR
  (the committed ISR plus a pending addition), Kafka's rule, so every record
  below it is on every replica that could be elected;
* at most one ISR change is in flight (:class:`IsrState`), and a change is only
  proposed from the committed state.

Thread/task model: a ``Partition`` is used from the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.errors import ErrorCode
from headwater.replication.state import IllegalStateTransition, IsrState, PartitionRole
from headwater.replication.values import (
    NO_EPOCH,
    FollowerFetchResult,
    FollowerState,
    IsrChange,
    ProduceCompletion,
)
from headwater.values import TopicPartition

_NO_CHANGE = FollowerFetchResult(False, None)


class Partition:
    """Replication state of one partition replica (see module docstring)."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        *,
        local_broker_id: int,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
    ) -> None:
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.role = PartitionRole.NONE
        self.leader_id: int | None = None
        self.leader_epoch = NO_EPOCH
        self.leader_epoch_start_offset = 0
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.isr_state = IsrState.COMMITTED
        self.pending_isr: tuple[int, ...] | None = None
        self.zk_version = 0
        self.controller_epoch = NO_EPOCH
        self.high_watermark = 0
        self.log_end_offset = 0
        self.followers: dict[int, FollowerState] = {}
        # produce id -> offset the HW must reach (Kafka's DelayedProduce).
        self._delayed_produces: dict[int, int] = {}

    # -- role changes (from LeaderAndIsr / StopReplica) ---------------------------------

    def make_leader(
        self,
        *,
        leader_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
        zk_version: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> bool:
        """Become leader for ``leader_epoch``; return False for a stale or repeated epoch.

        A new leader does not know its followers' positions: each starts at
        offset 0 (they will report with their next fetch) and is considered
        caught up now, so nobody is shrunk out before it had a chance to fetch.
        A leader re-elected in a new epoch (the controller shrank a stopping
        follower out of the ISR, Kafka's ``isNewLeader == false``) keeps what it
        knows of the followers that remain, and keeps its waiting ``acks=all``
        produces: its log is unchanged, so they complete once the high
        watermark, now over the new ISR, reaches them.  Dropping them would leave
        each unanswered until its request timed out.  After any change the
        caller collects :meth:`complete_delayed_produces`.
        """
        if self.role is PartitionRole.LEADER and leader_epoch <= self.leader_epoch:
            if leader_epoch == self.leader_epoch and zk_version >= self.zk_version:
                # Same epoch: the controller re-sent the state (e.g. a new ISR).  One
                # older than ours is ignored: a new controller read the znode before this
                # leader's own ISR write landed (its failover sends every state), and
                # taking it back would restore a dead follower to the ISR with a version
                # every later ISR write of ours fails on -- the high watermark would wait
                # for that follower, and every acks=all produce time out, for good.
                self._set_committed_isr(tuple(isr), zk_version)
                self.maybe_increment_high_watermark()
            return False
        if self.role is not PartitionRole.NONE and leader_epoch < self.leader_epoch:
            return False
        re_elected = self.role is PartitionRole.LEADER
        known = self.followers if re_elected else {}
        self.role = self.role.transition_to(PartitionRole.LEADER)
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = log_end_offset
        self.replicas = tuple(replicas)
        self._set_committed_isr(tuple(isr), zk_version)
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self.followers = {
            r: known[r]._replace(last_caught_up_time_ms=now_ms)
            if r in known
            else FollowerState(0, now_ms, now_ms, 0)
            for r in self.replicas
            if r != self.local_broker_id
        }
        if not re_elected:
            self._delayed_produces.clear()
        self.maybe_increment_high_watermark()
        return True

    def make_follower(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        isr: Iterable[int],
        replicas: Iterable[int],
        zk_version: int,
    ) -> bool:
        """Follow ``leader_id`` in ``leader_epoch``; False if nothing changed (stale/repeat).

        Pending ``acks=all`` produces are answered by :meth:`abort_delayed_produces`.
        """
        if self.role is not PartitionRole.NONE and leader_epoch < self.leader_epoch:
            return False
        if (
            self.role is PartitionRole.FOLLOWER
            and leader_epoch == self.leader_epoch
            and leader_id == self.leader_id
        ):
            self._set_committed_isr(tuple(isr), zk_version)
            return False
        self.role = self.role.transition_to(PartitionRole.FOLLOWER)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self._set_committed_isr(tuple(isr), zk_version)
        self.followers = {}
        return True

    def stop(self) -> None:
        """StopReplica: the partition leaves this broker (terminal)."""
        self.role = self.role.transition_to(PartitionRole.STOPPED)
        self.leader_id = None
        self.followers = {}

    def _set_committed_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        self.isr_state = IsrState.COMMITTED  # a controller decision overrides any pending change
        self.isr = isr
        self.pending_isr = None
        self.zk_version = zk_version

    # -- queries --------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is PartitionRole.LEADER

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must respect: committed plus any pending addition."""
        if self.isr_state is IsrState.PENDING_EXPAND and self.pending_isr is not None:
            return self.pending_isr
        return self.isr

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.isr) < self.min_insync_replicas

    def check_fetch_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's leader-epoch fencing for fetches and offset lookups."""
        if current_leader_epoch == NO_EPOCH:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def check_produce(self, acks: int) -> ErrorCode:
        """Admission before the append: leadership, acks value, ``min.insync.replicas``."""
        if acks not in (0, 1, -1):
            return ErrorCode.INVALID_REQUIRED_ACKS
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if acks == -1 and self.is_under_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    # -- leader events ------------------------------------------------------------------

    def on_leader_append(self, log_end_offset: int) -> bool:
        """The local log grew to ``log_end_offset``; return True if the HW moved."""
        self.log_end_offset = log_end_offset
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR; only ever moves forward. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log_end_offset
        for replica in self.maximal_isr:
            if replica == self.local_broker_id:
                continue
            state = self.followers.get(replica)
            new_hw = min(new_hw, state.log_end_offset if state is not None else 0)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower_fetch(
        self, follower_id: int, *, fetch_offset: int, now_ms: int, may_join_isr: bool = True
    ) -> FollowerFetchResult:
        """A follower fetched from ``fetch_offset``: it holds everything below it.

        Kafka's rule for "caught up": a fetch at or beyond the leader's current
        end makes the follower caught up now; a fetch at or beyond the leader's
        end at the *previous* fetch makes it caught up as of that previous fetch.

        ``may_join_isr`` is False for a follower that is shutting down: its
        position still counts for the high watermark, but it is never proposed
        for the ISR (Kafka's KIP-841).  The controller took it out of the ISR in
        its controlled shutdown; put back by its last fetches, it would stop
        moments later and hold the high watermark, and every ``acks=all``
        produce, until shrunk out ``replica.lag.time.max.ms`` later.
        """
        if not self.is_leader or follower_id not in self.followers:
            return _NO_CHANGE
        old = self.followers[follower_id]
        if fetch_offset == self.log_end_offset == self.high_watermark and follower_id in self.isr:
            # In the ISR and caught up with a high watermark at the log end: neither the
            # high watermark nor the ISR can change, only the follower's times move.
            self.followers[follower_id] = FollowerState(
                fetch_offset, max(old.last_caught_up_time_ms, now_ms), now_ms, fetch_offset
            )
            return _NO_CHANGE
        caught_up = old.last_caught_up_time_ms
        if fetch_offset >= self.log_end_offset:
            caught_up = max(caught_up, now_ms)
        elif fetch_offset >= old.last_fetch_leader_log_end_offset:
            caught_up = max(caught_up, old.last_fetch_time_ms)
        self.followers[follower_id] = FollowerState(
            log_end_offset=min(fetch_offset, self.log_end_offset),
            last_caught_up_time_ms=caught_up,
            last_fetch_time_ms=now_ms,
            last_fetch_leader_log_end_offset=self.log_end_offset,
        )
        isr_change = self.maybe_expand_isr(follower_id) if may_join_isr else None
        return FollowerFetchResult(self.maybe_increment_high_watermark(), isr_change)

    def maybe_expand_isr(self, follower_id: int) -> IsrChange | None:
        """Propose adding ``follower_id`` once it reached the HW in this leader epoch."""
        if not self.is_leader or self.isr_state is not IsrState.COMMITTED:
            return None
        if follower_id in self.isr or follower_id not in self.replicas:
            return None
        state = self.followers.get(follower_id)
        if state is None:
            return None
        if (
            state.log_end_offset < self.high_watermark
            or state.log_end_offset < self.leader_epoch_start_offset
        ):
            return None
        new_isr = (*self.isr, follower_id)
        self.isr_state = self.isr_state.transition_to(IsrState.PENDING_EXPAND)
        self.pending_isr = new_isr
        return self._isr_change(new_isr, is_expand=True)

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """Propose removing followers not caught up for ``replica.lag.time.max.ms``."""
        if not self.is_leader or self.isr_state is not IsrState.COMMITTED:
            return None
        out_of_sync = {
            r
            for r in self.isr
            if r != self.local_broker_id
            and (
                r not in self.followers
                or now_ms - self.followers[r].last_caught_up_time_ms > self.replica_lag_time_max_ms
            )
        }
        if not out_of_sync:
            return None
        new_isr = tuple(r for r in self.isr if r not in out_of_sync)
        self.isr_state = self.isr_state.transition_to(IsrState.PENDING_SHRINK)
        self.pending_isr = new_isr
        return self._isr_change(new_isr, is_expand=False)

    def _isr_change(self, new_isr: tuple[int, ...], *, is_expand: bool) -> IsrChange:
        return IsrChange(
            topic_partition=self.topic_partition,
            leader=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            new_isr=new_isr,
            expected_zk_version=self.zk_version,
            is_expand=is_expand,
        )

    def isr_change_committed(self, change: IsrChange, new_zk_version: int) -> bool:
        """ZooKeeper accepted ``change``; returns True if the HW moved as a result.

        A LeaderAndIsr that arrived meanwhile overtook the change only if it is newer
        than the znode the change replaced (``expected_zk_version``).  One not newer
        (the same state re-sent, e.g. by a new controller's failover, which read the
        znode before this write) was superseded by the write itself: the znode now
        holds ``change`` at ``new_zk_version``, and so must this leader, or its next
        ISR write fails on the version and the ISR never changes again.
        """
        if not self.is_leader or self.leader_epoch != change.leader_epoch:
            return False
        if self.zk_version > change.expected_zk_version:
            return False  # overtaken by a newer LeaderAndIsr meanwhile
        self.isr_state = self.isr_state.transition_to(IsrState.COMMITTED)
        self.isr = change.new_isr
        self.pending_isr = None
        self.zk_version = new_zk_version
        return self.maybe_increment_high_watermark()

    def isr_change_failed(self, change: IsrChange) -> None:
        """The conditional write lost (stale version): drop the pending change."""
        if self.isr_state is IsrState.COMMITTED or self.pending_isr != change.new_isr:
            return
        self.isr_state = self.isr_state.transition_to(IsrState.COMMITTED)
        self.pending_isr = None

    # -- follower events -------------------------------------------------------------------

    def on_follower_append(self, *, log_end_offset: int, leader_high_watermark: int) -> bool:
        """A follower appended fetched data: its HW is the leader's, capped at its own LEO.

        Returns True if the HW changed.  A follower's HW may move backwards after
        a truncation (the leader's view is the truth), unlike a leader's.
        """
        if self.role is not PartitionRole.FOLLOWER:
            return False
        self.log_end_offset = log_end_offset
        new_hw = min(leader_high_watermark, log_end_offset)
        changed = new_hw != self.high_watermark
        self.high_watermark = new_hw
        return changed

    def on_follower_truncate(self, *, log_start_offset: int, log_end_offset: int) -> bool:
        """The follower's log was cut (or restarted) to ``[log_start_offset, log_end_offset)``.

        The HW stays within the log, as the storage layer's copy does: capped
        at the new end, and at least the new start.  Returns True if it changed.
        """
        if self.role is not PartitionRole.FOLLOWER:
            return False
        self.log_end_offset = log_end_offset
        new_hw = min(max(self.high_watermark, log_start_offset), log_end_offset)
        changed = new_hw != self.high_watermark
        self.high_watermark = new_hw
        return changed

    # -- delayed acks=all produces --------------------------------------------------------

    def add_delayed_produce(
        self, produce_id: int, required_offset: int
    ) -> ProduceCompletion | None:
        """Register a produce that needs the HW to reach ``required_offset``.

        Returns its completion at once when it is already satisfied.
        """
        self._delayed_produces[produce_id] = required_offset
        done = self.complete_delayed_produces()
        for completion in done:
            if completion.produce_id == produce_id:
                return completion
        return None

    def complete_delayed_produces(self) -> list[ProduceCompletion]:
        """Kafka's ``checkEnoughReplicasReachOffset`` for every waiting produce."""
        done: list[ProduceCompletion] = []
        if not self.is_leader:
            return self.abort_delayed_produces()
        for produce_id, required in list(self._delayed_produces.items()):
            if self.high_watermark >= required:
                error = (
                    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    if self.is_under_min_isr
                    else ErrorCode.NONE
                )
                done.append(ProduceCompletion(produce_id, error))
                del self._delayed_produces[produce_id]
        return done

    def abort_delayed_produces(self) -> list[ProduceCompletion]:
        """Leadership moved: every waiting produce fails with NOT_LEADER_OR_FOLLOWER."""
        done = [
            ProduceCompletion(pid, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            for pid in self._delayed_produces
        ]
        self._delayed_produces.clear()
        return done

    def expire_delayed_produce(self, produce_id: int) -> ProduceCompletion | None:
        """The produce's timeout passed: REQUEST_TIMED_OUT unless already answered."""
        if self._delayed_produces.pop(produce_id, None) is None:
            return None
        return ProduceCompletion(produce_id, ErrorCode.REQUEST_TIMED_OUT)

    @property
    def delayed_produce_count(self) -> int:
        return len(self._delayed_produces)


__all__ = ["IllegalStateTransition", "Partition"]
