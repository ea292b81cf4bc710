"""Serving the console on a thread: it answers, a taken port is an OSError, close stops it."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from headwater.console.app import Settings, make_app
from headwater.console.server import RunningConsole

from tests.unit.console.test_app import StandIn


def test_serves_until_closed() -> None:
    with RunningConsole(make_app(StandIn(), Settings())) as running:
        assert running.port > 0
        with urllib.request.urlopen(running.url + "/topics", timeout=30) as resp:
            assert resp.status == 200
            assert "orders" in resp.read().decode()
        with pytest.raises(OSError):
            RunningConsole(make_app(StandIn(), Settings()), port=running.port)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(running.url + "/topics", timeout=5)
