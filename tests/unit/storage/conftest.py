"""Fixtures for the storage tests: a log in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.storage import Log

from .helpers import open_log


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    """A log with small segments (1 KiB) and a dense index (every 100 bytes)."""
    opened = open_log(tmp_path, segment_bytes=1024, index_interval_bytes=100)
    yield opened
    opened.close()
