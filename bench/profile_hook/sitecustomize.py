"""Profiling hook for ``bench/broker.py --profile``: cProfile a broker process's main thread.

Put on ``PYTHONPATH`` by the bench only; a broker (argv contains ``broker``) started with
``HW_PROFILE_DIR`` set writes ``broker-PID.prof`` there when it exits normally (SIGTERM).
"""

import atexit
import cProfile
import os
import sys

_directory = os.environ.get("HW_PROFILE_DIR")
if _directory and "broker" in sys.argv:
    _profile = cProfile.Profile()
    _profile.enable()

    def _dump() -> None:
        _profile.disable()
        _profile.dump_stats(os.path.join(_directory or ".", f"broker-{os.getpid()}.prof"))

    atexit.register(_dump)
