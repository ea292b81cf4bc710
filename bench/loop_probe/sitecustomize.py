"""Event-loop lag probe for ``bench/loop_stall.py``: how long a broker's event loop stalls.

Put on ``PYTHONPATH`` by that bench only.  A broker (argv contains ``broker``) started
with ``HW_LOOP_PROBE_DIR`` set runs, beside its own tasks, one that sleeps 5 ms at a
time; every wake-up late by 2 ms or more is a stall of the loop (nothing else ran it),
appended to ``<dir>/broker-<broker.id>.lag`` as ``<unix time at its end> <stall ms>``.
"""

import asyncio
import os
import sys
import time
from typing import Any

_directory = os.environ.get("HW_LOOP_PROBE_DIR")
_TICK_S = 0.005
_REPORT_S = 0.002

if _directory and "broker" in sys.argv:
    _broker = next(
        (a.split("=", 1)[1] for a in sys.argv if a.startswith("broker.id=")), str(os.getpid())
    )
    _path = os.path.join(_directory, f"broker-{_broker}.lag")
    _run = asyncio.run

    async def _probe() -> None:
        with open(_path, "a", buffering=1) as out:
            before = time.perf_counter()
            while True:
                await asyncio.sleep(_TICK_S)
                now = time.perf_counter()
                late = now - before - _TICK_S
                if late >= _REPORT_S:
                    out.write(f"{time.time():.6f} {late * 1000:.3f}\n")
                before = now

    def _probed_run(main: Any, **kwargs: Any) -> Any:
        async def probed() -> Any:
            probe = asyncio.get_running_loop().create_task(_probe())
            try:
                return await main
            finally:
                probe.cancel()

        return _run(probed(), **kwargs)

    asyncio.run = _probed_run
