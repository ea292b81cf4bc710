"""Idempotent producer state of one partition: Kafka's ``ProducerStateManager``, pure.

An idempotent producer numbers each partition's records 0, 1, 2, ... and puts
``(producerId, producerEpoch, baseSequence)`` in every batch header; a retry
resends the same batch with the same numbers.  The leader remembers, per
producer id, the epoch and the sequence ranges and offsets of the last
:data:`BATCHES_PER_PRODUCER` batches it appended, and decides for each new batch
(:meth:`ProducerStateManager.check`):

* a batch whose ``(epoch, first sequence, last sequence)`` equals a remembered
  one is a **duplicate**: answer NONE with the original base offset and do not
  append it again (the acknowledgement was lost, the data was not);
* an epoch older than the producer's current one is **fenced**:
  INVALID_PRODUCER_EPOCH;
* a newer epoch must start again at sequence 0; within an epoch the first
  sequence must be last sequence + 1 (wrapping at 2^31-1 as Kafka does);
  anything else is OUT_OF_ORDER_SEQUENCE_NUMBER;
* a producer id with no state here (new, or its batches were all deleted by
  retention) is accepted at any sequence, as Kafka 2.5+ does, so a long-lived
  producer does not fail when retention removed its history.

**Where the state comes from.** Nothing but the log: every field needed is in
the batch headers (``producerId``, ``producerEpoch``, ``baseSequence``,
``baseOffset``, ``lastOffsetDelta``), which followers copy byte for byte.  The
runtime rebuilds the state whenever a replica becomes leader, which includes
every broker start, since a broker starts with no roles and is told them by the
controller: from the newest producer snapshot the leader wrote
(:mod:`headwater.replication.producer_snapshot`, Kafka's ``.snapshot``: at each
segment roll and at a clean shutdown), then :meth:`ProducerStateManager.replay`
over the headers after it (a header scan, records are never read); without a
whole snapshot, over the headers of the whole log.  While a replica is leader only
it appends, and a leader never truncates its own log, so applying its own
appends (:meth:`ProducerStateManager.update`) keeps the state exact.

The number of producer ids kept is bounded (:data:`MAX_PRODUCERS`, least
recently used dropped first): an evicted producer is then "unknown" and accepted
at any sequence, the same as after retention.

No I/O, no clock; not thread-safe (the broker's event loop owns it).
"""

from __future__ import annotations

import dataclasses
import enum
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from headwater.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
BATCHES_PER_PRODUCER = 5
"""Kafka's ``NUM_BATCHES_TO_RETAIN``: the client keeps at most 5 requests in flight."""
MAX_PRODUCERS = 100_000


def increment_sequence(sequence: int, by: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past 2^31-1 to 0."""
    if sequence > MAX_SEQUENCE - by:
        return by - (MAX_SEQUENCE - sequence) - 1
    return sequence + by


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch."""

    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset_delta: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


class ProducerBatch(NamedTuple):
    """The header fields of one incoming or logged batch that idempotence needs."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


class Verdict(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    REFUSE = "refuse"


class CheckResult(NamedTuple):
    """The decision for one batch: append it, answer a duplicate, or refuse it."""

    verdict: Verdict
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    duplicate_of: BatchMetadata | None = None


APPEND = CheckResult(Verdict.APPEND)


@dataclasses.dataclass
class ProducerEntry:
    """One producer id's current epoch and its last batches, oldest first."""

    producer_epoch: int
    batches: deque[BatchMetadata] = dataclasses.field(
        default_factory=lambda: deque(maxlen=BATCHES_PER_PRODUCER)
    )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        last = batch.last_sequence
        for meta in self.batches:
            if meta.first_sequence == batch.base_sequence and meta.last_sequence == last:
                return meta
        return None


def _in_sequence(last_sequence: int, first_sequence: int) -> bool:
    return first_sequence == last_sequence + 1 or (
        first_sequence == 0 and last_sequence == MAX_SEQUENCE
    )


class ProducerStateManager:
    """Producer ids, epochs and last batches of one partition (see module docstring).

    Callers: the leader calls :meth:`check` before appending a batch and
    :meth:`update` after; a replica becoming leader calls :meth:`clear` and then
    :meth:`replay` with its log's headers, oldest first.
    """

    def __init__(self, *, max_producers: int = MAX_PRODUCERS) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._max_producers = max_producers

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """Every producer id held, with its entry (a copy of the list, for DescribeProducers)."""
        return list(self._producers.items())

    def clear(self) -> None:
        self._producers.clear()

    def check(self, batch: ProducerBatch) -> CheckResult:
        """Decide what to do with ``batch`` before appending it (changes nothing)."""
        if batch.producer_id < 0:
            return APPEND
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return APPEND
        pid, epoch = batch.producer_id, batch.producer_epoch
        if epoch < entry.producer_epoch:
            return CheckResult(
                Verdict.REFUSE,
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {pid} epoch {epoch} is older than the current epoch "
                f"{entry.producer_epoch}",
            )
        duplicate = entry.find_duplicate(batch)
        if duplicate is not None:
            return CheckResult(Verdict.DUPLICATE, duplicate_of=duplicate)
        if epoch > entry.producer_epoch:
            if batch.base_sequence != 0:
                return CheckResult(
                    Verdict.REFUSE,
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} new epoch {epoch} starts at sequence "
                    f"{batch.base_sequence}, expected 0",
                )
            return APPEND
        last = entry.last_sequence
        if last != NO_SEQUENCE and not _in_sequence(last, batch.base_sequence):
            return CheckResult(
                Verdict.REFUSE,
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} epoch {epoch}: sequence {batch.base_sequence} after "
                f"{last}, expected {increment_sequence(last, 1)}",
            )
        return APPEND

    def update(self, batch: ProducerBatch, *, base_offset: int) -> None:
        """Record ``batch``, appended at ``base_offset`` (by this leader or found in the log)."""
        if batch.producer_id < 0:
            return
        entry = self._producers.pop(batch.producer_id, None)
        if entry is None or batch.producer_epoch != entry.producer_epoch:
            if entry is not None and batch.producer_epoch < entry.producer_epoch:
                self._producers[batch.producer_id] = entry  # a stale batch changes nothing
                return
            entry = ProducerEntry(batch.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                batch.base_sequence, batch.last_sequence, base_offset, batch.last_offset_delta
            )
        )
        self._producers[batch.producer_id] = entry  # re-inserted last: most recently used
        if len(self._producers) > self._max_producers:
            del self._producers[next(iter(self._producers))]

    def replay(self, batches: Iterable[tuple[ProducerBatch, int]]) -> None:
        """Rebuild from ``(batch, base_offset)`` pairs read from the log, oldest first."""
        for batch, base_offset in batches:
            self.update(batch, base_offset=base_offset)
