"""The producer: :class:`~headwater.client.producer.producer.Producer` and what sends for it.

``producer`` is the user's API; ``accumulator`` queues records into batches per
partition; ``sender`` drains them to the partition leaders; ``partitioner``
chooses a record's partition; ``idempotence`` keeps the producer id, epoch and
sequence numbers; ``futures`` completes a batch's records and runs their
callbacks.  ``_native`` (a C extension, optional) is ``Producer.send``'s common
case and the callback loop in C, with the pure-Python code as reference and
fallback.  The producer uses :mod:`headwater.client.transport`, never the consumer
or the admin client.
"""
