"""The follower side of replication as decisions: truncate-to, append, back off.

Kafka's ``AbstractFetcherThread`` without the I/O (docs/style.md).  The replica
fetcher in :mod:`headwater.server.runtime.fetcher` does the gRPC calls and asks
:class:`FollowerFetchState` what to do with each answer; the
``ReplicaManager`` applies the decision to the local log.  Nothing here reads
a clock, sleeps or touches a log: the caller passes the local log's position
(:class:`LocalLog`) and ``now_ms``.

One followed partition goes through two phases::

    TRUNCATING --(truncation decided)--> FETCHING
    FETCHING   --(append refused)------> TRUNCATING

A back-off deadline is orthogonal to the phase: an error answer or a
transport failure delays the partition until ``delayed_until_ms``.

Invariants:

* a partition never fetches while it needs truncation;
* a truncation target never exceeds the local log end offset (truncation
  only cuts, it never extends);
* an :class:`Append` carries only whole batches that end past the local log
  end offset, so a retried or overlapping fetch never appends an offset twice.

Thread/task model: used from the broker's event loop only.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.records import scan_batches
from headwater.replication.state import IllegalStateTransition


class FollowerPhase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"

    def transition_to(self, new: FollowerPhase) -> FollowerPhase:
        if new is self:
            raise IllegalStateTransition(f"follower is already {self.value}")
        return new


class LocalLog(NamedTuple):
    """Where the local replica's log stands (read by the runtime, passed in)."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    latest_epoch: int
    """The latest leader epoch in the local epoch cache; -1 when there is none."""


class TruncateTo(NamedTuple):
    """Decision: cut the local log at ``offset`` (a no-op when it is the end already)."""

    offset: int


class StartAt(NamedTuple):
    """Decision: drop the whole local log and continue at ``offset`` (the leader's start)."""

    offset: int


class Append(NamedTuple):
    """Decision: append ``records`` (whole batches) and follow the leader's high watermark."""

    records: bytes
    leader_high_watermark: int


class Backoff(NamedTuple):
    """Decision: leave the partition alone until ``until_ms`` (``reason`` is for the log)."""

    until_ms: float
    reason: str


FetchDecision = TruncateTo | StartAt | Append | Backoff


class FollowerFetchState:
    """The fetch state of one partition this broker follows (see module docstring)."""

    def __init__(self, leader_epoch: int, *, backoff_ms: float) -> None:
        self.leader_epoch = leader_epoch
        self.backoff_ms = backoff_ms
        self.phase = FollowerPhase.TRUNCATING
        self.delayed_until_ms = 0.0

    @property
    def needs_truncation(self) -> bool:
        return self.phase is FollowerPhase.TRUNCATING

    def is_ready(self, now_ms: float) -> bool:
        return self.delayed_until_ms <= now_ms

    def back_off(self, now_ms: float, reason: str) -> Backoff:
        self.delayed_until_ms = now_ms + self.backoff_ms
        return Backoff(self.delayed_until_ms, reason)

    # -- truncation ------------------------------------------------------------------------

    def truncation_without_leader(self, local: LocalLog) -> TruncateTo | None:
        """Before asking the leader: a log without epochs truncates to its high watermark.

        Returns None when the leader must be asked (OffsetsForLeaderEpoch for
        ``local.latest_epoch``).
        """
        self._require(FollowerPhase.TRUNCATING)
        if local.latest_epoch >= 0:
            return None
        self.phase = self.phase.transition_to(FollowerPhase.FETCHING)
        return TruncateTo(min(local.high_watermark, local.log_end_offset))

    def on_epoch_end_offset(
        self,
        local: LocalLog,
        *,
        error: ErrorCode,
        leader_epoch: int,
        end_offset: int,
        local_end_offset_for_leader_epoch: int,
        now_ms: float,
    ) -> TruncateTo | Backoff:
        """The leader answered where ``local.latest_epoch`` ends on its side.

        ``leader_epoch``/``end_offset`` are the leader's answer (the largest
        epoch <= ours it knows, and where it ends); the runtime also passes
        where *that* epoch ends locally (-1 if unknown).  Kafka's rule: keep
        the common prefix, never trusting more than the leader holds.
        """
        self._require(FollowerPhase.TRUNCATING)
        if error is not ErrorCode.NONE:
            return self.back_off(now_ms, f"OffsetsForLeaderEpoch: {error.name}")
        if leader_epoch < 0 or end_offset < 0:
            target = local.high_watermark
        elif leader_epoch == local.latest_epoch:
            target = end_offset
        elif local_end_offset_for_leader_epoch >= 0:
            target = min(end_offset, local_end_offset_for_leader_epoch)
        else:
            target = min(end_offset, local.high_watermark)
        self.phase = self.phase.transition_to(FollowerPhase.FETCHING)
        return TruncateTo(min(target, local.log_end_offset))

    # -- fetching ----------------------------------------------------------------------------

    def on_fetched(
        self,
        local: LocalLog,
        *,
        error: ErrorCode,
        leader_log_start_offset: int,
        leader_log_end_offset: int,
        leader_high_watermark: int,
        records: bytes,
        now_ms: float,
    ) -> FetchDecision:
        """The leader answered a fetch from ``local.log_end_offset``."""
        self._require(FollowerPhase.FETCHING)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            if local.log_end_offset > leader_log_end_offset >= 0:
                return TruncateTo(leader_log_end_offset)
            if local.log_end_offset < leader_log_start_offset:
                return StartAt(leader_log_start_offset)
            return self.back_off(now_ms, "OFFSET_OUT_OF_RANGE with no way to recover yet")
        if error is not ErrorCode.NONE:
            return self.back_off(now_ms, error.name)
        return Append(complete_batches_from(records, local.log_end_offset), leader_high_watermark)

    def on_append_failed(self, now_ms: float, reason: str) -> Backoff:
        """The local log refused fetched data: find the divergence point again."""
        self._require(FollowerPhase.FETCHING)
        self.phase = self.phase.transition_to(FollowerPhase.TRUNCATING)
        return self.back_off(now_ms, reason)

    def _require(self, phase: FollowerPhase) -> None:
        if self.phase is not phase:
            raise IllegalStateTransition(f"follower is {self.phase.value}, not {phase.value}")


def complete_batches_from(data: bytes, start_offset: int) -> bytes:
    """The whole batches of ``data`` that end after ``start_offset`` (headers only, no records)."""
    begin = end = None
    for pos, header in scan_batches(data):
        if header.next_offset <= start_offset:
            continue
        if begin is None:
            begin = pos
        end = pos + header.size_in_bytes
    if begin is None or end is None:
        return b""
    if begin == 0 and end == len(data):
        return data
    return data[begin:end]
