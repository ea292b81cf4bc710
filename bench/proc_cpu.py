"""CPU of whole process groups from /proc, and the project's `headwater` CLI, for the
benches that start a `headwater dev up` cluster and read what its brokers spent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
HW = str(PROJECT / ".venv" / "bin" / "headwater")
TICK = os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgids: set[int]) -> float:
    """User + system CPU seconds of every live process in the process groups ``pgids``."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) in pgids:  # field 5 of stat: pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def hw(*args: str) -> str:
    """Run the `headwater` CLI; its stdout."""
    return subprocess.run([HW, *args], check=True, capture_output=True, text=True).stdout
