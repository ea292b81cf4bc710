"""``decode_as`` / ``Batch.record_list_as`` (issue 16): records built directly as a
caller's tuple subclass with a prefix (the consumer's ``ConsumerRecord`` is
``(topic, partition)`` + the record), equal field for field to ``decode`` with the
prefix in front, for both codecs (the conftest runs this module once per codec),
LogAppendTime included; corrupt input raises the same error; the native decoder
refuses a prefix that is not a tuple or a type that is not a tuple subclass."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import NamedTuple

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import (
    NativeRecordCodec,
    Record,
    RecordCodec,
    RecordsBuilder,
    finish_batch,
    native_available,
    new_records_builder,
    read_batches,
)


class Prefixed(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


RECORDS = [
    Record(b"k", b"v", (), 1000),
    Record(None, b"w" * 300, (("h", b"x"), ("n", None)), 1007),
    Record(b"", None, (), 999),
]


def filled() -> RecordsBuilder:
    builder = new_records_builder(capacity=4096)
    for r in RECORDS:
        assert r.timestamp_ms is not None
        builder.append(r.key, r.value, r.headers, r.timestamp_ms)
    return builder


def section() -> bytes:
    return bytes(filled().records())


@pytest.mark.parametrize("log_append_time", [None, 5555])
def test_decode_as_is_decode_with_the_prefix(
    codec: RecordCodec, log_append_time: int | None
) -> None:
    kw = {"count": 3, "base_offset": 40, "base_timestamp": 1000}
    plain = codec.decode(section(), log_append_time=log_append_time, **kw)
    got = codec.decode_as(
        section(),
        log_append_time=log_append_time,
        record_type=Prefixed,
        prefix=("orders", 7),
        **kw,
    )
    assert [type(r) for r in got] == [Prefixed] * 3
    assert got == [Prefixed._make(("orders", 7, *r)) for r in plain]
    assert [r.offset for r in got] == [40, 41, 42]
    if log_append_time is not None:
        assert {r.timestamp_ms for r in got} == {log_append_time}


def test_batch_record_list_as_matches_record_list(codec: RecordCodec) -> None:
    (batch,) = read_batches(finish_batch(filled(), compression="gzip"))
    prefix = ("t", 0)
    assert batch.record_list_as(Prefixed, prefix) == [
        Prefixed._make((*prefix, *r)) for r in batch.record_list()
    ]


def test_corrupt_section_raises_the_same_error(codec: RecordCodec) -> None:
    data = section()[:-3]
    with pytest.raises(CorruptRecordError):
        codec.decode_as(
            data,
            count=3,
            base_offset=0,
            base_timestamp=1000,
            log_append_time=None,
            record_type=Prefixed,
            prefix=("t", 0),
        )


@pytest.mark.skipif(not native_available(), reason="native record codec not built")
def test_native_refuses_bad_prefix_or_type() -> None:
    codec = NativeRecordCodec()
    kw = {"count": 3, "base_offset": 0, "base_timestamp": 1000, "log_append_time": None}
    with pytest.raises(TypeError, match="prefix must be a tuple"):
        codec.decode_as(section(), record_type=Prefixed, prefix=["t", 0], **kw)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple subclass"):
        codec.decode_as(section(), record_type=dict, prefix=("t", 0), **kw)  # type: ignore[arg-type,type-var]


@pytest.mark.skipif(not native_available(), reason="native record codec not built")
def test_native_records_are_left_out_of_the_cyclic_gc() -> None:
    """Records hold only ints, bytes, None, str and header pairs: the native decoder
    leaves them (and their header tuples) untracked, unless the prefix holds an
    object that could close a cycle or the type adds a ``__dict__``."""
    import gc

    codec = NativeRecordCodec()
    kw = {"count": 3, "base_offset": 0, "base_timestamp": 1000, "log_append_time": None}
    got = codec.decode_as(section(), record_type=Prefixed, prefix=("t", 0), **kw)
    assert not any(gc.is_tracked(r) for r in got)
    assert not any(gc.is_tracked(r.headers) for r in got)
    assert not any(gc.is_tracked(h) for r in got for h in r.headers)
    assert not any(gc.is_tracked(r) for r in codec.decode(section(), **kw))

    holder: list[object] = []
    got = codec.decode_as(section(), record_type=Prefixed, prefix=(holder, 0), **kw)
    assert all(gc.is_tracked(r) for r in got)

    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    got_dict = codec.decode_as(section(), record_type=WithDict, prefix=("t", 0), **kw)
    assert all(gc.is_tracked(r) for r in got_dict)
    got_dict[0].me = got_dict  # type: ignore[attr-defined]  # a cycle the gc must see


def test_records_sharing_a_timestamp_keep_their_own_values(codec: RecordCodec) -> None:
    """Records of equal timestamp deltas may share one int object; values stay right."""
    builder = new_records_builder(capacity=4096)
    for i, ts in enumerate([1000, 1000, 1003, 1003, 1000, 2**40]):
        builder.append(None, bytes([i]), (), ts)
    got = codec.decode(
        bytes(builder.records()), count=6, base_offset=0, base_timestamp=1000, log_append_time=None
    )
    assert [r.timestamp_ms for r in got] == [1000, 1000, 1003, 1003, 1000, 2**40]


_GC_CHECK = """
import gc
from typing import NamedTuple

from headwater.errors import CorruptRecordError
from headwater.records import NativeRecordCodec, new_records_builder


class Prefixed(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple


codec = NativeRecordCodec()
builder = new_records_builder(capacity=1 << 20)
for i in range(5000):
    builder.append(None, b"v", (), 1000 + i)
data = bytes(builder.records())
kw = {"count": 5000, "base_offset": 0, "base_timestamp": 1000, "log_append_time": None}
starts = []
gc.callbacks.append(lambda phase, info: starts.append(phase))
gc.set_threshold(100, *gc.get_threshold()[1:])
gc.collect()
starts.clear()
got = codec.decode_as(data, record_type=Prefixed, prefix=("t", 0), **kw)
assert len(got) == 5000
assert "start" not in starts, starts  # 5000 allocations, threshold 100: none collected
assert gc.isenabled()
try:
    codec.decode_as(data[:-3], record_type=Prefixed, prefix=("t", 0), **kw)
except CorruptRecordError:
    pass
else:
    raise AssertionError("a truncated section decoded")
assert gc.isenabled()
gc.disable()
codec.decode_as(data, record_type=Prefixed, prefix=("t", 0), **kw)
assert not gc.isenabled()
print("ok")
"""


@pytest.mark.skipif(not native_available(), reason="native record codec not built")
def test_native_decode_runs_no_collection_and_leaves_the_gc_as_it_was() -> None:
    """The native decoder pauses the cyclic collector while it makes untracked
    records (each allocation still counts toward a young collection), and leaves it
    enabled or disabled as it found it, after a corrupt section too.

    In a child interpreter of its own: the collector and its callbacks are
    process-wide, and any other thread of the test process (one left by an earlier
    test) allocating between the decode and the check would start a collection."""
    done = subprocess.run(
        [sys.executable, "-c", _GC_CHECK],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HEADWATER_PURE_PYTHON_RECORDS": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
