"""The native record codec (the C extension ``_speedups``) behind :class:`RecordCodec`.

The records section is the client's per-record cost; in C it is several
times cheaper than :class:`~headwater.records.record_codec.PythonRecordCodec`
(see ``bench/records.py``), byte for byte the same, with the same
CorruptRecordError checks (``tests/unit/records`` run every codec test
against both).  The extension is built by ``pip install`` (editable too)
from ``_speedups.c``; where it is missing (no compiler, an unusual
interpreter) the pure-Python codec is used, and ``HEADWATER_PURE_PYTHON_RECORDS=1``
forces that, e.g. to compare them or to rule the extension out when debugging.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from headwater.records.header import Buffer
from headwater.records.record import ConsumedRecord, Record
from headwater.records.record_codec import (
    EncodedRecords,
    PythonRecordCodec,
    RecordCodec,
    RecordsBuilder,
    T,
)

try:
    from headwater.records import _speedups
except ImportError as exc:  # not built: the pure-Python codec is the fallback
    _speedups = None  # type: ignore[assignment]  # a module or None
    UNAVAILABLE_REASON: str | None = f"{type(exc).__name__}: {exc}"
else:
    UNAVAILABLE_REASON = None

__all__ = [
    "PURE_PYTHON_ENV",
    "UNAVAILABLE_REASON",
    "NativeRecordCodec",
    "default_record_codec",
    "native_available",
    "payload_bytes",
    "pure_python_forced",
]

log = logging.getLogger(__name__)

PURE_PYTHON_ENV = "HEADWATER_PURE_PYTHON_RECORDS"
"""Set to 1 (or true/yes) to use the pure-Python codec even when the native one is built."""


def native_available() -> bool:
    """Whether the C extension was built and imports."""
    return _speedups is not None


class NativeRecordCodec:
    """:class:`RecordCodec` in C.  Stateless; safe to share between threads.

    Raises ImportError when the extension is not built.
    """

    name = "native"

    def __init__(self) -> None:
        if _speedups is None:
            raise ImportError(f"headwater.records._speedups is not built ({UNAVAILABLE_REASON})")
        self._encode = _speedups.encode
        self._decode = _speedups.decode
        self._builder = _speedups.RecordsBuilder

    def builder(self, *, capacity: int = 4096) -> RecordsBuilder:
        return self._builder(capacity=capacity)

    def encode(self, records: Sequence[Record], *, default_timestamp_ms: int) -> EncodedRecords:
        data, base, max_timestamp = self._encode(records, default_timestamp_ms)
        return EncodedRecords(data, base, max_timestamp)

    def decode(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
    ) -> list[ConsumedRecord]:
        return self._decode(data, count, base_offset, base_timestamp, log_append_time)

    def decode_as(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        record_type: type[T],
        prefix: tuple[Any, ...],
    ) -> list[T]:
        return self._decode(
            data, count, base_offset, base_timestamp, log_append_time, prefix, record_type
        )


def payload_bytes(records: list[Any], key_index: int, value_index: int) -> int:
    """Bytes of the keys and values of ``records`` (tuples; None counts 0), what Kafka's
    perf tools count as bytes read: in C when built (a Python loop over 100 B records
    costs a reader about a fifth of decoding them), else the same sum in Python."""
    if _speedups is not None and not pure_python_forced():
        return _speedups.payload_bytes(records, key_index, value_index)
    return sum(
        len(field)
        for record in records
        for field in (record[key_index], record[value_index])
        if field is not None
    )


def pure_python_forced() -> bool:
    """Whether ``HEADWATER_PURE_PYTHON_RECORDS`` turns the C code off (the record codec's
    and the producer's, :mod:`headwater.client.producer.native`)."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def default_record_codec() -> RecordCodec:
    """The native codec when built and not turned off by ``HEADWATER_PURE_PYTHON_RECORDS``."""
    if pure_python_forced():
        return PythonRecordCodec()
    if _speedups is None:
        log.debug("native record codec unavailable (%s); using pure Python", UNAVAILABLE_REASON)
        return PythonRecordCodec()
    return NativeRecordCodec()
