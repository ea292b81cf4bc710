"""``headwater.Consumer``: Kafka's consumer API over Headwater's gRPC Fetch RPC.

A background :class:`~headwater.client.consumer.fetcher.Fetcher` keeps one long-poll
fetch in flight per broker and buffers decoded records; ``poll`` hands them
out (at most ``max_poll_records``), advancing each partition's position.
Positions start from the committed offset (the :class:`CommittedOffsets`
hook, which a consumer group will provide) or, lacking one, from
``auto_offset_reset``.

With a ``group_id``, a :class:`~headwater.client.group.classic.coordinator.ConsumerCoordinator`
joins the group on ``subscribe``/``poll``, receives this member's share of the
partitions (``assign_from_subscription``), heartbeats in the background and
provides committed offsets (the ``committed_offsets`` hook) and commits.  With
``group_protocol="consumer"`` (KIP-848) a
:class:`~headwater.client.group.consumer.coordinator.ConsumerProtocolCoordinator`
does the same with ConsumerGroupHeartbeats: the broker assigns (``group_remote_assignor``
names its assignor) and ``session_timeout_ms``, ``heartbeat_interval_ms`` (after the
first answer) and ``partition_assignment_strategy`` are the broker's business.

    with headwater.Consumer("orders", bootstrap_servers="127.0.0.1:9092",
                            auto_offset_reset="earliest") as c:
        for record in c.poll(timeout_ms=1000):
            print(record.offset, record.value)
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType

from headwater import errors, interpreter
from headwater.client.consumer import offsets
from headwater.client.consumer.fetcher import Fetcher
from headwater.client.group.classic.assignors import ASSIGNORS
from headwater.client.group.classic.coordinator import ConsumerCoordinator
from headwater.client.group.consumer.coordinator import ConsumerProtocolCoordinator
from headwater.client.group.listener import ConsumerRebalanceListener, OffsetAndMetadata
from headwater.client.group.offsets import CommitCallback
from headwater.client.settings import ConsumerSettings, parse_bootstrap
from headwater.client.subscription import (
    EARLIEST,
    CommittedOffsets,
    NoCommittedOffsets,
    SubscriptionState,
)
from headwater.client.transport import connection
from headwater.client.transport import security as client_security
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.security import ClientSecurity
from headwater.client.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndTimestamp,
    TopicPartition,
)
from headwater.clock import Clock, monotonic_ms
from headwater.records.allocator import tune_allocator
from headwater.retry import RetryPolicy

log = logging.getLogger(__name__)

_MIN_LOOKUP_MS = 1000.0
"""The least time an offset-reset lookup inside ``poll`` gets, however short the poll."""


class Consumer:
    """Reads records from assigned or subscribed partitions.

    Not thread-safe, like Kafka's consumer: use it from one thread (its
    fetcher runs on its own background thread).

    ``client_id`` is Kafka's ``client.id``: sent with every call to the brokers
    (which apply client quotas by it) and given to the group; any printable-ASCII
    string, ``headwater-consumer`` by default.
    """

    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | list[str] | tuple[str, ...] = "127.0.0.1:9092",
        group_id: str | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1024 * 1024,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        consumer_timeout_ms: float | None = None,
        default_api_timeout_ms: int = 60000,
        committed_offsets: CommittedOffsets | None = None,
        client_id: str = "headwater-consumer",
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        group_instance_id: str | None = None,
        partition_assignment_strategy: str | list[str] | tuple[str, ...] = ("range",),
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        isolation_level: str = "read_uncommitted",
        clock: Clock = monotonic_ms,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        tune_allocator()  # MiB fetch responses: see headwater.records.allocator
        interpreter.tune_switch_interval()  # background threads: see headwater.interpreter
        self.settings = ConsumerSettings(
            bootstrap_servers=parse_bootstrap(bootstrap_servers),
            group_id=group_id,
            auto_offset_reset=auto_offset_reset,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_poll_records=max_poll_records,
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            group_protocol=group_protocol,
            group_remote_assignor=group_remote_assignor,
            isolation_level=isolation_level,
            retry=RetryPolicy(
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
            ),
        )
        s = self.settings
        self.consumer_timeout_ms = consumer_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self._clock = clock
        self._channels = connection.Channels(
            client_id=client_id,
            security=security
            or client_security.from_options(
                security_protocol=security_protocol,
                ssl_cafile=ssl_cafile,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                ssl_check_hostname=ssl_check_hostname,
                sasl_mechanism=sasl_mechanism,
                sasl_plain_username=sasl_plain_username,
                sasl_plain_password=sasl_plain_password,
            ),
        )
        self._metadata = MetadataManager(
            bootstrap=s.bootstrap_servers,
            channels=self._channels,
            retry=s.retry,
            request_timeout_ms=s.request_timeout_ms,
            max_age_ms=s.metadata_max_age_ms,
            clock=clock,
        )
        self._subs = SubscriptionState(default_reset=s.auto_offset_reset)
        self._committed: CommittedOffsets = committed_offsets or NoCommittedOffsets()
        strategies = (
            (partition_assignment_strategy,)
            if isinstance(partition_assignment_strategy, str)
            else tuple(partition_assignment_strategy)
        )
        unknown = [a for a in strategies if a not in ASSIGNORS]
        if unknown or not strategies:
            raise ValueError(
                f"partition_assignment_strategy: unknown {unknown or 'empty'}; "
                f"expected some of {', '.join(ASSIGNORS)}"
            )
        if not 0 < heartbeat_interval_ms < session_timeout_ms:
            raise ValueError("need 0 < heartbeat_interval_ms < session_timeout_ms")
        if max_poll_interval_ms <= 0:
            raise ValueError("max_poll_interval_ms must be > 0")
        self._group: ConsumerCoordinator | None = None
        if group_id is not None:
            if not group_id:
                raise ValueError("group_id must not be empty")
            if s.group_protocol == "consumer":
                self._group = ConsumerProtocolCoordinator(
                    group_id=group_id,
                    client_id=client_id,
                    group_instance_id=group_instance_id,
                    heartbeat_interval_ms=heartbeat_interval_ms,
                    max_poll_interval_ms=max_poll_interval_ms,
                    remote_assignor=group_remote_assignor,
                    enable_auto_commit=enable_auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                    subscriptions=self._subs,
                    metadata=self._metadata,
                    bootstrap=s.bootstrap_servers,
                    channels=self._channels,
                    retry=s.retry,
                    request_timeout_ms=s.request_timeout_ms,
                    on_assignment=self._assignment_changed,
                    clock=clock,
                )
            else:
                self._group = ConsumerCoordinator(
                    group_id=group_id,
                    client_id=client_id,
                    group_instance_id=group_instance_id,
                    session_timeout_ms=session_timeout_ms,
                    heartbeat_interval_ms=heartbeat_interval_ms,
                    max_poll_interval_ms=max_poll_interval_ms,
                    assignors=strategies,
                    enable_auto_commit=enable_auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                    subscriptions=self._subs,
                    metadata=self._metadata,
                    bootstrap=s.bootstrap_servers,
                    channels=self._channels,
                    retry=s.retry,
                    request_timeout_ms=s.request_timeout_ms,
                    on_assignment=self._assignment_changed,
                    clock=clock,
                )
            self._group.require_stable = s.read_committed
            if committed_offsets is None:
                self._committed = self._group
        self._fetcher = Fetcher(
            settings=s,
            subscriptions=self._subs,
            metadata=self._metadata,
            channels=self._channels,
            clock=clock,
        )
        self._thread = threading.Thread(
            target=self._fetcher.run, name="headwater-consumer-fetcher", daemon=True
        )
        self._closed = False
        self._subscribed_metadata: object = None
        self._thread.start()
        if topics:
            self.subscribe(topics)

    # -- what to read ---------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group management)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        before = self._subs.assignment()
        self._subs.assign(tps)
        self._metadata.add_topics({tp.topic for tp in tps})
        self._fetcher.clear(before - set(tps))
        self._fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assignment()

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Read ``topics`` (or topics matching ``pattern``): all their partitions, or with
        a ``group_id`` this member's share, rebalanced as members come and go.

        ``pattern`` is Python ``re`` syntax and must match a whole topic name.  With
        ``group_protocol="consumer"`` the broker resolves it (Kafka 4's
        ``subscribed_topic_regex``, whose syntax there is RE2/J; Headwater's broker
        uses Python ``re``): only the pattern's text is sent, not a compiled
        pattern's flags, and internal topics match too if the pattern names them."""
        if isinstance(topics, str):
            topics = [topics]
        self._subs.subscribe(topics, pattern=pattern)
        if self._group is not None:
            if listener is not None:
                self._group.listener = listener
            self._group.request_rejoin()
        self._metadata.add_topics(self._subs.subscription())
        self._subscribed_metadata = None

    def subscription(self) -> set[str]:
        return self._subs.subscription()

    def unsubscribe(self) -> None:
        """Stop reading the subscription; a consumer-protocol member revokes its
        partitions and leaves the group."""
        if self._group is not None:
            self._group.unsubscribe()
        self._subs.unsubscribe()
        self._fetcher.clear()

    def _assignment_changed(self, before: set[TopicPartition], after: set[TopicPartition]) -> None:
        self._fetcher.clear(before - after)
        self._fetcher.wakeup()

    def _update_assignment_from_subscription(self, *, deadline_ms: float) -> None:
        if not self._subs.is_subscribed:
            return
        if self._group is not None:
            self._group.poll(deadline_ms=deadline_ms)
            return
        if self._subs.pattern is not None:
            if self._metadata.needs_update() or self._subscribed_metadata is None:
                self._metadata.fetch(None)
        else:
            self._metadata.maybe_refresh()
        meta = self._metadata.current
        if meta is self._subscribed_metadata:
            return
        self._subscribed_metadata = meta
        tps = [
            TopicPartition(topic, p.partition)
            for topic, parts in sorted(meta.partitions.items())
            if self._subs.matches(topic) and topic not in meta.internal_topics
            for p in parts
        ]
        before = self._subs.assignment()
        if set(tps) != before:
            self._subs.assign_from_subscription(tps)
            self._fetcher.clear(before - set(tps))
            self._fetcher.wakeup()

    # -- reading --------------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, *, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records that have arrived, waiting up to ``timeout_ms`` for the first ones."""
        self._check_open()
        limit = max_records or self.settings.max_poll_records
        deadline = self._clock() + timeout_ms
        while True:
            self._update_assignment_from_subscription(deadline_ms=deadline)
            self._update_positions(deadline_ms=deadline)
            recs = self._fetcher.take(limit, paused=self._subs.is_paused)
            if recs:
                return recs
            remaining = deadline - self._clock()
            if remaining <= 0:
                return []
            self._fetcher.wakeup()
            # While the group rebalances, come back soon for the answers in flight.
            slice_ms = 100.0 if self._group is not None and self._group.busy else 1000.0
            self._fetcher.wait_for_data(min(remaining, slice_ms) / 1000.0)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever, or until ``consumer_timeout_ms`` pass without one."""
        while True:
            wait = self.consumer_timeout_ms if self.consumer_timeout_ms is not None else 1000.0
            recs = self.poll(wait)
            if not recs and self.consumer_timeout_ms is not None:
                return
            yield from recs

    def _update_positions(self, *, deadline_ms: float) -> None:
        """Position partitions that have none: at the committed offset or by
        ``auto_offset_reset``.  A group's OffsetFetch unanswered by ``deadline_ms``
        stays in flight for the next call, and the partitions wait without a position."""
        missing = self._subs.missing_positions()
        if not missing:
            return
        need_reset: dict[TopicPartition, str] = {}
        no_reset = [tp for tp in missing if self._subs.pending_reset(tp) is None]
        committed: Mapping[TopicPartition, int | None] = {}
        if no_reset and self._group is not None and self._committed is self._group:
            fetched = self._group.fetch_for_poll(no_reset, deadline_ms=deadline_ms)
            if fetched is None:
                return
            committed = fetched
        elif no_reset:
            committed = self._committed.committed(no_reset)
        for tp in missing:
            pending = self._subs.pending_reset(tp)
            offset = committed.get(tp)
            if pending is None and offset is not None:
                self._subs.seek(tp, offset)
                continue
            strategy = pending or self.settings.auto_offset_reset
            if strategy == "none":
                raise errors.NoOffsetForPartitionError(
                    f"no committed offset for {tp} and auto_offset_reset='none'"
                )
            need_reset[tp] = strategy
        if need_reset:
            # Bounded by the caller's deadline too (at least _MIN_LOOKUP_MS, so that a
            # poll(0) still gets an answer): a lookup that fails in time is retried by
            # the next call, as an OffsetFetch in flight is.
            budget_ms = max(deadline_ms - self._clock(), _MIN_LOOKUP_MS)
            try:
                found = self._list_offsets(
                    {
                        tp: offsets.EARLIEST_TIMESTAMP
                        if s == EARLIEST
                        else offsets.LATEST_TIMESTAMP
                        for tp, s in need_reset.items()
                    },
                    timeout_ms=budget_ms,
                    request_timeout_ms=min(budget_ms, self.settings.request_timeout_ms),
                )
            except errors.HeadwaterError as exc:
                if not exc.retriable:
                    raise
                log.debug("offset reset lookup failed, retried next poll: %s", exc)
                return
            for tp, ot in found.items():
                if self._subs.is_assigned(tp) and self._subs.position(tp) is None:
                    self._subs.seek(tp, ot.offset if ot is not None else 0)
        self._fetcher.wakeup()

    # -- positions ------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """The next ``poll`` returns records of ``partition`` from ``offset`` on."""
        self._subs.seek(partition, offset)
        self._fetcher.clear([partition])

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        tps = list(partitions) or self._subs.assigned_list()
        self._subs.request_reset(tps, "earliest")
        self._fetcher.clear(tps)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        tps = list(partitions) or self._subs.assigned_list()
        self._subs.request_reset(tps, "latest")
        self._fetcher.clear(tps)

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record ``poll`` will return for ``partition``, looked
        up within ``timeout_ms`` (default ``default_api_timeout_ms``)."""
        deadline = self._clock() + (timeout_ms or self.default_api_timeout_ms)
        for _ in range(10_000):  # each round waits for an answer or the deadline
            pos = self._subs.position(partition)
            if pos is not None:
                return pos
            if not self._subs.is_assigned(partition):
                raise errors.HeadwaterError(f"{partition} is not assigned to this consumer")
            if self._clock() >= deadline:
                break
            self._update_positions(deadline_ms=deadline)
        raise errors.RequestTimedOutError(f"no position for {partition} in time")

    def committed(self, partition: TopicPartition, timeout_ms: float | None = None) -> int | None:
        """The group's committed offset of ``partition`` (None: nothing committed), looked
        up within ``timeout_ms`` (default ``default_api_timeout_ms``)."""
        if self._group is not None and self._committed is self._group:
            found = self._group.fetch(
                [partition], timeout_ms=timeout_ms or self.default_api_timeout_ms
            )
            om = found.get(partition)
            return om.offset if om is not None else None
        return self._committed.committed([partition]).get(partition)

    def _require_group(self) -> ConsumerCoordinator:
        if self._group is None:
            raise errors.HeadwaterError("commits need a group_id")
        return self._group

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group identity, for a transactional producer's
        ``send_offsets_to_transaction`` (Kafka's ``groupMetadata()``)."""
        group = self._require_group()
        generation, member_id = group._commit_identity()
        return ConsumerGroupMetadata(
            group.group_id, generation, member_id, getattr(group, "group_instance_id", None)
        )

    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition) and wait,
        at most ``timeout_ms`` (default ``default_api_timeout_ms``)."""
        self._check_open()
        self._require_group().commit_sync(
            _offsets(offsets), timeout_ms=timeout_ms or self.default_api_timeout_ms
        )

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit in the background; ``callback(offsets, error)`` runs in a later poll."""
        self._check_open()
        self._require_group().commit_async(_offsets(offsets), callback)

    def highwater(self, partition: TopicPartition) -> int | None:
        """The last high watermark a fetch reported for ``partition`` (None: none yet)."""
        st = self._subs.state(partition)
        return st.high_watermark if st is not None and st.high_watermark >= 0 else None

    def _list_offsets(
        self,
        query: Mapping[TopicPartition, int],
        *,
        timeout_ms: float,
        request_timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return offsets.list_offsets(
            query,
            metadata=self._metadata,
            channels=self._channels,
            retry=self.settings.retry,
            request_timeout_ms=request_timeout_ms or self.settings.request_timeout_ms,
            timeout_ms=timeout_ms,
            read_committed=self.settings.read_committed,
        )

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp (None: no such record)."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, not {ts}")
        return self._list_offsets(timestamps, timeout_ms=timeout_ms or self.default_api_timeout_ms)

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._offsets(partitions, offsets.EARLIEST_TIMESTAMP, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The high watermark of each partition (the offset the next record will get)."""
        return self._offsets(partitions, offsets.LATEST_TIMESTAMP, timeout_ms)

    def _offsets(
        self, partitions: Iterable[TopicPartition], which: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        found = self._list_offsets(
            dict.fromkeys(partitions, which),
            timeout_ms=timeout_ms or self.default_api_timeout_ms,
        )
        return {tp: (ot.offset if ot is not None else 0) for tp, ot in found.items()}

    def partitions_for_topic(self, topic: str) -> set[int]:
        parts = self._metadata.wait_for_topic(topic, timeout_ms=self.default_api_timeout_ms)
        return {p.partition for p in parts}

    # -- flow control ---------------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and returning these partitions until :meth:`resume`."""
        self._subs.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._subs.resume(partitions)
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    # -- lifecycle ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise errors.HeadwaterError("the consumer is closed")

    def close(self) -> None:
        """Stop the fetcher and close connections; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._group is not None:
                self._group.close()
        finally:
            self._fetcher.close()
        # Channels first: closing them ends a long poll the fetcher thread may be
        # making itself (an inline fetch, see fetcher.py), so the join is short.
        self._channels.close()
        self._thread.join(5.0)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
) -> dict[TopicPartition, OffsetAndMetadata] | None:
    if offsets is None:
        return None
    return {
        TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o))
        for tp, o in offsets.items()
    }
