"""Type stubs of the C extension (see _speedups.c and headwater.records.native)."""

from collections.abc import Callable, Sequence
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
def run_thunks(
    thunks: list[Any],
    topic: str,
    partition: int,
    base_offset: int,
    log_append_time: int | None,
    error: BaseException | None,
    cls: type[tuple[Any, ...]],
    on_error: Callable[[BaseException], object],
    /,
) -> None: ...
def murmur2(data: bytes, /) -> int: ...

class SendPath:
    def __init__(
        self,
        *,
        lock: Any,
        accumulator: Any,
        queues: dict[Any, Any],
        metadata: Any,
        tp_cache: dict[str, Any],
        sticky: dict[str, int] | None,
        future_type: type[tuple[Any, ...]],
        on_full: Callable[[str, int, int], object],
        batch_type: type,
        result_type: type,
        batch_size: int,
        buffer_memory: int,
        max_request_size: int,
    ) -> None: ...
    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        callback: object,
        /,
    ) -> Any | None: ...

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
