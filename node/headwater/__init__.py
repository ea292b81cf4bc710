"""Headwater: a Kafka-style distributed commit log.

The package root is the user's entry point; the client classes are exported
here as the client issue lands (``Producer``, ``Consumer``, ``Admin``, ...).
"""

from __future__ import annotations

__version__ = "0.1.0"
