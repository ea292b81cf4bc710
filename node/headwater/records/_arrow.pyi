"""Type stubs of the C extension (see _arrow.c and headwater.records.columns)."""

from typing import Any

from headwater.records.header import Buffer

class Memory:
    """A read-only column buffer (buffer protocol)."""

    def __len__(self) -> int: ...

class ColumnsBuilder:
    def __init__(self, headers: bool) -> None: ...
    @property
    def count(self) -> int: ...
    @property
    def data_size(self) -> int: ...
    def reserve(self, records: int, data_bytes: int, /) -> None: ...
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
    ) -> int: ...
    def finish(self) -> tuple[Any, ...]: ...
