"""The shared retry/backoff policy: growth, cap, jitter, deadline, and ``call`` with fake time."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.retry import RetryPolicy, is_retriable


def test_backoff_doubles_up_to_cap() -> None:
    p = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=1000, jitter=0.0)
    assert [p.backoff_ms(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]


def test_jitter_bounds() -> None:
    p = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=100, jitter=0.2)
    assert p.backoff_ms(1, rand=lambda: 0.0) == pytest.approx(80)
    assert p.backoff_ms(1, rand=lambda: 1.0) == pytest.approx(120)


def test_should_retry_only_retriable_within_attempts_and_deadline() -> None:
    p = RetryPolicy(retries=2, retry_backoff_ms=10, retry_backoff_max_ms=10, jitter=0.0)
    net = errors.NetworkError("x")
    assert p.should_retry(net, attempt=1, now_ms=0, deadline_ms=100)
    assert p.should_retry(net, attempt=2, now_ms=0, deadline_ms=100)
    assert not p.should_retry(net, attempt=3, now_ms=0, deadline_ms=100)
    assert not p.should_retry(net, attempt=1, now_ms=95, deadline_ms=100)
    assert not p.should_retry(errors.InvalidTopicError("x"), attempt=1, now_ms=0, deadline_ms=100)
    assert is_retriable(errors.NotLeaderOrFollowerError())
    assert not is_retriable(ValueError())


def test_invalid_policies_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)
    with pytest.raises(ValueError):
        RetryPolicy(retry_backoff_ms=10, retry_backoff_max_ms=5)
    with pytest.raises(ValueError):
        RetryPolicy(jitter=1.5)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds * 1000


def test_call_retries_then_succeeds_with_backoff() -> None:
    t = FakeTime()
    attempts = []
    refreshed = []

    def fn() -> str:
        attempts.append(t.now)
        if len(attempts) < 3:
            raise errors.NotLeaderOrFollowerError("moved")
        return "ok"

    p = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=1000, jitter=0.0)
    assert (
        p.call(fn, timeout_ms=10_000, clock=t.clock, sleep=t.sleep, on_retry=refreshed.append)
        == "ok"
    )
    assert attempts == [0.0, 100.0, 300.0]
    assert len(refreshed) == 2


def test_call_gives_up_at_deadline() -> None:
    t = FakeTime()
    p = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=100, jitter=0.0)

    def fn() -> None:
        raise errors.NetworkError("down")

    with pytest.raises(errors.NetworkError):
        p.call(fn, timeout_ms=450, clock=t.clock, sleep=t.sleep)
    assert t.now <= 450
    assert len(t.sleeps) == 4


def test_call_does_not_retry_fatal() -> None:
    t = FakeTime()
    calls = []

    def fn() -> None:
        calls.append(1)
        raise errors.TopicAlreadyExistsError("t")

    with pytest.raises(errors.TopicAlreadyExistsError):
        RetryPolicy().call(fn, timeout_ms=1000, clock=t.clock, sleep=t.sleep)
    assert calls == [1]


def test_backoff_stays_at_the_maximum_however_many_attempts() -> None:
    policy = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=1000, jitter=0)
    assert policy.backoff_ms(5000) == 1000.0
    assert policy.backoff_ms(2**31 - 1) == 1000.0
