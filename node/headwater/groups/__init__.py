"""headwater.groups: the group coordinator, broker side (docs/design.md, "Consumer groups").

The classic and the consumer (KIP-848) protocols side by side, as Kafka keeps them:

- :mod:`.classic`: JoinGroup/SyncGroup/Heartbeat/LeaveGroup groups and their rebalances.
- :mod:`.consumer`: ``ConsumerGroupHeartbeat`` groups, their epochs and assignors.
- :mod:`.migration`: a classic group converted to the consumer protocol (and back), and
  the classic members of a converted group.

Shared by both, at this level: :mod:`.values` (requests, responses, settings),
:mod:`.records` (the ``__consumer_offsets`` record codec), :mod:`.offsets` (committed
offsets), :mod:`.placement` (which partition a group lives on), :mod:`.coordinator`
(the coordinator of one partition, a state machine) and
:mod:`.coordinator_runtime` (the asyncio driver that loads partitions, serialises the
coordinator's operations and appends its records).
"""
