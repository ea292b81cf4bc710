"""The idempotent producer's client side: a producer id and per-partition sequences.

With ``enable_idempotence`` the producer asks the cluster for a producer id and
epoch (InitProducerId) and numbers each partition's records 0, 1, 2, ... in
batch headers (``baseSequence`` = the first record's number).  A batch keeps
its sequence numbers on every retry, so the leader can recognise a retry of a
batch it already appended.

What the broker must do (Kafka's ``ProducerStateManager``): per partition and
producer id, remember the epoch and the sequence ranges of the last 5 appended
batches; answer a batch whose range equals one of them with NONE and the
original base offset, without appending it again (a duplicate); refuse a batch
whose ``baseSequence`` is not last sequence + 1 with OUT_OF_ORDER_SEQUENCE_NUMBER;
refuse a stale epoch with INVALID_PRODUCER_EPOCH / PRODUCER_FENCED; accept any
sequence from a producer id it has no state for (Kafka 2.5+; the state may have
gone with retention).  The broker's side is
:mod:`headwater.replication.producer_state`, rebuilt from the log's batch headers
on every leader change.  The client also accepts DUPLICATE_SEQUENCE_NUMBER as success.

When a batch with assigned sequences fails for good (expired, or refused as
out of order), later sequences for that partition are no longer contiguous:
the client then bumps to a new producer id/epoch (:meth:`needs_reset`) and
restarts every partition's numbering at 0, as Kafka's idempotent producer does.

Used only from the sender thread; not thread-safe.
"""

from __future__ import annotations

from typing import NamedTuple

from headwater import errors
from headwater.client.types import TopicPartition

MAX_SEQUENCE = 2**31 - 1
NO_PRODUCER_ID = -1


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int


NONE = ProducerIdAndEpoch(NO_PRODUCER_ID, -1)


def increment_sequence(sequence: int, by: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past Integer.MAX_VALUE to 0."""
    if sequence > MAX_SEQUENCE - by:
        return by - (MAX_SEQUENCE - sequence) - 1
    return sequence + by


class IdempotenceState:
    """Producer id/epoch and the next sequence of each partition."""

    def __init__(self) -> None:
        self.producer = NONE
        self._next_sequence: dict[TopicPartition, int] = {}
        self._reset_needed = False
        self._acknowledged: set[TopicPartition] = set()

    def acknowledged(self, tp: TopicPartition) -> None:
        """The leader appended a batch of ``tp`` under the current producer id/epoch."""
        self._acknowledged.add(tp)

    def may_pipeline(self, tp: TopicPartition) -> bool:
        """Whether a second batch of ``tp`` may be sent before the first is answered.

        Only once the leader has appended one batch of this producer id/epoch
        for ``tp``: a leader with no state for a producer accepts any sequence
        (Kafka's rule since KIP-360, for state lost to retention), so a second
        batch that overtook the first would be appended ahead of it and the
        first then refused, for good, as out of order.
        """
        return tp in self._acknowledged

    @property
    def has_producer_id(self) -> bool:
        return self.producer.producer_id != NO_PRODUCER_ID and not self._reset_needed

    def set_producer_id(self, producer: ProducerIdAndEpoch) -> None:
        """A new id or epoch from InitProducerId: every partition restarts at sequence 0."""
        self.producer = producer
        self._next_sequence.clear()
        self._acknowledged.clear()
        self._reset_needed = False

    def transaction_ended(self, producer: ProducerIdAndEpoch) -> None:
        """EndTxn bumped the epoch (transaction version 2): every partition restarts at
        sequence 0, and those that may pipeline still may when the producer id stayed.

        A leader that appended this producer id's batch knows the id, and a known id's
        newer epoch must start at sequence 0 there: a second batch that overtook the
        first is refused as out of order and resent, never appended ahead of it --
        the same knowledge :meth:`may_pipeline` relies on within an epoch.
        """
        same_id = producer.producer_id == self.producer.producer_id
        keep = set(self._acknowledged) if same_id else None
        self.set_producer_id(producer)
        if keep is not None:
            self._acknowledged = keep

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next_sequence.get(tp, 0)

    def assign(self, tp: TopicPartition, record_count: int) -> int:
        """Reserve ``record_count`` sequence numbers for a new batch; return the first."""
        base = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = increment_sequence(base, record_count)
        return base

    def batch_failed(self, error: BaseException | None) -> None:
        """A batch with sequences failed for good: numbering must restart with a new epoch."""
        self._reset_needed = True

    @property
    def needs_reset(self) -> bool:
        return self._reset_needed

    @staticmethod
    def is_duplicate(code: int) -> bool:
        return code == errors.ErrorCode.DUPLICATE_SEQUENCE_NUMBER
