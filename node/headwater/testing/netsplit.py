"""A TCP proxy whose link a test can cut and heal: a network partition between processes.

Put a :class:`LinkProxy` in front of a broker's inter-broker listener (advertise the
proxy's port on that listener) and the other brokers reach it only through the proxy;
clients, on another listener, and ZooKeeper are not affected.

What a cut does, and why:

* every connection open at the cut goes silent for good: bytes either way are read
  and dropped, and neither end sees a close.  This is the connection a partition
  leaves behind when its state does not survive (a NAT or conntrack entry gone, a
  peer that moved): the end that waits for an answer waits until its own deadline or
  keepalive gives up on it.  Healing does not revive it; its streams lost bytes.
* while cut, new connections are refused (closed as soon as they are accepted), as
  by an unreachable host; after :meth:`heal` they pass again.

The proxy runs an asyncio loop in a daemon thread; :meth:`cut`, :meth:`heal` and
:meth:`close` may be called from any one other thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any


class _Pair:
    """One proxied connection: the accepted one and the one to the target."""

    def __init__(self, writers: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        self.writers = writers
        self.silent = False

    def close(self) -> None:
        for w in self.writers:
            w.close()


class LinkProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; see the module docstring."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]
        self._cut = False
        self._pairs: set[_Pair] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self._start())

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Silence every open connection for good and refuse new ones until :meth:`heal`."""
        self._call(self._do_cut())

    def heal(self) -> None:
        """Let new connections through again (the silenced ones stay silent)."""
        self._call(self._do_heal())

    def close(self) -> None:
        """Close every connection and stop the proxy.  Idempotent."""
        if self._loop.is_closed():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)
        self._loop.close()

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- on the proxy's loop -----------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10.0)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    async def _do_cut(self) -> None:
        self._cut = True
        for pair in self._pairs:
            pair.silent = True

    async def _do_heal(self) -> None:
        self._cut = False

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in list(self._pairs):
            pair.close()
        self._pairs.clear()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # close() ends every connection
            await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        pair = _Pair((writer, up_writer))
        self._pairs.add(pair)
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, pair), self._pump(up_reader, writer, pair)
            )
        finally:
            self._pairs.discard(pair)
            pair.close()

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pair: _Pair
    ) -> None:
        """Copy until end of stream; a silenced pair drops what it reads and never closes
        the other side (a partition delivers neither data nor a FIN)."""
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                if pair.silent:
                    continue
                writer.write(data)
                await writer.drain()
        if pair.silent:
            await asyncio.Event().wait()  # until the proxy closes: no close is forwarded
        with contextlib.suppress(OSError):
            writer.close()
