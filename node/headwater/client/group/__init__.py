"""The consumer side of consumer groups: assignors, the consumer protocol, the coordinator.

- :mod:`.protocol`: Kafka's ConsumerProtocol bytes (subscription and assignment), which
  the broker carries opaquely in JoinGroup/SyncGroup.
- :mod:`.assignors`: range, roundrobin, sticky and cooperative-sticky as pure functions.
- :mod:`.member`: :class:`~.member.GroupMember`, joining as a state machine without I/O.
- :mod:`.requests`: the group RPCs' requests and answers as pure functions.
- :mod:`.calls`: calls to the coordinator that never block past their caller's deadline.
- :mod:`.coordinator`: :class:`ConsumerCoordinator`, which drives the member for a
  :class:`headwater.Consumer` with a ``group_id``: joins, syncs, heartbeats and commits,
  carrying unanswered calls over from one ``poll`` to the next.
- :mod:`.offsets`: :class:`~.offsets.GroupOffsets`, the coordinator's committed-offsets
  half: OffsetFetch and OffsetCommit (sync, async, auto-commit).
- :mod:`.consumer_member`: :class:`~.consumer_member.ConsumerMember`, the consumer
  group protocol's (KIP-848) membership and reconciliation as a state machine.
- :mod:`.consumer_coordinator`: :class:`ConsumerProtocolCoordinator`, which drives it
  for a :class:`headwater.Consumer` with ``group_protocol="consumer"``.
"""

from headwater.client.group.assignors import ASSIGNORS, Subscription, assign
from headwater.client.group.listener import ConsumerRebalanceListener, OffsetAndMetadata

__all__ = [
    "ASSIGNORS",
    "ConsumerRebalanceListener",
    "OffsetAndMetadata",
    "Subscription",
    "assign",
]
