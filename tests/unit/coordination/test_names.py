"""Kafka topic-name rules: legal characters, length, '.'/'..', and '.' vs '_' collisions."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination import names


@pytest.mark.parametrize("name", ["orders", "a.b_c-D9", "x" * 249, "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    names.validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        (".", '"." or ".."'),
        ("..", '"." or ".."'),
        ("x" * 250, "longer than 249"),
        ("a b", "illegal"),
        ("a/b", "illegal"),
        ("é", "illegal"),
    ],
)
def test_illegal_names(name: str, fragment: str) -> None:
    with pytest.raises(errors.InvalidTopicError, match=fragment.replace(".", r"\.")):
        names.validate_topic_name(name)


def test_dot_underscore_collision() -> None:
    with pytest.raises(errors.InvalidTopicError, match=r"collides with existing topic: a\.b"):
        names.check_no_collision("a_b", ["x", "a.b"])
    names.check_no_collision("a_b", ["a-b", "ab"])
    names.check_no_collision("a.b", ["a.b"])  # the same name is a duplicate, not a collision
    names.check_no_collision("plain", ["plain"])
