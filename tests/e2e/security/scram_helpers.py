"""SCRAM logins for tests that create a user and must wait until a broker knows it: a
credential written to ZooKeeper reaches each broker through its watch, a moment later."""

from __future__ import annotations

import grpc
from headwater import errors
from headwater.client.transport import sasl


def logs_in(channel: grpc.Channel, username: str, password: str) -> bool:
    """Whether the broker behind ``channel`` accepts this SCRAM-SHA-512 login now."""
    try:
        sasl.authenticate(
            channel, mechanism="SCRAM-SHA-512", username=username, password=password, timeout_s=10
        )
    except errors.SaslAuthenticationFailedError:
        return False
    return True
