"""The transactional ids of one ``__transaction_state`` partition, held by its leader.

The coordinator runtime (:mod:`~headwater.transactions.coordinator_runtime`) keeps one
:class:`TransactionShard` per partition it leads.  It feeds the shard the partition's
records while loading, asks
:mod:`~headwater.transactions.decisions` what each request does with the id's
metadata from :meth:`TransactionShard.get`, hands every
:class:`~headwater.transactions.results.Transition` to :meth:`TransactionShard.begin`
(which holds the pending state and gives the record to append), and reports the
append's outcome to :meth:`TransactionShard.appended`.  The shard does no I/O either.

Invariants:

* while loading, every request is answered COORDINATOR_LOAD_IN_PROGRESS and nothing is
  begun; after :meth:`TransactionShard.loaded` no record is replayed;
* at most one transition per id is in flight: a decision made while one is pending sees
  the pending state and refuses (CONCURRENT_TRANSACTIONS), and :meth:`begin` refuses a
  transition decided from metadata the shard no longer holds.
"""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.transactions import decisions as d
from headwater.transactions import records
from headwater.transactions.metadata import TransactionConfig, TransactionMetadata
from headwater.transactions.results import Refuse, Transition
from headwater.transactions.state import IllegalStateError, TransactionResult


class TransactionShard:
    """One ``__transaction_state`` partition's ids (see the module docstring)."""

    def __init__(self, partition: int, config: TransactionConfig) -> None:
        self.partition = partition
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loading = True

    # -- loading -----------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the partition while loading (TransactionLogFormatError: bad)."""
        if not self.loading:
            raise IllegalStateError(f"__transaction_state-{self.partition} is already loaded")
        records.replay(self.transactions, key, value)

    def loaded(self) -> list[tuple[str, TransactionResult]]:
        """Loading is done: the markers of the transactions that were completing to write."""
        self.loading = False
        return records.markers_to_resend(self.transactions.values())

    # -- requests ----------------------------------------------------------------------------

    def check_ready(self) -> Refuse | None:
        if self.loading:
            return Refuse(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"__transaction_state-{self.partition} is loading",
            )
        return None

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def begin(self, transition: Transition) -> records.TransactionRecord:
        """Hold ``transition``'s pending state; the record to append for it."""
        if self.loading:
            raise IllegalStateError(f"__transaction_state-{self.partition} is loading")
        tid = transition.before.transactional_id
        current = self.transactions.get(tid)
        decided_from = transition.before.replace(pending_state=None)
        new_id = current is None and transition.before.producer_epoch == -1
        if not new_id and current != decided_from:
            raise IllegalStateError(f"transactional id {tid!r} changed since the decision")
        self.transactions[tid] = transition.before
        return records.record(transition.after)

    def appended(self, transition: Transition, *, ok: bool) -> TransactionMetadata | None:
        """The record of ``transition`` was written (``ok``) or not: the id's state now
        (None: it is removed, Dead)."""
        tid = transition.before.transactional_id
        current = self.transactions[tid]
        if not ok:
            self.transactions[tid] = d.abandon(current, transition)
            return self.transactions[tid]
        after = d.complete(current, transition)
        if after is None:
            del self.transactions[tid]
        else:
            self.transactions[tid] = after
        return after

    # -- timers --------------------------------------------------------------------------------

    def tick(self, *, now_ms: int, allocate_producer_id: d.AllocateProducerId) -> list[Transition]:
        """Abort the timed-out transactions and expire the idle ids: the transitions begun
        (append :func:`records.record` of each ``after``, then report :meth:`appended`)."""
        if self.loading:
            return []
        out: list[Transition] = []
        for tid in d.timed_out(self.transactions.values(), now_ms=now_ms):
            t = d.abort_timed_out(
                self.transactions[tid], now_ms=now_ms, allocate_producer_id=allocate_producer_id
            )
            if t is not None:
                self.begin(t)
                out.append(t)
        for tid in d.expired(self.transactions.values(), now_ms=now_ms, config=self.config):
            e = d.expire(self.transactions[tid], now_ms=now_ms, config=self.config)
            if e is not None:
                self.begin(e)
                out.append(e)
        return out
