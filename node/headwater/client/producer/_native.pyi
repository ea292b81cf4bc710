"""Type stubs of the C extension (see _native.c and headwater.client.producer.native)."""

from collections.abc import Callable
from typing import Any

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
