"""headwater.errors: Kafka's codes and names, lookup by code."""

from __future__ import annotations

from headwater import errors


def test_codes_keep_kafkas_numbers() -> None:
    assert errors.ErrorCode.CORRUPT_MESSAGE == 2
    assert errors.ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert errors.ErrorCode.TOPIC_ALREADY_EXISTS == 36
    assert errors.ErrorCode.FENCED_INSTANCE_ID == 82


def test_for_code_returns_the_named_exception() -> None:
    exc = errors.for_code(36, "topic t exists")
    assert isinstance(exc, errors.TopicAlreadyExistsError)
    assert str(exc) == "TOPIC_ALREADY_EXISTS: topic t exists"
    assert not exc.retriable
    assert errors.for_code(6).retriable


def test_unknown_code_is_an_unknown_server_error() -> None:
    exc = errors.for_code(9999, "boom")
    assert isinstance(exc, errors.UnknownServerError)
    assert "9999" in str(exc)


def test_kip848_codes_keep_kafkas_numbers_and_names() -> None:
    assert errors.ErrorCode.FENCED_MEMBER_EPOCH == 110
    assert errors.ErrorCode.UNRELEASED_INSTANCE_ID == 111
    assert errors.ErrorCode.UNSUPPORTED_ASSIGNOR == 112
    assert isinstance(errors.for_code(110), errors.FencedMemberEpochError)
    assert isinstance(errors.for_code(111), errors.UnreleasedInstanceIdError)
    assert isinstance(errors.for_code(112), errors.UnsupportedAssignorError)


def test_from_wire_maps_numbers_to_codes_and_unknown_ones_to_unknown_server_error() -> None:
    assert errors.ErrorCode.from_wire(0) is errors.ErrorCode.NONE
    assert errors.ErrorCode.from_wire(6) is errors.ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert errors.ErrorCode.from_wire(9999) is errors.ErrorCode.UNKNOWN_SERVER_ERROR


def test_transaction_codes_keep_kafkas_numbers_and_names() -> None:
    expected = {
        "INVALID_PRODUCER_EPOCH": 47,
        "INVALID_TXN_STATE": 48,
        "INVALID_PRODUCER_ID_MAPPING": 49,
        "INVALID_TRANSACTION_TIMEOUT": 50,
        "CONCURRENT_TRANSACTIONS": 51,
        "TRANSACTION_COORDINATOR_FENCED": 52,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53,
        "PRODUCER_FENCED": 90,
        "TRANSACTIONAL_ID_NOT_FOUND": 105,
    }
    assert {name: errors.ErrorCode[name].value for name in expected} == expected
    assert isinstance(errors.for_code(48), errors.InvalidTxnStateError)
    assert isinstance(errors.for_code(49), errors.InvalidProducerIdMappingError)
    assert isinstance(errors.for_code(50), errors.InvalidTransactionTimeoutError)
    assert isinstance(errors.for_code(52), errors.TransactionCoordinatorFencedError)
    assert isinstance(errors.for_code(105), errors.TransactionalIdNotFoundError)
    concurrent = errors.for_code(51)
    assert isinstance(concurrent, errors.ConcurrentTransactionsError) and concurrent.retriable


def test_the_proto_enum_mirrors_every_error_code() -> None:
    from headwater.v1 import common_pb2

    assert {c.name: c.value for c in errors.ErrorCode} == dict(common_pb2.ErrorCode.items())
