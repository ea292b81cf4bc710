"""The transaction coordinator's state and decisions, without I/O (Kafka's design and names).

* :mod:`.state` -- the transaction states and Kafka's table of valid previous states;
* :mod:`.metadata` -- one transactional id's :class:`~.metadata.TransactionMetadata`;
* :mod:`.decisions` -- InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, marker
  completion, timeouts and id expiration, as pure functions returning :mod:`.results`;
* :mod:`.records` -- the ``__transaction_state`` record format and the replay that
  rebuilds a partition's state when a broker becomes its leader.
"""
