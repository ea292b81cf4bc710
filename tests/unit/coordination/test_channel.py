"""ControllerChannelManager: per-broker senders deliver in order, retry a failing request a
bounded number of times then drop it, drop requests for brokers without a sender, restart a
sender when the registration changes, and stop on removal and shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headwater.coordination.channel import ControllerChannelManager
from headwater.coordination.model import BrokerRegistration
from headwater.retry import RetryPolicy

from .helpers import reg


class Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[int, str]] = []

    def add(self, broker: int, what: str) -> None:
        with self.lock:
            self.items.append((broker, what))

    def snapshot(self) -> list[tuple[int, str]]:
        with self.lock:
            return list(self.items)

    def wait_for(self, n: int, timeout_s: float = 5.0) -> list[tuple[int, str]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            items = self.snapshot()
            if len(items) >= n:
                return items
            time.sleep(0.005)
        raise AssertionError(f"only {self.snapshot()} after {timeout_s}s")


def request(
    log: Log, what: str, *, fail_times: int = 0
) -> Callable[[object, BrokerRegistration], None]:
    attempts = [0]

    def send(_channel: object, broker: BrokerRegistration) -> None:
        attempts[0] += 1
        log.add(broker.broker_id, f"{what}#{attempts[0]}")
        if attempts[0] <= fail_times:
            raise ConnectionError("broker unreachable")

    return send


def manager(**kw: object) -> ControllerChannelManager:
    retry = RetryPolicy(retries=2, retry_backoff_ms=0, retry_backoff_max_ms=0, jitter=0)
    return ControllerChannelManager(object(), retry=retry, **kw)  # type: ignore[arg-type]


def test_requests_to_one_broker_arrive_in_order() -> None:
    m, log = manager(), Log()
    m.add_broker(reg(1))
    try:
        for i in range(5):
            m.send(1, request(log, str(i)))
        assert [w for _, w in log.wait_for(5)] == [f"{i}#1" for i in range(5)]
    finally:
        m.shutdown()


def test_a_failing_request_is_retried_then_dropped_and_the_next_goes_through() -> None:
    m, log = manager(), Log()
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a", fail_times=10))
        m.send(1, request(log, "b", fail_times=1))
        assert [w for _, w in log.wait_for(5)] == ["a#1", "a#2", "a#3", "b#1", "b#2"]
    finally:
        m.shutdown()


def test_requests_for_a_broker_without_sender_are_dropped() -> None:
    m, log = manager(), Log()
    m.send(7, request(log, "x"))
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "y"))
        assert log.wait_for(1) == [(1, "y#1")]
    finally:
        m.shutdown()


def test_same_registration_keeps_the_sender_a_new_one_restarts_it() -> None:
    m, log = manager(), Log()
    m.add_broker(reg(1))
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a"))
        log.wait_for(1)
        m.add_broker(reg(1, epoch=555))
        m.send(1, request(log, "b"))
        assert log.wait_for(2) == [(1, "a#1"), (1, "b#1")]
        assert len(m._senders) == 1 and m._senders[1].broker.epoch == 555
    finally:
        m.shutdown()


def test_removed_broker_gets_nothing_more() -> None:
    m, log = manager(), Log()
    m.add_broker(reg(1))
    m.add_broker(reg(2))
    try:
        m.remove_broker(1)
        m.remove_broker(1)  # twice is harmless
        m.send(1, request(log, "lost"))
        m.send(2, request(log, "kept"))
        assert log.wait_for(1) == [(2, "kept#1")]
    finally:
        m.shutdown()


def test_shutdown_stops_every_sender() -> None:
    m = manager()
    m.add_broker(reg(1))
    m.add_broker(reg(2))
    threads = [s._thread for s in m._senders.values()]
    m.shutdown(timeout_s=5.0)
    assert all(not t.is_alive() for t in threads)
    assert m._senders == {}
