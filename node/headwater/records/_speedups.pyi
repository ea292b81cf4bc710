"""Type stubs of the C extension (see _speedups.c and headwater.records.native)."""

from collections.abc import Sequence
from typing import Any, TypeVar, overload

from headwater.records.header import Buffer
from headwater.records.record import ConsumedRecord, Header, Record

def encode(records: Sequence[Record], default_timestamp_ms: int, /) -> tuple[bytes, int, int]: ...

_T = TypeVar("_T", bound=tuple[Any, ...])

@overload
def decode(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    /,
) -> list[ConsumedRecord]: ...
@overload
def decode(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    prefix: tuple[Any, ...],
    cls: type[_T],
    /,
) -> list[_T]: ...
def payload_bytes(records: list[Any], key_index: int, value_index: int, /) -> int: ...

_append_future_api: object
"""RecordsBuilder.append_future's C function (a capsule), for headwater.client.producer._native."""

class RecordsBuilder:
    def __init__(self, *, capacity: int = 4096) -> None: ...
    @property
    def count(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def base_timestamp(self) -> int | None: ...
    @property
    def max_timestamp(self) -> int | None: ...
    @property
    def finished(self) -> bool: ...
    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        /,
    ) -> int: ...
    def append_thunk(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
        /,
    ) -> int: ...
    def append_future(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
        result: object,
        cls: type[_T],
        /,
    ) -> _T: ...
    def records(self) -> memoryview: ...
    def batch(self, tail: bytes, /) -> bytes: ...
