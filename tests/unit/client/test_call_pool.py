"""connection.CallPool, the client's background calls on persistent worker threads:
calls to one address start in submission order, a call blocked at one broker does not
hold up another's, failures reach the callback as Kafka errors, steady traffic starts
no new threads, and a closed pool refuses calls."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest
from headwater import errors
from headwater.client.transport.connection import CallPool

TIMEOUT_S = 5.0


class Outcomes:
    def __init__(self) -> None:
        self.items: list[tuple[Any, errors.HeadwaterError | None]] = []
        self.cond = threading.Condition()

    def done(self, response: Any, error: errors.HeadwaterError | None) -> None:
        with self.cond:
            self.items.append((response, error))
            self.cond.notify_all()

    def wait_for(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, TIMEOUT_S)


def test_calls_to_one_address_start_in_submission_order() -> None:
    pool = CallPool(name="t", max_workers=8)
    started: list[int] = []
    outcomes = Outcomes()

    def method(request: int, timeout: float) -> int:
        started.append(request)
        return request

    try:
        for i in range(200):
            pool.submit(method, i, address="a", timeout_s=1, done=outcomes.done)
        outcomes.wait_for(200)
    finally:
        pool.close()
    assert started == list(range(200))
    assert sorted(r for r, _ in outcomes.items) == list(range(200))


def test_a_blocked_call_does_not_hold_up_another_broker() -> None:
    pool = CallPool(name="t", max_workers=4)
    release = threading.Event()
    outcomes = Outcomes()

    def slow(request: str, timeout: float) -> str:
        release.wait(TIMEOUT_S)
        return request

    def fast(request: str, timeout: float) -> str:
        return request

    try:
        pool.submit(slow, "a", address="a:1", timeout_s=1, done=outcomes.done)
        pool.submit(fast, "b", address="b:1", timeout_s=1, done=outcomes.done)
        outcomes.wait_for(1)
        assert outcomes.items == [("b", None)]
        release.set()
        outcomes.wait_for(2)
    finally:
        release.set()
        pool.close()


class _Unreachable(grpc.RpcError):
    """A transport failure without a status (what a dead connection raises)."""


def test_failures_reach_the_callback_as_kafka_errors() -> None:
    pool = CallPool(name="t")
    outcomes = Outcomes()

    def unreachable(request: object, timeout: float) -> None:
        raise _Unreachable("connection refused")

    def broken(request: object, timeout: float) -> None:
        raise ValueError("Cannot invoke RPC on closed channel!")

    try:
        pool.submit(unreachable, None, address="h:1", timeout_s=1, done=outcomes.done)
        pool.submit(broken, None, address="h:1", timeout_s=1, done=outcomes.done)
        outcomes.wait_for(2)
    finally:
        pool.close()
    (r1, e1), (r2, e2) = outcomes.items
    assert r1 is None and isinstance(e1, errors.NetworkError) and e1.retriable
    assert r2 is None and isinstance(e2, errors.UnknownServerError)


def test_steady_traffic_reuses_its_workers() -> None:
    pool = CallPool(name="t")
    outcomes = Outcomes()
    before = threading.active_count()
    try:
        for i in range(50):  # one call at a time: one worker does them all
            pool.submit(lambda r, timeout: r, i, address="a", timeout_s=1, done=outcomes.done)
            outcomes.wait_for(i + 1)
        assert threading.active_count() - before <= 2  # one, plus one racing its idle mark
    finally:
        pool.close()


def test_a_closed_pool_refuses_calls() -> None:
    pool = CallPool(name="t")
    pool.close()
    with pytest.raises(errors.NetworkError, match="closed"):
        pool.submit(lambda r, timeout: r, 1, address="a", timeout_s=1, done=Outcomes().done)
