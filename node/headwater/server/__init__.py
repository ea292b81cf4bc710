"""The broker process: the only package that runs a gRPC server (docs/design.md, "Layers").

Entry points: :class:`headwater.server.config.BrokerConfig` (Kafka-named settings
from file, ``HEADWATER_*`` env and overrides) and
:func:`headwater.server.app.run_broker`.  Inside, in layers that import only
downwards (``.importlinter``):

- :mod:`.app`, the composition root: builds the runtime, wires it through
  constructors, orders startup and shutdown; it decides nothing itself;
- :mod:`.services`, the gRPC servicers: protobuf in, a runtime call, protobuf out;
- :mod:`.runtime`, everything that runs the broker: the ``ReplicaManager``
  (the one owner of every hosted partition and its log), the replica fetchers,
  role changes, the group coordinator's wiring, the periodic jobs and their
  scheduler, the one off-load seam for blocking calls (``run_blocking``), the
  controller's channel to brokers, controlled shutdown and process helpers.

Beside them, shared by several: ``config`` (settings, loading, validation), ``metrics``,
``convert`` (protobuf ↔ domain values), ``group_lag`` and ``startup`` (deferred services,
readiness).
docs/architecture.md maps the threads and tasks.
"""
