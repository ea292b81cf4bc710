"""What every area of the admin client shares: the cluster connection and how to call it.

:class:`AdminCore` holds the bootstrap addresses, the timeouts, the retry policy,
the channels and the metadata of one :class:`~headwater.client.admin.client.Admin`,
and sends a request to any live broker.  Each area (:mod:`.acls`,
:mod:`.log_dirs`, :mod:`.reassignments`, :mod:`.scram`) is a class that takes the
core; the Admin delegates its methods to them.  Thread-safe: the core's state is
set once, and the channels and metadata are thread-safe.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from headwater import errors
from headwater.client.admin.values import BrokerDescription, ClusterDescription
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.retry import RetryPolicy
from headwater.v1 import admin_pb2


class AdminCore:
    """The connection to the cluster that the admin client's areas share."""

    def __init__(
        self,
        *,
        bootstrap_servers: Sequence[str],
        request_timeout_ms: int,
        default_api_timeout_ms: int,
        retry: RetryPolicy,
        channels: connection.Channels,
        metadata: MetadataManager,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.request_timeout_ms = request_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.retry = retry
        self.channels = channels
        self.metadata = metadata

    def admin_call(self, rpc: str, request: Any, *, timeout_ms: float | None = None) -> Any:
        """Send ``request`` to any broker's Admin service, retrying on another."""
        return self.call_any_broker(self.channels.admin, rpc, request, timeout_ms=timeout_ms)

    def call_any_broker(
        self,
        stub_for: Callable[[str], Any],
        rpc: str,
        request: Any,
        *,
        timeout_ms: float | None = None,
    ) -> Any:
        """Send ``request`` as ``stub_for(address).<rpc>`` to any broker (known brokers in
        random order, then the bootstrap addresses), trying the next on a network error and
        retrying the whole round with a metadata refresh until ``default_api_timeout_ms``."""

        def attempt() -> Any:
            brokers = [b.address for b in self.metadata.current.brokers.values()]
            random.shuffle(brokers)
            candidates = brokers + [a for a in self.bootstrap_servers if a not in brokers]
            last: errors.HeadwaterError | None = None
            for address in candidates:
                try:
                    return connection.call(
                        getattr(stub_for(address), rpc),
                        request,
                        address=address,
                        timeout_ms=timeout_ms or self.request_timeout_ms,
                    )
                except errors.NetworkError as exc:
                    last = exc
            raise errors.NetworkError(
                f"cannot reach any broker (tried {', '.join(candidates)})"
                + (f"; last error: {last.message}" if last is not None else "")
            )

        return self.retry.call(
            attempt,
            timeout_ms=self.default_api_timeout_ms,
            on_retry=lambda _e: self.metadata.maybe_refresh(),
        )

    def describe_cluster(self) -> ClusterDescription:
        resp = self.admin_call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        return ClusterDescription(
            resp.cluster_id,
            resp.controller_id,
            tuple(
                sorted(
                    (
                        BrokerDescription(
                            b.id, b.host, b.port, b.rack or None, b.version, b.protocol_version
                        )
                        for b in resp.brokers
                    ),
                    key=lambda b: b.broker_id,
                )
            ),
        )
