"""Kafka's error codes and the exceptions that carry them.

Every layer raises these, and the wire carries the numeric code (the proto's
``ErrorCode`` enum mirrors :class:`ErrorCode` number for number), so a user who
knows Kafka's error names recognises every failure.  Codes keep Kafka's numbers
so that a later Kafka-protocol front end can pass them through unchanged.

Exceptions are looked up by code with :func:`for_code`; each one knows whether
a client may retry it (Kafka's ``RetriableException``).

One convention for messages: a response carries the code in its error field and human
text without the code's name in ``error_message`` (:func:`message_of`, never
``str(error)``); ``str()`` of an exception, which the CLI prints, is ``CODE: message``.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's protocol error codes, with Kafka's numbers."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    UNKNOWN_TOPIC_ID = 100
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113

    @classmethod
    def from_wire(cls, value: int) -> ErrorCode:
        """The code for a number read off the wire; UNKNOWN_SERVER_ERROR for one this
        version does not know (a newer peer's), as Kafka's ``Errors.forCode`` does."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


class HeadwaterError(Exception):
    """Base of every Headwater error; ``code`` is the Kafka error code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code.name)
        self.message = message or self.code.name

    def __str__(self) -> str:
        return (
            f"{self.code.name}: {self.message}" if self.message != self.code.name else self.message
        )


class UnknownServerError(HeadwaterError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(HeadwaterError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(HeadwaterError):
    """A batch failed validation: bad CRC, bad magic, impossible length (CORRUPT_MESSAGE)."""

    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(HeadwaterError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True


class LeaderNotAvailableError(HeadwaterError):
    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True


class NotLeaderOrFollowerError(HeadwaterError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


class RequestTimedOutError(HeadwaterError):
    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class BrokerNotAvailableError(HeadwaterError):
    code = ErrorCode.BROKER_NOT_AVAILABLE
    retriable = True


class MessageTooLargeError(HeadwaterError):
    """A batch is larger than ``message.max.bytes`` / ``max.message.bytes``."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(HeadwaterError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH


class NetworkError(HeadwaterError):
    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


class CoordinatorLoadInProgressError(HeadwaterError):
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(HeadwaterError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(HeadwaterError):
    code = ErrorCode.NOT_COORDINATOR
    retriable = True


class InvalidTopicError(HeadwaterError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(HeadwaterError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(HeadwaterError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(HeadwaterError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class InvalidRequiredAcksError(HeadwaterError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(HeadwaterError):
    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(HeadwaterError):
    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(HeadwaterError):
    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(HeadwaterError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(HeadwaterError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(HeadwaterError):
    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidTimestampError(HeadwaterError):
    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedVersionError(HeadwaterError):
    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(HeadwaterError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(HeadwaterError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(HeadwaterError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(HeadwaterError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(HeadwaterError):
    code = ErrorCode.INVALID_CONFIG


class NotControllerError(HeadwaterError):
    code = ErrorCode.NOT_CONTROLLER
    retriable = True


class InvalidRequestError(HeadwaterError):
    code = ErrorCode.INVALID_REQUEST


class PolicyViolationError(HeadwaterError):
    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(HeadwaterError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(HeadwaterError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(HeadwaterError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(HeadwaterError):
    """The request does not fit the transaction's state (EndTxn commit with nothing open)."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(HeadwaterError):
    """The producer id is not the one the coordinator holds for this transactional id."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(HeadwaterError):
    """``transaction.timeout.ms`` is not positive or exceeds ``transaction.max.timeout.ms``."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(HeadwaterError):
    """A previous transaction of this transactional id is still completing; retry."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(HeadwaterError):
    """A marker request came from a coordinator older than the partition has seen."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TransactionalIdNotFoundError(HeadwaterError):
    """DescribeTransactions/abort named a transactional id the coordinator does not hold."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class KafkaStorageError(HeadwaterError):
    """A log directory failed (I/O error); the replica is offline on this broker."""

    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True


class UnknownProducerIdError(HeadwaterError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class NonEmptyGroupError(HeadwaterError):
    code = ErrorCode.NON_EMPTY_GROUP


class GroupSubscribedToTopicError(HeadwaterError):
    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class GroupIdNotFoundError(HeadwaterError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class FencedLeaderEpochError(HeadwaterError):
    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpochError(HeadwaterError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class UnsupportedCompressionTypeError(HeadwaterError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class MemberIdRequiredError(HeadwaterError):
    code = ErrorCode.MEMBER_ID_REQUIRED


class FencedInstanceIdError(HeadwaterError):
    code = ErrorCode.FENCED_INSTANCE_ID


class FencedMemberEpochError(HeadwaterError):
    """KIP-848: the heartbeat's member epoch is not the member's; rejoin with epoch 0."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


class UnreleasedInstanceIdError(HeadwaterError):
    """KIP-848: a static member with this instance id is still in the group."""

    code = ErrorCode.UNRELEASED_INSTANCE_ID


class UnsupportedAssignorError(HeadwaterError):
    """KIP-848: the requested server-side assignor is not configured."""

    code = ErrorCode.UNSUPPORTED_ASSIGNOR


class StaleMemberEpochError(HeadwaterError):
    """KIP-848: an offset commit or fetch carries an older member epoch than the member's."""

    code = ErrorCode.STALE_MEMBER_EPOCH


class EligibleLeadersNotAvailableError(HeadwaterError):
    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True


class StaleBrokerEpochError(HeadwaterError):
    """A request carried a broker epoch older than the broker's registration."""

    code = ErrorCode.STALE_BROKER_EPOCH


class PreferredLeaderNotAvailableError(HeadwaterError):
    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True


class ElectionNotNeededError(HeadwaterError):
    code = ErrorCode.ELECTION_NOT_NEEDED


class InvalidRecordError(HeadwaterError):
    """A record or append is invalid for a reason other than corruption.

    Raised, for example, for a follower append whose offsets do not continue
    the log (a gap or a non-monotonic offset).
    """

    code = ErrorCode.INVALID_RECORD


class ProducerFencedError(HeadwaterError):
    code = ErrorCode.PRODUCER_FENCED


class UnstableOffsetCommitError(HeadwaterError):
    """A transactional offset commit of the partition is pending (OffsetFetch with
    require_stable, KIP-447): retry once the transaction ends."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


class TopicAuthorizationFailedError(HeadwaterError):
    """The principal lacks the ACL this topic operation needs."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(HeadwaterError):
    """The principal lacks the ACL this group operation needs."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(HeadwaterError):
    """The principal lacks the CLUSTER ACL this operation needs."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailedError(HeadwaterError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class UnsupportedSaslMechanismError(HeadwaterError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(HeadwaterError):
    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationFailedError(HeadwaterError):
    """Wrong credentials or a failed SASL exchange; the message never holds a secret."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class ResourceNotFoundError(HeadwaterError):
    """The named resource (a user's SCRAM credential, ...) does not exist."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(HeadwaterError):
    """A request named the same resource twice (KIP-554: one user in two alterations)."""

    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(HeadwaterError):
    """A SCRAM credential Kafka refuses: empty user, too few or too many iterations."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class SecurityDisabledError(HeadwaterError):
    """An ACL call on a cluster with no authorizer configured."""

    code = ErrorCode.SECURITY_DISABLED


class ReassignmentInProgressError(HeadwaterError):
    """The partition is being reassigned; the asked change must wait for the move."""

    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class NoReassignmentInProgressError(HeadwaterError):
    """A cancellation named a partition that is not being reassigned."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class NoOffsetForPartitionError(HeadwaterError):
    """Client-side: no committed offset and ``auto_offset_reset="none"``."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


_BY_CODE: dict[ErrorCode, type[HeadwaterError]] = {}
for _cls in list(globals().values()):
    if (
        isinstance(_cls, type)
        and issubclass(_cls, HeadwaterError)
        and _cls is not HeadwaterError
        and _cls is not NoOffsetForPartitionError
    ):
        _BY_CODE.setdefault(_cls.code, _cls)


def message_of(error: HeadwaterError | None) -> str:
    """The ``error_message`` a response carries for ``error``: its human text without the
    code's name, which travels in the response's error code ("" for no error or no text).
    ``str(error)`` already starts with the code: sent on, clients print it twice."""
    if error is None or error.message == error.code.name:
        return ""
    return error.message


def for_code(code: int, message: str = "") -> HeadwaterError:
    """Return the exception for a Kafka error ``code`` (unknown codes: UnknownServerError)."""
    try:
        error_code = ErrorCode(code)
    except ValueError:
        return UnknownServerError(f"error code {code}: {message}")
    cls = _BY_CODE.get(error_code, UnknownServerError)
    return cls(message)


def describe(exc: BaseException) -> str:
    """``exc`` for a log line, always naming what went wrong: a Headwater error's text
    starts with its Kafka error code; any other exception's is prefixed with its type,
    so one whose ``str()`` is empty (``TimeoutError()``, a cancellation) still says what
    it is."""
    if isinstance(exc, HeadwaterError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
