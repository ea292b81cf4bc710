"""The broker process: gRPC servicers, the asyncio replica manager, config and metrics.

The only package that runs a gRPC server (DESIGN.md, "Layering").  Entry points:
:class:`headwater.server.config.BrokerConfig` (Kafka-named settings from file,
``HEADWATER_*`` env and overrides) and :func:`headwater.server.broker.run_broker`.
:mod:`.replica_manager` runs the pure :mod:`headwater.replication` state
machines against real logs; :mod:`.fetcher` replicates followers;
:mod:`.controller_channel` is the controller's gRPC channel to brokers.
"""
