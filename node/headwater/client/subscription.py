"""What a consumer reads: its subscription, its assignment and a position per partition.

Kafka's ``SubscriptionState``, reduced to what a consumer without a group
needs and shaped so that groups slot in: a group's rebalance calls
:meth:`SubscriptionState.assign_from_subscription` with the partitions the
leader assigned; committed offsets come through the :class:`CommittedOffsets`
hook (a group coordinator client implements it; without a group,
:class:`NoCommittedOffsets` says "none" and ``auto_offset_reset`` decides).

Per partition it holds the *position* (the next offset to return; None until
it is initialised), whether it is paused, and a pending reset (``earliest`` /
``latest``) requested by ``seek_to_*`` or by an out-of-range answer.

Thread-safety: the consumer's thread and its fetcher thread share one
instance; every method takes the lock.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Protocol

from headwater.client.types import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"


class CommittedOffsets(Protocol):
    """Where a consumer's committed offsets live (the group coordinator, later)."""

    def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        """The committed offset of each partition, None when there is none."""
        ...


class NoCommittedOffsets:
    """A consumer without a group has no committed offsets."""

    def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        return dict.fromkeys(tps)


@dataclasses.dataclass
class PartitionState:
    position: int | None = None
    paused: bool = False
    reset: str | None = None
    """A pending reset to "earliest"/"latest"; wins over the committed offset."""
    high_watermark: int = -1
    log_start_offset: int = -1
    epoch: int = 0
    """Bumped by every seek/reset, so a fetch answer for an older position is dropped."""


class SubscriptionState:
    """A consumer's topics, partitions and positions (see the module docstring)."""

    def __init__(self, *, default_reset: str) -> None:
        self.default_reset = default_reset
        self._lock = threading.RLock()
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._manual = False
        self._assignment: dict[TopicPartition, PartitionState] = {}

    # -- what to read ---------------------------------------------------------------

    def subscribe(
        self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None
    ) -> None:
        with self._lock:
            if self._manual and self._assignment:
                raise ValueError("subscribe() after assign(): call unsubscribe() first")
            self._manual = False
            self._topics = tuple(dict.fromkeys(topics))
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            if self._topics and self._pattern is not None:
                raise ValueError("subscribe to topics or to a pattern, not both")

    def subscription(self) -> set[str]:
        with self._lock:
            return set(self._topics)

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    @property
    def is_subscribed(self) -> bool:
        return bool(self._topics) or self._pattern is not None

    def matches(self, topic: str) -> bool:
        with self._lock:
            if self._pattern is not None:
                return self._pattern.fullmatch(topic) is not None
            return topic in self._topics

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Manual assignment (``Consumer.assign``); keeps positions of partitions kept."""
        with self._lock:
            if self.is_subscribed:
                raise ValueError("assign() after subscribe(): call unsubscribe() first")
            self._manual = True
            self._set_assignment(tps)

    def assign_from_subscription(self, tps: Iterable[TopicPartition]) -> None:
        """The partitions a subscription resolves to (all of them, or a group's share)."""
        with self._lock:
            self._set_assignment(tps)

    def _set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        new = {tp: self._assignment.get(tp) or PartitionState() for tp in tps}
        self._assignment = new

    def unsubscribe(self) -> None:
        with self._lock:
            self._topics = ()
            self._pattern = None
            self._manual = False
            self._assignment = {}

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._assignment)

    def assigned_list(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._assignment

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise ValueError(f"partition {tp} is not assigned to this consumer")
        return state

    # -- positions ------------------------------------------------------------------

    def position(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._state(tp).position

    def state(self, tp: TopicPartition) -> PartitionState | None:
        """A copy of the partition's state, or None when not assigned."""
        with self._lock:
            s = self._assignment.get(tp)
            return dataclasses.replace(s) if s is not None else None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        with self._lock:
            s = self._state(tp)
            s.position = offset
            s.reset = None
            s.epoch += 1

    def request_reset(self, tps: Iterable[TopicPartition], strategy: str) -> None:
        with self._lock:
            for tp in tps:
                s = self._state(tp)
                s.position = None
                s.reset = strategy
                s.epoch += 1

    def advance(self, tp: TopicPartition, *, expected: int, to: int) -> bool:
        """Move the position from ``expected`` to ``to`` (after returning records)."""
        with self._lock:
            s = self._assignment.get(tp)
            if s is None or s.position != expected:
                return False
            s.position = to
            return True

    def update_watermarks(
        self, tp: TopicPartition, *, high_watermark: int, log_start_offset: int
    ) -> None:
        with self._lock:
            s = self._assignment.get(tp)
            if s is not None:
                s.high_watermark = high_watermark
                s.log_start_offset = log_start_offset

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions without a position (need a committed offset or a reset)."""
        with self._lock:
            return [tp for tp, s in self._assignment.items() if s.position is None]

    def pending_reset(self, tp: TopicPartition) -> str | None:
        with self._lock:
            s = self._assignment.get(tp)
            return s.reset if s is not None else None

    def fetchable(self) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (position, epoch)}`` for partitions with a position that are not paused."""
        with self._lock:
            return {
                tp: (s.position, s.epoch)
                for tp, s in self._assignment.items()
                if s.position is not None and not s.paused
            }

    def epoch(self, tp: TopicPartition) -> int | None:
        with self._lock:
            s = self._assignment.get(tp)
            return s.epoch if s is not None else None

    # -- pause/resume ---------------------------------------------------------------

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._state(tp).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        with self._lock:
            return {tp for tp, s in self._assignment.items() if s.paused}

    def is_paused(self, tp: TopicPartition) -> bool:
        with self._lock:
            s = self._assignment.get(tp)
            return s is not None and s.paused
