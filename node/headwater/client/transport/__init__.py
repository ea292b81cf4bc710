"""How the client reaches brokers: channels, calls, security and metadata.

``connection`` keeps one gRPC channel per broker and translates RPC errors;
``security`` is the client's TLS and SASL settings; ``sasl`` and ``sasl_aio``
authenticate a channel (SCRAM, PLAIN); ``streams`` and ``inline_calls`` are the
pipelined call paths of produce and fetch; ``metadata`` keeps the cluster's
metadata.  The producer, the consumer, group membership and the admin client sit
above this package; it knows none of them.
"""
