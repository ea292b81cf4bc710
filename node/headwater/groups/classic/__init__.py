"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), broker side.

- :mod:`.state`: the classic group's state machine (Kafka's ``GroupState``).
- :mod:`.group`: one group's members, generation and protocol (``GroupMetadata``).
- :mod:`.membership`: the operations and the rebalance they drive, as decisions.
"""
