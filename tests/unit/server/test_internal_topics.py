"""InternalTopicCreator: one creation in flight, settings decided when it starts, an
existing topic is success, a failure is tried again by the next lookup."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, cast

from headwater import errors
from headwater.coordination.admin import CreateTopicResult, NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.server.runtime.internal_topics import InternalTopicCreator


class Controller:
    """Stands in for BrokerCoordinator.create_topics (the controller over ZooKeeper)."""

    def __init__(self, *answers: errors.HeadwaterError | None) -> None:
        self.answers = list(answers)
        self.asked: list[NewTopic] = []
        self.release = threading.Event()
        self.release.set()

    def create_topics(self, topics: Sequence[NewTopic]) -> list[CreateTopicResult]:
        self.release.wait(5)
        self.asked.extend(topics)
        error = self.answers.pop(0) if self.answers else None
        return [CreateTopicResult(t.name, error) for t in topics]


def creator(controller: Controller | None, rf: list[int]) -> InternalTopicCreator:
    return InternalTopicCreator(
        coordinator=lambda: cast(BrokerCoordinator, controller),
        new_topic=lambda: NewTopic(
            name="__consumer_offsets", num_partitions=3, replication_factor=rf[0]
        ),
    )


async def settle(c: InternalTopicCreator) -> None:
    task = cast(Any, c)._creating
    if task is not None:
        await asyncio.wait_for(task, 5)


def test_lookups_during_a_creation_start_no_second_one() -> None:
    async def go() -> Controller:
        controller = Controller()
        controller.release.clear()
        c = creator(controller, [3])
        for _ in range(5):
            c()
        controller.release.set()
        await settle(c)
        return controller

    assert [t.name for t in asyncio.run(go()).asked] == ["__consumer_offsets"]


def test_the_topic_is_decided_when_the_creation_starts() -> None:
    async def go() -> Controller:
        controller = Controller(errors.NotControllerError("moving"))
        rf = [1]
        c = creator(controller, rf)
        c()
        await settle(c)
        rf[0] = 3  # more brokers live now
        c()
        await settle(c)
        return controller

    assert [t.replication_factor for t in asyncio.run(go()).asked] == [1, 3]


def test_an_existing_topic_is_success_and_a_failure_is_tried_again_by_the_next_lookup(
    caplog: Any,
) -> None:
    async def go() -> Controller:
        controller = Controller(
            errors.TopicAlreadyExistsError("another broker created it"),
            errors.NotControllerError("moving"),
            None,
        )
        c = creator(controller, [3])
        for _ in range(3):
            c()
            await settle(c)
        return controller

    with caplog.at_level("WARNING"):
        assert len(asyncio.run(go()).asked) == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "moving" in warnings[0]


def test_no_controller_client_yet_tries_nothing() -> None:
    async def go() -> BaseException | None:
        c = creator(None, [3])
        c()
        await settle(c)
        task: asyncio.Task[None] = cast(Any, c)._creating
        return task.exception()

    assert asyncio.run(go()) is None
