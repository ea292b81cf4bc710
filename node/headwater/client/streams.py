"""Unary-looking calls made as messages on a long-lived bidi stream per broker.

A unary gRPC call sets up an HTTP/2 stream, its metadata and, on the broker, a
new call's state: most of a one-record Produce, and twice what one message each
way on a stream that is already open costs (``bench/grpc_stream_vs_unary.py``;
docs/performance.md, "Figures behind rules in the code").  The
producer's sender and the consumer's fetcher make their *inline* calls (the
request they wait for alone, :mod:`headwater.client.inline_calls`) through
:class:`StreamedCalls`: ``ProduceStream`` and ``FetchStream`` answer each
request on the stream, in order, as ``Produce`` and ``Fetch`` would.

Invariants:

- A :class:`StreamedCalls` is used by one thread (the sender's or the
  fetcher's), one request at a time per broker: a stream never has two
  requests outstanding, so the next message on it is always the answer to the
  request just sent.
- A stream that failed in any way (transport error, a missed deadline, a
  closed channel), or whose answer came just as the watchdog cancelled it, is
  dropped, never reused; the next call opens a new one.  So is one left unused
  for :data:`MAX_IDLE_S` (its connection may have died unseen meanwhile).
  The request that failed is not resent here: the caller's retry rules decide,
  as for a failed unary call.
- A broker that answers UNIMPLEMENTED (one from before these methods, met in a
  rolling upgrade) gets the unary call at once, for that request and every
  later one on that channel.  So does every broker of a SASL client, whose
  session is renewed per call (:mod:`headwater.client.sasl`), which a
  long-lived stream cannot follow.
- A call waits at most its ``timeout_s``: a watchdog thread, one per process,
  cancels a stream whose answer is overdue (checked every
  :data:`WATCHDOG_INTERVAL_S`), and the call raises ``RequestTimedOutError``.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import grpc

from headwater import errors
from headwater.client import connection

ENABLED = True
"""Whether :meth:`connection.Channels.inline_caller` hands out streams (PLAINTEXT and SSL
clients).  Off for a while: a Kubernetes rolling upgrade stalled a one-at-a-time
producer 30 s with them.  The cause was the brokers' (a broker in controlled shutdown
rejoined the ISR on its way out, KIP-841, fixed in the broker), not the streams; it
stays a switch so that a comparison with unary calls is one assignment away."""

MAX_IDLE_S = 1.0
"""A stream unused for longer is replaced before its next request.  An idle stream
stays bound to the connection it was opened on, and a broker that was restarted
meanwhile (a rolling upgrade: its partitions led elsewhere for a while, then back)
may have left that connection dead without a word; a new stream goes over the
channel's live connection.  A client sending a record at a time reuses its
streams well within this; a trickle pays a stream's setup, about a unary call."""

WATCHDOG_INTERVAL_S = 0.05
"""How often overdue answers are looked for: a call's deadline is kept to this."""

_END = object()
"""Put in a stream's outbox to end its requests (and grpc's thread reading them)."""


class _Stream:
    """One open bidi call: requests go in through ``outbox``, answers come from ``answers``.

    ``deadline`` is the monotonic time by which the outstanding request must be
    answered (``None`` when nothing is outstanding); the watchdog reads it.
    """

    def __init__(self, multicallable: Callable[..., Any], channel: Any) -> None:
        self.channel = channel
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # iter(get, _END): a C iterator over the outbox, drained by grpc's own thread.
        self.answers = multicallable(iter(self.outbox.get, _END))
        self.deadline: float | None = None
        self.timed_out = False
        self.last_used = time.monotonic()

    def expire(self, now: float) -> None:
        """Called by the watchdog: cancel the call if its answer is overdue."""
        deadline = self.deadline
        if deadline is not None and now > deadline:
            self.timed_out = True
            self.answers.cancel()

    def end(self) -> None:
        self.outbox.put(_END)
        self.answers.cancel()


class _Watchdog:
    """The one thread that cancels overdue streams, started with the first stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: weakref.WeakSet[_Stream] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def watch(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.add(stream)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="headwater-stream-watchdog", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(WATCHDOG_INTERVAL_S)
            now = time.monotonic()
            with self._lock:
                streams = list(self._streams)
            for stream in streams:
                stream.expire(now)


_WATCHDOG = _Watchdog()


class UnaryCalls:
    """Calls of one Broker method as plain unary calls: what a SASL client makes,
    and what :class:`StreamedCalls` falls back to."""

    def __init__(self, channels: Any, method: str) -> None:
        """``channels``: anything with ``broker(address)`` (a :class:`connection.Channels`)."""
        self._channels = channels
        self._method = method

    def call(self, address: str, request: Any, *, timeout_s: float) -> Any:
        """The answer to ``request`` from ``address``; raises a Kafka error on failure."""
        method = getattr(self._channels.broker(address), self._method)
        try:
            return method(request, timeout=max(0.001, timeout_s))
        except Exception as exc:
            raise connection.as_error(exc, address) from None

    def close(self) -> None:
        pass


class StreamedCalls:
    """Calls of one Broker method (``"Produce"`` or ``"Fetch"``) on a stream per broker.

    See the module docstring for the invariants; :meth:`call` behaves as the
    unary method would, errors included.
    """

    def __init__(self, channels: connection.Channels, method: str) -> None:
        self._channels = channels
        self._stream_method = f"{method}Stream"
        self._streams: dict[str, _Stream] = {}
        self._unary = UnaryCalls(channels, method)
        self._unary_only: dict[str, Any] = {}
        """Per address, the channel on which streams are not used (UNIMPLEMENTED)."""

    def call(self, address: str, request: Any, *, timeout_s: float) -> Any:
        """The answer to ``request`` from ``address``; raises a Kafka error on failure."""
        channel = self._channels.channel(address)
        if self._unary_only.get(address) is channel:
            return self._unary.call(address, request, timeout_s=timeout_s)
        stream = self._streams.get(address)
        now = time.monotonic()
        if stream is None or stream.channel is not channel or now - stream.last_used > MAX_IDLE_S:
            if stream is not None:
                stream.end()
            stream = self._open(address, channel)
        stream.deadline = now + max(0.001, timeout_s)
        stream.outbox.put(request)
        try:
            answer = next(stream.answers)
        except StopIteration:
            self._drop(address, stream)
            raise errors.NetworkError(f"broker {address} ended the stream") from None
        except grpc.RpcError as exc:
            self._drop(address, stream)
            if stream.timed_out:
                raise errors.RequestTimedOutError(
                    f"no answer in time from broker {address}"
                ) from None
            error = connection.translate_rpc_error(exc, address)
            if isinstance(error, errors.UnsupportedVersionError):
                self._unary_only[address] = channel  # a broker from before the streams
                return self._unary.call(address, request, timeout_s=timeout_s)
            raise error from None
        stream.deadline = None
        stream.last_used = time.monotonic()
        if stream.timed_out:  # the watchdog cancelled it as the answer came: not reused
            self._drop(address, stream)
        return answer

    def close(self) -> None:
        """End every stream (and the grpc threads that feed them)."""
        for stream in self._streams.values():
            stream.end()
        self._streams.clear()

    def _open(self, address: str, channel: Any) -> _Stream:
        multicallable = getattr(self._channels.broker(address), self._stream_method)
        stream = self._streams[address] = _Stream(multicallable, channel)
        _WATCHDOG.watch(stream)
        return stream

    def _drop(self, address: str, stream: _Stream) -> None:
        stream.deadline = None
        stream.end()
        if self._streams.get(address) is stream:
            del self._streams[address]


__all__ = ["MAX_IDLE_S", "WATCHDOG_INTERVAL_S", "StreamedCalls", "UnaryCalls"]
