"""The consumer group protocol (KIP-848, ``ConsumerGroupHeartbeat``), broker side.

- :mod:`.group`: one consumer group as a state machine (epochs, target assignment,
  reconciliation).
- :mod:`.groups`: the consumer groups of one ``__consumer_offsets`` partition: request
  validation and the records of each change.
- :mod:`.assignors`: the server-side assignors (``uniform``, ``range``).
- :mod:`.records`: the ``__consumer_offsets`` records of consumer groups, as bytes.
- :mod:`.subscription_authorization`: which topics a heartbeat may subscribe to.
"""
