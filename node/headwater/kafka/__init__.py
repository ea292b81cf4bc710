"""A listener that speaks Kafka's wire protocol: a second front door onto the brokers.

:mod:`headwater.kafka.protocol` frames and decodes requests (pure);
:mod:`headwater.kafka.apis` answers them by calling the broker's runtime (the replica
manager, the metadata cache), as the gRPC servicers do; :mod:`headwater.kafka.server`
is the asyncio server, one task per connection.
"""
