"""The rebalance listener and the committed-offset value users hand to ``commit``."""

from __future__ import annotations

from typing import NamedTuple

from headwater.client.types import TopicPartition


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the *next* offset to read) with optional metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerRebalanceListener:
    """Callbacks around a rebalance, run on the consumer's thread inside ``poll()``.

    Subclass and override what you need (Kafka's interface, same meaning):

    - :meth:`on_partitions_revoked`: before partitions move away (eager: all of them at
      the start of every rebalance; cooperative: only those that move).  Offsets
      committed here are kept by the coordinator; with auto-commit on the consumer
      commits pending positions just before calling this.
    - :meth:`on_partitions_assigned`: after the new assignment arrives (cooperative:
      only the newly added partitions).
    - :meth:`on_partitions_lost`: the member was thrown out (session timeout,
      fenced, unknown member): the partitions may already belong to someone else, so
      committing is pointless.  Defaults to :meth:`on_partitions_revoked`.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Partitions about to move to another member."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Partitions newly assigned to this member."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Partitions that were taken without a clean revoke."""
        self.on_partitions_revoked(lost)
