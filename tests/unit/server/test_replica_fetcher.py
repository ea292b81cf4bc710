"""The replica fetcher: its decisions (which partitions fetch, how long it sleeps, what each
kind of failure does), the deadline it puts on its calls, and what it does to its channel.

The fetcher runs against a real ReplicaManager over real logs (the ``harness``); only the
leader is fake: a channel factory whose stub answers, or fails, as each test says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from headwater import errors
from headwater.coordination.model import BrokerRegistration
from headwater.replication.follower import FollowerFetchState
from headwater.server.config import ConfigError, load_config
from headwater.server.runtime.fetcher import (
    FailureResponse,
    ReplicaFetcherManager,
    idle_wait_s,
    on_round_failed,
    ready_partitions,
)
from headwater.v1 import broker_pb2
from headwater.values import TopicPartition

from .conftest import TP, Harness
from .test_replica_manager import records

LEADER = BrokerRegistration(broker_id=1, host="leader.example", port=9093)


def rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


# -- decisions -----------------------------------------------------------------------------------


def test_a_partition_backing_off_is_not_ready_until_its_backoff_ends() -> None:
    a, b = FollowerFetchState(1, backoff_ms=100), FollowerFetchState(1, backoff_ms=300)
    other = TopicPartition("orders", 1)
    a.back_off(1000, "transport failure")
    b.back_off(1000, "transport failure")
    states = {TP: a, other: b}
    assert ready_partitions(states, 1099) == {}
    assert idle_wait_s(states, 1050) == pytest.approx(0.05)  # the earliest backoff's end
    assert ready_partitions(states, 1100) == {TP: a}
    assert idle_wait_s(states, 2000) == 0.0  # never a negative sleep


def test_a_fetcher_without_partitions_sleeps_until_a_change() -> None:
    assert idle_wait_s({}, 0) is None
    assert ready_partitions({}, 0) == {}


def test_a_timed_out_call_drops_its_connection() -> None:
    response = on_round_failed(rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))
    assert response == FailureResponse(
        "transport failure", logging.INFO, "DEADLINE_EXCEEDED: Deadline Exceeded", reconnect=True
    )


def test_an_unreachable_leader_is_routine_and_keeps_the_channel() -> None:
    response = on_round_failed(rpc_error(grpc.StatusCode.UNAVAILABLE))
    assert response == FailureResponse("transport failure", logging.INFO, "UNAVAILABLE")


def test_headwater_errors_back_off_under_their_code() -> None:
    retriable = on_round_failed(errors.NotLeaderOrFollowerError("moved"))
    assert retriable == FailureResponse(
        "NOT_LEADER_OR_FOLLOWER", logging.INFO, "NOT_LEADER_OR_FOLLOWER: moved"
    )
    fatal = on_round_failed(errors.SaslAuthenticationFailedError("bad password"))
    assert (fatal.reason, fatal.level, fatal.reconnect) == (
        "SASL_AUTHENTICATION_FAILED",
        logging.WARNING,
        False,
    )


def test_any_other_error_is_a_bug_named_by_its_type() -> None:
    response = on_round_failed(TimeoutError())  # str() is empty
    assert response == FailureResponse(
        "fetcher failure", logging.ERROR, "TimeoutError", traceback=True
    )
    assert on_round_failed(KeyError("tp")).message == "KeyError: 'tp'"


def test_describe_names_the_type_of_every_error() -> None:
    assert errors.describe(TimeoutError()) == "TimeoutError"
    assert errors.describe(OSError("disk full")) == "OSError: disk full"
    assert errors.describe(errors.NotEnoughReplicasError()) == "NOT_ENOUGH_REPLICAS"


# -- replica.socket.timeout.ms -------------------------------------------------------------------


def test_socket_timeout_default_leaves_room_over_the_fetch_wait() -> None:
    config = load_config(environ={}, overrides=["broker.id=0"])
    assert config.replica_socket_timeout_ms == 5000
    assert config.replica_socket_timeout_ms >= config.replica_fetch_wait_max_ms + 1000


@pytest.mark.parametrize(
    "overrides",
    [
        ["replica.socket.timeout.ms=1499"],
        ["replica.fetch.wait.max.ms=4500"],
        ["replica.fetch.wait.max.ms=100", "replica.socket.timeout.ms=0"],
    ],
)
def test_socket_timeout_below_fetch_wait_plus_margin_is_refused(overrides: list[str]) -> None:
    with pytest.raises(
        ConfigError, match=r"replica\.socket\.timeout\.ms: must be >= replica\.fetch\.wait"
    ):
        load_config(environ={}, overrides=["broker.id=0", *overrides])


def test_socket_timeout_at_the_bound_is_accepted() -> None:
    config = load_config(
        environ={},
        overrides=[
            "broker.id=0",
            "replica.fetch.wait.max.ms=200",
            "replica.socket.timeout.ms=1200",
        ],
    )
    assert config.replica_socket_timeout_ms == 1200


# -- the fetcher against a fake leader -----------------------------------------------------------

Outcome = broker_pb2.FetchResponse | BaseException


class FakeChannel:
    def __init__(self) -> None:
        self.closed = False

    async def close(self, grace: float | None) -> None:
        self.closed = True


class FakeLeader:
    """Opens fake channels; every stub answers Fetch with the next queued outcome, after
    recording the call's channel and deadline."""

    def __init__(self) -> None:
        self.channels: list[FakeChannel] = []
        self.calls: list[tuple[str, int, float]] = []
        self.outcomes: asyncio.Queue[Outcome] = asyncio.Queue()

    def connect(self, address: str) -> tuple[FakeChannel, Any]:
        assert address == "leader.example:9093"
        channel = FakeChannel()
        self.channels.append(channel)
        return channel, FakeStub(self, len(self.channels) - 1)


class FakeStub:
    def __init__(self, leader: FakeLeader, index: int) -> None:
        self._leader = leader
        self._index = index

    async def Fetch(
        self, request: broker_pb2.FetchRequest, *, timeout: float, wait_for_ready: bool
    ) -> broker_pb2.FetchResponse:
        assert wait_for_ready  # a call waits for the channel to connect, within its deadline
        self._leader.calls.append(("Fetch", self._index, timeout))
        outcome = await self._leader.outcomes.get()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def OffsetsForLeaderEpoch(
        self,
        request: broker_pb2.OffsetsForLeaderEpochRequest,
        *,
        timeout: float,
        wait_for_ready: bool,
    ) -> broker_pb2.OffsetsForLeaderEpochResponse:
        assert wait_for_ready
        self._leader.calls.append(("OffsetsForLeaderEpoch", self._index, timeout))
        [asked] = request.partitions
        return broker_pb2.OffsetsForLeaderEpochResponse(
            partitions=[
                broker_pb2.EpochEndOffsetResult(
                    topic=asked.topic,
                    partition=asked.partition,
                    leader_epoch=asked.leader_epoch,
                    end_offset=1,
                )
            ]
        )


def empty_fetch() -> broker_pb2.FetchResponse:
    return broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=TP.topic, partition=TP.partition, high_watermark=1, log_end_offset=1
            )
        ]
    )


async def until(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def follower_of_leader(harness: Harness, leader: FakeLeader) -> ReplicaFetcherManager:
    """``harness``'s broker 0 follows TP on broker 1 (epoch 2), having led it in epoch 1
    with one record: its first call to the leader is OffsetsForLeaderEpoch."""
    m = harness.manager
    await m.prepare_topics([TP.topic])
    m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))])
    await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
    m.become_leader_or_follower(
        controller_epoch=1, states=[harness.state(leader=1, isr=(0, 1), epoch=2)]
    )
    fetchers = ReplicaFetcherManager(
        manager=m,
        broker_id=0,
        max_bytes=1 << 20,
        max_wait_ms=500,
        backoff_ms=50,
        socket_timeout_ms=1500,
        max_message_bytes=1 << 20,
        connect=leader.connect,
        fetch_streams=False,  # the fake leader's stub has unary calls only
    )
    fetchers.add_partitions({TP: (1, 2)}, {1: LEADER})
    return fetchers


def test_every_call_to_the_leader_has_the_socket_timeout_as_deadline(harness: Harness) -> None:
    async def scenario() -> None:
        leader = FakeLeader()
        fetchers = await follower_of_leader(harness, leader)
        leader.outcomes.put_nowait(empty_fetch())
        await until(lambda: len(leader.calls) == 3, "a second fetch")
        assert leader.calls == [
            ("OffsetsForLeaderEpoch", 0, 1.5),
            ("Fetch", 0, 1.5),
            ("Fetch", 0, 1.5),
        ]
        await fetchers.shutdown()

    asyncio.run(scenario())


def test_a_follower_follows_the_leaders_log_start(harness: Harness) -> None:
    async def scenario() -> None:
        leader = FakeLeader()
        fetchers = await follower_of_leader(harness, leader)
        moved = empty_fetch()
        moved.partitions[0].log_start_offset = 1  # the leader deleted record 0
        leader.outcomes.put_nowait(moved)
        log = harness.manager.partitions[TP].log
        await until(lambda: log.log_start_offset == 1, "the follower's log start at 1")
        await fetchers.shutdown()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("failure", "reconnects", "level", "logged"),
    [
        (rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), True, "INFO",
         "DEADLINE_EXCEEDED: Deadline Exceeded"),
        (rpc_error(grpc.StatusCode.UNAVAILABLE, "ping timeout"), False, "INFO",
         "UNAVAILABLE: ping timeout"),
        (errors.BrokerNotAvailableError(), False, "INFO", "BROKER_NOT_AVAILABLE"),
        (errors.SaslAuthenticationFailedError("no"), False, "WARNING",
         "SASL_AUTHENTICATION_FAILED: no"),
        (RuntimeError(), False, "ERROR", "RuntimeError"),
    ],
)  # fmt: skip
def test_a_failed_fetch_backs_off_then_fetches_again(
    harness: Harness,
    caplog: pytest.LogCaptureFixture,
    failure: BaseException,
    reconnects: bool,
    level: str,
    logged: str,
) -> None:
    async def scenario() -> None:
        leader = FakeLeader()
        fetchers = await follower_of_leader(harness, leader)
        fetcher = fetchers.fetchers[1]
        with caplog.at_level(logging.INFO, logger="headwater.server.runtime.fetcher"):
            leader.outcomes.put_nowait(failure)
            await until(lambda: len(leader.calls) == 3, "a fetch after the failure")
        state = fetcher.partitions[TP]
        assert state.delayed_until_ms > 0  # it backed off before fetching again
        assert [c.closed for c in leader.channels] == ([True, False] if reconnects else [False])
        assert leader.calls[-1] == ("Fetch", 1 if reconnects else 0, 1.5)  # on the new channel
        [record] = [r for r in caplog.records if "fetch from broker 1 failed" in r.getMessage()]
        assert (record.levelname, record.getMessage()) == (
            level,
            f"fetch from broker 1 failed: {logged}",
        )
        assert (record.exc_info is not None) == (level == "ERROR")
        await fetchers.shutdown()
        assert all(c.closed for c in leader.channels)

    asyncio.run(scenario())


def test_a_failed_isr_update_is_logged_with_the_error_type(
    harness: Harness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def update_isr(*args: Any) -> int | None:
        raise TimeoutError()  # str() is empty, as of some of ZooKeeper's client's errors

    monkeypatch.setattr(harness.store, "update_isr", update_isr)

    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        harness.clock.now_ms = 1001
        with caplog.at_level(logging.WARNING):
            m.maybe_shrink_isrs()
            await until(lambda: "ISR update" in caplog.text, "the ISR update's failure")
        assert "ISR update of orders-0 failed: TimeoutError" in caplog.text

    asyncio.run(scenario())
