"""One convention for error messages (headwater.errors): a response carries the code in
its error field and human text without the code's name in ``error_message``; the client
turns the pair back into an exception whose ``str()`` -- what the CLI prints -- names the
code once.  Covers :func:`errors.message_of`, the round trip, and responses of the Admin
servicer and the replica manager, whose messages once started with the code's name and
reached users as ``TOPIC_ALREADY_EXISTS: TOPIC_ALREADY_EXISTS: ...``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.storage import LogManager
from headwater.v1 import admin_pb2

from tests.unit.server.conftest import TP, Harness
from tests.unit.server.test_describe_log_dirs import _Authz, call, service


def client_side(code: int, message: str) -> str:
    """What a user sees for a response's (code, error_message)."""
    return str(errors.for_code(code, message or "fallback"))


def test_message_of_is_the_text_without_the_code() -> None:
    exc = errors.TopicAlreadyExistsError("Topic 'x' already exists.")
    assert str(exc) == "TOPIC_ALREADY_EXISTS: Topic 'x' already exists."
    assert errors.message_of(exc) == "Topic 'x' already exists."
    assert errors.message_of(errors.TopicAlreadyExistsError()) == ""
    assert errors.message_of(None) == ""


@pytest.mark.parametrize("code", [c for c in ErrorCode if c is not ErrorCode.NONE])
def test_every_code_round_trips_naming_the_code_once(code: ErrorCode) -> None:
    exc = errors.for_code(code, "what went wrong")
    seen = client_side(exc.code, errors.message_of(exc))
    assert seen.count(exc.code.name) == 1, seen


def test_str_of_an_error_sent_on_would_name_the_code_twice() -> None:
    # Why message_of exists: the bug it fixes, kept visible.
    exc = errors.InvalidPartitionsError("1 would not be an increase")
    assert client_side(exc.code, str(exc)).count("INVALID_PARTITIONS") == 2


def test_admin_response_carries_no_code_name_in_its_message(tmp_path: Path) -> None:
    request = admin_pb2.DescribeLogDirsRequest(
        topics=[admin_pb2.DescribableLogDirTopic(topic="no way")]
    )
    manager = LogManager([tmp_path / "d"], clock=lambda: 1000)
    resp = call(service(manager, _Authz(allow=True)), request)
    assert resp.error == ErrorCode.INVALID_TOPIC_EXCEPTION
    name = ErrorCode(resp.error).name
    assert resp.error_message and name not in resp.error_message
    assert client_side(resp.error, resp.error_message).count(name) == 1


def test_replica_manager_refusals_carry_no_code_name(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        other = TP._replace(topic="other")
        batch = build_batch([Record(key=None, value=b"a")])
        [result] = await m.append_records(acks=1, timeout_ms=100, entries=[(other, batch)])
        assert result.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert result.message and "UNKNOWN_TOPIC_OR_PARTITION" not in result.message
        assert client_side(result.error, result.message).count(result.error.name) == 1

    asyncio.run(scenario())
