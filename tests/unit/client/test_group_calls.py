"""Calls to a group's coordinator that never block past the caller's deadline.

Covers :mod:`headwater.client.group.calls` against an in-process gRPC group service on
127.0.0.1: the coordinator is found once and remembered; a lookup not answered by the
deadline is left in flight and picked up by the next caller; refusals back off and the
next broker is asked; a call the coordinator does not answer fails by the deadline and
makes the client look the coordinator up again.
"""

from __future__ import annotations

import threading
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
    """FindCoordinator names this server (or refuses); OffsetFetch may be held."""

    def __init__(self) -> None:
        self.refuse = 0
        """FindCoordinator answers COORDINATOR_NOT_AVAILABLE this many more times."""
        self.lookups = 0
        self.release = threading.Event()
        self.release.set()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        group_pb2_grpc.add_GroupServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def FindCoordinator(self, request: Any, context: Any) -> Any:
        self.lookups += 1
        if self.refuse:
            self.refuse -= 1
            return group_pb2.FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.release.wait(10)
        return group_pb2.FindCoordinatorResponse(host="127.0.0.1", port=self.port)

    def OffsetFetch(self, request: Any, context: Any) -> Any:
        self.release.wait(10)
        return group_pb2.OffsetFetchResponse()


@pytest.fixture
def service() -> Iterator[GroupService]:
    s = GroupService()
    yield s
    s.release.set()
    s.server.stop(0).wait()


@pytest.fixture
def channels() -> Iterator[connection.Channels]:
    c = connection.Channels(name="test-group-calls")
    yield c
    c.close()


def coordinator_calls(channels: connection.Channels, *bootstrap: str) -> calls.CoordinatorCalls:
    metadata = MetadataManager(
        bootstrap=bootstrap,
        channels=channels,
        retry=RETRY,
        request_timeout_ms=2000,
        max_age_ms=60_000,
    )
    return calls.CoordinatorCalls(
        group_id="g",
        metadata=metadata,
        bootstrap=bootstrap,
        channels=channels,
        retry=RETRY,
        request_timeout_ms=2000,
        clock=monotonic_ms,
    )


def soon(ms: float) -> float:
    return monotonic_ms() + ms


def test_the_coordinator_is_found_once_and_remembered(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    assert c.address is None
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    assert service.lookups == 1 and c.address == service.address


def test_an_unanswered_lookup_is_left_for_the_next_caller(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    service.release.clear()
    assert c.coordinator(deadline_ms=soon(50)) is None
    assert c.coordinator(deadline_ms=soon(50)) is None
    assert service.lookups == 1  # the same lookup, still in flight
    service.release.set()
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    assert service.lookups == 1


def test_refusals_back_off_then_succeed(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    service.refuse = 2
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    assert service.lookups == 3


def test_an_unreachable_broker_is_skipped_for_the_next(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, "127.0.0.1:9", service.address)
    assert c.coordinator(deadline_ms=soon(5000)) == service.address


def test_no_broker_answering_gives_none_by_the_deadline(channels: connection.Channels) -> None:
    c = coordinator_calls(channels, "127.0.0.1:9")
    assert c.coordinator(deadline_ms=soon(300)) is None
    assert c.address is None


def test_a_call_not_answered_by_the_deadline_fails_and_forgets_the_coordinator(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    service.release.clear()
    with pytest.raises(errors.RequestTimedOutError):
        c.call("OffsetFetch", group_pb2.OffsetFetchRequest(group_id="g"), deadline_ms=soon(100))
    assert c.address is None
    service.release.set()
    resp = c.call("OffsetFetch", group_pb2.OffsetFetchRequest(group_id="g"), deadline_ms=soon(5000))
    assert resp.error_code == 0 and c.address == service.address


def test_a_submitted_call_is_carried_over_until_answered(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    address = c.coordinator(deadline_ms=soon(5000))
    assert address is not None
    service.release.clear()
    future = c.submit(
        "OffsetFetch", group_pb2.OffsetFetchRequest(group_id="g"), address=address, timeout_ms=5000
    )
    assert not calls.wait(future, deadline_ms=soon(50), clock=monotonic_ms)
    assert not calls.wait(future, deadline_ms=soon(50), clock=monotonic_ms)
    service.release.set()
    assert calls.wait(future, deadline_ms=soon(5000), clock=monotonic_ms)
    assert future.result().error_code == 0


def test_a_submitted_call_that_fails_forgets_only_that_coordinator(
    service: GroupService, channels: connection.Channels
) -> None:
    c = coordinator_calls(channels, service.address)
    assert c.coordinator(deadline_ms=soon(5000)) == service.address
    future = c.submit(
        "OffsetFetch", group_pb2.OffsetFetchRequest(), address="127.0.0.1:9", timeout_ms=2000
    )
    assert calls.wait(future, deadline_ms=soon(5000), clock=monotonic_ms)
    assert isinstance(future.exception(), errors.NetworkError)
    assert c.address == service.address  # another address failed: this one is kept
    c.mark_dead("127.0.0.1:9")
    assert c.address == service.address
    c.mark_dead(service.address)
    assert c.address is None
