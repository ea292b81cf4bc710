"""Driver side: what the cluster holds, and the batch and streaming plans built on it.

:class:`ClusterView` is the driver's only I/O: topic metadata, ListOffsets and
(for ``groupId``) offset commits, through the client's metadata and offsets
modules.  :func:`plan_batch` and :class:`StreamPlanner` combine it with the
pure steps of :mod:`headwater_spark.planning`; they take any object with the
:class:`View` methods, so unit tests drive them with an in-memory fake.

The Spark classes in :mod:`headwater_spark.source` only delegate here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from headwater import errors
from headwater.client.consumer import offsets
from headwater.client.retry import RetryPolicy
from headwater.client.settings import parse_bootstrap
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.security import PLAINTEXT, ClientSecurity
from headwater.client.types import TopicPartition

from headwater_spark import planning
from headwater_spark.options import EARLIEST, LATEST, OptionError, ReadOptions, Subscription
from headwater_spark.planning import OffsetRange, PartitionOffsets

log = logging.getLogger(__name__)

_TIMEOUT_MS = 60000


class View(Protocol):
    """What planning needs to know of the cluster."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]: ...

    def lookup(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...

    def commit(self, group_id: str, positions: Mapping[TopicPartition, int]) -> None: ...


class ClusterView:
    """The driver's connection to the cluster; thread-safe, closed with :meth:`close`."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        timeout_ms: int = _TIMEOUT_MS,
        security: ClientSecurity = PLAINTEXT,
        read_committed: bool = False,
        client_id: str = "",
    ) -> None:
        """``client_id``: the driver's ``client.id``
        (:func:`headwater_spark.options.client_ids`)."""
        self._read_committed = read_committed
        """The latest offset is the last stable offset, not the high watermark."""
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._timeout_ms = timeout_ms
        self._retry = RetryPolicy()
        self._channels = connection.Channels(security=security, client_id=client_id)
        self._metadata = MetadataManager(
            bootstrap=self._bootstrap,
            channels=self._channels,
            retry=self._retry,
            request_timeout_ms=30000,
        )

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The subscribed partitions that exist now (unknown topics have none)."""
        if subscription.kind == "assign":
            return list(subscription.partitions)

        def attempt() -> list[TopicPartition]:
            if subscription.kind == "subscribe":
                snap = self._metadata.fetch(sorted(subscription.topics))
                for topic, code in snap.topic_errors.items():
                    err = errors.for_code(code, f"topic {topic!r}")
                    if err.retriable and not isinstance(err, errors.UnknownTopicOrPartitionError):
                        raise err
            else:
                snap = self._metadata.fetch(None)
            pattern = re.compile(subscription.pattern) if subscription.pattern else None
            return [
                TopicPartition(topic, p.partition)
                for topic, parts in sorted(snap.partitions.items())
                if topic not in snap.internal_topics
                and (
                    topic in subscription.topics
                    if pattern is None
                    else pattern.fullmatch(topic) is not None
                )
                for p in parts
            ]

        return self._retry.call(
            attempt,
            timeout_ms=self._timeout_ms,
            on_retry=lambda _e: self._metadata.request_update(),
        )

    def lookup(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        found = offsets.list_offsets(
            query,
            metadata=self._metadata,
            channels=self._channels,
            retry=self._retry,
            request_timeout_ms=30000,
            timeout_ms=self._timeout_ms,
            read_committed=self._read_committed,
        )
        return {tp: (ot.offset if ot is not None else None) for tp, ot in found.items()}

    def commit(self, group_id: str, positions: Mapping[TopicPartition, int]) -> None:
        """Commit ``{tp: next offset}`` to ``group_id`` from outside the group.

        Kafka's "commit from outside the group" (generation -1, no member id),
        what ``AdminClient.alterConsumerGroupOffsets`` sends: the driver needs no
        membership or heartbeat.  The checkpoint stays the source of truth for
        restarts; the group offsets are for ``headwater groups describe`` and lag.
        """
        from headwater.client.group.admin import GroupAdmin
        from headwater.client.group.listener import OffsetAndMetadata

        GroupAdmin(
            channels=self._channels,
            metadata=self._metadata,
            retry=self._retry,
            bootstrap=tuple(self._bootstrap),
            request_timeout_ms=30000,
            default_api_timeout_ms=int(self._timeout_ms),
        ).alter_consumer_group_offsets(
            group_id, {tp: OffsetAndMetadata(off, "spark") for tp, off in positions.items()}
        )

    def close(self) -> None:
        self._channels.close()


def _earliest(view: View, tps: Iterable[TopicPartition]) -> PartitionOffsets:
    found = view.lookup(dict.fromkeys(tps, EARLIEST))
    return {tp: (off if off is not None and off >= 0 else 0) for tp, off in found.items()}


def _latest(view: View, tps: Iterable[TopicPartition]) -> PartitionOffsets:
    found = view.lookup(dict.fromkeys(tps, LATEST))
    return {tp: (off if off is not None and off >= 0 else 0) for tp, off in found.items()}


def plan_batch(opts: ReadOptions, view: View) -> list[OffsetRange]:
    """The ranges of a batch read: resolved start and end, checked, then split."""
    tps = view.partitions(opts.subscription)
    if not tps:
        return []
    start = planning.resolve_bound(
        opts.starting,
        tps,
        lookup=view.lookup,
        starting=True,
        strategy=opts.timestamp_strategy,
    )
    end = planning.resolve_bound(opts.ending, tps, lookup=view.lookup, starting=False)
    for tp in tps:
        if start[tp] > end[tp]:
            raise OptionError(
                f"the starting offset {start[tp]} of {tp} is after its ending offset {end[tp]} "
                f"(options {opts.starting.option!r} and {opts.ending.option!r})"
            )
    earliest = _earliest(view, tps)
    ranges = planning.plan_ranges(
        start, end, earliest=earliest, fail_on_data_loss=opts.fail_on_data_loss
    )
    return planning.split_ranges(
        ranges,
        min_partitions=opts.min_partitions,
        max_records_per_partition=opts.max_records_per_partition,
    )


class StreamPlanner:
    """Offsets of a streaming read, micro-batch by micro-batch (driver only).

    Offsets are ``{tp: next offset to read}``; :mod:`headwater_spark.source`
    converts them to and from the checkpointed JSON form.
    """

    def __init__(self, opts: ReadOptions, view: View) -> None:
        self.opts = opts
        self.view = view
        self._available_now: PartitionOffsets | None = None
        self._last_committed: dict[TopicPartition, int] = {}

    def initial_offset(self) -> PartitionOffsets:
        """Where a new query starts (``startingOffsets``, default latest)."""
        tps = self.view.partitions(self.opts.subscription)
        return planning.resolve_bound(
            self.opts.starting,
            tps,
            lookup=self.view.lookup,
            starting=True,
            strategy=self.opts.timestamp_strategy,
        )

    def _latest_known(self, start: Mapping[TopicPartition, int]) -> PartitionOffsets:
        if self._available_now is not None:
            return dict(self._available_now)
        tps = self.view.partitions(self.opts.subscription)
        return _latest(self.view, tps)

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: never read past what exists at this moment."""
        tps = self.view.partitions(self.opts.subscription)
        self._available_now = _latest(self.view, tps)

    def latest_offset(
        self, start: Mapping[TopicPartition, int], max_records: int | None
    ) -> PartitionOffsets:
        """The end of the next micro-batch: the latest offsets, capped at ``max_records``.

        Spark runs micro-batches one after another and asks for the next end
        only once the batch ending at ``start`` has completed (a batch planned but
        not completed before a restart is re-run first, without this call), so
        ``start`` is processed: commit it for ``groupId``.  Spark's own
        ``commit(end)`` comes only when a later batch is planned, which never
        happens after the last batch of an ``availableNow`` run or while no new
        data arrives, and lag monitoring would show the job a batch behind.
        """
        self.commit(start)
        latest = self._latest_known(start)
        # Partitions the query had that are gone keep their offsets: partitions()
        # reports the loss once, when it plans the batch.
        if max_records is None:
            return latest
        new = [tp for tp in latest if tp not in start]
        new_from = _earliest(self.view, new) if new else {}
        return planning.rate_limit(max_records, start, latest, new_from=new_from)

    def latest_report(self) -> PartitionOffsets:
        tps = self.view.partitions(self.opts.subscription)
        return _latest(self.view, tps)

    def partitions(
        self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
    ) -> list[OffsetRange]:
        """The ranges of the micro-batch ``[start, end)``; new partitions from earliest."""
        if dict(start) == dict(end):
            return []
        earliest = _earliest(self.view, set(start) | set(end))
        ranges = planning.plan_ranges(
            start,
            end,
            earliest=earliest,
            fail_on_data_loss=self.opts.fail_on_data_loss,
            new_partitions_from_earliest=True,
        )
        return planning.split_ranges(
            ranges,
            min_partitions=self.opts.min_partitions,
            max_records_per_partition=self.opts.max_records_per_partition,
        )

    def commit(self, end: Mapping[TopicPartition, int]) -> None:
        """After a micro-batch: commit its end offsets to ``groupId`` (if given).

        A transient failure (a retriable error that outlasted the retries: no
        coordinator, a timeout) is logged and the offsets are committed again
        after the next batch; the query's progress is in Spark's checkpoint, so
        only lag monitoring lags.  A refusal by the group (any other error, such
        as UNKNOWN_MEMBER_ID while the group has active members, classic or
        consumer protocol) would recur at every batch and leave the group's
        offsets silently stale, so it raises :class:`GroupCommitError` and
        stops the query.
        """
        group_id = self.opts.group_id
        if group_id is None or not end or dict(end) == self._last_committed:
            return
        try:
            self.view.commit(group_id, end)
        except errors.HeadwaterError as exc:
            if not exc.retriable:
                raise GroupCommitError(group_id, exc) from exc
            log.warning("committing offsets for group %r failed: %s", group_id, exc)
            return
        self._last_committed = dict(end)


class GroupCommitError(RuntimeError):
    """The group of option ``groupId`` refused the query's offsets (not transient).

    ``error`` is Kafka's error; the message names the group and the error code.
    """

    def __init__(self, group_id: str, error: errors.HeadwaterError) -> None:
        hint = (
            " (Kafka takes commits from outside a group, what groupId sends, only while the"
            " group has no members: stop its consumers or give the query a groupId of its own)"
            if error.code is errors.ErrorCode.UNKNOWN_MEMBER_ID
            else ""
        )
        super().__init__(
            f"the offsets of this query could not be committed to groupId {group_id!r}:"
            f" {error}{hint}"
        )
        self.group_id = group_id
        self.error = error
