"""The consumer group protocol (KIP-848, ``group_protocol="consumer"``), consumer side.

- :mod:`.member`: :class:`~.member.ConsumerMember`, the membership as a state machine
  without I/O (Kafka's ``ConsumerMembershipManager``).
- :mod:`.coordinator`: :class:`~.coordinator.ConsumerProtocolCoordinator`, the I/O around
  it (it extends the classic coordinator's commits, offset fetches and listener plumbing).
"""
