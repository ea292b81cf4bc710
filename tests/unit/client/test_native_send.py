"""``Producer.send``'s common case in C (``_native.SendPath``, issue 16).

The C path must be :meth:`RecordAccumulator.try_append` after the producer's
partition choice, or answer None having changed nothing: these tests drive a
``SendPath`` over a real accumulator (each refusal, the append and its
bookkeeping, a full batch, a record it cannot encode, the lock held by another
thread, ``abort_all`` after C appends) and a producer against the in-process
fake broker with and without it (same partitions, offsets, callbacks and
errors).  Skipped where the extension is not built; the pure-Python mode
(``HEADWATER_PURE_PYTHON_RECORDS``) has no C path at all.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import headwater
import pytest
from headwater import errors
from headwater.client.producer.accumulator import RecordAccumulator
from headwater.client.producer.futures import RecordFuture
from headwater.client.producer.native import UNAVAILABLE_REASON
from headwater.client.producer.partitioner import DefaultPartitioner, murmur2, partition_for_key
from headwater.client.types import RecordMetadata, TopicPartition
from headwater.records import NativeRecordCodec, Record, native_available, record_codec
from headwater.records import set_record_codec as set_codec
from headwater.records.native import PURE_PYTHON_ENV

from tests.unit.client.fake_broker import FakeBroker

pytestmark = pytest.mark.skipif(
    not native_available() or UNAVAILABLE_REASON is not None,
    reason="the C extensions are not built",
)

TOPIC = "t"
TPS = [TopicPartition(TOPIC, i) for i in range(3)]


@pytest.fixture(autouse=True)
def native_codec(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The native codec and the C path, also in a run with ``HEADWATER_PURE_PYTHON_RECORDS``."""
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    previous = record_codec()
    set_codec(NativeRecordCodec())
    yield
    set_codec(previous)


class Snapshot:
    """Stands for a MetadataManager: ``current`` is the snapshot the cache is keyed by."""

    def __init__(self) -> None:
        self.current = object()


class Rig:
    """A SendPath over a real accumulator, with the producer's side faked."""

    def __init__(
        self, *, batch_size: int = 10_000, buffer_memory: int = 100_000, sticky: bool = True
    ) -> None:
        self.acc = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=5,
            buffer_memory=buffer_memory,
            delivery_timeout_ms=120_000,
        )
        self.meta = Snapshot()
        self.tp_cache: dict[str, tuple[object, list[TopicPartition]]] = {
            TOPIC: (self.meta.current, TPS)
        }
        self.sticky: dict[str, int] | None = {} if sticky else None
        self.full: list[tuple[str, int, int]] = []
        send = self.acc.native_send_path(
            metadata=self.meta,
            tp_cache=self.tp_cache,
            sticky=self.sticky,
            on_full=lambda *a: self.full.append(a),
            max_request_size=1000,
        )
        assert send is not None
        self.send = send

    def open(self, partition: int, value: bytes = b"first") -> None:
        """Start a batch for ``partition`` through the Python path (one record)."""
        self.acc.append(TPS[partition], Record(None, value, (), 100), max_block_ms=0)

    def state(self) -> tuple[Any, ...]:
        """Everything an append changes."""
        batches = [b for q in self.acc._queues.values() for b in q]
        return (
            self.acc.used_bytes,
            [(b.tp, b.size_bytes, b.closed, len(b), list(b.result.thunks)) for b in batches],
            list(self.full),
        )


def test_murmur2_in_c_is_kafkas() -> None:
    from headwater.client.producer import _native

    rand = random.Random(7)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"customer-42", bytes(range(256))]
    keys += [rand.randbytes(rand.randrange(40)) for _ in range(500)]
    for key in keys:
        assert _native.murmur2(key) == murmur2(key)
    assert _native.murmur2(b"21") == -973932308  # Kafka's UtilsTest vector
    with pytest.raises(TypeError):
        _native.murmur2("text")  # type: ignore[arg-type]


def test_the_record_joins_the_open_batch_with_its_callback_and_future() -> None:
    rig = Rig()
    rig.sticky[TOPIC] = 1  # type: ignore[index]
    rig.open(1)
    before = rig.acc.used_bytes
    calls: list[Any] = []

    def cb(md: RecordMetadata | None, exc: BaseException | None) -> None:
        calls.append((md, exc))

    future = rig.send(TOPIC, None, b"second", None, 105, cb)
    assert isinstance(future, RecordFuture)
    batch = rig.acc._queues[TPS[1]][-1]
    assert future[0] is batch.result and future[1] == 1 and future[2] == 105
    assert len(batch) == 2 and not batch.closed
    assert rig.acc.used_bytes == before + 21 + len(b"second")
    assert batch.result.thunks == [cb, 1, 105]
    batch.complete(base_offset=40, timestamp_ms=None)
    assert calls == [(RecordMetadata(TOPIC, 1, 41, 105), None)]
    assert future.result(0) == RecordMetadata(TOPIC, 1, 41, 105)
    assert rig.full == []


def test_a_record_without_timestamp_is_stamped_with_the_wall_clock() -> None:
    rig = Rig()
    rig.open(2)
    lo = time.time_ns() // 1_000_000
    future = rig.send(TOPIC, None, b"v", 2, None, None)
    hi = time.time_ns() // 1_000_000
    assert future is not None and lo <= future[2] <= hi


def test_the_partition_is_the_default_partitioners() -> None:
    rig = Rig()
    for p in range(3):
        rig.open(p)
    key = b"customer-42"
    future = rig.send(TOPIC, key, b"v", None, 100, None)
    assert future is not None and future[0].tp == TPS[partition_for_key(key, 3)]
    rig.sticky[TOPIC] = 2  # type: ignore[index]
    future = rig.send(TOPIC, None, b"v", None, 100, None)
    assert future is not None and future[0].tp == TPS[2]
    future = rig.send(TOPIC, None, b"v", 0, 100, None)
    assert future is not None and future[0].tp == TPS[0]


def test_a_single_partition_topic_needs_no_sticky_choice() -> None:
    rig = Rig()
    rig.tp_cache[TOPIC] = (rig.meta.current, TPS[:1])
    rig.open(0)
    future = rig.send(TOPIC, None, b"v", None, 100, None)
    assert future is not None and future[0].tp == TPS[0]


@pytest.mark.parametrize(
    "why",
    [
        "no batch",
        "closed batch",
        "batch without room",
        "accumulator closed",
        "buffer full",
        "stale metadata",
        "unknown topic",
        "no sticky partition yet",
        "another partitioner",
        "partition out of range",
        "negative partition",
        "bytearray value",
        "str key",
        "too large for a request",
        "float timestamp",
    ],
)
def test_every_other_case_answers_none_and_changes_nothing(why: str) -> None:
    rig = Rig(sticky=why != "another partitioner")
    if rig.sticky is not None:
        rig.sticky[TOPIC] = 0
    if why != "no batch":
        rig.open(0, b"x" * (9_900 if why == "batch without room" else 5))
    args: list[Any] = [TOPIC, None, b"v" * 100, None, 100, None]
    if why == "closed batch":
        rig.acc._queues[TPS[0]][-1].closed = True
    elif why == "accumulator closed":
        rig.acc.close()
    elif why == "buffer full":
        rig.acc._used_bytes = rig.acc.buffer_memory - 100
    elif why == "stale metadata":
        rig.meta.current = object()
    elif why == "unknown topic":
        args[0] = "other"
    elif why == "no sticky partition yet":
        del rig.sticky[TOPIC]  # type: ignore[union-attr]
    elif why == "partition out of range":
        args[3] = 3
    elif why == "negative partition":
        args[3] = -1
    elif why == "bytearray value":
        args[2] = bytearray(b"v")
    elif why == "str key":
        args[1] = "k"
    elif why == "too large for a request":
        args[2] = b"v" * 1000
    elif why == "float timestamp":
        args[4] = 100.0
    before = rig.state()
    assert rig.send(*args) is None
    assert rig.state() == before


def test_it_waits_for_the_accumulators_lock_held_by_another_thread() -> None:
    rig = Rig()
    rig.sticky[TOPIC] = 0  # type: ignore[index]
    rig.open(0)
    got: list[Any] = []
    sender = threading.Thread(target=lambda: got.append(rig.send(TOPIC, None, b"v", 0, 100, None)))
    with rig.acc._lock:
        before = rig.state()
        sender.start()
        for _ in range(50):  # give it every chance to append without the lock
            time.sleep(0.002)
            assert rig.state() == before and not got
    sender.join(10)
    assert len(got) == 1 and isinstance(got[0], RecordFuture)
    assert len(rig.acc._queues[TPS[0]][-1]) == 2


def test_filling_the_batch_closes_it_and_calls_on_full_after_the_lock() -> None:
    rig = Rig(batch_size=61 + 2 * (21 + 10))
    rig.sticky[TOPIC] = 1  # type: ignore[index]
    rig.open(1, b"x" * 10)
    seen_lock_free: list[bool] = []

    def on_full(*a: Any) -> None:
        got = rig.acc._lock.acquire(False)  # free here: not called under the lock
        seen_lock_free.append(got)
        if got:
            rig.acc._lock.release()
        rig.full.append(a)

    send = rig.acc.native_send_path(
        metadata=rig.meta,
        tp_cache=rig.tp_cache,
        sticky=rig.sticky,
        on_full=on_full,
        max_request_size=1000,
    )
    assert send is not None
    future = send(TOPIC, None, b"y" * 10, None, 100, None)
    assert future is not None
    batch = rig.acc._queues[TPS[1]][-1]
    assert batch.closed and len(batch) == 2
    assert rig.full == [(TOPIC, 1, 3)] and seen_lock_free == [True]
    assert send(TOPIC, None, b"z", None, 100, None) is None  # closed: Python's turn


def test_a_record_it_cannot_encode_raises_and_changes_nothing() -> None:
    rig = Rig()
    rig.sticky[TOPIC] = 0  # type: ignore[index]
    rig.open(0)
    before = rig.state()
    with pytest.raises(ValueError, match="int64"):
        rig.send(TOPIC, None, b"v", None, 2**64, None)
    with pytest.raises(ValueError, match="timestamp delta"):
        rig.send(TOPIC, None, b"v", None, -(2**63), None)
    assert rig.state() == before
    assert rig.acc._lock.acquire(False)  # released on the error path
    rig.acc._lock.release()


def test_abort_all_fails_every_record_appended_in_c() -> None:
    rig = Rig()
    rig.sticky[TOPIC] = 0  # type: ignore[index]
    rig.open(0)
    got: list[BaseException | None] = []
    futures = [
        rig.send(TOPIC, None, b"v", None, 100, lambda md, exc: got.append(exc)) for _ in range(5)
    ]
    assert all(f is not None for f in futures)
    boom = errors.HeadwaterError("forced close")
    for batch in rig.acc.abort_all():
        batch.fail(boom)
    assert got == [boom] * 5
    assert all(f.exception(0) is boom for f in futures if f is not None)


def test_pure_python_mode_has_no_c_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    acc = RecordAccumulator(
        batch_size=1000, linger_ms=5, buffer_memory=10_000, delivery_timeout_ms=1000
    )
    assert (
        acc.native_send_path(
            metadata=Snapshot(), tp_cache={}, sticky={}, on_full=print, max_request_size=1
        )
        is None
    )


# -- a producer against the fake broker, with and without the C path ---------------------


def run_workload(bootstrap: str, *, native: bool) -> tuple[list[Any], list[Any], Any]:
    """Keyed, keyless, explicit-partition and header records, with callbacks; returns
    each record's metadata, the callbacks' calls, and how many went through Python."""
    calls: list[Any] = []
    # A long linger and batches that do not fill: the batches, hence the sticky
    # partitioner's random choices, do not depend on when the sender drains.
    with headwater.Producer(
        bootstrap,
        linger_ms=60_000,
        partitioner=DefaultPartitioner(rand=random.Random(3)),
    ) as p:
        if not native:
            p._native_send = None
        assert (p._native_send is not None) == native
        python_path = [0]
        try_append = p._accumulator.try_append

        def counted(*a: Any) -> Any:
            python_path[0] += 1
            return try_append(*a)

        p._accumulator.try_append = counted  # type: ignore[method-assign,assignment]
        futures = []
        for i in range(300):
            kind = i % 5
            key = f"k{i % 7}".encode() if kind == 1 else None
            partition = i % 3 if kind == 2 else None
            headers = [("h", b"1")] if kind == 3 else None

            def cb(md: RecordMetadata | None, exc: BaseException | None, i: int = i) -> None:
                calls.append((i, md, exc))

            futures.append(
                p.send(
                    TOPIC,
                    f"v{i}".encode(),
                    key=key,
                    partition=partition,
                    headers=headers,
                    timestamp_ms=1000 + i,
                    callback=cb,
                )
            )
        p.flush(30)
        results = [f.result(0) for f in futures]
        too_large = p.send(TOPIC, b"x" * (2 << 20), callback=cb)
        with pytest.raises(errors.MessageTooLargeError):
            too_large.result(0)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            p.send(TOPIC, b"v", partition=3)
    with pytest.raises(errors.HeadwaterError, match="closed"):
        p.send(TOPIC, b"v")
    return results, calls, python_path[0]


def test_a_producer_gives_the_same_partitions_offsets_and_callbacks_either_way() -> None:
    outcomes = []
    for native in (True, False):
        broker = FakeBroker()  # type: ignore[abstract]
        try:
            broker.create(TOPIC, 3)
            results, calls, python_path = run_workload(broker.bootstrap, native=native)
            values = [broker.values(TOPIC, p) for p in range(3)]
        finally:
            broker.stop()
        by_record = sorted((i, md) for i, md, exc in calls if i is not None and exc is None)
        assert [md for _, md in by_record[:300]] == results
        failed = [exc for _, md, exc in calls if exc is not None]
        assert len(failed) == 1 and isinstance(failed[0], errors.MessageTooLargeError)
        # per partition, callbacks ran in send order
        for part in range(3):
            offsets = [md.offset for _, md, _ in calls if md is not None and md.partition == part]
            assert offsets == sorted(offsets)
        outcomes.append(([tuple(md) for md in results], values))
        if native:
            # only records with headers and those whose partition needed the
            # partitioner's choice took try_append
            assert python_path < 300 // 5 + 20, python_path
    assert outcomes[0] == outcomes[1]


def test_the_c_path_is_used_by_a_producer_by_default() -> None:
    broker = FakeBroker()  # type: ignore[abstract]
    try:
        broker.create(TOPIC, 1)
        with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
            assert p._native_send is not None
            assert p.send(TOPIC, b"v").result(10).offset == 0
    finally:
        broker.stop()


def test_a_transactional_producer_takes_the_c_path_after_its_state_check() -> None:
    """The transaction state is checked before either path: outside a transaction the
    send is refused and nothing is queued."""
    broker = FakeBroker()  # type: ignore[abstract]
    try:
        broker.create(TOPIC, 1)
        with headwater.Producer(broker.bootstrap, transactional_id="tx") as p:
            assert p._native_send is not None
            with pytest.raises(errors.InvalidTxnStateError, match="begin_transaction"):
                p.send(TOPIC, b"v")
            assert not p._accumulator.has_incomplete()
    finally:
        broker.stop()


def test_a_send_path_needs_every_argument() -> None:
    from headwater.client.producer import _native

    with pytest.raises(TypeError, match="every keyword"):
        _native.SendPath()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.SendPath.send(_native.SendPath.__new__(_native.SendPath), "t")  # type: ignore[call-arg]


def test_state_behind_a_descriptor_is_refused() -> None:
    """The C path reads ``current``, ``_closed`` and ``_used_bytes`` from the instances'
    dicts: a class attribute (a property) there would be bypassed, so it refuses."""

    class Property:
        @property
        def current(self) -> object:
            return object()

    acc = RecordAccumulator(
        batch_size=1000, linger_ms=5, buffer_memory=10_000, delivery_timeout_ms=1000
    )
    with pytest.raises(TypeError, match="plain instance attributes"):
        acc.native_send_path(
            metadata=Property(), tp_cache={}, sticky={}, on_full=print, max_request_size=1
        )
