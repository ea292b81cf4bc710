"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

With the next-generation protocol the coordinator, not a group leader, computes each
member's *target* assignment whenever the group epoch moves.  Like Kafka's
``UniformAssignor`` and ``RangeAssignor`` (``group.consumer.assignors``), both are pure
functions of the members' subscriptions, the partition counts and the current target
(to stay sticky):

- ``uniform``: every partition of every subscribed topic goes to one of the members
  subscribed to it, counts differing by at most one among members with the same
  subscription; a member keeps what it already had up to its share (few moves).
- ``range``: per topic, the subscribed members sorted by id get contiguous ranges, the
  first ``n % m`` one partition more (Kafka's classic range, computed on the broker).

Invariant of both, checked by the unit tests: each partition of a subscribed topic is
assigned to exactly one member that subscribes to its topic, and nothing else is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from headwater.values import TopicPartition

Assignment = dict[str, frozenset[TopicPartition]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, frozenset[TopicPartition]]],
    Assignment,
]
"""``(subscriptions by member, partition counts, current target) -> new target``."""


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Contiguous ranges per topic over the subscribed members in id order."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted(partition_counts):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        n = partition_counts[topic]
        share, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            size = share + (1 if i < extra else 0)
            out[m].update(TopicPartition(topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in out.items()}


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> Assignment:
    """Balanced and sticky: members keep what they had up to their share, the rest is
    handed to the least loaded member subscribed to each partition's topic."""
    members = sorted(subscriptions)
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return {}
    wanted = {
        TopicPartition(t, p)
        for t, n in partition_counts.items()
        if any(t in s for s in subscriptions.values())
        for p in range(n)
    }
    quota = _quotas(subscriptions, partition_counts)
    free = set(wanted)
    for m in members:  # keep what is still valid, up to the member's quota
        keep = sorted(
            tp for tp in current.get(m, frozenset()) if tp in free and tp.topic in subscriptions[m]
        )[: quota[m]]
        out[m].update(keep)
        free.difference_update(keep)
    for tp in sorted(free):  # the rest to the least loaded eligible member
        eligible = [m for m in members if tp.topic in subscriptions[m]]
        target = min(eligible, key=lambda m: (len(out[m]) >= quota[m], len(out[m]), m))
        out[target].add(tp)
    return {m: frozenset(tps) for m, tps in out.items()}


def _quotas(
    subscriptions: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int]
) -> dict[str, int]:
    """Each member's fair share: members with the same subscription split its partitions,
    counts differing by at most one (the first members in id order take the extra)."""
    by_subscription: dict[frozenset[str], list[str]] = {}
    for m in sorted(subscriptions):
        by_subscription.setdefault(subscriptions[m], []).append(m)
    quota: dict[str, int] = {}
    for topics, same in by_subscription.items():
        total = sum(partition_counts.get(t, 0) for t in topics)
        # Partitions shared with members of other subscriptions are counted for all; the
        # quota is then only a cap on keeping, and hand-out balances by load.
        share, extra = divmod(total, len(same))
        for i, m in enumerate(same):
            quota[m] = share + (1 if i < extra else 0)
    return quota


ASSIGNORS: Mapping[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
"""By ``group.consumer.assignors`` name; the first configured one is the default."""
