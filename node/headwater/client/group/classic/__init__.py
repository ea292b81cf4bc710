"""The classic group protocol, consumer side: JoinGroup, SyncGroup, Heartbeat.

- :mod:`.protocol`: Kafka's ConsumerProtocol bytes (subscription and assignment), which
  the broker carries opaquely in JoinGroup/SyncGroup.
- :mod:`.assignors`: range, roundrobin, sticky and cooperative-sticky as pure functions,
  and the rebalance protocol (eager or cooperative) a list of them gives.
- :mod:`.member`: :class:`~.member.GroupMember`, joining as a state machine without I/O.
- :mod:`.coordinator`: :class:`~.coordinator.ConsumerCoordinator`, the I/O around it.
"""
