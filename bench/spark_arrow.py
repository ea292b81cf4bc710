"""CPU per row of turning fetched batches into the Spark reader's Arrow batches, in-process.

Two paths over the same ~4 MiB fetch answers (stored batches of ~1 MiB):

- ``records``: decode each batch into records (the record codec), then
  ``headwater_spark.arrow.to_record_batch`` (one ``pa.array`` per column);
- ``columns``: ``headwater_spark.arrow.batches_to_record_batches``, the records sections
  decoded straight into column buffers (``headwater.records.columns``, C when built).

Both include the CRC check (``read_batches``) and, with ``--compression``, the
decompression; neither includes the fetch or Spark.  Rounds alternate the paths.

    .venv/bin/python bench/spark_arrow.py --size 1024 --rounds 5
    HEADWATER_PURE_PYTHON_RECORDS=1 .venv/bin/python bench/spark_arrow.py --size 100
"""

from __future__ import annotations

import argparse
import time

from headwater.client.consumer.range_reader import decode_range
from headwater.records import Record, build_batch, read_batches
from headwater.records.allocator import tune_allocator
from headwater.records.columns import native_columns_available
from headwater.records.native import pure_python_forced
from headwater_spark import arrow


def make_answers(size: int, records: int, compression: str, headers: bool) -> list[bytes]:
    """Fetch answers of 4 batches of ~1 MiB each."""
    per_batch = max(1, (1 << 20) // (size + 20))
    value = b"x" * size
    hs = [("trace", b"0123456789")] if headers else []
    answers: list[bytes] = []
    batch_list: list[bytes] = []
    offset = 0
    while offset < records:
        n = min(per_batch, records - offset)
        recs = [
            Record(key=None, value=value, headers=hs, timestamp_ms=1_700_000_000_000 + i)
            for i in range(n)
        ]
        batch_list.append(build_batch(recs, base_offset=offset, compression=compression))
        offset += n
        if len(batch_list) == 4:
            answers.append(b"".join(batch_list))
            batch_list = []
    if batch_list:
        answers.append(b"".join(batch_list))
    return answers


def run_records(answers: list[bytes], end: int, headers: bool) -> int:
    rows = 0
    for answer in answers:
        decoded = decode_range(list(read_batches(answer)), start=0, end=end)
        batch = arrow.to_record_batch(
            "bench", 0, [(d.records, d.timestamp_type) for d in decoded], include_headers=headers
        )
        rows += batch.num_rows
        del decoded, batch
    return rows


def run_columns(answers: list[bytes], end: int, headers: bool) -> int:
    rows = 0
    for answer in answers:
        for batch in arrow.batches_to_record_batches(
            "bench", 0, list(read_batches(answer)), start=0, end=end, include_headers=headers
        ):
            rows += batch.num_rows
            del batch
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="value bytes")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--headers", action="store_true", help="one header per record, read too")
    args = parser.parse_args()
    tune_allocator()  # as the reader (RangeReader) does
    answers = make_answers(args.size, args.records, args.compression, args.headers)
    in_c = native_columns_available() and not pure_python_forced()
    print(
        f"{args.records} records x {args.size} B, {args.compression}, headers={args.headers}; "
        f"columns builder: {'C' if in_c else 'Python'}"
    )
    paths = {"records": run_records, "columns": run_columns}
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, fn in paths.items():
            t0 = time.process_time()
            rows = fn(answers, args.records, args.headers)
            us = (time.process_time() - t0) / rows * 1e6
            best[name] = min(best.get(name, us), us)
    for name, us in best.items():
        print(f"  {name:8s} best of {args.rounds}: {us:.3f} us CPU/row")


if __name__ == "__main__":
    main()
