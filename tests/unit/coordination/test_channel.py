"""ControllerChannelManager: per-broker senders deliver in order, retry a request the broker
could not be reached for (as long as the policy and the sender's life allow) but drop one the
broker refused at once, drop requests for brokers without a sender, restart a sender when the
registration changes, and stop on removal and shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headwater import errors
from headwater.coordination.channel import ControllerChannelManager, RequestRefused
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
    log: Log, what: str, *, fail_times: int = 0, refuse: bool = False
) -> Callable[[object, BrokerRegistration], None]:
    attempts = [0]

    def send(_channel: object, broker: BrokerRegistration) -> None:
        attempts[0] += 1
        log.add(broker.broker_id, f"{what}#{attempts[0]}")
        if refuse:
            raise RequestRefused("UpdateMetadata to broker 1 refused: STALE_CONTROLLER_EPOCH")
        if attempts[0] <= fail_times:
            raise errors.SaslAuthenticationFailedError("broker unreachable or not authenticated")

    return send


def manager(retries: int = 2) -> ControllerChannelManager:
    retry = RetryPolicy(retries=retries, retry_backoff_ms=0, retry_backoff_max_ms=0, jitter=0)
    return ControllerChannelManager(object(), retry=retry)  # type: ignore[arg-type]


def test_requests_to_one_broker_arrive_in_order() -> None:
    m, log = manager(), Log()
    m.add_broker(reg(1))
    try:
        for i in range(5):
            m.send(1, request(log, str(i)))
        assert [w for _, w in log.wait_for(5)] == [f"{i}#1" for i in range(5)]
    finally:
        m.shutdown()


def test_an_unreachable_broker_is_retried_until_the_policy_gives_up() -> None:
    m, log = manager(retries=2), Log()
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a", fail_times=10))
        m.send(1, request(log, "b", fail_times=1))
        assert [w for _, w in log.wait_for(5)] == ["a#1", "a#2", "a#3", "b#1", "b#2"]
    finally:
        m.shutdown()


def test_the_default_policy_retries_a_transport_failure_until_it_succeeds() -> None:
    assert ControllerChannelManager.DEFAULT_RETRY.retries >= 2**31 - 1
    m, log = manager(retries=ControllerChannelManager.DEFAULT_RETRY.retries), Log()
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a", fail_times=50))
        m.send(1, request(log, "b"))
        items = [w for _, w in log.wait_for(52)]
        assert items == [f"a#{i}" for i in range(1, 52)] + ["b#1"]
    finally:
        m.shutdown()


def test_a_refused_request_is_dropped_at_once_and_the_next_goes_through() -> None:
    m, log = manager(retries=ControllerChannelManager.DEFAULT_RETRY.retries), Log()
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a", refuse=True))
        m.send(1, request(log, "b"))
        assert [w for _, w in log.wait_for(2)] == ["a#1", "b#1"]
        time.sleep(0.05)
        assert [w for _, w in log.snapshot()] == ["a#1", "b#1"]
    finally:
        m.shutdown()


def test_removing_the_broker_ends_the_retries_of_its_request() -> None:
    retry = RetryPolicy(retry_backoff_ms=5, retry_backoff_max_ms=5, jitter=0)
    m, log = ControllerChannelManager(object(), retry=retry), Log()  # type: ignore[arg-type]
    m.add_broker(reg(1))
    try:
        m.send(1, request(log, "a", fail_times=10**9))
        log.wait_for(3)
        sender = m._senders[1]
        m.remove_broker(1)
        sender.join(2.0)
        assert not sender._thread.is_alive()
        count = len(log.snapshot())
        time.sleep(0.05)
        assert len(log.snapshot()) == count
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
