"""The one way the broker's event loop runs a blocking call: :func:`run_blocking`.

ZooKeeper calls (kazoo blocks), the storage layer's periodic work (retention,
flushes, checkpoints), the log cleaner and opening or closing the logs all
block; none may run on the event loop.  Each goes to a new daemon thread.

Why not :func:`asyncio.to_thread`: an abandoned call (its awaiter timed out,
e.g. a ZooKeeper call stuck on an unreachable ensemble during shutdown) would
keep the interpreter from exiting, because asyncio's executor threads are
joined at exit; daemon threads are not.  The calls are rare (ISR changes,
admin requests, periodic ticks), so a thread per call costs nothing that
matters.  Nothing on the produce/fetch hot path off-loads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


async def run_blocking(func: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``func(*args, **kwargs)`` in a new daemon thread; its result or exception comes back."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(result: _T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(settle, None, exc)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result, None)

    name = getattr(func, "__name__", "call")
    threading.Thread(target=run, name=f"blocking-{name}", daemon=True).start()
    return await future
