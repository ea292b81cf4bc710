"""A follower's fetch session with one leader (Kafka's ``FetchSessionHandler``, KIP-227).

The replica fetcher (:mod:`headwater.server.runtime.fetcher`) asks
:class:`FollowerFetchSession` what to send, and tells it how the leader answered; the
leader's side is :mod:`headwater.fetch_sessions`.  Nothing here does I/O.

States (``session_id``, ``epoch``)::

    NONE     (0, 0)    the next fetch is full and opens a session
    CLOSING  (s, 0)    the next fetch is full, closes session s and opens a new one
    OPEN     (s, N>0)  the next fetch is incremental: session s, epoch N

Transitions, for the fetch :meth:`FollowerFetchSession.build` planned:

=================================  ==========================  ==========================
answer                             from NONE / CLOSING (full)  from OPEN (incremental)
=================================  ==========================  ==========================
NONE, session id s > 0             OPEN (s, 1)                 OPEN (s, N + 1) if s is the
                                                               session, else NONE
NONE, session id 0 (sessionless)   NONE                        NONE
FETCH_SESSION_ID_NOT_FOUND         NONE                        NONE
INVALID_FETCH_SESSION_EPOCH        CLOSING (s)                 CLOSING (s)
any other error, or no answer      CLOSING (s) or NONE         CLOSING (s)
(:meth:`on_failure`)
=================================  ==========================  ==========================

Invariants:

* an incremental fetch lists exactly the partitions that are new or whose
  :class:`PartitionFetch` differs from what the leader's session holds (``sent``), and
  forgets exactly those it holds that the fetcher no longer wants; so after an answer the
  leader's session holds what the fetcher wanted;
* ``sent`` is only trusted in OPEN: any doubt (an error, a fetch cancelled or lost in
  flight, whose answer may or may not have moved the leader's epoch) returns to a full
  fetch, which replaces the leader's session whole.

Thread/task model: used from the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.values import TopicPartition

INITIAL_EPOCH = 0
MAX_EPOCH = 0x7FFFFFFF


class PartitionFetch(NamedTuple):
    """What a follower asks of one partition (the fields of a ``FetchPartition``)."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int


class FetchPlan(NamedTuple):
    """One fetch to send: ``partitions`` to list, ``forgotten`` to drop from the session.

    ``wanted`` is every partition the fetcher wants (the session after the answer).
    """

    session_id: int
    epoch: int
    partitions: Mapping[TopicPartition, PartitionFetch]
    forgotten: tuple[TopicPartition, ...]
    wanted: Mapping[TopicPartition, PartitionFetch]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FollowerFetchSession:
    """The session state of one fetcher (see the module docstring for the table)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, PartitionFetch] = {}

    @property
    def is_open(self) -> bool:
        return self.epoch > INITIAL_EPOCH

    def build(self, wanted: Mapping[TopicPartition, PartitionFetch]) -> FetchPlan:
        """The next fetch for ``wanted``: full unless a session is open."""
        wanted = dict(wanted)
        if not self.is_open:
            return FetchPlan(self.session_id, INITIAL_EPOCH, wanted, (), wanted)
        sent = self.sent
        listed = {tp: f for tp, f in wanted.items() if sent.get(tp) != f}
        forgotten = tuple(tp for tp in sent if tp not in wanted)
        return FetchPlan(self.session_id, self.epoch, listed, forgotten, wanted)

    def on_response(self, plan: FetchPlan, *, error: ErrorCode, session_id: int) -> None:
        """The leader answered ``plan`` with the top-level ``error`` and ``session_id``."""
        if error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._reset(0)
        elif error is not ErrorCode.NONE:  # INVALID_FETCH_SESSION_EPOCH, or anything else
            self._reset(plan.session_id)
        elif session_id == 0 or (not plan.full and session_id != plan.session_id):
            self._reset(0)
        else:
            self.session_id = session_id
            self.epoch = 1 if plan.full or plan.epoch >= MAX_EPOCH else plan.epoch + 1
            self.sent = dict(plan.wanted)

    def on_failure(self) -> None:
        """A fetch got no answer (a transport failure, or cancelled in flight): the leader
        may or may not have moved the session, so the next fetch is full."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self.sent = {}
