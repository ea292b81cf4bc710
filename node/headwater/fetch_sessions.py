"""Fetch sessions (Kafka's KIP-227), the leader's side: incremental fetches name only what changed.

Shared by the Kafka door (a consumer's Fetch v7+) and the gRPC Fetch (the replica
fetchers: :mod:`headwater.replication.fetch_session` is their side).  A Fetch carries
``session_id`` and ``session_epoch``:

* epoch -1 (FINAL): a full, sessionless fetch; a session named by ``session_id`` is
  closed.  The response's session id is 0.
* epoch 0 (INITIAL): a full fetch that opens a new session holding the request's
  partitions (a session named by ``session_id`` is closed first).  The response names
  the new session id (0 when no session could be made) and every partition.
* epoch N > 0: an incremental fetch of session ``session_id``, which must exist
  (else FETCH_SESSION_ID_NOT_FOUND) and expect epoch N (else
  INVALID_FETCH_SESSION_EPOCH).  The request's partitions are added to the session or
  update it (fetch offset, max bytes), ``forgotten_topics_data`` leaves it; every
  partition of the session is read, and the response names only those with records, an
  error, or a high watermark, last stable offset or log start offset that changed since
  the session's last response.  The session then expects N + 1 (after 2**31 - 1, 1).

A session belongs to the ``replica_id`` that opened it (-1 for consumers): to any other
it does not exist (FETCH_SESSION_ID_NOT_FOUND), and their epoch 0 or -1 does not close
it.  A refused request changes nothing.

Pure bookkeeping: :meth:`FetchSessionCache.begin` turns a request into the partitions to
read and a :class:`Session` (or an error); :meth:`Session.keep` decides which results a
response carries and remembers what it sent.  At most ``max_sessions`` are kept; a new
session evicts the least recently used one (Kafka's
``max.incremental.fetch.session.cache.slots``, 1000).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from headwater.errors import ErrorCode
from headwater.values import TopicPartition

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
DEFAULT_MAX_SESSIONS = 1000
MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: int32, wrapping to 1 (0 and -1 are not incremental)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclasses.dataclass(slots=True)
class PartitionState:
    """What the session knows of a partition: the client's position and what it was told."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Wanted:
    """One partition of a Fetch request."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


@dataclasses.dataclass(slots=True)
class Session:
    """An open fetch session (or a sessionless fetch when ``session_id`` is 0).

    Invariant: ``partitions`` keeps the request order of first appearance, which is the
    order a full response lists them in.
    """

    session_id: int
    epoch: int
    partitions: OrderedDict[TopicPartition, PartitionState]
    incremental: bool = False
    replica_id: int = -1

    def to_read(self) -> list[Wanted]:
        return [
            Wanted(tp, s.fetch_offset, s.max_bytes, s.current_leader_epoch)
            for tp, s in self.partitions.items()
        ]

    def keep(
        self,
        tp: TopicPartition,
        *,
        error: ErrorCode,
        has_records: bool,
        hw: int,
        log_start: int,
        last_stable: int = -1,
    ) -> bool:
        """True when the response carries this partition; remembers what it tells."""
        state = self.partitions.get(tp)
        if state is None:
            return True
        changed = (
            hw != state.high_watermark
            or log_start != state.log_start_offset
            or last_stable != state.last_stable_offset
        )
        state.high_watermark, state.log_start_offset = hw, log_start
        state.last_stable_offset = last_stable
        return not self.incremental or has_records or error is not ErrorCode.NONE or changed


class FetchSessionError(Exception):
    """The request names a session that cannot serve it: ``code`` is Kafka's error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class FetchSessionCache:
    """The open sessions of one listener (event-loop only)."""

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS, first_id: int = 1) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[int, Session] = OrderedDict()
        self._ids = itertools.count(first_id)

    def __len__(self) -> int:
        return len(self._sessions)

    def begin(
        self,
        *,
        session_id: int,
        epoch: int,
        wanted: Sequence[Wanted],
        forgotten: Iterable[TopicPartition],
        replica_id: int = -1,
    ) -> Session:
        """The session this request of ``replica_id`` runs in; raises
        :class:`FetchSessionError` (and then changes nothing)."""
        if epoch < FINAL_EPOCH:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH, f"no fetch session epoch {epoch}"
            )
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            closing = self._sessions.get(session_id) if session_id else None
            if closing is not None and closing.replica_id == replica_id:
                del self._sessions[session_id]
            partitions = OrderedDict(
                (w.tp, PartitionState(w.fetch_offset, w.max_bytes, w.current_leader_epoch))
                for w in wanted
            )
            if epoch == FINAL_EPOCH or self._max <= 0:
                return Session(0, FINAL_EPOCH, partitions, replica_id=replica_id)
            while len(self._sessions) >= self._max:
                self._sessions.popitem(last=False)
            session = Session(self._new_id(), 1, partitions, replica_id=replica_id)
            self._sessions[session.session_id] = session
            return session
        found = self._sessions.get(session_id)
        if found is None or found.replica_id != replica_id:
            raise FetchSessionError(
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id}"
            )
        session = found
        if epoch != session.epoch:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {session.epoch}, not {epoch}",
            )
        self._sessions.move_to_end(session_id)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for w in wanted:
            state = session.partitions.get(w.tp)
            if state is None:
                session.partitions[w.tp] = PartitionState(
                    w.fetch_offset, w.max_bytes, w.current_leader_epoch
                )
            else:
                state.fetch_offset = w.fetch_offset
                state.max_bytes = w.max_bytes
                state.current_leader_epoch = w.current_leader_epoch
        session.epoch = next_epoch(session.epoch)
        session.incremental = True
        return session

    def _new_id(self) -> int:
        while True:
            candidate = next(self._ids) & 0x7FFFFFFF
            if candidate and candidate not in self._sessions:
                return candidate
