"""Topic-level config overrides of the topics hosted on this broker.

Kafka's ``DynamicConfigManager`` for topics, reduced to what the broker needs:
read a topic's overrides from ZooKeeper before its first partition is
created here, watch them while any partition of the topic is hosted, and hand
every change, as a validated :class:`LogConfig`, to ``on_change`` (the
``ReplicaManager``, which updates its logs).

Thread model: every method runs on the broker's event loop; ZooKeeper reads
go to a worker thread; a watch fires on kazoo's thread and is handed back to
the loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping

from headwater import errors
from headwater.server.runtime.isr_store import IsrStore
from headwater.server.runtime.offload import run_blocking
from headwater.storage import LogConfig

log = logging.getLogger(__name__)


class TopicConfigs:
    """Overrides per topic, merged over the broker's defaults (see module docstring).

    Invariant: a topic has a watch exactly when its overrides were read and it
    was not released since; ``log_config`` never calls ZooKeeper.
    """

    def __init__(
        self,
        *,
        store: IsrStore,
        default_properties: Mapping[str, str],
        on_change: Callable[[str, LogConfig], None],
    ) -> None:
        self._store = store
        self._defaults = dict(default_properties)
        self._on_change = on_change
        self._overrides: dict[str, dict[str, str]] = {}
        self._watches: dict[str, Callable[[], None]] = {}

    def log_config(self, topic: str) -> LogConfig:
        """The config a new log of ``topic`` gets (defaults if never read)."""
        return LogConfig.from_properties({**self._defaults, **self._overrides.get(topic, {})})

    async def prepare(self, topics: Iterable[str]) -> None:
        """Read and watch the overrides of topics not watched yet (ZooKeeper, in a thread)."""
        loop = asyncio.get_running_loop()

        def on_change(changed_topic: str, config: Mapping[str, str]) -> None:  # kazoo's thread
            loop.call_soon_threadsafe(self.apply, changed_topic, dict(config))

        for topic in set(topics) - set(self._watches):
            try:
                overrides = await run_blocking(self._store.get_topic_config, topic)
                self._overrides[topic] = dict(overrides)
                self._watches[topic] = await run_blocking(
                    self._store.watch_topic_config, topic, on_change
                )
            except Exception as exc:  # the defaults still apply; the next LeaderAndIsr retries
                log.warning(
                    "cannot read or watch the config of topic %s: %s", topic, errors.describe(exc)
                )

    def apply(self, topic: str, overrides: Mapping[str, str]) -> None:
        """New overrides for ``topic``: remember them and pass the merged config on."""
        try:
            config = LogConfig.from_properties({**self._defaults, **overrides})
        except errors.HeadwaterError as exc:
            log.warning("ignoring invalid config of topic %s: %s", topic, exc)
            return
        self._overrides[topic] = dict(overrides)
        self._on_change(topic, config)

    def release(self, topics: Iterable[str]) -> None:
        """No partition of ``topics`` is hosted any more: stop watching them."""
        for topic in topics:
            cancel = self._watches.pop(topic, None)
            if cancel is not None:
                cancel()
                self._overrides.pop(topic, None)

    def shutdown(self) -> None:
        for cancel in self._watches.values():
            cancel()
        self._watches.clear()
