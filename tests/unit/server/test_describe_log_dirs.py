"""DescribeLogDirs on one broker (headwater.server.log_dirs): every log dir with its replicas'
sizes (the segment files' bytes, growing with appends), offset lag 0 and is_future false,
the disk's total and usable bytes; Kafka's filter (None: all; per topic, its listed
partitions or all of them); an illegal topic name refused before anything is described;
an unreadable dir answered KAFKA_STORAGE_ERROR; and the protobuf shape."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.security.acls import AclOperation
from headwater.server import log_dirs
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.config import BrokerConfig
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.admin import AdminService
from headwater.storage import LogManager
from headwater.v1 import admin_pb2
from headwater.values import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    m = LogManager([tmp_path / "d1", tmp_path / "d2"], clock=lambda: 1000)
    for tp in (A0, A1, B0):
        m.get_or_create_log(tp.topic, tp.partition)
    yield m
    for log in m.logs():
        log.close()


def append(m: LogManager, tp: TopicPartition, count: int) -> None:
    log = m.get_log(tp.topic, tp.partition)
    assert log is not None
    for _ in range(count):
        record = Record(key=None, value=b"x" * 100, timestamp_ms=None)
        log.append_as_leader(build_batch([record], timestamp_ms=1000), leader_epoch=0, now_ms=1000)


def replicas(dirs: list[log_dirs.LogDirInfo]) -> dict[TopicPartition, log_dirs.ReplicaInfo]:
    return {tp: r for d in dirs for tp, r in d.replicas.items()}


def test_every_dir_and_replica_with_sizes_that_grow(manager: LogManager) -> None:
    dirs = log_dirs.describe_log_dirs(manager)
    assert [Path(d.path).name for d in dirs] == ["d1", "d2"]
    assert all(d.error is ErrorCode.NONE and d.total_bytes > 0 for d in dirs)
    assert all(0 <= d.usable_bytes <= d.total_bytes for d in dirs)
    before = replicas(dirs)
    assert set(before) == {A0, A1, B0} and before[A0].size == 0
    append(manager, A0, 3)
    after = replicas(log_dirs.describe_log_dirs(manager))
    log = manager.get_log("a", 0)
    assert log is not None
    assert after[A0].size == log.size_in_bytes > 300
    assert after[A1].size == 0 and after[A0].offset_lag == 0 and not after[A0].is_future


def test_each_replica_is_in_its_own_dir(manager: LogManager) -> None:
    for d in log_dirs.describe_log_dirs(manager):
        for tp in d.replicas:
            assert manager.log_dir_of(tp.topic, tp.partition) == Path(d.path)


def test_filters(manager: LogManager) -> None:
    assert set(replicas(log_dirs.describe_log_dirs(manager, {"a": []}))) == {A0, A1}
    assert set(replicas(log_dirs.describe_log_dirs(manager, {"a": [1], "b": [0]}))) == {A1, B0}
    assert replicas(log_dirs.describe_log_dirs(manager, {"unknown": [], "a": [7]})) == {}
    # Dirs are described even when nothing in them is selected.
    assert len(log_dirs.describe_log_dirs(manager, {"unknown": []})) == 2


@pytest.mark.parametrize("name", ["", "bad name!", "..", "x" * 250])
def test_an_illegal_topic_name_is_refused(manager: LogManager, name: str) -> None:
    with pytest.raises(errors.InvalidTopicError):
        log_dirs.describe_log_dirs(manager, {"a": [], name: []})


def test_a_dir_that_cannot_be_read_is_a_storage_error(manager: LogManager) -> None:
    gone = manager.log_dirs[1]
    moved = {tp for tp in (A0, A1, B0) if manager.log_dir_of(tp.topic, tp.partition) == gone}
    shutil.rmtree(gone)
    dirs = {Path(d.path).name: d for d in log_dirs.describe_log_dirs(manager)}
    assert dirs["d2"].error is ErrorCode.KAFKA_STORAGE_ERROR and dirs["d2"].replicas == {}
    assert dirs["d2"].total_bytes == log_dirs.UNKNOWN_BYTES
    assert dirs["d1"].error is ErrorCode.NONE and not moved & set(dirs["d1"].replicas)


def test_protobuf_shape(manager: LogManager) -> None:
    append(manager, B0, 1)
    (proto,) = [
        log_dirs.to_proto(d) for d in log_dirs.describe_log_dirs(manager) if B0 in d.replicas
    ]
    (topic,) = [t for t in proto.topics if t.name == "b"]
    (partition,) = topic.partitions
    assert partition.partition_index == 0 and partition.partition_size > 100
    assert partition.offset_lag == 0 and not partition.is_future_key
    assert proto.error == 0 and proto.total_bytes > 0


# -- the RPC: authorization and refusals ------------------------------------------------


class _Authz(RequestAuthorizer):
    def __init__(self, allow: bool) -> None:
        super().__init__(None)
        self.allow = allow
        self.asked: list[AclOperation] = []

    def cluster(self, context: Any, operation: AclOperation) -> bool:
        self.asked.append(operation)
        return self.allow


def service(manager: LogManager | None, authz: RequestAuthorizer) -> AdminService:
    return AdminService(
        coordinator=lambda: None,
        metadata=MetadataCache(),
        metadata_changed=asyncio.Condition(),
        metrics=BrokerMetrics(),
        config=BrokerConfig(broker_id=5),
        authz=authz,
        log_manager=lambda: manager,
    )


def call(svc: AdminService, request: admin_pb2.DescribeLogDirsRequest) -> Any:
    return asyncio.run(svc.DescribeLogDirs(request, None))  # type: ignore[arg-type]


def test_the_rpc_needs_describe_on_the_cluster(manager: LogManager) -> None:
    authz = _Authz(allow=False)
    resp = call(service(manager, authz), admin_pb2.DescribeLogDirsRequest())
    assert authz.asked == [AclOperation.DESCRIBE]
    assert resp.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not resp.results
    assert "DESCRIBE the cluster" in resp.error_message and resp.broker_id == 5


def test_the_rpc_answers_for_this_broker(manager: LogManager) -> None:
    request = admin_pb2.DescribeLogDirsRequest(
        topics=[admin_pb2.DescribableLogDirTopic(topic="a", partitions=[1])]
    )
    resp = call(service(manager, _Authz(allow=True)), request)
    assert resp.error == ErrorCode.NONE and resp.broker_id == 5 and len(resp.results) == 2
    found = [
        (t.name, p.partition_index) for r in resp.results for t in r.topics for p in t.partitions
    ]
    assert found == [("a", 1)]


def test_the_rpc_refuses_an_illegal_topic_name(manager: LogManager) -> None:
    request = admin_pb2.DescribeLogDirsRequest(
        topics=[admin_pb2.DescribableLogDirTopic(topic="no way")]
    )
    resp = call(service(manager, _Authz(allow=True)), request)
    assert resp.error == ErrorCode.INVALID_TOPIC_EXCEPTION and not resp.results
    assert "illegal" in resp.error_message


def test_the_rpc_before_the_logs_are_open() -> None:
    resp = call(service(None, _Authz(allow=True)), admin_pb2.DescribeLogDirsRequest())
    assert resp.error == ErrorCode.BROKER_NOT_AVAILABLE
