"""What it costs this machine to put new bytes into the page cache.

    .venv/bin/python bench/pagecache.py [--mib 1500] [--dir DIR] [--pause-s 5]

Every byte a broker appends lands in the page cache, once per replica.  On
the project's machine kind (a Firecracker guest with free-page reporting, see
``/sys/module/page_reporting``), memory the guest has not touched recently
is backed by the host only on first touch, so a write into *fresh* page-cache
pages costs several times a write into pages the guest freed a moment ago.
The broker benchmark's figures swing with it; this script shows the effect
alone, with plain ``os.write`` of 1 MiB buffers (no headwater code):

1. fresh: write ``--mib`` MiB to a new file;
2. reused: delete it and at once write the same amount again (the kernel
   hands back the pages it just freed);
3. after a pause: delete, wait ``--pause-s`` seconds, write again (by then
   the guest has reported the free pages to the host, which took them back).

It prints CPU milliseconds per MiB (user + system of this process) and MB/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

MIB = 1 << 20


def write_file(path: Path, mib: int, buffer: bytes) -> tuple[float, float]:
    """(CPU ms per MiB, MB/s) of writing ``mib`` MiB to a new file at ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(mib):
            os.write(fd, buffer)
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
    finally:
        os.close(fd)
    return cpu * 1000 / mib, mib * MIB / wall / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1500, help="MiB written per step")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    parser.add_argument("--pause-s", type=float, default=5.0, help="wait before step 3")
    args = parser.parse_args()
    buffer = os.urandom(MIB)
    with tempfile.TemporaryDirectory(prefix="hw-pagecache-", dir=args.dir) as tmp:
        path = Path(tmp) / "data"
        steps = [("fresh pages", 0.0), ("just-freed pages", 0.0), ("after a pause", args.pause_s)]
        for index, (label, pause_s) in enumerate(steps, 1):
            if path.exists():
                path.unlink()
            if pause_s:
                print(f"[pagecache] waiting {pause_s:g} s", flush=True)
                time.sleep(pause_s)
            cost, mbps = write_file(path, args.mib, buffer)
            print(
                f"{index}. {label:17}: {cost:5.2f} CPU ms/MiB, {mbps:7.0f} MB/s ({args.mib} MiB)",
                flush=True,
            )


if __name__ == "__main__":
    main()
