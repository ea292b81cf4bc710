"""AdminTopics over a Headwater Admin: what it waits for after it grows a topic."""

from __future__ import annotations

from typing import Any

import pytest
from headwater import errors
from headwater.client.admin.values import TopicDescription
from headwater_operator import topics
from headwater_operator.topic_reconciler import AdminTopics


class LaggingMetadata:
    """An Admin whose metadata shows a grown topic only after ``lag`` describes."""

    def __init__(self, lag: int) -> None:
        self.lag = lag
        self.grown_to: int | None = None
        self.describes = 0

    def create_partitions(self, totals: dict[str, int], *, validate_only: bool) -> None:
        if not validate_only:
            (self.grown_to,) = totals.values()

    def describe_topics(self, names: list[str]) -> dict[str, TopicDescription]:
        self.describes += 1
        count = self.grown_to if self.grown_to and self.describes > self.lag else 1
        parts: Any = tuple(object() for _ in range(count))
        return {name: TopicDescription(name, False, parts) for name in names}


def grow(admin: LaggingMetadata, *, validate: bool = False, attempts: int = 50) -> None:
    topic_admin = AdminTopics(admin, metadata_attempts=attempts, sleep=lambda _s: None)
    action = topics.CreatePartitions("t", old_total=1, new_total=3)
    (topic_admin.validate if validate else topic_admin.apply)(action)


def test_apply_returns_once_the_metadata_shows_the_new_partitions() -> None:
    admin = LaggingMetadata(lag=4)
    grow(admin)
    assert admin.grown_to == 3 and admin.describes == 5


def test_validate_grows_nothing_and_waits_for_nothing() -> None:
    admin = LaggingMetadata(lag=4)
    grow(admin, validate=True)
    assert admin.grown_to is None and admin.describes == 0


def test_metadata_that_never_catches_up_is_a_retriable_error() -> None:
    admin = LaggingMetadata(lag=100)
    with pytest.raises(errors.LeaderNotAvailableError, match="grown to 3 partitions"):
        grow(admin, attempts=5)
    assert admin.describes == 5
