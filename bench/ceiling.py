"""The machine's own limits for moving bytes, to place each throughput row against.

    .venv/bin/python bench/ceiling.py [--mib 1024] [--chunk-kib 1024] [--dir DIR] [--rounds 3]
                                      [--write-gib 6]

No Headwater code runs here; two figures, each the median of ``--rounds``, and a table:

1. loopback TCP: a child process sends ``--mib`` MiB in ``--chunk-kib`` buffers
   over a 127.0.0.1 TCP connection to this process, which reads them with
   ``recv_into`` into one reused buffer (no allocation per read).  Both
   processes share the machine's cores, as a broker and a consumer on one
   machine do: this is the most a consumer on this machine could read from a
   broker on this machine, before any protocol, framing or record work.
2. page-cache read: writes a ``--mib`` MiB file in ``--dir`` (fsync'd so that
   the write-back is over), then reads it back with ``readinto`` in
   ``--chunk-kib`` chunks; the pages are still cached, so this is a memory copy
   from the page cache, the cost a broker pays to read a log segment that
   was just written.

3. page-cache write, by GiB written: ``--write-gib`` GiB appended to files in
   ``--dir`` half a GiB at a time, all kept until the end (as a broker keeps its
   segments), with the system CPU each half GiB took.  On a VM the price of a page
   of page cache can change with how much has been written: on the project's machine
   kind the first few GB cost about a tenth of what the rest do, which favours
   whatever runs first in a benchmark.

Prints MB/s (10^6 bytes per second) and the CPU per MiB of the reading process,
also as MB per reader CPU second: the reader's own ceiling with a core to
itself.  On a shared or loaded machine the MB/s move with the load (the CPU
figures much less); compare rows measured in the same minutes.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

MIB = 1 << 20


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def loopback_tcp(total: int, chunk: int) -> tuple[float, float]:
    """(seconds to receive ``total`` bytes over loopback TCP, reader CPU seconds)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        pid = os.fork()
        if pid == 0:  # the sender
            try:
                payload = memoryview(os.urandom(chunk))
                with socket.create_connection(("127.0.0.1", port)) as s:
                    sent = 0
                    while sent < total:
                        n = min(chunk, total - sent)
                        s.sendall(payload[:n])
                        sent += n
            finally:
                os._exit(0)
        conn, _ = server.accept()
    buf = bytearray(chunk)
    view = memoryview(buf)
    got = 0
    with conn:
        cpu0 = _cpu_s()
        t0 = time.perf_counter()
        while got < total:
            n = conn.recv_into(view)
            if n == 0:
                raise SystemExit(f"sender closed after {got} of {total} bytes")
            got += n
        elapsed = time.perf_counter() - t0
        cpu = _cpu_s() - cpu0
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("the sending process failed")
    return elapsed, cpu


def page_cache_read(total: int, chunk: int, directory: Path) -> tuple[float, float]:
    """(seconds to read back a ``total``-byte file just written, reader CPU seconds)."""
    block = os.urandom(chunk)
    fd, name = tempfile.mkstemp(prefix="ceiling-", dir=directory)
    try:
        written = 0
        while written < total:
            written += os.write(fd, block[: min(chunk, total - written)])
        os.fsync(fd)
        os.close(fd)
        buf = bytearray(chunk)
        got = 0
        with open(name, "rb", buffering=0) as f:
            cpu0 = _cpu_s()
            t0 = time.perf_counter()
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                got += n
            elapsed = time.perf_counter() - t0
            cpu = _cpu_s() - cpu0
        if got != total:
            raise SystemExit(f"read {got} of {total} bytes back")
        return elapsed, cpu
    finally:
        os.unlink(name)


def page_cache_write(total: int, step: int, chunk: int, directory: Path) -> list[float]:
    """System CPU seconds of each ``step`` bytes of ``total`` appended to new files,
    none deleted before the end (no fsync: writeback runs in the kernel's threads)."""
    block = os.urandom(chunk)
    names: list[str] = []
    seconds: list[float] = []
    try:
        while len(seconds) * step < total:
            fd, name = tempfile.mkstemp(prefix="ceiling-write-", dir=directory)
            names.append(name)
            try:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
                written = 0
                while written < step:
                    written += os.write(fd, block[: min(chunk, step - written)])
                seconds.append(resource.getrusage(resource.RUSAGE_SELF).ru_stime - before)
            finally:
                os.close(fd)
    finally:
        for name in names:
            os.unlink(name)
    return seconds


def report(name: str, total: int, runs: list[tuple[float, float]]) -> None:
    rates = sorted(total / s / 1e6 for s, _ in runs)
    cpu_ms = sorted(c * 1000 / (total / MIB) for _, c in runs)
    per_cpu_s = MIB / 1e6 / (statistics.median(cpu_ms) / 1000)
    print(
        f"{name:16s} {statistics.median(rates):>9,.0f} MB/s ({rates[0]:,.0f}-{rates[-1]:,.0f}), "
        f"reader CPU {statistics.median(cpu_ms):.3f} ms/MiB = {per_cpu_s:,.0f} MB per "
        "reader CPU second",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="MiB moved per round")
    ap.add_argument("--chunk-kib", type=int, default=1024, help="buffer size of each send/read")
    ap.add_argument("--dir", type=Path, default=None, help="where the page-cache file goes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--write-gib", type=int, default=6, help="GiB of the page-cache write table (0: skip it)"
    )
    args = ap.parse_args()
    if args.mib <= 0 or args.chunk_kib <= 0 or args.rounds <= 0 or args.write_gib < 0:
        ap.error("--mib, --chunk-kib and --rounds must be > 0, --write-gib >= 0")
    directory = args.dir or Path(tempfile.gettempdir())
    if not directory.is_dir():
        ap.error(f"--dir {directory} is not a directory")
    total, chunk = args.mib * MIB, args.chunk_kib * 1024
    benches: list[tuple[str, Callable[[], tuple[float, float]]]] = [
        ("loopback TCP", lambda: loopback_tcp(total, chunk)),
        ("page-cache read", lambda: page_cache_read(total, chunk, directory)),
    ]
    print(f"{args.mib} MiB per round, {args.chunk_kib} KiB buffers, {args.rounds} rounds")
    for name, bench in benches:
        report(name, total, [bench() for _ in range(args.rounds)])
    if args.write_gib:
        step = 512 * MIB
        print("page-cache write, system CPU per GB by GiB written so far:", flush=True)
        steps = page_cache_write(args.write_gib << 30, step, chunk, directory)
        for i, sys_s in enumerate(steps):
            per_gb = sys_s / (step / 1e9)
            print(f"  {i / 2:4.1f}-{(i + 1) / 2:4.1f} GiB: {per_gb:.2f} s/GB", flush=True)


if __name__ == "__main__":
    main()
