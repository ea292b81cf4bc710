"""``Admin``'s consumer-group calls when coordinators move, fail or answer with errors.

Scripted Group services over real gRPC on 127.0.0.1 (each answers FindCoordinator and the
admin calls from queues the test fills) stand in for brokers, so each answer the real
coordinator rarely gives can be forced.  Covers ``client/group/admin.py``'s plumbing: a
NOT_COORDINATOR (top level, per described group or per deleted group) or
COORDINATOR_LOAD_IN_PROGRESS answer makes it find the coordinator again and retry there;
FindCoordinator errors are retried when retriable and raised otherwise; no reachable
broker is a CoordinatorNotAvailableError naming the last network error; listing asks every
broker and skips unreachable ones; the OffsetCommit that alters offsets carries no
generation or member, and a partition-level error is raised.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import headwater
import pytest
from headwater import errors
from headwater.client.group.listener import OffsetAndMetadata
from headwater.errors import ErrorCode
from headwater.v1 import group_pb2, group_pb2_grpc

TP = headwater.TopicPartition
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
DEAD = "127.0.0.1:1"  # nothing listens there


class ScriptedGroup(group_pb2_grpc.GroupServicer):
    """A broker's Group service that answers from per-method queues.

    FindCoordinator answers with the next of ``coordinators`` (addresses, or an error code),
    the last one repeated; this server's own address when there are none.  Every other
    method pops the next scripted response, the last one repeated.  Requests are recorded.
    """

    def __init__(self) -> None:
        self.coordinators: list[str | int] = []
        self.responses: dict[str, list[Any]] = {}
        self.requests: dict[str, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        group_pb2_grpc.add_GroupServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _next(self, queue: list[Any]) -> Any:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def _answer(self, method: str, request: Any) -> Any:
        with self._lock:
            self.requests[method].append(request)
            return self._next(self.responses[method])

    def FindCoordinator(self, request: Any, context: Any) -> Any:
        with self._lock:
            self.requests["FindCoordinator"].append(request)
            target = self._next(self.coordinators) if self.coordinators else self.address
        if isinstance(target, int):
            return group_pb2.FindCoordinatorResponse(error_code=target)
        host, port = target.rsplit(":", 1)
        return group_pb2.FindCoordinatorResponse(node_id=1, host=host, port=int(port))

    def DescribeGroups(self, request: Any, context: Any) -> Any:
        return self._answer("DescribeGroups", request)

    def DeleteGroups(self, request: Any, context: Any) -> Any:
        return self._answer("DeleteGroups", request)

    def OffsetFetch(self, request: Any, context: Any) -> Any:
        return self._answer("OffsetFetch", request)

    def OffsetCommit(self, request: Any, context: Any) -> Any:
        return self._answer("OffsetCommit", request)

    def ListGroups(self, request: Any, context: Any) -> Any:
        return self._answer("ListGroups", request)


@pytest.fixture
def brokers() -> Iterator[tuple[ScriptedGroup, ScriptedGroup]]:
    a, b = ScriptedGroup(), ScriptedGroup()
    yield a, b
    a.server.stop(0).wait()
    b.server.stop(0).wait()


def admin(*bootstrap: str, timeout_ms: int = 3000) -> headwater.Admin:
    return headwater.Admin(
        list(bootstrap),
        request_timeout_ms=1000,
        default_api_timeout_ms=timeout_ms,
        retry_backoff_ms=10,
        retry_backoff_max_ms=20,
    )


def described(gid: str, code: int = 0, state: str = "Empty") -> Any:
    return group_pb2.DescribeGroupsResponse(
        groups=[group_pb2.DescribedGroup(error_code=code, group_id=gid, group_state=state)]
    )


def test_describe_follows_a_coordinator_that_moved(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, b = brokers
    a.coordinators = [a.address, b.address]
    a.responses["DescribeGroups"] = [described("g", NOT_COORDINATOR)]
    b.responses["DescribeGroups"] = [described("g", state="Stable")]
    with admin(a.address) as adm:
        d = adm.describe_groups(["g"])["g"]
    assert (d.state, d.coordinator) == ("Stable", b.address)
    assert len(a.requests["FindCoordinator"]) == 2
    assert a.requests["FindCoordinator"][0].key == "g"
    assert len(a.requests["DescribeGroups"]) == len(b.requests["DescribeGroups"]) == 1


def test_a_group_error_other_than_a_move_is_raised_without_retry(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, _ = brokers
    a.responses["DescribeGroups"] = [described("g", ErrorCode.INVALID_GROUP_ID)]
    with admin(a.address) as adm, pytest.raises(errors.InvalidGroupIdError):
        adm.describe_groups(["g"])
    assert len(a.requests["DescribeGroups"]) == 1


def test_delete_and_offset_fetch_retry_while_the_coordinator_is_loading_or_moved(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, _ = brokers
    a.responses["DeleteGroups"] = [
        group_pb2.DeleteGroupsResponse(
            results=[group_pb2.DeletableGroupResult(group_id="g", error_code=NOT_COORDINATOR)]
        ),
        group_pb2.DeleteGroupsResponse(results=[group_pb2.DeletableGroupResult(group_id="g")]),
    ]
    a.responses["OffsetFetch"] = [
        group_pb2.OffsetFetchResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        group_pb2.OffsetFetchResponse(
            partitions=[
                group_pb2.OffsetFetchResponsePartition(
                    topic="t", partition_index=0, committed_offset=9, metadata="m"
                ),
                group_pb2.OffsetFetchResponsePartition(
                    topic="t", partition_index=1, committed_offset=-1
                ),
            ]
        ),
    ]
    with admin(a.address) as adm:
        assert adm.delete_groups(["g"]) == {"g": None}
        assert adm.list_consumer_group_offsets("g", [TP("t", 0), TP("t", 1)]) == {
            TP("t", 0): OffsetAndMetadata(9, "m", 0)
        }
    assert len(a.requests["DeleteGroups"]) == 2
    assert [a.requests["DeleteGroups"][0].groups_names[:]] == [["g"]]
    fetch = a.requests["OffsetFetch"][-1]
    assert (fetch.group_id, [(p.topic, p.partition) for p in fetch.partitions]) == (
        "g",
        [("t", 0), ("t", 1)],
    )


def test_a_delete_answer_without_results_is_an_unknown_server_error(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, _ = brokers
    a.responses["DeleteGroups"] = [group_pb2.DeleteGroupsResponse()]
    with admin(a.address) as adm:
        result = adm.delete_groups(["g"], raise_on_error=False)
    assert isinstance(result["g"], errors.UnknownServerError)


def test_find_coordinator_errors_are_retried_only_when_retriable(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, b = brokers
    a.coordinators = [ErrorCode.COORDINATOR_NOT_AVAILABLE, a.address]
    a.responses["DescribeGroups"] = [described("g")]
    with admin(a.address) as adm:
        assert adm.describe_groups(["g"])["g"].state == "Empty"
    assert len(a.requests["FindCoordinator"]) == 2

    b.coordinators = [ErrorCode.INVALID_GROUP_ID]
    with admin(b.address) as adm, pytest.raises(errors.InvalidGroupIdError):
        adm.list_consumer_group_offsets("g")
    assert len(b.requests["FindCoordinator"]) == 1
    assert b.requests["OffsetFetch"] == []


def test_find_coordinator_skips_an_unreachable_broker(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, _ = brokers
    a.responses["DescribeGroups"] = [described("g")]
    with admin(DEAD, a.address) as adm:
        assert adm.describe_groups(["g"])["g"].coordinator == a.address


def test_no_reachable_broker_is_coordinator_not_available_naming_the_last_error() -> None:
    with (
        admin(DEAD, timeout_ms=300) as adm,
        pytest.raises(errors.CoordinatorNotAvailableError, match="last error: cannot reach"),
    ):
        adm.describe_groups(["g"])


def test_listing_asks_every_broker_merges_and_skips_unreachable_ones(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, b = brokers

    def listed(*groups: tuple[str, str]) -> Any:
        return group_pb2.ListGroupsResponse(
            groups=[
                group_pb2.ListedGroup(group_id=g, group_state=s, protocol_type="consumer")
                for g, s in groups
            ]
        )

    a.responses["ListGroups"] = [listed(("z", "Stable"), ("m", "Empty"))]
    b.responses["ListGroups"] = [listed(("a", "Empty"))]
    with admin(a.address, DEAD, b.address) as adm:
        got = adm.list_groups(["Empty", "Stable"])
    assert [(g.group_id, g.state) for g in got] == [("a", "Empty"), ("m", "Empty"), ("z", "Stable")]
    assert {g.protocol_type for g in got} == {"consumer"}
    assert list(a.requests["ListGroups"][0].states_filter) == ["Empty", "Stable"]

    with admin(DEAD) as adm, pytest.raises(errors.NetworkError, match="list groups"):
        adm.list_groups()


def test_altering_offsets_commits_without_a_member_and_raises_partition_errors(
    brokers: tuple[ScriptedGroup, ScriptedGroup],
) -> None:
    a, _ = brokers

    def committed(code: int, top: int = 0) -> Any:
        return group_pb2.OffsetCommitResponse(
            error_code=top,
            partitions=[
                group_pb2.OffsetCommitResponsePartition(
                    topic="t", partition_index=0, error_code=code
                )
            ],
        )

    a.responses["OffsetCommit"] = [
        committed(0),
        committed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        committed(0, top=ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    with admin(a.address) as adm:
        adm.alter_consumer_group_offsets("g", {TP("t", 0): OffsetAndMetadata(3, "x", 2)})
        req = a.requests["OffsetCommit"][0]
        assert (req.group_id, req.generation_id, req.member_id) == ("g", -1, "")
        (p,) = req.partitions
        assert (p.topic, p.partition_index, p.committed_offset) == ("t", 0, 3)
        assert (p.committed_metadata, p.committed_leader_epoch) == ("x", 2)

        with pytest.raises(errors.UnknownTopicOrPartitionError, match="altering offsets"):
            adm.alter_consumer_group_offsets("g", {TP("t", 0): 4})
        with pytest.raises(errors.UnknownMemberIdError, match="stop them"):
            adm.alter_consumer_group_offsets("g", {TP("t", 0): 5})
    assert len(a.requests["OffsetCommit"]) == 3
