"""The consumer's CPU per record, stage by stage, without a broker or a network.

    .venv/bin/python bench/consume_cpu.py [--records 200000] [--rounds 3]

Builds fetch answers the way a broker sends them (``FetchResponse`` bytes of
~1 MiB: 1 MiB batches of 100 B and of 1 KiB values, no key, as ``headwater
perf produce`` writes them) and times, per record, with ``time.process_time``:

- ``parse``: the client's deserializer of a fetch answer and reading its ``records``
  (what gRPC's deserializer and the fetcher do first);
- ``check``: the fetcher's check of an answer (batch headers and CRCs);
- ``decode``: ``fetcher.decode_batches``, the records made for ``poll``;
- ``fetcher``: the real :class:`~headwater.client.consumer.fetcher.Fetcher`
  handling answers (parse included) and ``take`` handing them out as
  ``poll`` does, 10,000 at a time, with ``perf consume``'s per-record work
  (value and key sizes, a timestamp in 16) on what it returns; and the cyclic
  collections (any generation) that ran meanwhile, per 100k records.

Each figure is the median of ``--rounds`` (with the range).  It is the
client's own CPU: compare code versions by it (run each checkout's own
``.venv/bin/python``), and ``bench/consume_e2e.py`` for a real broker.
"""

from __future__ import annotations

import argparse
import gc
import operator
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headwater import records
from headwater.client.consumer import fetcher as fetcher_mod
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.types import TopicPartition
from headwater.records.allocator import tune_allocator
from headwater.v1 import broker_pb2

deserialize: Callable[[bytes], Any]
try:  # what the client's Fetch calls deserialize with (older checkouts: the generated code)
    from headwater.client.transport.fetch_response import parse as deserialize
except ImportError:
    deserialize = broker_pb2.FetchResponse.FromString

MIB = 1024 * 1024
TP = TopicPartition("t", 0)


def batches_of(value_size: int, count: int, *, batch_bytes: int = MIB) -> list[bytes]:
    """``count`` records in batches of at most ``batch_bytes``, offsets following on."""
    value = os.urandom(value_size)
    per_batch = max(1, batch_bytes // (value_size + 10))
    out: list[bytes] = []
    offset = 0
    now = int(time.time() * 1000)
    while offset < count:
        n = min(per_batch, count - offset)
        recs = [records.Record(None, value, (), now + i % 7) for i in range(n)]
        out.append(records.build_batch(recs, base_offset=offset, timestamp_ms=now))
        offset += n
    return out


def answers_of(batches: list[bytes]) -> list[bytes]:
    """Serialized FetchResponses of about ``MIB`` each (at least one batch each)."""
    out: list[bytes] = []
    chunk: list[bytes] = []
    size = 0
    for b in batches:
        if chunk and size + len(b) > MIB:
            out.append(_response(chunk))
            chunk, size = [], 0
        chunk.append(b)
        size += len(b)
    if chunk:
        out.append(_response(chunk))
    return out


def _response(chunk: list[bytes]) -> bytes:
    part = broker_pb2.FetchedPartition(
        topic=TP.topic, partition=TP.partition, high_watermark=1 << 40, records=b"".join(chunk)
    )
    return bytes(broker_pb2.FetchResponse(partitions=[part]).SerializeToString())


def _cpu(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


class _Metadata:
    """The fetcher's metadata, never consulted while every answer is well formed."""

    def maybe_refresh(self) -> None:
        pass

    def request_update(self) -> None:
        pass


class _Channels:
    """No broker: answers are handed to the fetcher directly."""

    def inline_caller(self, method: str) -> None:
        return None


def run_fetcher(answers: list[bytes], count: int) -> int:
    """Answers through a real Fetcher's handling and ``take``, as ``poll`` and ``perf
    consume`` do; returns the records handed out."""
    subs = SubscriptionState(default_reset="earliest")
    subs.assign([TP])
    subs.seek(TP, 0)
    f = fetcher_mod.Fetcher(
        settings=ConsumerSettings(bootstrap_servers=("127.0.0.1:1",)),
        subscriptions=subs,
        metadata=_Metadata(),  # type: ignore[arg-type]
        channels=_Channels(),  # type: ignore[arg-type]
        allow_inline=False,
    )
    key, value, ts = (
        operator.attrgetter("key"),
        operator.attrgetter("value"),
        operator.attrgetter("timestamp_ms"),
    )
    got = nbytes = 0
    lat: list[float] = []
    offset = 0
    paused = subs.is_paused
    for raw in answers:
        response = deserialize(raw)
        f._handle(fetcher_mod._Answer("a", {TP: (offset, subs.epoch(TP) or 0)}, response, None))
        f._decode_pending()
        while True:
            recs = f.take(10_000, paused=paused)
            if not recs:
                break
            wall = time.time() * 1000.0
            nbytes += sum(map(len, filter(None, map(value, recs))))
            nbytes += sum(map(len, filter(None, map(key, recs))))
            lat += map(wall.__sub__, map(ts, recs[::16]))
            got += len(recs)
        offset = subs.position(TP) or 0
    assert got == count, (got, count)
    return got


def stages(value_size: int, count: int) -> dict[str, float]:
    """Seconds of CPU per record of each stage, once (and the fetcher's collection count)."""
    answers = answers_of(batches_of(value_size, count))
    parsed = [deserialize(a) for a in answers]
    datas = [p.partitions[0].records for p in parsed]
    checked = [list(records.read_batches(d)) for d in datas]
    out: dict[str, float] = {}
    out["parse"] = _cpu(lambda: [deserialize(a).partitions[0].records for a in answers])
    out["check"] = _cpu(lambda: [list(records.read_batches(d)) for d in datas])
    out["decode"] = _cpu(
        lambda: [fetcher_mod.decode_batches(b, TP, fetch_offset=0) for b in checked]
    )
    collections = _collections_during(lambda: run_fetcher(answers, count))
    out["fetcher"] = _cpu(lambda: run_fetcher(answers, count))
    per_record = {k: v / count for k, v in out.items()}
    per_record["gc collections per 100k (fetcher)"] = collections / count * 1e5
    return per_record


def _collections_during(fn: Callable[[], Any]) -> int:
    """How many cyclic collections (any generation) ran during ``fn()``."""
    starts = [0]

    def count(phase: str, info: dict[str, int]) -> None:
        starts[0] += phase == "start"

    gc.callbacks.append(count)
    try:
        fn()
    finally:
        gc.callbacks.remove(count)
    return starts[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="100,1024", help="value sizes, comma-separated")
    args = ap.parse_args()
    tune_allocator()
    print(f"record codec: {records.record_codec().name}")
    for size in (int(s) for s in args.sizes.split(",")):
        rounds = [stages(size, args.records) for _ in range(args.rounds)]
        parts = []
        for stage in rounds[0]:
            scale = 1 if stage.startswith("gc") else 1e6  # a count, not seconds
            us = sorted(r[stage] * scale for r in rounds)
            parts.append(f"{stage} {statistics.median(us):.3f} ({us[0]:.3f}-{us[-1]:.3f})")
        print(f"{size:>5} B values, {args.records} records, us/record: " + ", ".join(parts))


if __name__ == "__main__":
    main()
