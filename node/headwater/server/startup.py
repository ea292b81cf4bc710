"""Broker startup: services registered before the gRPC server starts, and readiness.

The gRPC server starts before log recovery so that the health service can
answer NOT_SERVING while the logs recover; but gRPC refuses (with a warning
per service) method handlers added after ``server.start()``.  So every
Headwater service is registered up front through :class:`DeferredServices`, a
generic handler that answers UNAVAILABLE (retriable, "the broker is starting")
until the real servicers are attached, then delegates to them.

:class:`Readiness` decides when the health service may say SERVING: only once
the broker is registered in ZooKeeper, has applied an UpdateMetadata sent for
that registration (its broker epoch), and hosts every partition the metadata
says it is a replica of (the controller's LeaderAndIsr has arrived).  Before
that a Metadata request would show no topics and a fetch or produce would be
refused, so Kubernetes' readiness probe and the roll engine must not count
the broker as ready.  It is pure state: the broker feeds it events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import grpc

from headwater.coordination.model import PartitionState
from headwater.values import TopicPartition

STARTING_MESSAGE = "the broker is starting (recovering its logs or registering)"


class DeferredServices(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """A generic handler for ``services``, registered before ``server.start()``.

    Until :meth:`attach` has been given the real servicers, a call to any
    method of those services gets UNAVAILABLE (clients retry it); other
    services are left to the server (UNIMPLEMENTED).  Every Headwater RPC is
    unary-unary, which the placeholder handler relies on.

    ``add_generic_rpc_handlers`` / ``add_registered_method_handlers`` let the
    generated ``add_*Servicer_to_server`` functions register into this object.
    Called from the event loop (attach) and gRPC's handler lookup (service).
    """

    def __init__(self, services: Sequence[str]) -> None:
        self._prefixes = tuple(f"/{name}/" for name in services)
        self._handlers: list[grpc.GenericRpcHandler[Any, Any]] = []
        self._methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        self._attached = False

    @property
    def attached(self) -> bool:
        return self._attached

    def add_generic_rpc_handlers(
        self, handlers: Iterable[grpc.GenericRpcHandler[Any, Any]]
    ) -> None:
        self._handlers.extend(handlers)

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        for method, handler in method_handlers.items():
            self._methods[f"/{service_name}/{method}"] = handler

    def attach(self, register: Callable[[DeferredServices], None]) -> None:
        """Register the real servicers (``register(self)``) and start delegating to them."""
        register(self)
        self._attached = True

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = handler_call_details.method
        if not method.startswith(self._prefixes):
            return None
        if not self._attached:
            return grpc.unary_unary_rpc_method_handler(_unavailable)
        handler = self._methods.get(method)
        if handler is not None:
            return handler
        for generic in self._handlers:
            found = generic.service(handler_call_details)
            if found is not None:
                return found
        return None


async def _unavailable(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    await context.abort(grpc.StatusCode.UNAVAILABLE, STARTING_MESSAGE)


@dataclasses.dataclass
class Readiness:
    """When a starting broker may report SERVING; see the module docstring.

    Mutated only from the event loop.  Once ready it stays ready (shutdown
    flips health separately).
    """

    broker_id: int
    registered_epoch: int = -1
    metadata_epoch: int = -1
    ready: bool = False

    def on_registered(self, broker_epoch: int) -> None:
        self.registered_epoch = broker_epoch

    def on_update_metadata(self, broker_epoch: int) -> None:
        """An UpdateMetadata addressed to ``broker_epoch`` has been applied."""
        self.metadata_epoch = max(self.metadata_epoch, broker_epoch)

    def missing_replicas(
        self, topics: dict[str, dict[int, PartitionState]], hosted: Container[TopicPartition]
    ) -> list[TopicPartition]:
        """Partitions with a leader that list this broker as a replica but are not hosted yet."""
        return [
            TopicPartition(ps.topic, ps.partition)
            for parts in topics.values()
            for ps in parts.values()
            if self.broker_id in ps.replicas
            and ps.leader >= 0
            and TopicPartition(ps.topic, ps.partition) not in hosted
        ]

    def evaluate(
        self, topics: dict[str, dict[int, PartitionState]], hosted: Container[TopicPartition]
    ) -> bool:
        """True (and latched) once registered, told the metadata, and hosting its replicas."""
        if self.ready:
            return True
        if self.registered_epoch < 0 or self.metadata_epoch < self.registered_epoch:
            return False
        if self.missing_replicas(topics, hosted):
            return False
        self.ready = True
        return True
