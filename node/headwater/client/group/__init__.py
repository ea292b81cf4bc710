"""The consumer side of consumer groups: assignors, the consumer protocol, the coordinator.

- :mod:`.protocol`: Kafka's ConsumerProtocol bytes (subscription and assignment), which
  the broker carries opaquely in JoinGroup/SyncGroup.
- :mod:`.assignors`: range, roundrobin, sticky and cooperative-sticky as pure functions.
- :mod:`.coordinator`: :class:`ConsumerCoordinator`, which joins, syncs, heartbeats and
  commits for a :class:`headwater.Consumer` with a ``group_id``.
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
