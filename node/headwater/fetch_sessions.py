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
  (else FETCH_SESSION_ID_NOT_FOUND), expect epoch N (else INVALID_FETCH_SESSION_EPOCH)
  and name partitions the way the request that opened it did (else
  FETCH_SESSION_TOPIC_ID_ERROR: Fetch v13+ names topics by id, older versions by name).
  The request's partitions are added to the session or update it (fetch offset, max
  bytes), ``forgotten_topics_data`` leaves it; every partition of the session is read,
  and the response names only those with records, an error, or a high watermark, last
  stable offset or log start offset that changed since the session's last response.
  The session then expects N + 1 (after 2**31 - 1, 1).

A session opened by Fetch v13+ (:meth:`FetchSessionCache.begin_by_id`) holds its
partitions by topic id and partition, as Kafka's does: an id that names no topic stays
in the session, answered UNKNOWN_TOPIC_ID on every response until the client forgets
it, and is looked up again on each request (a topic created since gets read).  Those
whose id names a topic are also held by name (``partitions``), the name the broker
reads and answers by.

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
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol

from headwater.errors import ErrorCode
from headwater.values import TopicPartition

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
DEFAULT_MAX_SESSIONS = 1000
MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: int32, wrapping to 1 (0 and -1 are not incremental)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class TopicIdPartition(NamedTuple):
    """A partition named by its topic's id, as Fetch v13+ names partitions."""

    topic_id: uuid.UUID
    partition: int


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


@dataclasses.dataclass(frozen=True, slots=True)
class WantedById:
    """One partition of a Fetch v13+ request, named by its topic's id."""

    key: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


class FetchOutcome(Protocol):
    """What :meth:`Session.keep` reads of a partition's fetch result (the broker's
    ``FetchResult``)."""

    @property
    def topic_partition(self) -> TopicPartition: ...
    @property
    def error(self) -> ErrorCode: ...
    @property
    def records(self) -> bytes: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...


def _state(w: Wanted | WantedById) -> PartitionState:
    return PartitionState(w.fetch_offset, w.max_bytes, w.current_leader_epoch)


@dataclasses.dataclass(slots=True)
class Session:
    """An open fetch session (or a sessionless fetch when ``session_id`` is 0).

    Invariants: ``partitions`` keeps the order of first appearance, which is the order a
    full response lists them in.  A session by id (``by_id`` not None) holds every
    partition in ``by_id``; each key is either in ``names`` (its id names a topic, and
    ``partitions[names[key]]`` is the same state) or in ``unknown`` (no topic has it).
    """

    session_id: int
    epoch: int
    partitions: OrderedDict[TopicPartition, PartitionState]
    incremental: bool = False
    replica_id: int = -1
    by_id: OrderedDict[TopicIdPartition, PartitionState] | None = None
    """Fetch v13+ sessions: every partition by topic id; None for sessions by name."""
    names: dict[TopicIdPartition, TopicPartition] = dataclasses.field(default_factory=dict)
    unknown: dict[TopicIdPartition, None] = dataclasses.field(default_factory=dict)
    """The keys of ``by_id`` whose id names no topic, in order of first appearance."""

    @property
    def uses_topic_ids(self) -> bool:
        return self.by_id is not None

    def to_read(self) -> list[Wanted]:
        return [
            Wanted(tp, s.fetch_offset, s.max_bytes, s.current_leader_epoch)
            for tp, s in self.partitions.items()
        ]

    def unknown_topic_ids(self) -> list[TopicIdPartition]:
        """The partitions whose topic id names no topic: each is answered UNKNOWN_TOPIC_ID."""
        return list(self.unknown)

    def keep(self, result: FetchOutcome) -> bool:
        """True when the response carries this partition's ``result``; remembers what it
        tells."""
        state = self.partitions.get(result.topic_partition)
        if state is None:
            return True
        hw, log_start = result.high_watermark, result.log_start_offset
        last_stable = result.last_stable_offset
        changed = (
            hw != state.high_watermark
            or log_start != state.log_start_offset
            or last_stable != state.last_stable_offset
        )
        state.high_watermark, state.log_start_offset = hw, log_start
        state.last_stable_offset = last_stable
        return (
            not self.incremental
            or bool(result.records)
            or result.error is not ErrorCode.NONE
            or changed
        )

    def _want_by_id(self, w: WantedById, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        assert self.by_id is not None
        state = self.by_id.get(w.key)
        if state is not None:
            state.fetch_offset = w.fetch_offset
            state.max_bytes = w.max_bytes
            state.current_leader_epoch = w.current_leader_epoch
            return
        self.by_id[w.key] = _state(w)
        self.unknown[w.key] = None
        self._resolve(w.key, topic_name)

    def _forget_by_id(self, key: TopicIdPartition) -> None:
        assert self.by_id is not None
        self.by_id.pop(key, None)
        self.unknown.pop(key, None)
        tp = self.names.pop(key, None)
        if tp is not None:
            self.partitions.pop(tp, None)

    def _resolve(
        self, key: TopicIdPartition, topic_name: Callable[[uuid.UUID], str | None]
    ) -> None:
        """Name ``key`` (in ``unknown``) if its id now names a topic."""
        assert self.by_id is not None
        name = topic_name(key.topic_id)
        if name is None:
            return
        tp = self.names[key] = TopicPartition(name, key.partition)
        self.partitions[tp] = self.by_id[key]
        del self.unknown[key]

    def _resolve_unknown(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        for key in list(self.unknown):
            self._resolve(key, topic_name)


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
        """The session this request of ``replica_id`` (partitions named by topic name)
        runs in; raises :class:`FetchSessionError` (and then changes nothing)."""
        session = self._incremental(session_id, epoch, replica_id, by_id=False)
        if session is None:
            return self._full(
                epoch, OrderedDict((w.tp, _state(w)) for w in wanted), replica_id=replica_id
            )
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for w in wanted:
            state = session.partitions.get(w.tp)
            if state is None:
                session.partitions[w.tp] = _state(w)
            else:
                state.fetch_offset = w.fetch_offset
                state.max_bytes = w.max_bytes
                state.current_leader_epoch = w.current_leader_epoch
        return session

    def begin_by_id(
        self,
        *,
        session_id: int,
        epoch: int,
        wanted: Sequence[WantedById],
        forgotten: Iterable[TopicIdPartition],
        topic_name: Callable[[uuid.UUID], str | None],
    ) -> Session:
        """The session a consumer's Fetch v13+ (partitions named by topic id) runs in;
        ``topic_name``: the topic an id names now, None for none.  Raises
        :class:`FetchSessionError` (and then changes nothing)."""
        session = self._incremental(session_id, epoch, -1, by_id=True)
        if session is None:
            session = self._full(epoch, OrderedDict(), replica_id=-1, by_id=OrderedDict())
        else:
            for key in forgotten:
                session._forget_by_id(key)
            session._resolve_unknown(topic_name)
        for w in wanted:
            session._want_by_id(w, topic_name)
        return session

    def _incremental(
        self, session_id: int, epoch: int, replica_id: int, *, by_id: bool
    ) -> Session | None:
        """The open session an incremental request (epoch > 0) continues, its epoch moved
        on; None for a full request (epoch 0 or -1), after closing the session it names."""
        if epoch < FINAL_EPOCH:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH, f"no fetch session epoch {epoch}"
            )
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            closing = self._sessions.get(session_id) if session_id else None
            if closing is not None and closing.replica_id == replica_id:
                del self._sessions[session_id]
            return None
        found = self._sessions.get(session_id)
        if found is None or found.replica_id != replica_id:
            raise FetchSessionError(
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id}"
            )
        if epoch != found.epoch:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {found.epoch}, not {epoch}",
            )
        if found.uses_topic_ids != by_id:
            raise FetchSessionError(
                ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
                f"fetch session {session_id} names topics "
                + ("by id (Fetch v13+)" if found.uses_topic_ids else "by name (Fetch v12-)"),
            )
        self._sessions.move_to_end(session_id)
        found.epoch = next_epoch(found.epoch)
        found.incremental = True
        return found

    def _full(
        self,
        epoch: int,
        partitions: OrderedDict[TopicPartition, PartitionState],
        *,
        replica_id: int,
        by_id: OrderedDict[TopicIdPartition, PartitionState] | None = None,
    ) -> Session:
        """A full request's session: a new one for epoch 0 (if one can be kept), else
        sessionless (id 0)."""
        if epoch == FINAL_EPOCH or self._max <= 0:
            return Session(0, FINAL_EPOCH, partitions, replica_id=replica_id, by_id=by_id)
        while len(self._sessions) >= self._max:
            self._sessions.popitem(last=False)
        session = Session(self._new_id(), 1, partitions, replica_id=replica_id, by_id=by_id)
        self._sessions[session.session_id] = session
        return session

    def _new_id(self) -> int:
        while True:
            candidate = next(self._ids) & 0x7FFFFFFF
            if candidate and candidate not in self._sessions:
                return candidate
