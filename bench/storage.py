"""Storage throughput: Log.append_as_leader and Log.read against raw file I/O.

Prints append MB/s and read MB/s through :class:`headwater.storage.Log` for
1 KiB and 100 B records in ~1 MiB batches (batches are built before timing;
only append/read calls are timed), beside a dd-style sequential write
(``os.write`` of 1 MiB buffers) and read of the same total size to a file in
the same directory, in the same run, and the ratios.  Everything goes through
the page cache (no fsync), as Kafka's default flush policy does.  The raw write
sends the very batch buffers the log appends, so both copy the same bytes.

    .venv/bin/python bench/storage.py [--total-mib 160] [--dir DIR] [--rounds 2]

Targets (issue 2): append >= 0.6x raw write, read >= 0.6x raw read.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from headwater.records import Record, build_batch, scan_batches
from headwater.storage import Log, LogConfig

MIB = 1 << 20


def build_batches(record_size: int, count: int = 4) -> list[bytes]:
    """A few distinct ~1 MiB batches of ``record_size``-byte values."""
    per_batch = MIB // (record_size + 8)
    out = []
    for b in range(count):
        value = bytes([65 + b]) * record_size
        records = [
            Record(None, value, timestamp_ms=1_700_000_000_000 + i) for i in range(per_batch)
        ]
        out.append(build_batch(records, timestamp_ms=0))
    return out


def raw_write(path: Path, buffers: list[bytes], total: int) -> tuple[float, int]:
    """dd-style: ``os.write`` the same ~1 MiB buffers the log gets, cyclically."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    try:
        start = time.perf_counter()
        while written < total:
            written += os.write(fd, buffers[(written // MIB) % len(buffers)])
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return elapsed, written


def raw_read(path: Path, passes: int) -> tuple[float, int]:
    """dd-style: ``os.read`` 1 MiB at a time to the end, ``passes`` times."""
    got = 0
    start = time.perf_counter()
    for _ in range(passes):
        fd = os.open(path, os.O_RDONLY)
        try:
            while chunk := os.read(fd, MIB):
                got += len(chunk)
        finally:
            os.close(fd)
    return time.perf_counter() - start, got


def log_append(log: Log, batches: list[bytes], total: int) -> tuple[float, int]:
    appended = 0
    elapsed = 0.0
    i = 0
    while appended < total:
        records = batches[i % len(batches)]
        start = time.perf_counter()
        log.append_as_leader(records, leader_epoch=0, now_ms=0)
        elapsed += time.perf_counter() - start
        appended += len(records)
        i += 1
    return elapsed, appended


def log_read(log: Log, passes: int) -> tuple[float, int]:
    """A consumer's sequential fetches (max_bytes 1 MiB, as max.partition.fetch.bytes)."""
    got = 0
    end = log.log_end_offset
    start = time.perf_counter()
    for _ in range(passes):
        offset = 0
        while offset < end:
            data = log.read(offset, MIB).records
            got += len(data)
            for _, header in scan_batches(data):
                offset = header.last_offset + 1
    return time.perf_counter() - start, got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mib", type=int, default=256, help="MiB per measurement")
    parser.add_argument("--read-passes", type=int, default=4, help="times each file is read")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: temp)")
    parser.add_argument("--rounds", type=int, default=5, help="best of N rounds")
    args = parser.parse_args()
    total = args.total_mib * MIB
    root = Path(tempfile.mkdtemp(prefix="hw-bench-storage-", dir=args.dir))
    config = LogConfig(max_message_bytes=2 * MIB)
    rates: dict[str, float] = {}

    def best(name: str, seconds: float, nbytes: int) -> None:
        rate = nbytes / MIB / seconds
        rates[name] = max(rates.get(name, 0.0), rate)
        print(
            f"  {name:<22} {rate:8.0f} MB/s  ({nbytes / MIB:.0f} MiB in {seconds:.2f} s)",
            flush=True,
        )

    try:
        print(f"dir={root} total={args.total_mib} MiB per measurement, best of {args.rounds}")
        for record_size in (1024, 100):
            print(f"building ~1 MiB batches of {record_size} B records...", flush=True)
            batches = build_batches(record_size)
            for r in range(args.rounds):
                print(f"round {r + 1}, {record_size} B records", flush=True)
                raw = root / "raw.bin"
                best("raw write", *raw_write(raw, batches, total))
                best("raw read", *raw_read(raw, args.read_passes))
                raw.unlink()
                log = Log.open(root / "bench-0", config, now_ms=0)
                best(f"log append {record_size} B", *log_append(log, batches, total))
                best(f"log read {record_size} B", *log_read(log, args.read_passes))
                log.delete()
        print("\nresults (best of rounds)")
        for name, rate in rates.items():
            print(f"  {name:<22} {rate:8.0f} MB/s")
        ok = True
        for size in (1024, 100):
            for kind, raw_name in (("append", "raw write"), ("read", "raw read")):
                ratio = rates[f"log {kind} {size} B"] / rates[raw_name]
                ok &= ratio >= 0.6
                flag = "ok" if ratio >= 0.6 else "BELOW 0.6"
                print(f"  {kind:<6} {size:>4} B records: {ratio:4.2f}x {raw_name}  [{flag}]")
        return 0 if ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
