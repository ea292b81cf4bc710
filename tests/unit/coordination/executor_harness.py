"""An executor wired to in-memory ZooKeeper and senders, with an active controller term."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from headwater.coordination.context import ControllerContext
from headwater.coordination.executor import ControllerExecutor, Watches
from headwater.coordination.model import ControllerEpochZk, LeaderAndIsr

from .fakes import FakeZk, RecordingSender
from .helpers import reg


def _ignore(_: Any) -> None:
    return None


WATCHES = Watches(
    brokers=_ignore, topics=_ignore, deletions=_ignore, isr_changes=_ignore, preferred=_ignore
)


@dataclasses.dataclass
class Harness:
    zk: FakeZk
    ctx: ControllerContext
    sender: RecordingSender
    executor: ControllerExecutor


def topic_watch(topic: str) -> Callable[[Any], None]:
    return _ignore


def harness(
    *,
    brokers: tuple[int, ...] = (1, 2, 3),
    topics: Mapping[str, Mapping[int, tuple[int, ...]]] | None = None,
    states: Mapping[tuple[str, int], LeaderAndIsr] | None = None,
    unclean: bool = False,
) -> Harness:
    """ZooKeeper holding ``topics`` (states default to first replica leading, all in sync),
    this broker the controller, and the view not loaded yet (call ``on_failover``)."""
    zk = FakeZk()
    zk.brokers = {b: reg(b) for b in brokers}
    for t, parts in (topics or {}).items():
        zk.topics[t] = dict(parts)
        for p, replicas in parts.items():
            if states is None:
                zk.put_state((t, p), LeaderAndIsr(replicas[0], 0, tuple(replicas), 0))
    for tp, s in (states or {}).items():
        zk.put_state(tp, s)
    won = zk.try_become_controller(1, now_ms=0)
    assert won is not None
    ctx = ControllerContext(epoch=ControllerEpochZk(won.epoch, won.zk_version))
    sender = RecordingSender()
    executor = ControllerExecutor(
        zk, ctx, sender, watches=WATCHES, topic_watch=topic_watch, unclean=unclean
    )
    return Harness(zk, ctx, sender, executor)
