"""Per-record callbacks as batch thunks (issue 16): ``send(callback=...)`` callbacks
stored with the batch and run in one loop when it completes, in append order, each
with its own RecordMetadata (offset, create or LogAppendTime timestamp) or the
batch's error; a callback that raises does not stop the others; callbacks added
after completion run at once; futures and callbacks agree; a record refused before
it was queued calls its callback with the error.

Every test runs twice: with the C loop (``_native.run_thunks``) and the native
builder's ``append_thunk``, and with the pure-Python loop and builder (skipped
where the extension is not built)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from headwater import errors
from headwater.client.producer import futures as futures_module
from headwater.client.producer.accumulator import RecordAccumulator
from headwater.client.producer.futures import (
    BatchResult,
    RecordCallback,
    RecordFuture,
    failed_future,
)
from headwater.client.producer.native import native_run_thunks
from headwater.client.types import RecordMetadata, TopicPartition
from headwater.records import (
    NativeRecordCodec,
    PythonRecordCodec,
    Record,
    native_available,
    record_codec,
    set_record_codec,
)

TP = TopicPartition("t", 3)
Seen = list[tuple[str, RecordMetadata | None, BaseException | None]]


@pytest.fixture(params=["python", "native"], autouse=True)
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The thunk loop and builder under test: the C ones or the pure-Python ones."""
    if request.param == "native" and not native_available():
        pytest.skip("the C extension is not built")
    native = request.param == "native"
    monkeypatch.setattr(futures_module, "_native_run", native_run_thunks() if native else None)
    previous = record_codec()
    set_record_codec(NativeRecordCodec() if native else PythonRecordCodec())
    try:
        yield request.param
    finally:
        set_record_codec(previous)


def collector(seen: Seen, name: str) -> RecordCallback:
    def cb(md: RecordMetadata | None, exc: BaseException | None) -> None:
        seen.append((name, md, exc))

    return cb


def accumulator() -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=10_000, linger_ms=5, buffer_memory=100_000, delivery_timeout_ms=120_000
    )


def append_three(acc: RecordAccumulator, seen: Seen) -> list[RecordFuture]:
    """The first record through ``append`` (it opens the batch), two through ``try_append``."""
    futures = [
        acc.append(
            TP, Record(None, b"a", (), 100), max_block_ms=0, callback=collector(seen, "a")
        ).future
    ]
    for name, ts in (("b", 101), ("c", 102)):
        fast = acc.try_append(TP, None, name.encode(), (), ts, 22, collector(seen, name))
        assert fast is not None
        futures.append(fast[0])
    return futures


def test_callbacks_run_in_append_order_with_each_records_metadata() -> None:
    acc, seen = accumulator(), Seen()
    futures = append_three(acc, seen)
    (batch,) = acc.drain([TP])
    assert seen == []  # nothing runs before the batch completes
    batch.complete(base_offset=40, timestamp_ms=None)
    assert seen == [
        ("a", RecordMetadata("t", 3, 40, 100), None),
        ("b", RecordMetadata("t", 3, 41, 101), None),
        ("c", RecordMetadata("t", 3, 42, 102), None),
    ]
    assert [f.result(0) for f in futures] == [md for _, md, _ in seen]
    assert all(isinstance(md, RecordMetadata) for _, md, _ in seen)


def test_log_append_time_replaces_every_records_timestamp() -> None:
    acc, seen = accumulator(), Seen()
    append_three(acc, seen)
    (batch,) = acc.drain([TP])
    batch.complete(base_offset=0, timestamp_ms=999)
    assert [md.timestamp_ms for _, md, _ in seen if md is not None] == [999, 999, 999]


def test_acks_0_reports_offset_minus_one() -> None:
    acc, seen = accumulator(), Seen()
    append_three(acc, seen)
    (batch,) = acc.drain([TP])
    batch.complete(base_offset=-1, timestamp_ms=None)
    assert [md.offset for _, md, _ in seen if md is not None] == [-1, -1, -1]


def test_a_failed_batch_gives_each_callback_the_error() -> None:
    acc, seen = accumulator(), Seen()
    futures = append_three(acc, seen)
    (batch,) = acc.drain([TP])
    error = errors.NotEnoughReplicasError("too few in sync")
    batch.fail(error)
    assert seen == [("a", None, error), ("b", None, error), ("c", None, error)]
    for f in futures:
        assert f.exception(0) is error
        with pytest.raises(errors.NotEnoughReplicasError):
            f.result(0)


def test_a_raising_callback_is_logged_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    acc, seen = accumulator(), Seen()

    def boom(md: RecordMetadata | None, exc: BaseException | None) -> None:
        raise RuntimeError("user bug")

    acc.append(TP, Record(None, b"a", (), 1), max_block_ms=0, callback=boom)
    assert acc.try_append(TP, None, b"b", (), 2, 22, collector(seen, "b")) is not None
    (batch,) = acc.drain([TP])
    with caplog.at_level(logging.ERROR, logger="headwater.client.producer.futures"):
        batch.complete(base_offset=7, timestamp_ms=None)
    assert seen == [("b", RecordMetadata("t", 3, 8, 2), None)]
    assert "producer callback raised" in caplog.text


def test_done_callbacks_and_record_callbacks_share_one_order() -> None:
    result = BatchResult(TP)
    order: list[str] = []
    first, second = RecordFuture(result, 0, 5), RecordFuture(result, 1, 6)
    result.add_record_callback(lambda md, exc: order.append(f"cb0:{md.offset}"), 0, 5)  # type: ignore[union-attr]
    first.add_done_callback(lambda f: order.append(f"fut0:{f.result(0).offset}"))
    result.add_record_callback(lambda md, exc: order.append(f"cb1:{md.offset}"), 1, 6)  # type: ignore[union-attr]
    assert not first.done() and order == []
    result.set(base_offset=10, timestamp_ms=None, error=None)
    assert order == ["cb0:10", "fut0:10", "cb1:11"]
    assert first.done() and second.done()
    # Added after completion: runs at once, on the caller's thread.
    second.add_done_callback(lambda f: order.append(f"late:{f.result(0).offset}"))
    result.add_record_callback(lambda md, exc: order.append("late-cb"), 1, 6)
    assert order[-2:] == ["late:11", "late-cb"]
    result.set(base_offset=99, timestamp_ms=None, error=None)  # set once: ignored
    assert first.result(0).offset == 10


def test_a_pending_future_times_out() -> None:
    fut = RecordFuture(BatchResult(TP), 0, 1)
    with pytest.raises(TimeoutError):
        fut.result(0.01)
    with pytest.raises(TimeoutError):
        fut.exception(0.01)


def test_failed_future_calls_its_callback_before_returning() -> None:
    seen: Seen = []
    error = errors.MessageTooLargeError("too big")
    fut = failed_future(TP, error, callback=collector(seen, "x"))
    assert seen == [("x", None, error)]
    assert fut.done() and fut.exception(0) is error


def fixed_thunks(seen: list[Any], fut: RecordFuture, boom: RecordCallback) -> list[Any]:
    """Records 0 and 2 append their calls to ``seen``, record 1 raises, a done callback."""
    return [
        lambda md, exc: seen.append(("a", md, exc)),
        0,
        100,
        boom,
        1,
        101,
        lambda f: seen.append(("done", f)),
        -1,
        fut,
        lambda md, exc: seen.append(("c", md, exc)),
        2,
        102,
    ]


def test_the_c_loop_makes_the_same_calls_as_the_python_loop() -> None:
    """``_native.run_thunks`` against ``BatchResult._run_python`` on one fixed flat list:
    record callbacks, a done callback, a raising callback; success (create and
    LogAppendTime timestamps, acks=0's -1 offsets, offsets past 2**63) and failure."""
    run = native_run_thunks()
    if run is None:
        pytest.skip("the C extension is not built")
    error = errors.NotLeaderOrFollowerError("moved")
    for base, log_append, err in (
        (40, None, None),
        (0, 999, None),
        (-1, None, None),
        (2**63 - 2, None, None),
        (-1, None, error),
    ):
        calls: dict[str, list[Any]] = {"python": [], "c": []}
        for name in ("python", "c"):
            seen = calls[name]
            fut = RecordFuture(BatchResult(TP), 0, 1)

            def boom(md: RecordMetadata | None, exc: BaseException | None) -> None:
                raise RuntimeError("user bug")

            thunks = fixed_thunks(seen, fut, boom)
            result = BatchResult(TP)
            result.base_offset, result.timestamp_ms, result.error = base, log_append, err
            if name == "python":
                result._run_python(thunks)
            else:
                run(thunks, "t", 3, base, log_append, err, RecordMetadata, lambda e: None)
            assert all(type(c[1]) is RecordMetadata for c in seen if c[0] != "done" and c[1])
            seen[:] = [c if c[0] != "done" else ("done", c[1] is fut) for c in seen]
        assert calls["c"] == calls["python"]
        assert len(calls["c"]) == 3


def test_the_c_loop_logs_a_raising_callback_and_stops_on_keyboard_interrupt() -> None:
    run = native_run_thunks()
    if run is None:
        pytest.skip("the C extension is not built")
    logged: list[BaseException] = []
    seen: list[int] = []

    def boom(md: RecordMetadata | None, exc: BaseException | None) -> None:
        raise RuntimeError("user bug")

    def interrupt(md: RecordMetadata | None, exc: BaseException | None) -> None:
        raise KeyboardInterrupt

    def mark(md: RecordMetadata | None, exc: BaseException | None) -> None:
        assert md is not None
        seen.append(md.offset)

    run([boom, 0, 1, mark, 1, 1], "t", 0, 5, None, None, RecordMetadata, logged.append)
    assert seen == [6] and len(logged) == 1 and isinstance(logged[0], RuntimeError)
    assert logged[0].__traceback__ is not None
    with pytest.raises(KeyboardInterrupt):
        run([interrupt, 0, 1, mark, 1, 1], "t", 0, 5, None, None, RecordMetadata, logged.append)
    assert seen == [6]
    with pytest.raises(TypeError):
        run((), "t", 0, 5, None, None, RecordMetadata, logged.append)
    with pytest.raises(TypeError):
        run([], "t", 0, 5, None, None, dict, logged.append)


def test_a_future_is_a_cheap_tuple_with_identity_equality() -> None:
    result = BatchResult(TP)
    a, b = RecordFuture(result, 0, 5), RecordFuture(result, 0, 5)
    assert a != b and a == a and len({a, b}) == 2
    assert "index=0" in repr(a)
