"""The gRPC servicers: protobuf in, domain values to the runtime, protobuf out.

See docs/style.md, "Thin servicers".

A servicer holds no state of its own and no logic beyond conversion and
request validation; it calls the runtime (:mod:`headwater.server.runtime`),
the group coordinator or the ZooKeeper coordinator.  Servicers do not import
each other.
"""
