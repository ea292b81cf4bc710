"""``headwater.Admin.describe_log_dirs``: Kafka's ``Admin.describeLogDirs``.

Each broker describes only its own log dirs, so the Admin asks every broker
wanted (default: every live broker, from DescribeCluster) in parallel, as
Kafka's admin client sends one DescribeLogDirs per broker.  The answer is
Kafka's: broker id -> log dir path -> :class:`LogDirDescription` (the dir's
error, its replicas' sizes in bytes and offset lags, the disk's total and
usable bytes).

Refusals: a broker id that is not alive raises ``BrokerNotAvailableError``
before anything is asked; an illegal topic name in ``topics`` is the
brokers' INVALID_TOPIC_EXCEPTION; without DESCRIBE on the CLUSTER,
CLUSTER_AUTHORIZATION_FAILED.  :meth:`LogDirsAdmin.describe_log_dirs_each`
returns each broker's error instead of raising (an older broker without the
RPC answers ``UnsupportedVersionError``), which the rebalance planner uses
to fall back to estimates for those brokers.

The Admin delegates to it.  Thread-safe as
the Admin is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from headwater import errors
from headwater.client.admin.core import AdminCore
from headwater.client.admin.values import LogDirDescription, LogDirs, ReplicaInfo
from headwater.client.transport import connection
from headwater.client.types import TopicPartition
from headwater.v1 import admin_pb2

MAX_PARALLEL_BROKERS = 8


class LogDirsAdmin:
    """``describe_log_dirs`` of :class:`~headwater.client.admin.client.Admin`, over its core."""

    def __init__(self, core: AdminCore) -> None:
        self._core = core

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Sequence[int]] | Iterable[str] | None = None,
    ) -> dict[int, LogDirs]:
        """Every log dir of each of ``brokers`` (None: every live broker), by broker id.

        ``topics`` narrows the replicas described: topic names (all their
        partitions) or topic -> partitions.  Raises the first broker's error.
        """
        out: dict[int, LogDirs] = {}
        for broker, answer in self.describe_log_dirs_each(brokers, topics=topics).items():
            if isinstance(answer, errors.HeadwaterError):
                raise answer
            out[broker] = answer
        return out

    def describe_log_dirs_each(
        self,
        brokers: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Sequence[int]] | Iterable[str] | None = None,
    ) -> dict[int, LogDirs | errors.HeadwaterError]:
        """As :meth:`describe_log_dirs`, but each broker's error is returned, not raised.

        An unknown broker id still raises ``BrokerNotAvailableError`` at once.
        """
        live = {b.broker_id: b.address for b in self._core.describe_cluster().brokers}
        wanted = sorted(live) if brokers is None else sorted(set(brokers))
        unknown = [b for b in wanted if b not in live]
        if unknown:
            raise errors.BrokerNotAvailableError(
                f"broker(s) {','.join(map(str, unknown))} are not alive"
                f" (live brokers: {','.join(map(str, sorted(live))) or 'none'})"
            )
        request = admin_pb2.DescribeLogDirsRequest(topics=_topics_to_proto(topics))
        if not wanted:
            return {}

        def ask(broker: int) -> LogDirs | errors.HeadwaterError:
            try:
                return self._describe_one(broker, live[broker], request)
            except errors.HeadwaterError as exc:
                return exc

        with ThreadPoolExecutor(
            max_workers=min(MAX_PARALLEL_BROKERS, len(wanted)), thread_name_prefix="log-dirs"
        ) as pool:
            return dict(zip(wanted, pool.map(ask, wanted), strict=True))

    def _describe_one(
        self, broker: int, address: str, request: admin_pb2.DescribeLogDirsRequest
    ) -> LogDirs:
        resp: admin_pb2.DescribeLogDirsResponse = self._core.retry.call(
            lambda: connection.call(
                self._core.channels.admin(address).DescribeLogDirs,
                request,
                address=address,
                timeout_ms=self._core.request_timeout_ms,
            ),
            timeout_ms=self._core.default_api_timeout_ms,
        )
        if resp.error:
            raise errors.for_code(
                resp.error, resp.error_message or f"describing the log dirs of broker {broker}"
            )
        return {r.log_dir: _from_proto(r) for r in resp.results}


def _topics_to_proto(
    topics: Mapping[str, Sequence[int]] | Iterable[str] | None,
) -> list[admin_pb2.DescribableLogDirTopic]:
    if topics is None:
        return []
    if isinstance(topics, str):
        topics = [topics]
    if isinstance(topics, Mapping):
        return [
            admin_pb2.DescribableLogDirTopic(topic=t, partitions=list(ps))
            for t, ps in topics.items()
        ]
    return [admin_pb2.DescribableLogDirTopic(topic=t) for t in topics]


def _from_proto(r: admin_pb2.DescribeLogDirsResult) -> LogDirDescription:
    return LogDirDescription(
        error=errors.for_code(r.error, f"log dir {r.log_dir}") if r.error else None,
        replica_infos={
            TopicPartition(t.name, p.partition_index): ReplicaInfo(
                p.partition_size, p.offset_lag, p.is_future_key
            )
            for t in r.topics
            for p in t.partitions
        },
        total_bytes=r.total_bytes,
        usable_bytes=r.usable_bytes,
    )
