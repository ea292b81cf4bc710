"""Partition assignors: who in a group reads which partition, as pure functions.

The group leader runs one of these after every JoinGroup (the protocol all members
support, chosen by the coordinator's vote) and sends the result in its SyncGroup.  Each
takes the partition count of every subscribed topic and each member's
:class:`Subscription`, and returns every member's partitions.  No I/O, no clock,
deterministic: the same input always gives the same output.

- ``range`` (Kafka's default): per topic, members sorted by id, consecutive ranges; the
  first ``partitions % members`` members get one extra.
- ``roundrobin``: all partitions in (topic, partition) order dealt to the members in
  turn, skipping members not subscribed to the topic.
- ``sticky``: balanced (within one for equal subscriptions) while keeping as many of
  each member's currently owned partitions as balance allows.
- ``cooperative-sticky``: the sticky target, minus every partition that would change
  owner in this round: the old owner revokes it, rejoins, and a follow-up rebalance
  hands it to the new owner.  Partitions that stay put are never revoked (KIP-429).

A consumer rebalances cooperatively only when every assignor it is configured with
supports it (:func:`rebalance_protocol`); otherwise it revokes everything (eager).
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from headwater.client.types import TopicPartition

Assignment = dict[str, list[TopicPartition]]


class Subscription(NamedTuple):
    """What a member told the group: its topics and what it owns now."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1
    """The generation in which the member got ``owned_partitions`` (-1: unknown)."""
    group_instance_id: str | None = None


Assignor = Callable[[Mapping[str, int], Mapping[str, Subscription]], Assignment]


def _member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Members sorted as Kafka sorts them: by instance id when static, else member id."""
    return sorted(subscriptions, key=lambda m: (subscriptions[m].group_instance_id or m, m))


def range_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    out: Assignment = {m: [] for m in subscriptions}
    order = _member_order(subscriptions)
    for topic in sorted(partitions_per_topic):
        members = [m for m in order if topic in subscriptions[m].topics]
        if not members:
            continue
        n = partitions_per_topic[topic]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            out[m] += [TopicPartition(topic, p) for p in range(start, start + count)]
            start += count
    return out


def roundrobin_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    out: Assignment = {m: [] for m in subscriptions}
    order = _member_order(subscriptions)
    if not order:
        return out
    i = 0
    for topic in sorted(partitions_per_topic):
        subscribed = [m for m in order if topic in subscriptions[m].topics]
        if not subscribed:
            continue
        for p in range(partitions_per_topic[topic]):
            while topic not in subscriptions[order[i % len(order)]].topics:
                i += 1
            out[order[i % len(order)]].append(TopicPartition(topic, p))
            i += 1
    return out


def _all_partitions(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> list[TopicPartition]:
    wanted = {t for s in subscriptions.values() for t in s.topics}
    return [
        TopicPartition(t, p)
        for t in sorted(partitions_per_topic)
        if t in wanted
        for p in range(partitions_per_topic[t])
    ]


def _valid_owners(
    partitions: list[TopicPartition], subscriptions: Mapping[str, Subscription]
) -> dict[TopicPartition, str]:
    """Who owns each partition now; a partition claimed twice goes to the newer generation."""
    exists = set(partitions)
    owner: dict[TopicPartition, str] = {}
    for m in _member_order(subscriptions):
        sub = subscriptions[m]
        for tp in sub.owned_partitions:
            if tp not in exists or tp.topic not in sub.topics:
                continue
            prev = owner.get(tp)
            if prev is None or subscriptions[prev].generation < sub.generation:
                owner[tp] = m
    return owner


def sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    order = _member_order(subscriptions)
    out: Assignment = {m: [] for m in order}
    if not order:
        return out
    partitions = _all_partitions(partitions_per_topic, subscriptions)
    owner = _valid_owners(partitions, subscriptions)
    # 1. Everyone keeps what they own, up to the balanced quota (ceil), while the number
    #    of members allowed to hold the ceiling lasts.
    n_members = len(order)
    floor_q, extra = divmod(len(partitions), n_members)
    by_owned = sorted(order, key=lambda m: -sum(1 for o in owner.values() if o == m))
    kept: set[TopicPartition] = set()
    ceil_slots = extra
    for m in by_owned:
        mine = [tp for tp in partitions if owner.get(tp) == m]
        quota = floor_q
        if ceil_slots > 0 and len(mine) > floor_q:
            quota, ceil_slots = floor_q + 1, ceil_slots - 1
        for tp in mine[:quota]:
            out[m].append(tp)
            kept.add(tp)
    # 2. Hand the rest, in order, to the subscribed member holding the fewest.
    position = {m: i for i, m in enumerate(order)}
    for tp in partitions:
        if tp in kept:
            continue
        candidates = [m for m in order if tp.topic in subscriptions[m].topics]
        target = min(candidates, key=lambda m: (len(out[m]), position[m]))
        out[target].append(tp)
    # 3. Even out what unequal subscriptions left uneven: move a partition from a member
    #    holding two more than another subscribed member (bounded: each move lowers the
    #    sum of squares of the counts).
    for _ in range(len(partitions) * n_members + 1):
        moved = False
        for src in sorted(order, key=lambda m: (-len(out[m]), position[m])):
            for tp in sorted(out[src], key=lambda t: (owner.get(t) == src, t)):
                dst = min(
                    (m for m in order if tp.topic in subscriptions[m].topics),
                    key=lambda m: (len(out[m]), position[m]),
                )
                if len(out[src]) > len(out[dst]) + 1:
                    out[src].remove(tp)
                    out[dst].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return {m: sorted(tps) for m, tps in out.items()}


def cooperative_sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    target = sticky_assign(partitions_per_topic, subscriptions)
    partitions = _all_partitions(partitions_per_topic, subscriptions)
    owner = _valid_owners(partitions, subscriptions)
    # Claims that are not valid (e.g. a topic no longer subscribed) still count as owned:
    # the owner must revoke them before anyone else gets them.
    for m, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            owner.setdefault(tp, m)
    return {m: [tp for tp in tps if owner.get(tp, m) == m] for m, tps in target.items()}


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
"""Assignors by the names used in ``partition_assignment_strategy`` and on the wire."""


class RebalanceProtocol(enum.IntEnum):
    """How members give partitions up in a rebalance (Kafka's ``RebalanceProtocol``)."""

    EAGER = 0
    """Every member revokes all its partitions before it rejoins; the new assignment
    starts every partition at its committed offset."""
    COOPERATIVE = 1
    """Members revoke only what moves to another member (KIP-429); the rest keep their
    positions."""


SUPPORTED_PROTOCOLS: Mapping[str, frozenset[RebalanceProtocol]] = {
    "range": frozenset({RebalanceProtocol.EAGER}),
    "roundrobin": frozenset({RebalanceProtocol.EAGER}),
    "sticky": frozenset({RebalanceProtocol.EAGER}),
    "cooperative-sticky": frozenset({RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE}),
}
"""The rebalance protocols each assignor supports (Kafka's ``supportedProtocols()``)."""


def rebalance_protocol(assignors: Sequence[str]) -> RebalanceProtocol:
    """The protocol of a consumer configured with ``assignors``: the highest one that
    *every* assignor supports, as Kafka's ``ConsumerCoordinator`` chooses it.  So a list
    with any eager assignor is eager (``["cooperative-sticky", "range"]``, the first step
    of Kafka's upgrade to cooperative rebalancing, revokes everything); only a list of
    cooperative assignors rebalances cooperatively.  ValueError for an unknown or empty
    list."""
    unknown = [a for a in assignors if a not in SUPPORTED_PROTOCOLS]
    if unknown or not assignors:
        raise ValueError(
            f"partition assignors: unknown {unknown or 'empty'}; "
            f"expected some of {', '.join(SUPPORTED_PROTOCOLS)}"
        )
    common = frozenset(RebalanceProtocol)
    for a in assignors:
        common &= SUPPORTED_PROTOCOLS[a]
    return max(common)  # EAGER is supported by every assignor: never empty


def assign(
    name: str,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
) -> Assignment:
    """Run the assignor ``name``; ValueError for an unknown one."""
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise ValueError(
            f"unknown partition assignor {name!r}; expected one of {', '.join(ASSIGNORS)}"
        ) from None
    return fn(partitions_per_topic, subscriptions)


def owners(assignment: Mapping[str, list[TopicPartition]]) -> dict[TopicPartition, list[str]]:
    """Partition -> members assigned it (for checks: every list should have one entry)."""
    found: dict[TopicPartition, list[str]] = defaultdict(list)
    for m, tps in assignment.items():
        for tp in tps:
            found[tp].append(m)
    return dict(found)
