"""Record format throughput: build_batch, the producer's builder and Batch.records().

Prints records/s and MB/s (of record values, 1 MB = 10^6 bytes) to encode
and decode ~1 MiB batches of 100 B and 1 KiB records, uncompressed and with
each compression codec, for each record codec (pure Python, and native when
the C extension is built).  Encode is ``build_batch`` on a prepared list of
``Record``s; build is what the producer does: ``append`` every record to a
``RecordsBuilder`` then ``finish_batch``; decode is ``read_batches`` (header +
CRC) plus decoding every record (the consumer's per-fetch cost).  Values are
text-like so the compressors have something to compress.

    .venv/bin/python bench/records.py [--seconds 0.3] [--codec python|native]

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

from headwater.records import (
    NativeRecordCodec,
    PythonRecordCodec,
    Record,
    RecordCodec,
    build_batch,
    finish_batch,
    native_available,
    new_records_builder,
    read_batches,
    set_record_codec,
)

BATCH_BYTES = 1 << 20
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
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


def _build(records: list[Record], compression: str) -> bytes:
    builder = new_records_builder(capacity=BATCH_BYTES)
    append = builder.append
    for key, value, headers, timestamp in records:
        append(key, value, headers, timestamp or 1_700_000_000_000)
    return finish_batch(builder, compression=compression)


def _codecs(only: str | None) -> list[RecordCodec]:
    codecs: list[RecordCodec] = [PythonRecordCodec()]
    if native_available():
        codecs.append(NativeRecordCodec())
    else:
        print("native record codec not built: python only")
    return [c for c in codecs if only is None or c.name == only]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    parser.add_argument("--codec", choices=("python", "native"), help="only this record codec")
    args = parser.parse_args(argv)

    print(f"python {sys.version.split()[0]}, ~1 MiB batches, {args.seconds}s per measurement")
    header = (
        f"{'codec':>6} {'size':>5} {'compr':>6} {'records':>7} {'KiB':>5} "
        f"{'encode rec/s':>13} {'build rec/s':>12} {'build MB/s':>10} "
        f"{'decode rec/s':>13} {'dec MB/s':>9}"
    )
    print(header)
    print("-" * len(header), flush=True)
    started = time.perf_counter()
    for codec in _codecs(args.codec):
        set_record_codec(codec)
        for size in (100, 1024):
            records = _records(size)
            payload_mb = sum(len(r.value or b"") for r in records) / 1e6
            for compression in COMPRESSIONS:
                batch = build_batch(
                    records, compression=compression, timestamp_ms=1_700_000_000_000
                )
                assert _build(records, compression) == batch

                def encode(c: str = compression, rs: list[Record] = records) -> object:
                    return build_batch(rs, compression=c, timestamp_ms=1_700_000_000_000)

                def build(c: str = compression, rs: list[Record] = records) -> object:
                    return _build(rs, c)

                def decode(batch: bytes = batch) -> object:
                    return [b.record_list() for b in read_batches(batch)]

                enc = _rate(encode, args.seconds)
                bld = _rate(build, args.seconds)
                dec = _rate(decode, args.seconds)
                print(
                    f"{codec.name:>6} {size:>5} {compression:>6} {len(records):>7} "
                    f"{len(batch) / 1024:>5.0f} {len(records) / enc:>13,.0f} "
                    f"{len(records) / bld:>12,.0f} {payload_mb / bld:>10.1f} "
                    f"{len(records) / dec:>13,.0f} {payload_mb / dec:>9.1f}",
                    flush=True,
                )
    print(f"done in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
