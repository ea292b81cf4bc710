"""Fixtures for the client's unit tests: an in-process fake broker over real gRPC."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.client.fake_broker import FakeBroker


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    b = FakeBroker()
    yield b
    b.stop()
