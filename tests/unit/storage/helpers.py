"""Builders and inspectors shared by the storage tests."""

from __future__ import annotations

from pathlib import Path

from headwater.records import Record, build_batch, read_batches
from headwater.storage import Log, LogConfig


def batch(count: int, *, first: int = 0, timestamp_ms: int = 1_000, size: int = 10) -> bytes:
    """A batch of ``count`` records whose values are ``b"v<first+i>"`` padded to ``size``."""
    records = [
        Record(key=None, value=f"v{first + i}".encode().ljust(size, b"."), timestamp_ms=None)
        for i in range(count)
    ]
    return build_batch(records, timestamp_ms=timestamp_ms)


def batch_with_timestamps(timestamps: list[int], *, first: int = 0) -> bytes:
    """One record per timestamp, values ``b"v<first+i>"``."""
    records = [
        Record(key=None, value=f"v{first + i}".encode(), timestamp_ms=ts)
        for i, ts in enumerate(timestamps)
    ]
    return build_batch(records, timestamp_ms=0)


def offsets_and_values(data: bytes) -> list[tuple[int, bytes]]:
    """Decode fetched bytes into ``(offset, value without padding)`` pairs."""
    out = []
    for b in read_batches(data):
        for r in b.records():
            assert r.value is not None
            out.append((r.offset, r.value.rstrip(b".")))
    return out


def batch_bases(data: bytes) -> list[int]:
    return [b.base_offset for b in read_batches(data)]


def open_log(root: Path, *, now_ms: int = 0, name: str = "orders-0", **fields: int | str) -> Log:
    """A fresh (or re-opened, treated as crashed) log under ``root/name`` with config fields."""
    config = LogConfig(**fields)  # type: ignore[arg-type]
    return Log.open(root / name, config, now_ms=now_ms)


def reopen(log: Log, *, clean: bool = False, now_ms: int = 0) -> Log:
    """Close ``log`` without the manager and open it again (crashed unless ``clean``)."""
    directory, config = log.dir, log.config
    log.close()
    return Log.open(
        directory,
        config,
        now_ms=now_ms,
        had_clean_shutdown=clean,
        recovery_point=log.recovery_point if clean else 0,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes (to prove a refusal changed nothing)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def read_all(log: Log, start: int | None = None) -> list[tuple[int, bytes]]:
    """Every record from ``start`` (default: log start) to the log end, through Log.read."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes]] = []
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        info = log.read(offset, 1 << 20)
        pairs = offsets_and_values(info.records)
        assert pairs, f"read at {offset} returned nothing below the log end"
        out.extend(p for p in pairs if p[0] >= offset)
        offset = pairs[-1][0] + 1
    return out
