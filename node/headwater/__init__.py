"""Headwater: a Kafka-style distributed commit log.

The package root is the user's entry point: ``headwater.Producer``,
``headwater.Consumer``, ``headwater.Admin`` and the values they exchange.
They are imported lazily, so ``import headwater`` (and the broker, which never
uses the client) does not pay for loading gRPC client code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRecord",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
    "__version__",
]

if TYPE_CHECKING:
    from headwater.client import (
        Admin,
        Consumer,
        ConsumerRecord,
        Producer,
        RecordMetadata,
        TopicPartition,
    )

_CLIENT_NAMES = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        import headwater.client

        return getattr(headwater.client, name)
    raise AttributeError(f"module 'headwater' has no attribute {name!r}")
