"""The planners' working copy of a cluster's replica layout, and the rack rule.

:class:`Layout` is a mutable scratch copy of an assignment that keeps each
broker's replica count, preferred-leader count and bytes up to date as
replicas move, so each greedy step of a planner reads them in O(1).  Only the
planners use it, each on its own copy, from one thread; ``finish()`` turns it
into the immutable :class:`~headwater.client.reassignment.model.RebalancePlan`.

**The rack rule** (why a move may be refused): a move must not leave a
partition on fewer racks than it spans now, unless it now spans more than the
target brokers' racks can give it (a replica on a broker being drained, in a
rack no target broker is in).  Formally, after a move a partition must span at
least ``min(racks before, min(replication factor, racks of the target
brokers))`` racks.  A broker without a rack counts as one rack of its own
(``None``), so a rack-less cluster always satisfies the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from headwater.client.reassignment.model import (
    Assignment,
    BrokerInfo,
    RebalancePlan,
    ReplicaMove,
    loads,
)
from headwater.values import TopicPartition


class Layout:
    """A scratch assignment with per-broker tallies; see the module docstring.

    Invariants (kept by :meth:`move` and :meth:`make_leader`): every
    partition keeps its replica count and never holds a broker twice;
    ``count``, ``leaders`` and ``size`` equal what ``replicas`` implies, for
    every broker that holds a replica or is a target.
    """

    def __init__(
        self,
        current: Assignment,
        *,
        targets: Sequence[BrokerInfo],
        racks: Mapping[int, str | None],
        sizes: Mapping[TopicPartition, int],
    ) -> None:
        self.current = {tp: tuple(r) for tp, r in current.items()}
        self.replicas: dict[TopicPartition, list[int]] = {
            tp: list(r) for tp, r in self.current.items()
        }
        self.targets = sorted({b.broker_id for b in targets})
        self.target_set = frozenset(self.targets)
        self.racks: dict[int, str | None] = {**racks, **{b.broker_id: b.rack for b in targets}}
        self.sizes = {tp: max(0, sizes.get(tp, 0)) for tp in self.current}
        self.target_racks = len({self.racks[b] for b in self.targets})
        self.count: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.leaders: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.size: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.held: dict[int, set[TopicPartition]] = {b: set() for b in self.targets}
        for tp, ids in self.replicas.items():
            for i, b in enumerate(ids):
                self._add(b, tp, leader=i == 0)

    def _add(self, broker: int, tp: TopicPartition, *, leader: bool) -> None:
        self.count[broker] = self.count.get(broker, 0) + 1
        self.leaders[broker] = self.leaders.get(broker, 0) + (1 if leader else 0)
        self.size[broker] = self.size.get(broker, 0) + self.sizes[tp]
        self.held.setdefault(broker, set()).add(tp)

    def _remove(self, broker: int, tp: TopicPartition, *, leader: bool) -> None:
        self.count[broker] -= 1
        self.leaders[broker] -= 1 if leader else 0
        self.size[broker] -= self.sizes[tp]
        self.held[broker].discard(tp)

    # -- the rack rule ----------------------------------------------------------------

    def rack_count(self, ids: Sequence[int]) -> int:
        return len({self.racks.get(b) for b in ids})

    def may_move(self, tp: TopicPartition, source: int, destination: int) -> bool:
        """True if ``tp``'s replica on ``source`` may go to ``destination`` (a target,
        not already a replica of ``tp``) without breaking the rack rule."""
        ids = self.replicas[tp]
        if destination not in self.target_set or destination in ids:
            return False
        after = [destination if b == source else b for b in ids]
        floor = min(self.rack_count(ids), min(len(ids), self.target_racks))
        return self.rack_count(after) >= floor

    # -- changes ----------------------------------------------------------------------

    def move(self, tp: TopicPartition, source: int, destination: int) -> None:
        """Replace ``source`` by ``destination`` in ``tp``'s list, in the same position
        (so a moved preferred leader's place goes to the destination)."""
        ids = self.replicas[tp]
        i = ids.index(source)
        if destination in ids:
            raise ValueError(f"broker {destination} already holds {tp}")
        self._remove(source, tp, leader=i == 0)
        ids[i] = destination
        self._add(destination, tp, leader=i == 0)

    def make_leader(self, tp: TopicPartition, broker: int) -> None:
        """Put ``broker`` (a replica of ``tp``) first, swapping it with the current first."""
        ids = self.replicas[tp]
        i = ids.index(broker)
        if i == 0:
            return
        self.leaders[ids[0]] -= 1
        self.leaders[broker] += 1
        ids[0], ids[i] = ids[i], ids[0]

    # -- the answer -------------------------------------------------------------------

    def finish(self) -> RebalancePlan:
        proposed = {tp: tuple(ids) for tp, ids in self.replicas.items()}
        moves: list[ReplicaMove] = []
        leader_changes: list[TopicPartition] = []
        for tp in sorted(proposed, key=lambda t: (t.topic, t.partition)):
            before, after = self.current[tp], proposed[tp]
            if before == after:
                continue
            gone = [b for b in before if b not in after]
            new = [b for b in after if b not in before]
            moves += [
                ReplicaMove(tp, s, d, self.sizes[tp]) for s, d in zip(gone, new, strict=False)
            ]
            if before[0] != after[0]:
                leader_changes.append(tp)
        listed = {*self.targets, *(b for ids in self.current.values() for b in ids)}
        racks = {b: self.racks.get(b) for b in sorted(listed)}
        return RebalancePlan(
            current=dict(self.current),
            proposed=proposed,
            moves=tuple(moves),
            leader_changes=tuple(leader_changes),
            before=loads(self.current, brokers=racks, sizes=self.sizes),
            after=loads(proposed, brokers=racks, sizes=self.sizes),
        )
