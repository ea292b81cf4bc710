"""Kafka's DescribeLogDirs on one broker: each log dir, its partitions' sizes, its disk space.

As Kafka's ``ReplicaManager.describeLogDirs``: a partition's size is its log's
size (the sum of its segment files' sizes, which each :class:`~headwater.storage.Log`
keeps in memory: no record is read and no file is opened), its offset lag is
``max(high watermark - log end offset, 0)`` (0 for every current replica; Kafka
uses the field for future replicas, which Headwater does not have, so
``is_future_key`` is always false).  A dir that cannot be read answers
KAFKA_STORAGE_ERROR with no partitions, as Kafka answers for an offline dir.

The filter is Kafka's: None describes every partition; otherwise only the
listed topics, each with its listed partitions (an empty tuple: all of the
topic's partitions here).  Topics or partitions this broker does not host are
simply absent, as in Kafka.  Names are checked first: an illegal topic name
raises InvalidTopicError and nothing is described.

Pure apart from reading the logs' in-memory sizes and ``shutil.disk_usage``;
any thread may call it (the log manager and each log take their own locks).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from headwater.coordination.names import validate_topic_name
from headwater.errors import ErrorCode, KafkaStorageError
from headwater.server.convert import pb_error
from headwater.storage import LogManager
from headwater.storage.values import parse_topic_partition
from headwater.v1 import admin_pb2
from headwater.values import TopicPartition

UNKNOWN_BYTES = -1
"""Kafka's ``DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES``."""


@dataclasses.dataclass(frozen=True)
class ReplicaInfo:
    """One partition's replica in a log dir (Kafka's ``ReplicaInfo``)."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclasses.dataclass(frozen=True)
class LogDirInfo:
    """One log dir (Kafka's ``LogDirDescription``): its error, replicas and disk space."""

    path: str
    error: ErrorCode
    replicas: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int = UNKNOWN_BYTES
    usable_bytes: int = UNKNOWN_BYTES


Filter = Mapping[str, Sequence[int]] | None
"""Topic -> partitions (empty: every partition of the topic); None: everything."""


def check_filter(wanted: Filter) -> None:
    """Raise InvalidTopicError (Kafka's INVALID_TOPIC_EXCEPTION) for an illegal topic name."""
    for topic in wanted or {}:
        validate_topic_name(topic)


def _selected(tp: TopicPartition, wanted: Filter) -> bool:
    if wanted is None:
        return True
    partitions = wanted.get(tp.topic)
    if partitions is None:
        return False
    return not partitions or tp.partition in partitions


def describe_log_dirs(log_manager: LogManager, wanted: Filter = None) -> list[LogDirInfo]:
    """Every log dir of ``log_manager`` in ``log.dirs`` order, with the selected replicas."""
    check_filter(wanted)
    by_dir: dict[Path, dict[TopicPartition, ReplicaInfo]] = {d: {} for d in log_manager.log_dirs}
    for log in log_manager.logs():
        try:
            tp = parse_topic_partition(log.dir.name)
        except ValueError:
            continue
        if not _selected(tp, wanted):
            continue
        directory = log_manager.log_dir_of(tp.topic, tp.partition)
        if directory is None:
            continue  # deleted meanwhile
        try:
            info = ReplicaInfo(
                size=log.size_in_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
            )
        except KafkaStorageError:
            continue  # closed or deleted meanwhile
        by_dir.setdefault(directory, {})[tp] = info
    out = []
    for directory, replicas in by_dir.items():
        try:
            if not directory.is_dir():
                raise OSError(f"{directory} is not a directory")
            usage = shutil.disk_usage(directory)
        except OSError:
            out.append(LogDirInfo(str(directory.absolute()), ErrorCode.KAFKA_STORAGE_ERROR, {}))
            continue
        out.append(
            LogDirInfo(
                str(directory.absolute()),
                ErrorCode.NONE,
                dict(sorted(replicas.items())),
                total_bytes=usage.total,
                usable_bytes=usage.free,
            )
        )
    return out


def to_proto(d: LogDirInfo) -> admin_pb2.DescribeLogDirsResult:
    """Kafka's ``DescribeLogDirsResult``: the replicas grouped by topic."""
    topics: dict[str, list[admin_pb2.DescribeLogDirsPartition]] = {}
    for tp, replica in d.replicas.items():
        topics.setdefault(tp.topic, []).append(
            admin_pb2.DescribeLogDirsPartition(
                partition_index=tp.partition,
                partition_size=replica.size,
                offset_lag=replica.offset_lag,
                is_future_key=replica.is_future,
            )
        )
    return admin_pb2.DescribeLogDirsResult(
        error=pb_error(d.error),
        log_dir=d.path,
        topics=[admin_pb2.DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in topics.items()],
        total_bytes=d.total_bytes,
        usable_bytes=d.usable_bytes,
    )
