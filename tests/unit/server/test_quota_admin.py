"""AlterClientQuotas' per-entry rule shared by both doors: a bad entity or op answers
INVALID_REQUEST with Kafka's message and writes nothing; validate_only writes nothing;
no ZooKeeper session answers BROKER_NOT_AVAILABLE; a good entry is written once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import cast

from headwater import errors
from headwater.coordination.client_quotas import ClientQuotaStore
from headwater.errors import ErrorCode
from headwater.quotas.entities import QuotaEntity
from headwater.server.runtime.quota_admin import alter_entry


class RecordingStore:
    """Stands in for ZooKeeper: the writes it was asked for, or a failure to raise."""

    def __init__(self, fail: errors.HeadwaterError | None = None) -> None:
        self.writes: list[tuple[QuotaEntity, Mapping[str, float | None]]] = []
        self.fail = fail

    def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        if self.fail is not None:
            raise self.fail
        self.writes.append((entity, dict(changes)))


def run(
    store: RecordingStore | None,
    components: Sequence[tuple[str, str | None]],
    ops: Sequence[tuple[str, float | None]],
    *,
    validate_only: bool = False,
) -> tuple[ErrorCode, str]:
    return asyncio.run(
        alter_entry(
            lambda: cast(ClientQuotaStore, store),
            components,
            ops,
            validate_only=validate_only,
        )
    )


def test_a_good_entry_is_written_once() -> None:
    store = RecordingStore()
    code, message = run(
        store, [("user", "alice")], [("producer_byte_rate", 1024.0), ("request_percentage", None)]
    )
    assert (code, message) == (ErrorCode.NONE, "")
    assert store.writes == [
        (
            QuotaEntity.of(user="alice"),
            {"producer_byte_rate": 1024.0, "request_percentage": None},
        )
    ]


def test_validate_only_writes_nothing() -> None:
    store = RecordingStore()
    assert run(
        store, [("client-id", None)], [("consumer_byte_rate", 10.0)], validate_only=True
    ) == (
        ErrorCode.NONE,
        "",
    )
    assert store.writes == []


def test_a_bad_entity_or_op_answers_invalid_request_and_writes_nothing() -> None:
    store = RecordingStore()
    cases = [
        ([("ip", "1.2.3.4")], [("producer_byte_rate", 1.0)], "IP (connection rate) quotas"),
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        ([("user", "a")], [("no_such_quota", 1.0)], "Unknown quota key: no_such_quota"),
        ([("user", "a")], [("producer_byte_rate", -5.0)], "must be > 0"),
        (
            [("user", "a")],
            [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
            "Duplicate quota key",
        ),
    ]
    for components, ops, expected in cases:
        code, message = run(store, components, ops)
        assert code is ErrorCode.INVALID_REQUEST, (components, ops)
        assert expected in message
    assert store.writes == []


def test_no_zookeeper_session_answers_broker_not_available() -> None:
    code, message = run(None, [("user", "a")], [("producer_byte_rate", 1.0)])
    assert code is ErrorCode.BROKER_NOT_AVAILABLE
    assert "not connected to ZooKeeper" in message
    # validating needs no session
    assert run(None, [("user", "a")], [("producer_byte_rate", 1.0)], validate_only=True) == (
        ErrorCode.NONE,
        "",
    )


def test_a_failed_write_answers_its_error() -> None:
    store = RecordingStore(fail=errors.NotControllerError("lost the session"))
    code, message = run(store, [("user", "a")], [("producer_byte_rate", 1.0)])
    assert code is errors.NotControllerError("x").code
    assert "lost the session" in message
