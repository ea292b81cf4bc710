"""Run a rendered container as a local process group, and stop it without leaving it behind.

A "pod" here is one process started with exactly the command, arguments and environment
the chart renders (after :mod:`tests.e2e.deploy.localize`), in its own session so it can be
signalled as a whole, with its output in a log file whose tail failures print.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def image_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What a kubelet gives the container: the image's ENV (Dockerfile) plus the pod's env."""
    return {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        **env,
    }


class LocalPod:
    """One container as a process; ``stop()`` sends SIGTERM, then SIGKILL after a grace period."""

    def __init__(
        self, name: str, *, argv: Sequence[str], env: Mapping[str, str], log_path: Path
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, cwd: Path) -> None:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return f"--- {self.name} ({self.log_path}) ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self, *, grace_s: float = 10.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def wait_for(
    check: Callable[[], bool], *, what: str, pods: Sequence[LocalPod], timeout_s: float = 45.0
) -> None:
    """Poll ``check`` until true; fail with the pods' log tails on timeout or if one exits."""
    deadline = time.monotonic() + timeout_s
    while not check():
        dead = [p for p in pods if not p.running]
        if dead or time.monotonic() >= deadline:
            why = f"{', '.join(p.name for p in dead)} exited" if dead else "timed out"
            tails = "\n".join(p.log_tail() for p in pods)
            raise AssertionError(f"{why} waiting for {what}\n{tails}")
        time.sleep(0.1)
