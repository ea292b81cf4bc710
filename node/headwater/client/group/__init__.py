"""The consumer side of consumer groups, the classic and the consumer protocol side by side.

- :mod:`.classic`: the classic protocol (JoinGroup/SyncGroup/Heartbeat): the
  ConsumerProtocol bytes, the client-side assignors, :class:`~.classic.member.GroupMember`
  (a state machine without I/O) and :class:`~.classic.coordinator.ConsumerCoordinator`,
  which drives it for a :class:`headwater.Consumer` with a ``group_id``.
- :mod:`.consumer`: the consumer group protocol (KIP-848, ``group_protocol="consumer"``):
  :class:`~.consumer.member.ConsumerMember` and
  :class:`~.consumer.coordinator.ConsumerProtocolCoordinator`.

Shared by both:

- :mod:`.requests`: the group RPCs' requests and answers as pure functions.
- :mod:`.calls`: calls to the coordinator that never block past their caller's deadline.
- :mod:`.offsets`: :class:`~.offsets.GroupOffsets`, the coordinator's committed-offsets
  half: OffsetFetch and OffsetCommit (sync, async, auto-commit).
- :mod:`.listener`: the rebalance listener and ``OffsetAndMetadata``.
- :mod:`.admin`: listing, describing and deleting groups and their offsets.
"""

from headwater.client.group.classic.assignors import ASSIGNORS, Subscription, assign
from headwater.client.group.listener import ConsumerRebalanceListener, OffsetAndMetadata

__all__ = [
    "ASSIGNORS",
    "ConsumerRebalanceListener",
    "OffsetAndMetadata",
    "Subscription",
    "assign",
]
