"""Decisions on a controller failover and on broker registrations changing.

A broker is *dead* when its registration is gone, *new* when one appeared,
and *bounced* when its registration's epoch (the znode's czxid) changed: it
restarted or its session expired while the controller missed the deletion.
A bounced broker is handled as a death followed by a startup, as in Kafka,
so its partitions are re-elected and it is sent its state afresh.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import BrokerRegistration
from headwater.coordination.partitions import Plan, RemoveFromIsr

log = logging.getLogger(__name__)


def on_failover(ctx: ControllerContext, *, unclean: bool) -> r.ControllerResult:
    """A new term, ``ctx`` freshly loaded from ZooKeeper: repair and tell every broker.

    Opens a sender per live broker, creates states for partitions that have
    none, elects leaders for partitions whose leader may not lead, then sends
    UpdateMetadata and LeaderAndIsr with every partition's state.
    """
    plan = Plan(ctx)
    plan.add(*(r.AddBroker(b) for b in ctx.live_brokers.values()))
    everything = ctx.all_partitions()
    plan.initialize([tp for tp in everything if tp not in ctx.states])
    plan.elect_offline(everything, unclean=unclean)
    plan.add(r.SendUpdateMetadata(tuple(everything)), r.SendLeaderAndIsr(tuple(everything)))
    return plan.result()


@dataclasses.dataclass(frozen=True)
class BrokerChanges:
    """How the registered brokers differ from the controller's live set (ids sorted)."""

    dead: tuple[int, ...]
    new: tuple[int, ...]
    bounced: tuple[int, ...]

    def __bool__(self) -> bool:
        return bool(self.dead or self.new or self.bounced)


def broker_changes(
    live: Mapping[int, BrokerRegistration], current: Mapping[int, BrokerRegistration]
) -> BrokerChanges:
    return BrokerChanges(
        dead=tuple(sorted(set(live) - set(current))),
        new=tuple(sorted(set(current) - set(live))),
        bounced=tuple(
            sorted(b for b in set(live) & set(current) if live[b].epoch != current[b].epoch)
        ),
    )


def on_broker_change(
    ctx: ControllerContext,
    current: Mapping[int, BrokerRegistration],
    *,
    unclean: bool,
) -> r.ControllerResult:
    """``/brokers/ids`` changed: ``current`` is what it holds now."""
    changes = broker_changes(ctx.live_brokers, current)
    if not changes:
        return r.EMPTY
    log.info(
        "brokers changed: new %s, dead %s, bounced %s",
        list(changes.new),
        list(changes.dead),
        list(changes.bounced),
    )
    gone = changes.dead + changes.bounced
    came = changes.new + changes.bounced
    plan = Plan(ctx)
    plan.add(*(r.RemoveBroker(b) for b in changes.dead))
    plan.add(r.SetShuttingDown(frozenset(ctx.shutting_down - set(gone))))
    plan.add(r.SetLiveBrokers(tuple(reg for b, reg in current.items() if b not in changes.bounced)))
    if gone:
        _on_broker_failure(plan, gone, unclean=unclean)
    plan.add(r.SetLiveBrokers(tuple(current.values())))
    plan.add(*(r.AddBroker(current[b]) for b in came))
    if came:
        _on_broker_startup(plan, came, unclean=unclean)
    return plan.result()


def _on_broker_failure(plan: Plan, broker_ids: Sequence[int], *, unclean: bool) -> None:
    """Elect new leaders where the gone brokers led; shrink them out of the other ISRs."""
    view = plan.view
    led = [tp for tp, s in view.states.items() if s.leader in broker_ids]
    changed = plan.elect_offline(led, unclean=unclean)
    handled = set(led)
    for b in broker_ids:
        followers = [tp for tp in view.partitions_on_broker(b) if tp not in handled]
        changed += plan.elect(followers, RemoveFromIsr(b, view.controller_epoch))
    if changed:
        plan.add(r.Announce(tuple(changed)))


def _on_broker_startup(plan: Plan, broker_ids: Sequence[int], *, unclean: bool) -> None:
    """Tell the new brokers everything, then create and elect what they make possible."""
    view = plan.view
    plan.add(r.SendUpdateMetadata(tuple(view.all_partitions())))
    for b in broker_ids:
        hosted = tuple(tp for tp in view.partitions_on_broker(b) if tp in view.states)
        if hosted:
            plan.add(r.SendLeaderAndIsr(hosted, to=frozenset({b})))
    everything = view.all_partitions()
    created = plan.initialize([tp for tp in everything if tp not in view.states])
    changed = plan.elect_offline(everything, unclean=unclean)
    if created or changed:
        plan.add(r.Announce(tuple(created + changed)))
