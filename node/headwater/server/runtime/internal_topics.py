"""Creating an internal topic (``__consumer_offsets``, ``__transaction_state``) on first use.

As in Kafka, a coordinator lookup (FindCoordinator through either door) that finds the
topic missing asks the controller to create it and answers COORDINATOR_NOT_AVAILABLE;
the client retries until the topic has leaders.  Rules:

* one creation per topic and broker is in flight at a time; a lookup during it adds none;
* the topic's settings (partitions, replication factor capped by the live brokers,
  configs) are decided when the creation starts, not when the broker starts;
* TOPIC_ALREADY_EXISTS (another broker's creation won) is success; any other failure is
  logged and the next lookup tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from headwater.coordination.admin import NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.errors import ErrorCode
from headwater.server.runtime.offload import run_blocking

__all__ = ["InternalTopicCreator"]

log = logging.getLogger(__name__)


class InternalTopicCreator:
    """Creates one internal topic through the controller, one attempt at a time.

    Called (with no arguments) by every coordinator lookup that found the topic missing;
    ``new_topic`` gives the topic to create, ``coordinator`` this broker's controller
    client (None before it is connected: nothing is tried).
    """

    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        new_topic: Callable[[], NewTopic],
    ) -> None:
        self._coordinator = coordinator
        self._new_topic = new_topic
        self._creating: asyncio.Task[None] | None = None

    def __call__(self) -> None:
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())

    async def _create(self) -> None:
        coordinator = self._coordinator()
        if coordinator is None:
            return
        topic = self._new_topic()
        try:
            (result,) = await run_blocking(coordinator.create_topics, [topic])
        except Exception:
            log.exception("creating %s failed", topic.name)
            return
        if result.error is not None and result.error.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s: %s", topic.name, result.error)
