"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic``).

Topic names become directory names (``<topic>-<partition>``) and metric
names, where '.' and '_' are interchangeable; Kafka therefore refuses a new
topic whose name differs from an existing one only by '.' versus '_'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from headwater import errors

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Raise :class:`~headwater.errors.InvalidTopicError` unless ``name`` is a legal topic name."""
    if not name:
        raise errors.InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise errors.InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise errors.InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters,"
            f" topic name: {name[:40]}... ({len(name)} characters)"
        )
    if not _LEGAL.match(name):
        raise errors.InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII'
            " alphanumerics, '.', '_' and '-'"
        )


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def check_no_collision(name: str, existing: Iterable[str]) -> None:
    """Refuse ``name`` if an existing topic differs from it only by '.' versus '_'."""
    if not has_collision_chars(name):
        return
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            raise errors.InvalidTopicError(
                f"Topic '{name}' collides with existing topic: {other}"
                " (topic names that differ only by '.' and '_' collide)"
            )


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
