"""``client.streams`` without a network: how :class:`StreamedCalls` keeps, replaces
and drops its streams, with a fake channel whose stream answers as the test says.

Covers: one stream per broker carries consecutive calls; a new channel (after
``Channels.forget``) gets a new stream and the old one is ended; an answer that
arrives just as the watchdog cancels its stream is returned, and that stream is
not used again; ``close`` ends every stream (its request iterator stops, so
grpc's thread reading it ends too)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from headwater.client.transport import streams


class FakeStreamCall:
    """What a stream multicallable returns: answers ``next`` with ``answer(request)``
    for each request read from the client's iterator (read on a thread, as grpc
    does), after ``delay_s``; records ``cancel``."""

    def __init__(self, requests: Iterator[Any], delay_s: float) -> None:
        self.requests = requests
        self.delay_s = delay_s
        self.cancelled = False
        self.ended = threading.Event()
        self._answers: list[Any] = []
        self._ready = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for request in self.requests:  # ends when the client puts the end marker
            with self._ready:
                self._answers.append(("answer", request))
                self._ready.notify_all()
        self.ended.set()

    def __iter__(self) -> FakeStreamCall:
        return self

    def __next__(self) -> Any:
        with self._ready:
            assert self._ready.wait_for(lambda: self._answers, 5.0)
            answer = self._answers.pop(0)
        time.sleep(self.delay_s)  # the answer is late, but it does come
        return answer

    def cancel(self) -> None:
        self.cancelled = True


class FakeStub:
    def __init__(self) -> None:
        self.delay_s = 0.0
        self.calls: list[FakeStreamCall] = []

    def ProduceStream(self, requests: Iterator[Any]) -> FakeStreamCall:
        call = FakeStreamCall(requests, self.delay_s)
        self.calls.append(call)
        return call


class FakeChannels:
    def __init__(self) -> None:
        self.channels = {"a:1": object()}
        self.stub = FakeStub()

    def channel(self, address: str) -> object:
        return self.channels[address]

    def broker(self, address: str) -> FakeStub:
        return self.stub


def make() -> tuple[FakeChannels, streams.StreamedCalls]:
    channels = FakeChannels()
    return channels, streams.StreamedCalls(channels, "Produce")  # type: ignore[arg-type]


def test_consecutive_calls_ride_one_stream() -> None:
    channels, calls = make()
    assert calls.call("a:1", "r1", timeout_s=5) == ("answer", "r1")
    assert calls.call("a:1", "r2", timeout_s=5) == ("answer", "r2")
    assert len(channels.stub.calls) == 1
    calls.close()


def test_a_new_channel_gets_a_new_stream_and_the_old_one_ends() -> None:
    channels, calls = make()
    calls.call("a:1", "r1", timeout_s=5)
    old = channels.stub.calls[0]
    channels.channels["a:1"] = object()  # what Channels.forget leads to
    assert calls.call("a:1", "r2", timeout_s=5) == ("answer", "r2")
    assert len(channels.stub.calls) == 2
    assert old.cancelled and old.ended.wait(5)
    calls.close()


def test_an_answer_racing_the_watchdog_is_returned_and_its_stream_dropped() -> None:
    channels, calls = make()
    channels.stub.delay_s = 4 * streams.WATCHDOG_INTERVAL_S  # the watchdog looks meanwhile
    answer = calls.call("a:1", "r1", timeout_s=0.001)
    first = channels.stub.calls[0]
    assert answer == ("answer", "r1") and first.cancelled
    channels.stub.delay_s = 0.0
    assert calls.call("a:1", "r2", timeout_s=5) == ("answer", "r2")
    assert len(channels.stub.calls) == 2  # the cancelled stream was not used again
    assert first.ended.wait(5)
    calls.close()


def test_close_ends_every_stream() -> None:
    channels, calls = make()
    calls.call("a:1", "r1", timeout_s=5)
    calls.close()
    (only,) = channels.stub.calls
    assert only.cancelled and only.ended.wait(5)
    assert not calls._streams


def test_a_stream_left_idle_is_replaced_before_its_next_request(monkeypatch: Any) -> None:
    channels, calls = make()
    calls.call("a:1", "r1", timeout_s=5)
    first = channels.stub.calls[0]
    monkeypatch.setattr(streams, "MAX_IDLE_S", 0.05)
    time.sleep(0.1)  # idle past it: its connection may have died unseen
    assert calls.call("a:1", "r2", timeout_s=5) == ("answer", "r2")
    assert len(channels.stub.calls) == 2 and first.cancelled and first.ended.wait(5)
    calls.call("a:1", "r3", timeout_s=5)  # used again at once: the same stream
    assert len(channels.stub.calls) == 2
    calls.close()
