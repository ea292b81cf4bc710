"""Sizes for the planners from DescribeLogDirs: the leader's replica size; without the
leader's report, the largest replica reported; partitions no broker reported (an older
broker answering UNSUPPORTED_VERSION, or one unavailable) fall back to the record-count
estimate, and only those are estimated.  And the Admin's describe_log_dirs: fan-out to the
live brokers, unknown broker ids refused before anything is asked, broker errors raised."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from headwater import errors
from headwater.client.admin.core import AdminCore
from headwater.client.admin.log_dirs import LogDirsAdmin
from headwater.client.admin.rebalance import measured_size
from headwater.client.admin.values import LogDirDescription, ReplicaInfo
from headwater.retry import RetryPolicy
from headwater.v1 import admin_pb2, common_pb2
from headwater.values import TopicPartition

from .test_admin_rebalance import FakeAdmin

TP = TopicPartition
LAYOUT = {TP("a", 0): (0, 1), TP("a", 1): (1, 2), TP("b", 0): (2, 0)}


def dirs(sizes: Mapping[TopicPartition, int]) -> dict[str, LogDirDescription]:
    return {"/d": LogDirDescription(None, {tp: ReplicaInfo(n, 0) for tp, n in sizes.items()})}


class MeasuringAdmin(FakeAdmin):
    def __init__(self, answers: Mapping[int, Any]) -> None:
        super().__init__(LAYOUT, [0, 1, 2])
        self.answers = dict(answers)
        self.estimated: list[TopicPartition] = []

    def describe_log_dirs_each(
        self, brokers: Iterable[int] | None = None, *, topics: Any = None
    ) -> dict[int, Any]:
        return dict(self.answers)

    def _estimate_from_records(self, partitions: Iterable[TopicPartition]) -> dict[TP, int]:
        self.estimated = sorted(partitions)
        return dict.fromkeys(self.estimated, 7)


def test_the_leaders_size_is_taken() -> None:
    reported = {0: {TP("a", 0): 100}, 1: {TP("a", 0): 90, TP("a", 1): 50}, 2: {}}
    assert measured_size(TP("a", 0), 0, reported) == 100
    assert measured_size(TP("a", 0), 1, reported) == 90
    assert measured_size(TP("a", 1), -1, reported) == 50  # no leader: the largest reported
    assert measured_size(TP("a", 1), 2, reported) == 50  # the leader did not report it
    assert measured_size(TP("b", 0), 2, reported) is None


def test_all_brokers_answer_nothing_is_estimated() -> None:
    admin = MeasuringAdmin(
        {
            0: dirs({TP("a", 0): 1000, TP("b", 0): 3}),
            1: dirs({TP("a", 0): 999, TP("a", 1): 2000}),
            2: dirs({TP("a", 1): 1, TP("b", 0): 3000}),
        }
    )
    assert admin.estimate_partition_sizes(LAYOUT) == {
        TP("a", 0): 1000,
        TP("a", 1): 2000,
        TP("b", 0): 3000,
    }
    assert admin.estimated == []


def test_only_partitions_no_broker_reported_are_estimated() -> None:
    admin = MeasuringAdmin(
        {
            0: errors.UnsupportedVersionError("DescribeLogDirs"),
            1: dirs({TP("a", 0): 999, TP("a", 1): 2000}),
            2: errors.BrokerNotAvailableError("down"),
        }
    )
    sizes = admin.estimate_partition_sizes(LAYOUT)
    assert sizes == {TP("a", 0): 999, TP("a", 1): 2000, TP("b", 0): 7}
    assert admin.estimated == [TP("b", 0)]


def test_an_offline_dir_reports_nothing() -> None:
    offline = {
        "/d": LogDirDescription(errors.KafkaStorageError("x"), {TP("a", 0): ReplicaInfo(5, 0)})
    }
    admin = MeasuringAdmin({0: offline, 1: dirs({}), 2: dirs({})})
    assert admin.estimate_partition_sizes([TP("a", 0)]) == {TP("a", 0): 7}


def test_plans_use_the_measured_bytes() -> None:
    admin = MeasuringAdmin({b: dirs({tp: 10 * (b + 1) for tp in LAYOUT}) for b in (0, 1, 2)})
    plan = admin.plan_rebalance()
    assert {b.broker_id: b.size_bytes for b in plan.before} == {0: 10 + 30, 1: 10 + 20, 2: 20 + 30}
    assert admin.estimated == []


# -- describe_log_dirs over fake channels ------------------------------------------------


class _Stub:
    def __init__(self, broker: int, calls: list[int]) -> None:
        self.broker, self.calls = broker, calls

    def DescribeLogDirs(self, request: Any, timeout: float) -> admin_pb2.DescribeLogDirsResponse:
        self.calls.append(self.broker)
        if self.broker == 2:
            return admin_pb2.DescribeLogDirsResponse(
                error=common_pb2.CLUSTER_AUTHORIZATION_FAILED,
                error_message="not authorized to DESCRIBE the cluster",
            )
        return admin_pb2.DescribeLogDirsResponse(
            broker_id=self.broker,
            results=[
                admin_pb2.DescribeLogDirsResult(
                    log_dir=f"/data/{self.broker}",
                    topics=[
                        admin_pb2.DescribeLogDirsTopic(
                            name=t.topic or "a",
                            partitions=[
                                admin_pb2.DescribeLogDirsPartition(
                                    partition_index=0, partition_size=100 + self.broker
                                )
                            ],
                        )
                        for t in request.topics or [admin_pb2.DescribableLogDirTopic()]
                    ],
                    total_bytes=1000,
                    usable_bytes=400,
                )
            ],
        )


class _Channels:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def admin(self, address: str) -> _Stub:
        return _Stub(int(address.rsplit(":", 1)[1]) - 9000, self.calls)


class StubCore(AdminCore):
    """An admin core over stub channels, with a fixed set of live brokers."""

    def __init__(self, live: Sequence[int]) -> None:
        super().__init__(
            bootstrap_servers=[],
            request_timeout_ms=1000,
            default_api_timeout_ms=1000,
            retry=RetryPolicy(retry_backoff_ms=1, retry_backoff_max_ms=1),
            channels=_Channels(),  # type: ignore[arg-type]
            metadata=None,  # type: ignore[arg-type]
        )
        self.live = live

    def describe_cluster(self) -> Any:
        from headwater.client.admin.values import BrokerDescription, ClusterDescription

        return ClusterDescription(
            "c", 0, tuple(BrokerDescription(b, "127.0.0.1", 9000 + b) for b in self.live)
        )


class StubAdmin(LogDirsAdmin):
    def __init__(self, live: Sequence[int]) -> None:
        super().__init__(StubCore(live))
        self._channels = self._core.channels


def test_every_live_broker_is_asked() -> None:
    admin = StubAdmin([0, 1])
    out = admin.describe_log_dirs()
    assert sorted(admin._channels.calls) == [0, 1]  # type: ignore[attr-defined]
    assert out[1]["/data/1"].replica_infos == {TP("a", 0): ReplicaInfo(101, 0, False)}
    assert out[1]["/data/1"].error is None
    assert (out[0]["/data/0"].total_bytes, out[0]["/data/0"].usable_bytes) == (1000, 400)
    only = admin.describe_log_dirs([1], topics=["b"])
    assert list(only) == [1] and TP("b", 0) in only[1]["/data/1"].replica_infos


def test_an_unknown_broker_is_refused_before_anything_is_asked() -> None:
    admin = StubAdmin([0, 1])
    with pytest.raises(errors.BrokerNotAvailableError, match=r"broker\(s\) 7 are not alive"):
        admin.describe_log_dirs([0, 7])
    assert admin._channels.calls == []  # type: ignore[attr-defined]


def test_a_brokers_error_is_raised_or_returned() -> None:
    admin = StubAdmin([0, 2])
    with pytest.raises(errors.ClusterAuthorizationFailedError, match="DESCRIBE the cluster"):
        admin.describe_log_dirs()
    each = admin.describe_log_dirs_each()
    assert isinstance(each[2], errors.ClusterAuthorizationFailedError)
    assert isinstance(each[0], dict)
