"""``Channels.broker``: one Broker stub per channel, reused per call (a stub builds a
multi-callable per RPC, issue 16), replaced after ``forget``, dropped on ``close``."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.client.transport.connection import Channels


def test_the_stub_is_made_once_per_channel_and_anew_after_forget() -> None:
    channels = Channels(name="test-channels")
    try:
        first = channels.broker("127.0.0.1:1")
        assert channels.broker("127.0.0.1:1") is first
        other = channels.broker("127.0.0.1:2")
        assert other is not first
        channels.forget("127.0.0.1:1")
        again = channels.broker("127.0.0.1:1")
        assert again is not first
        assert channels.broker("127.0.0.1:1") is again
        assert channels.broker("127.0.0.1:2") is other
    finally:
        channels.close()
    with pytest.raises(errors.NetworkError, match="closed"):
        channels.broker("127.0.0.1:1")
