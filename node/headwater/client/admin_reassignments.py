"""``headwater.Admin``'s partition reassignment and replication throttle calls.

Kafka's admin client semantics (KIP-455):

* :meth:`AdminReassignments.alter_partition_reassignments` goes to the
  controller, found with DescribeCluster; a partition answered NOT_CONTROLLER
  (the controller moved) is asked again of the new one, within
  ``default_api_timeout_ms``.  A None target cancels the move in progress.
  Each partition's refusal comes back as Kafka's exception, nothing raised.
* :meth:`AdminReassignments.list_partition_reassignments` may go to any broker
  (they read ZooKeeper) and returns only the partitions being moved.
* :meth:`AdminReassignments.alter_broker_configs` sets or deletes the dynamic
  broker configs (``leader.replication.throttled.rate``,
  ``follower.replication.throttled.rate``) of one broker or, with
  ``broker_id=None``, the cluster default; brokers apply them at once.

A mixin: :class:`~headwater.client.admin.Admin` inherits it and supplies the
channels, metadata and retry policy.  Thread-safe as the Admin is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from headwater import errors
from headwater.client import connection
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import admin_pb2, common_pb2

if TYPE_CHECKING:
    from headwater.client.admin import ClusterDescription, ConfigEntry
    from headwater.retry import RetryPolicy


@dataclasses.dataclass(frozen=True)
class PartitionReassignment:
    """A move in progress: the current replica set and the replicas being added and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where the partition is going (Kafka's ``targetReplicas``)."""
        return tuple(b for b in self.replicas if b not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """Where it came from (Kafka's ``originReplicas``)."""
        return tuple(b for b in self.replicas if b not in self.adding_replicas)


class AdminReassignments:
    """Reassignment and replication throttle methods of :class:`~headwater.client.admin.Admin`."""

    if TYPE_CHECKING:
        _channels: connection.Channels
        _retry: RetryPolicy
        request_timeout_ms: int
        default_api_timeout_ms: int

        def _admin_call(
            self, rpc: str, request: Any, *, timeout_ms: float | None = None
        ) -> Any: ...

        def describe_cluster(self) -> ClusterDescription: ...

    # -- reassignments ---------------------------------------------------------------

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Move each partition to its target replicas (preferred leader first); None cancels.

        Returns each partition's error (None: accepted).  The move itself goes
        on in the background; follow it with :meth:`list_partition_reassignments`.
        """
        pending = {TopicPartition(*tp): target for tp, target in reassignments.items()}
        out: dict[TopicPartition, errors.HeadwaterError | None] = {}

        def attempt() -> None:
            if not pending:
                return
            address = self._controller_address()
            request = admin_pb2.AlterPartitionReassignmentsRequest(
                partitions=[
                    admin_pb2.ReassignablePartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        replicas=list(target or ()),
                        cancel=target is None,
                    )
                    for tp, target in pending.items()
                ],
                timeout_ms=timeout_ms or self.request_timeout_ms,
            )
            resp = connection.call(
                self._channels.admin(address).AlterPartitionReassignments,
                request,
                address=address,
                timeout_ms=(timeout_ms or self.request_timeout_ms) + 5000,
            )
            moved = False
            for r in resp.results:
                tp = TopicPartition(r.topic, r.partition)
                code = ErrorCode.from_wire(r.error)
                if code is ErrorCode.NOT_CONTROLLER:
                    moved = True
                    continue
                out[tp] = errors.for_code(r.error, r.error_message) if r.error else None
                pending.pop(tp, None)
            if moved:
                raise errors.NotControllerError(f"broker at {address} is no longer the controller")

        try:
            self._retry.call(attempt, timeout_ms=self.default_api_timeout_ms)
        except errors.NotControllerError as exc:
            out.update({tp: exc for tp in pending})
        return out

    def _controller_address(self) -> str:
        cluster = self.describe_cluster()
        for broker in cluster.brokers:
            if broker.broker_id == cluster.controller_id:
                return broker.address
        raise errors.NotControllerError("the cluster has no controller right now")

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The partitions being moved (of ``partitions``, if given), with their replicas."""
        request = admin_pb2.ListPartitionReassignmentsRequest(
            partitions=[
                common_pb2.TopicPartition(topic=tp[0], partition=tp[1]) for tp in partitions or ()
            ]
        )
        resp = self._admin_call("ListPartitionReassignments", request)
        if resp.error:
            raise errors.for_code(resp.error, resp.error_message or "listing reassignments")
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
            )
            for r in resp.reassignments
        }

    # -- dynamic broker configs (replication throttles) ---------------------------------

    def alter_broker_configs(
        self, broker_id: int | None, configs: Mapping[str, str | None]
    ) -> None:
        """Set (or, with a None value, delete) dynamic configs of a broker or the default.

        ``broker_id=None`` is the cluster-wide default (``/config/brokers/<default>``).
        Raises Kafka's error (INVALID_REQUEST for a config that is not dynamic).
        """
        name = "" if broker_id is None else str(broker_id)
        request = admin_pb2.AlterConfigsRequest(
            resources=[
                admin_pb2.AlterConfigsResource(
                    type=admin_pb2.BROKER,
                    name=name,
                    configs=[
                        admin_pb2.AlterableConfig(name=k, op=admin_pb2.SET, value=v)
                        if v is not None
                        else admin_pb2.AlterableConfig(name=k, op=admin_pb2.DELETE)
                        for k, v in configs.items()
                    ],
                )
            ]
        )
        resp = self._admin_call("AlterConfigs", request)
        for r in resp.results:
            if r.error:
                raise errors.for_code(r.error, r.error_message or f"configs of broker {name!r}")

    def describe_broker_configs(self, broker_id: int | None = None) -> dict[str, ConfigEntry]:
        """A broker's configs (static and dynamic, with their source) or, for None, the
        cluster-wide dynamic defaults.  A broker describes itself, so the request goes
        to that broker."""
        from headwater.client.admin import ConfigEntry

        name = "" if broker_id is None else str(broker_id)
        request = admin_pb2.DescribeConfigsRequest(
            resources=[admin_pb2.ConfigResource(type=admin_pb2.BROKER, name=name)]
        )
        if broker_id is None:
            resp = self._admin_call("DescribeConfigs", request)
        else:
            address = next(
                (b.address for b in self.describe_cluster().brokers if b.broker_id == broker_id),
                None,
            )
            if address is None:
                raise errors.BrokerNotAvailableError(f"broker {broker_id} is not alive")
            resp = self._retry.call(
                lambda: connection.call(
                    self._channels.admin(address).DescribeConfigs,
                    request,
                    address=address,
                    timeout_ms=self.request_timeout_ms,
                ),
                timeout_ms=self.default_api_timeout_ms,
            )
        out: dict[str, ConfigEntry] = {}
        for r in resp.results:
            if r.error:
                raise errors.for_code(r.error, r.error_message or f"configs of broker {name!r}")
            for e in r.entries:
                out[e.name] = ConfigEntry(
                    e.name,
                    e.value,
                    e.read_only,
                    admin_pb2.ConfigSource.Name(e.source),
                    e.is_sensitive,
                    e.documentation,
                )
        return out
