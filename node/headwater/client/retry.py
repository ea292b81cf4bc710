"""Where the client's retry policy used to live: now :mod:`headwater.retry`.

Kept so that existing imports (``from headwater.client.retry import
RetryPolicy``) keep working; new code imports :mod:`headwater.retry`.
"""

from __future__ import annotations

from headwater.retry import RetryPolicy, is_retriable

__all__ = ["RetryPolicy", "is_retriable"]
