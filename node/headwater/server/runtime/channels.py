"""gRPC channel options shared by the broker's server and its outgoing channels.

The broker's gRPC server, the replica fetchers' channels and the controller's
channels to brokers all carry whole record batches, so all raise gRPC's 4 MiB
default message limit to the broker's ``grpc.max.message.bytes``.  One
function, so that the three cannot drift apart.
"""

from __future__ import annotations


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """gRPC options allowing messages of up to ``max_message_bytes`` both ways."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]
