"""The transaction coordinator's state and decisions, without I/O (Kafka's design and names).

* :mod:`.state` -- the transaction states and Kafka's table of valid previous states;
* :mod:`.metadata` -- one transactional id's :class:`~.metadata.TransactionMetadata`;
* :mod:`.decisions` -- InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, marker
  completion, timeouts and id expiration, as pure functions returning :mod:`.results`;
* :mod:`.records` -- the ``__transaction_state`` record format and the replay that
  rebuilds a partition's state when a broker becomes its leader;
* :mod:`.shard` -- one partition's ids as its leader holds them: loading, appends in
  flight, the timers;
* :mod:`.views` -- what DescribeTransactions and ListTransactions answer;
* :mod:`.placement` -- which ``__transaction_state`` partition holds an id, the topic's configs;
* :mod:`.coordinator_runtime` -- the asyncio runtime: loads and drops partitions, writes
  each state change to the log before answering, writes the markers, runs the timers.

Nothing here does I/O of its own: the runtime appends, reads and writes markers through
callables the broker gives it; the RPCs and the marker writer live in ``headwater.server``
(docs/design.md, "Layers").
"""
