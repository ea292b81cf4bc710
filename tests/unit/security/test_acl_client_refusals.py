"""A consumer refused its group by the authorizer: the coordinator lookup raises
GroupAuthorizationFailedError (once per refused lookup, as Kafka's consumer raises it from
poll) instead of retrying forever, and looks up again afterwards, so an ACL granted later
is picked up.  Against an in-process gRPC group service on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from headwater import errors
from headwater.client.group import calls
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.clock import monotonic_ms
from headwater.errors import ErrorCode
from headwater.retry import RetryPolicy
from headwater.v1 import group_pb2, group_pb2_grpc

RETRY = RetryPolicy(retry_backoff_ms=20, retry_backoff_max_ms=40, jitter=0.0)


class GroupService(group_pb2_grpc.GroupServicer):
    def __init__(self) -> None:
        self.denied = True
        self.lookups = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        group_pb2_grpc.add_GroupServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def FindCoordinator(self, request: Any, context: Any) -> Any:
        self.lookups += 1
        if self.denied:
            return group_pb2.FindCoordinatorResponse(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                error_message="not authorized to DESCRIBE GROUP 'g'",
                node_id=-1,
            )
        return group_pb2.FindCoordinatorResponse(host="127.0.0.1", port=self.port)


@pytest.fixture
def service() -> Iterator[GroupService]:
    s = GroupService()
    yield s
    s.server.stop(0).wait()


@pytest.fixture
def channels() -> Iterator[connection.Channels]:
    c = connection.Channels(name="test-acl-refusals")
    yield c
    c.close()


def test_a_refused_lookup_raises_then_looks_up_again(
    service: GroupService, channels: connection.Channels
) -> None:
    address = f"127.0.0.1:{service.port}"
    metadata = MetadataManager(
        bootstrap=(address,), channels=channels, retry=RETRY, request_timeout_ms=2000
    )
    c = calls.CoordinatorCalls(
        group_id="g",
        metadata=metadata,
        bootstrap=(address,),
        channels=channels,
        retry=RETRY,
        request_timeout_ms=2000,
        clock=monotonic_ms,
    )
    with pytest.raises(errors.GroupAuthorizationFailedError, match="DESCRIBE GROUP 'g'"):
        c.coordinator(deadline_ms=monotonic_ms() + 5000)
    with pytest.raises(errors.GroupAuthorizationFailedError):
        c.coordinator(deadline_ms=monotonic_ms() + 5000)
    assert service.lookups == 2  # each raise came from its own lookup
    service.denied = False  # the ACL is granted
    assert c.coordinator(deadline_ms=monotonic_ms() + 5000) == address
