"""Serving the console: in the foreground (``headwater console``) or on a thread (tests,
bench), both through aiohttp's runner on one host and port."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable

from aiohttp import web


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    sockets = [s for s in runner.addresses if isinstance(s, tuple)]
    return runner, int(sockets[0][1]) if sockets else port


def run(app: web.Application, host: str, port: int, on_ready: Callable[[int], None]) -> None:
    """Serve until interrupted or sent SIGTERM; ``on_ready(port)`` once listening.  OSError
    if the port cannot be bound."""

    async def main() -> None:
        runner, bound = await _start(app, host, port)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            on_ready(bound)
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())


class RunningConsole:
    """The console served on a background thread; ``url`` is where; :meth:`close` stops it."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0) -> None:
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.host = host
        self._thread = threading.Thread(
            target=self._serve, args=(app, host, port), name="console", daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _serve(self, app: web.Application, host: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner, self.port = self._loop.run_until_complete(_start(app, host, port))
        except BaseException as exc:
            self._error = exc
            self._started.set()
            self._loop.close()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    def __enter__(self) -> RunningConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
