"""Records decoded straight into Arrow column buffers, for readers that hand on columns.

A reader that turns fetched batches into Arrow (the Spark connector) needs no Python
object per record.  A :class:`ColumnsBuilder` takes the records sections of
CRC-checked batches (:func:`add_batch` decompresses them first) and appends every
record in ``[start, end)`` to the buffers of these columns, in Arrow's layout
(native byte order, int32 offsets for binary data):

==================  ==============================================================
offsets             int64 per record
timestamps          int64 microseconds per record (the batch's LogAppendTime when set)
timestamp_types     int32 per record (:class:`~headwater.records.TimestampType`)
key, value          :class:`BinaryColumn`: validity bitmap (None: no nulls), null
                    count, ``rows + 1`` int32 offsets, the bytes
headers             None, or :class:`HeaderColumns`: per record ``rows + 1`` int32
                    offsets into the header children; header keys (UTF-8) and values
                    as :class:`BinaryColumn`\\ s
==================  ==============================================================

The C builder (``_arrow.c``) decodes each section in one pass and copies each value
once.  :class:`PythonColumnsBuilder` decodes with the record codec in use and builds
the same buffers; it is used where the extension is not built or
``HEADWATER_PURE_PYTHON_RECORDS=1`` turns C off.  Both check a section as the record
codec does and raise the same :class:`~headwater.errors.CorruptRecordError`\\ s
(messages may differ in detail); a bad section adds nothing.  Control batches are not
records: callers leave them out, as they leave out aborted transactions' batches.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from headwater.errors import CorruptRecordError
from headwater.records.batch import Batch, record_codec
from headwater.records.header import Buffer
from headwater.records.native import pure_python_forced
from headwater.records.record import ConsumedRecord, Header

try:
    from headwater.records import _arrow
except ImportError as exc:  # not built: the pure-Python builder is the fallback
    _arrow = None  # type: ignore[assignment]  # a module or None
    UNAVAILABLE_REASON: str | None = f"{type(exc).__name__}: {exc}"
else:
    UNAVAILABLE_REASON = None

__all__ = [
    "BinaryColumn",
    "Columns",
    "ColumnsBuilder",
    "HeaderColumns",
    "PythonColumnsBuilder",
    "add_batch",
    "columns_builder",
    "native_columns_available",
]

ColumnBuffer = Any
"""Anything with the buffer protocol: ``array``, ``bytes``, ``bytearray`` here, the C
builder's own ``Memory`` objects there."""


class BinaryColumn(NamedTuple):
    """An Arrow binary (or string) column's buffers."""

    validity: ColumnBuffer | None
    """One bit per item, least significant first, 1 = present; None when nothing is null."""
    null_count: int
    offsets: ColumnBuffer
    """``length + 1`` int32: item i is ``data[offsets[i]:offsets[i + 1]]``."""
    data: ColumnBuffer


class HeaderColumns(NamedTuple):
    """The headers of each record: a list column of (key, value) structs."""

    offsets: ColumnBuffer
    """``rows + 1`` int32: record i's headers are children ``offsets[i]:offsets[i + 1]``."""
    total: int
    """Headers in all, the children's length."""
    key: BinaryColumn
    value: BinaryColumn


class Columns(NamedTuple):
    """What a builder's ``finish()`` returns (see the module docstring)."""

    rows: int
    offsets: ColumnBuffer
    timestamps: ColumnBuffer
    timestamp_types: ColumnBuffer
    key: BinaryColumn
    value: BinaryColumn
    headers: HeaderColumns | None

    @classmethod
    def from_tuple(cls, raw: tuple[Any, ...]) -> Columns:
        """From the C builder's plain tuple of the same shape."""
        rows, offsets, timestamps, types, key, value, headers = raw
        return cls(
            rows,
            offsets,
            timestamps,
            types,
            BinaryColumn(*key),
            BinaryColumn(*value),
            None
            if headers is None
            else HeaderColumns(
                headers[0], headers[1], BinaryColumn(*headers[2]), BinaryColumn(*headers[3])
            ),
        )


class ColumnsBuilder(Protocol):
    """Appends records sections to column buffers; ``finish`` hands them out and resets."""

    @property
    def count(self) -> int:
        """Records added since the last ``finish``."""
        ...

    @property
    def data_size(self) -> int:
        """Bytes of keys, values and headers held (each binary column stays below 2 GiB)."""
        ...

    def reserve(self, records: int, data_bytes: int, /) -> None:
        """Make room for about that many more records and value bytes (a hint: the
        columns are then allocated once instead of grown)."""
        ...

    def add(
        self,
        data: Buffer,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        timestamp_type: int,
        start: int,
        end: int,
        /,
    ) -> int:
        """Decode the ``count`` records of ``data`` (a records section) and keep those with
        ``start <= offset < end``; returns how many were kept."""
        ...

    def finish(self) -> tuple[Any, ...]:
        """The columns as a plain tuple (:meth:`Columns.from_tuple`); the builder is empty
        afterwards."""
        ...


def native_columns_available() -> bool:
    """Whether the C builder was built and imports."""
    return _arrow is not None


def columns_builder(*, headers: bool) -> ColumnsBuilder:
    """A builder: in C when built and not turned off by ``HEADWATER_PURE_PYTHON_RECORDS``.

    ``headers``: also build the headers column.
    """
    if _arrow is None or pure_python_forced():
        return PythonColumnsBuilder(headers=headers)
    builder: ColumnsBuilder = _arrow.ColumnsBuilder(headers)
    return builder


def add_batch(builder: ColumnsBuilder, batch: Batch, *, start: int, end: int) -> int:
    """Add ``batch``'s records in ``[start, end)`` (decompressed first); returns how many.

    ``batch`` is a data batch (control batches carry no records for the caller).
    """
    h = batch.header
    data = batch.records_section()
    try:
        return builder.add(
            data,
            h.records_count,
            h.base_offset,
            h.base_timestamp,
            batch.log_append_time,
            int(h.timestamp_type),
            start,
            end,
        )
    except CorruptRecordError as e:
        raise CorruptRecordError(f"batch at offset {h.base_offset}: {e.message}") from None
    finally:
        if isinstance(data, memoryview):
            data.release()


class PythonColumnsBuilder:
    """:class:`ColumnsBuilder` over the record codec in use, in Python."""

    def __init__(self, *, headers: bool) -> None:
        self._headers = headers
        self._records: list[ConsumedRecord] = []
        self._types: list[tuple[int, int]] = []
        self._data_size = 0

    @property
    def count(self) -> int:
        return len(self._records)

    @property
    def data_size(self) -> int:
        return self._data_size

    def reserve(self, records: int, data_bytes: int, /) -> None:
        pass  # lists grow as they must

    def add(
        self,
        data: Buffer,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        timestamp_type: int,
        start: int,
        end: int,
        /,
    ) -> int:
        recs = record_codec().decode(
            data,
            count=count,
            base_offset=base_offset,
            base_timestamp=base_timestamp,
            log_append_time=log_append_time,
        )
        kept = [r for r in recs if start <= r[0] < end]
        for r in kept:
            if r[1] * 1000 not in _INT64:
                raise CorruptRecordError(
                    f"timestamp {r[1]} ms does not fit microseconds in 64 bits"
                )
            self._data_size += len(r[2] or b"") + len(r[3] or b"")
            for k, v in r[4]:
                self._data_size += len(k.encode()) + len(v or b"")
        self._records += kept
        self._types.append((len(kept), timestamp_type))
        return len(kept)

    def finish(self) -> tuple[Any, ...]:
        recs, self._records = self._records, []
        spans, self._types = self._types, []
        self._data_size = 0
        types = array("i")
        for n, kind in spans:
            types.extend(itertools.repeat(kind, n))
        headers: tuple[Any, ...] | None = None
        if self._headers:
            per_record = [r[4] for r in recs]
            flat: list[Header] = [h for hs in per_record for h in hs]
            headers = (
                _offsets(len(hs) for hs in per_record),
                len(flat),
                _binary([k.encode() for k, _ in flat]),
                _binary([v for _, v in flat]),
            )
        return (
            len(recs),
            array("q", [r[0] for r in recs]),
            array("q", [r[1] * 1000 for r in recs]),
            types,
            _binary([r[2] for r in recs]),
            _binary([r[3] for r in recs]),
            headers,
        )


_INT64 = range(-(1 << 63), 1 << 63)


def _offsets(lengths: Any) -> array[int]:
    """``count + 1`` int32 offsets from item lengths."""
    out = array("i", [0])
    out.extend(itertools.accumulate(lengths))
    return out


def _binary(items: Sequence[bytes | None]) -> tuple[Any, ...]:
    """(validity or None, null count, offsets, data) of a binary column."""
    nulls = items.count(None)
    validity: bytearray | None = None
    if nulls:
        validity = bytearray((len(items) + 7) >> 3)
        for i, item in enumerate(items):
            if item is not None:
                validity[i >> 3] |= 1 << (i & 7)
    return (
        validity,
        nulls,
        _offsets(0 if item is None else len(item) for item in items),
        b"".join([item for item in items if item is not None]),
    )
