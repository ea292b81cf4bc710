"""Small typed values shared by the replication state machines.

Broker ids, offsets and leader epochs are plain ``int``s, not ``NewType``s:
every one arrives from protobuf, ZooKeeper or the log as an ``int``, offsets
and epochs are computed (``+ 1``, ``min``, the ``-1`` sentinels), and each call
that takes several of them names them with keyword-only arguments, which is
the mix-up a ``NewType`` would catch.  A ``NewType`` would need a cast at each
of those places and would protect nothing more.
"""

from __future__ import annotations

from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.values import TopicPartition

NO_EPOCH = -1
"""A leader epoch field left unset (``current_leader_epoch=-1``: do not check)."""


class IsrChange(NamedTuple):
    """A decision: ask ZooKeeper to set the ISR to ``new_isr``.

    The runtime performs the conditional write with ``expected_zk_version`` and
    reports back with :meth:`Partition.isr_change_committed` or
    :meth:`Partition.isr_change_failed`.
    """

    topic_partition: TopicPartition
    leader: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    expected_zk_version: int
    is_expand: bool


class FollowerState(NamedTuple):
    """What the leader knows about one follower (Kafka's ``Replica`` state)."""

    log_end_offset: int
    last_caught_up_time_ms: int
    last_fetch_time_ms: int
    last_fetch_leader_log_end_offset: int


class ProduceCompletion(NamedTuple):
    """A delayed ``acks=all`` produce is done: answer ``produce_id`` with ``error``."""

    produce_id: int
    error: ErrorCode
    """NONE on success."""


class FollowerFetchResult(NamedTuple):
    """What a follower's fetch changed on the leader."""

    high_watermark_changed: bool
    isr_change: IsrChange | None
