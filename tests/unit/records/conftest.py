"""Every test in tests/unit/records runs once per record codec: pure Python and native.

The codec is process-wide (``set_record_codec``); the fixture installs each in
turn for a whole module (module scope keeps hypothesis' per-example checks
happy) and puts the default back afterwards.  The native run skips, saying
why, when the C extension is not built.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from headwater.records import (
    NativeRecordCodec,
    PythonRecordCodec,
    RecordCodec,
    native_available,
    record_codec,
    set_record_codec,
)
from headwater.records.native import UNAVAILABLE_REASON


def make_codec(name: str) -> RecordCodec:
    """The codec called ``name``; skips the test when the native one is not built."""
    if name == "python":
        return PythonRecordCodec()
    if not native_available():
        pytest.skip(f"native record codec not built: {UNAVAILABLE_REASON}")
    return NativeRecordCodec()


@pytest.fixture(scope="module", params=["python", "native"], autouse=True)
def codec(request: pytest.FixtureRequest) -> Iterator[RecordCodec]:
    chosen = make_codec(request.param)
    previous = record_codec()
    set_record_codec(chosen)
    try:
        yield chosen
    finally:
        set_record_codec(previous)
