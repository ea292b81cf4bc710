"""Record format throughput: build_batch and Batch.records() per codec.

Prints records/s and MB/s (of record values, 1 MB = 10^6 bytes) to encode
and decode ~1 MiB batches of 100 B and 1 KiB records, uncompressed and with
each codec.  Encode is ``build_batch`` on a prepared list of ``Record``s
(the producer's per-batch cost); decode is ``read_batches`` (header + CRC)
plus decoding every record (the consumer's per-fetch cost).  Values are
text-like so the codecs have something to compress.

    .venv/bin/python bench/records.py [--seconds 0.4]

Targets from the issue: producer 300k records/s and consumer 400k records/s
of 100 B records.  Each measurement repeats for about ``--seconds``; the
whole run takes well under a minute.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

from headwater.records import Record, build_batch, read_batches

BATCH_BYTES = 1 << 20
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
WORDS = (
    b"order customer shipped pending invoice amount currency EUR USD warehouse "
    b"berlin paris tokyo status created updated priority high low sku item qty"
).split()


def _value(rng: random.Random, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += rng.choice(WORDS) + b" "
    return bytes(out[:size])


def _records(size: int) -> list[Record]:
    rng = random.Random(size)
    count = BATCH_BYTES // (size + 8)  # ~8 bytes of per-record framing
    pool = [_value(rng, size) for _ in range(64)]
    return [Record(None, pool[i % 64]) for i in range(count)]


def _rate(work: Callable[[], object], budget_s: float) -> float:
    """Seconds per call, repeating ``work`` for about ``budget_s``."""
    work()  # warm up
    calls = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < budget_s and calls < 10_000:
        work()
        calls += 1
        elapsed = time.perf_counter() - start
    return elapsed / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.4, help="time per measurement")
    args = parser.parse_args(argv)

    print(f"python {sys.version.split()[0]}, ~1 MiB batches, {args.seconds}s per measurement")
    header = (
        f"{'size':>6} {'codec':>7} {'records':>8} {'batch KiB':>9} "
        f"{'encode rec/s':>13} {'enc MB/s':>9} {'decode rec/s':>13} {'dec MB/s':>9}"
    )
    print(header)
    print("-" * len(header), flush=True)
    started = time.perf_counter()
    for size in (100, 1024):
        records = _records(size)
        payload_mb = sum(len(r.value or b"") for r in records) / 1e6
        for codec in CODECS:
            batch = build_batch(records, compression=codec, timestamp_ms=1_700_000_000_000)

            def encode(codec: str = codec, records: list[Record] = records) -> object:
                return build_batch(records, compression=codec, timestamp_ms=1_700_000_000_000)

            def decode(batch: bytes = batch) -> object:
                return [list(b.records()) for b in read_batches(batch)]

            enc = _rate(encode, args.seconds)
            dec = _rate(decode, args.seconds)
            print(
                f"{size:>6} {codec:>7} {len(records):>8} {len(batch) / 1024:>9.0f} "
                f"{len(records) / enc:>13,.0f} {payload_mb / enc:>9.1f} "
                f"{len(records) / dec:>13,.0f} {payload_mb / dec:>9.1f}",
                flush=True,
            )
    print(f"done in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
