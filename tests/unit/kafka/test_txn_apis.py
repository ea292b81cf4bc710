"""The Kafka listener's transaction handlers (headwater.kafka.txn_apis) over a real
coordinator runtime (an in-memory ``__transaction_state``): Kafka's requests in, Kafka's
answers out.

* transaction version 1 (Kafka's clients, EndTxn below v5): the epoch stays across
  transactions, the markers carry it, a retried EndTxn is answered as the first was;
* transaction version 2 (EndTxn v5, TxnOffsetCommit v5): EndTxn bumps the epoch and
  answers it, a retry with the old epoch gets the result and the new epoch, the other
  result or a request of the old epoch is refused; TxnOffsetCommit v5 adds the group's
  partition itself;
* bad input answers Kafka's error and changes nothing: EndTxn with nothing open, a stale
  or future epoch, an unknown topic, a timeout above ``transaction.max.timeout.ms``, an
  empty transactional id;
* TxnOffsetCommit reaches the group coordinator only once the transaction coordinator
  confirms AddOffsetsToTxn added the group's ``__consumer_offsets`` partition
  (INVALID_TXN_STATE otherwise, KIP-890);
* ACLs: TRANSACTIONAL_ID WRITE for the producer's calls, CLUSTER_ACTION for
  AddPartitionsToTxn v4;
* DescribeTransactions and ListTransactions in Kafka's shapes;
* the new API keys' requests, corrupted, decode or are refused (fuzz).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import struct
from collections.abc import Mapping
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.groups import values as gv
from headwater.kafka import protocol as p
from headwater.kafka.txn_apis import KafkaTxnApis, partition_codes
from headwater.security.acls import (
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)
from headwater.security.acls import AclOperation as Op
from headwater.security.authorizer import AclAuthorizer, AclSnapshot, AuthorizerSettings
from headwater.security.principal import KafkaPrincipal, RequestIdentity
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.auth.identity import reset_identity, set_identity
from headwater.transactions.coordinator_runtime import MarkerRequest, TransactionCoordinatorRuntime
from headwater.transactions.metadata import TransactionConfig
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest as AddOffsetsV4
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as AddV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTopic as TopicV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest as AddV5
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnTopic as AddTopicV5
from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnTransaction as AddTransactionV5,
)
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnV5
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as InitProducerIdV5
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.request_header.v2 import RequestHeader
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest as TxnOffsetCommitV5
from kio.serial import entity_writer

from tests.unit.transactions.helpers import ProducerIds
from tests.unit.transactions.test_coordinator_runtime import FakeLog

T0 = TopicPartition("t", 0)
TID = "tx"


class Markers:
    def __init__(self) -> None:
        self.written: list[MarkerRequest] = []

    async def __call__(self, request: MarkerRequest) -> Mapping[TopicPartition, ErrorCode]:
        self.written.append(request)
        return dict.fromkeys(request.partitions, ErrorCode.NONE)


class Replicas:
    """The partition leaders' side of the check: asks the coordinator runtime directly."""

    def __init__(self, runtime: TransactionCoordinatorRuntime) -> None:
        self.runtime = runtime

    async def verify_transaction(
        self, tid: str, pid: int, epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        return self.runtime.verify_partition(
            tid, producer_id=pid, producer_epoch=epoch, partition=tp
        )

    async def add_to_transaction(
        self, tid: str, pid: int, epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        answer = await self.runtime.add_partitions(
            tid, producer_id=pid, producer_epoch=epoch, partitions=[tp]
        )
        return answer.error


class Groups:
    """Records the transactional offset commits that reach the group coordinator."""

    def __init__(self) -> None:
        self.commits: list[gv.OffsetCommitRequest] = []

    async def commit_offsets(self, req: gv.OffsetCommitRequest) -> gv.OffsetCommitResponse:
        self.commits.append(req)
        return gv.OffsetCommitResponse(ErrorCode.NONE)


class Harness:
    def __init__(self, authz: RequestAuthorizer = ALLOW_ALL) -> None:
        self.markers = Markers()
        self.groups = Groups()
        log = FakeLog()
        self.runtime = TransactionCoordinatorRuntime(
            num_partitions=1,
            append=log.append,
            read=log.read,
            write_markers=self.markers,
            allocate_producer_id=ProducerIds(),
            config=TransactionConfig(transaction_max_timeout_ms=60_000),
        )
        self.replicas = Replicas(self.runtime)
        apis = KafkaTxnApis(
            listener="KAFKA",
            runtime=self.runtime,
            groups=self.groups,  # type: ignore[arg-type]
            replicas=self.replicas,  # type: ignore[arg-type]
            metadata=None,  # type: ignore[arg-type]
            authz=authz,
            is_known_partition=lambda tp: tp.topic == "t",
            offsets_partition=lambda group: TopicPartition("__consumer_offsets", 0),
            ensure_transaction_state=lambda: None,
        )

        async def idempotent(request: p.Request) -> Any:
            raise AssertionError("an InitProducerId without a transactional id")

        self.handlers = apis.handlers(find_coordinator=None, init_producer_id=idempotent)

    async def __call__(self, body: Any) -> Any:
        request = p.Request(body.__api_key__, body.__version__, 1, "test", body)
        return await self.handlers[request.api_key](request)

    async def init(self, tid: str = TID, timeout_ms: int = 10_000) -> Any:
        return await self(
            InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                producer_id=-1,
                producer_epoch=-1,
            )
        )

    async def add(self, pid: int, epoch: int, *topics: str) -> list[tuple[str, int]]:
        r = await self(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TID,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=tuple(
                    AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics or ("t",)
                ),
            )
        )
        return sorted(
            (t.name, int(x.partition_error_code))
            for t in r.results_by_topic_v3_and_below
            for x in t.results_by_partition
        )

    async def end(self, pid: int, epoch: int, *, commit: bool = True) -> int:
        r = await self(
            EndTxnRequest(
                transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit
            )
        )
        return int(r.error_code)

    def held(self) -> tuple[str, int, int, tuple[TopicPartition, ...]]:
        d = self.runtime.describe(TID)
        return d.state, d.producer_id, d.producer_epoch, d.partitions

    async def settle(self, state: str) -> None:
        for _ in range(500):
            if self.runtime.describe(TID).state == state:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{self.held()}, not {state}")


def run(scenario: Any) -> None:
    async def main() -> None:
        h = await scenario_harness()
        try:
            await scenario(h)
        finally:
            await h.runtime.close()

    asyncio.run(main())


async def scenario_harness(authz: RequestAuthorizer = ALLOW_ALL) -> Harness:
    h = Harness(authz)
    await h.runtime.on_become_leader(0, 1)
    return h


def test_transaction_version_1_keeps_the_epoch_and_answers_a_retried_end() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.init()
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        for commit in (True, False, True):
            assert await h.add(pid, epoch) == [("t", 0)]
            assert await h.end(pid, epoch, commit=commit) == 0
            await h.settle("CompleteCommit" if commit else "CompleteAbort")
            assert h.held() == ("CompleteCommit" if commit else "CompleteAbort", pid, epoch, ())
            assert h.markers.written[-1].producer_epoch == epoch  # the markers carry it
        # A retry of the last EndTxn is answered as the first; the other result is not.
        assert await h.end(pid, epoch, commit=True) == 0
        assert await h.end(pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert len(h.markers.written) == 3

    run(scenario)


def test_bad_requests_answer_kafkas_errors_and_change_nothing() -> None:
    async def scenario(h: Harness) -> None:
        too_long = await h.init(timeout_ms=60_001)
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (too_long.producer_id, too_long.producer_epoch) == (-1, -1)
        assert h.runtime.describe(TID).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert (await h.init(tid="")).error_code == ErrorCode.INVALID_REQUEST

        init = await h.init()
        pid, epoch = init.producer_id, init.producer_epoch
        assert await h.end(pid, epoch) == ErrorCode.INVALID_TXN_STATE  # nothing open
        assert await h.add(pid, epoch, "missing", "t") == [
            ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("t", ErrorCode.OPERATION_NOT_ATTEMPTED),
        ]
        assert await h.add(pid, epoch + 1) == [("t", ErrorCode.PRODUCER_FENCED)]
        assert await h.add(pid + 1, epoch) == [("t", ErrorCode.INVALID_PRODUCER_ID_MAPPING)]
        assert await h.end(pid, epoch + 1) == ErrorCode.PRODUCER_FENCED
        assert h.held() == ("Empty", pid, epoch, ())
        assert h.markers.written == []

        # A second producer fences the first: its EndTxn is PRODUCER_FENCED.
        assert await h.add(pid, epoch) == [("t", 0)]
        fenced_by = await h.init()
        while fenced_by.error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
            await asyncio.sleep(0.001)
            fenced_by = await h.init()
        assert fenced_by.producer_epoch > epoch
        assert await h.end(pid, epoch) == ErrorCode.PRODUCER_FENCED

    run(scenario)


async def _end_v5(h: Harness, pid: int, epoch: int, *, commit: bool) -> tuple[int, int, int]:
    r = await h(
        EndTxnV5(transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit)
    )
    return int(r.error_code), r.producer_id, r.producer_epoch


def test_transaction_version_2_bumps_the_epoch_at_every_end() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.init()
        pid, epoch = init.producer_id, init.producer_epoch
        for commit in (True, False, True):
            # The partition leader's implicit add opens the transaction (Produce v12).
            assert await h.replicas.add_to_transaction(TID, pid, epoch, T0) == 0
            assert await _end_v5(h, pid, epoch, commit=commit) == (0, pid, epoch + 1)
            state = "CompleteCommit" if commit else "CompleteAbort"
            await h.settle(state)
            assert h.held() == (state, pid, epoch + 1, ())
            # The markers carry the bumped epoch: the old one is fenced at the partition.
            assert h.markers.written[-1].producer_epoch == epoch + 1
            epoch += 1
        assert len(h.markers.written) == 3

    run(scenario)


def test_transaction_version_2_retried_end_txn_and_late_requests_of_the_old_epoch() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.init()
        pid, old = init.producer_id, init.producer_epoch
        assert await h.replicas.add_to_transaction(TID, pid, old, T0) == 0
        assert await _end_v5(h, pid, old, commit=True) == (0, pid, old + 1)
        await h.settle("CompleteCommit")
        # A retry (the answer was lost) gets the result and the epoch to use now.
        assert await _end_v5(h, pid, old, commit=True) == (0, pid, old + 1)
        # The other result with the old epoch is refused, with no producer id or epoch.
        assert await _end_v5(h, pid, old, commit=False) == (ErrorCode.INVALID_TXN_STATE, -1, -1)
        # A late produce or offset commit of the ended transaction is fenced.
        late = await h.replicas.add_to_transaction(TID, pid, old, T0)
        assert late == ErrorCode.PRODUCER_FENCED
        r = await h(_txn_offset_commit_v5(pid, old))
        assert [x.error_code for t in r.topics for x in t.partitions] == [ErrorCode.PRODUCER_FENCED]
        assert h.held() == ("CompleteCommit", pid, old + 1, ())
        assert h.groups.commits == [] and len(h.markers.written) == 1
        # A commit with nothing open is refused; an abort is accepted and bumps the epoch.
        assert await _end_v5(h, pid, old + 1, commit=True) == (ErrorCode.INVALID_TXN_STATE, -1, -1)
        assert await _end_v5(h, pid, old + 1, commit=False) == (0, pid, old + 2)
        # A future epoch is fenced.
        assert await _end_v5(h, pid, old + 5, commit=False) == (ErrorCode.PRODUCER_FENCED, -1, -1)

    run(scenario)


def test_transaction_version_2_txn_offset_commit_adds_the_groups_partition() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.init()
        pid, epoch = init.producer_id, init.producer_epoch
        # Version 1 (v3): refused without AddOffsetsToTxn; version 2 (v5): added.
        r = await h(_txn_offset_commit(pid, epoch))
        assert [x.error_code for t in r.topics for x in t.partitions] == [
            ErrorCode.INVALID_TXN_STATE
        ]
        r = await h(_txn_offset_commit_v5(pid, epoch))
        assert [x.error_code for t in r.topics for x in t.partitions] == [ErrorCode.NONE]
        assert h.held() == (
            "Ongoing",
            pid,
            epoch,
            (TopicPartition("__consumer_offsets", 0),),
        )
        assert [(c.group_id, c.producer_epoch) for c in h.groups.commits] == [("g", epoch)]

    run(scenario)


def _txn_offset_commit_v5(pid: int, epoch: int) -> TxnOffsetCommitV5:
    v3 = _txn_offset_commit(pid, epoch)
    return TxnOffsetCommitV5(
        transactional_id=v3.transactional_id,
        group_id=v3.group_id,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=v3.topics,  # type: ignore[arg-type]
    )


def _txn_offset_commit(pid: int, epoch: int, group: str = "g") -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id=TID,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        topics=(
            TxnOffsetCommitRequestTopic(
                name="t",
                partitions=(
                    TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )


def test_txn_offset_commit_needs_add_offsets_to_txn_first() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.init()
        pid, epoch = init.producer_id, init.producer_epoch

        def codes(r: Any) -> list[tuple[str, int, int]]:
            return [
                (t.name, x.partition_index, x.error_code) for t in r.topics for x in t.partitions
            ]

        # Nothing open: refused, and nothing reaches the group coordinator.
        r = await h(_txn_offset_commit(pid, epoch))
        assert codes(r) == [("t", 0, ErrorCode.INVALID_TXN_STATE)]
        # A transaction open on a data partition only: still refused.
        assert await h.add(pid, epoch) == [("t", 0)]
        r = await h(_txn_offset_commit(pid, epoch))
        assert codes(r) == [("t", 0, ErrorCode.INVALID_TXN_STATE)]
        assert h.groups.commits == []
        # A stale epoch is fenced even after AddOffsetsToTxn.
        added = await h(
            AddOffsetsToTxnRequest(
                transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id="g"
            )
        )
        assert added.error_code == ErrorCode.NONE
        r = await h(_txn_offset_commit(pid, epoch + 1))
        assert codes(r)[0][2] != ErrorCode.NONE
        assert h.groups.commits == []
        # After AddOffsetsToTxn: the commit goes through, as the producer's.
        r = await h(_txn_offset_commit(pid, epoch))
        assert codes(r) == [("t", 0, ErrorCode.NONE)]
        assert [(c.group_id, c.producer_id, c.producer_epoch) for c in h.groups.commits] == [
            ("g", pid, epoch)
        ]

    run(scenario)


def _allow(name: str, op: Op, rtype: ResourceType) -> AclBinding:
    return binding(
        resource_type=rtype,
        name=name,
        principal="User:alice",
        operation=op,
        permission_type=AclPermissionType.ALLOW,
        host="*",
        pattern_type=PatternType.LITERAL,
    )


def test_acls_are_kafkas() -> None:
    authz = RequestAuthorizer(
        AclAuthorizer(
            AuthorizerSettings(),
            AclSnapshot.of(
                [
                    _allow("mine", Op.WRITE, ResourceType.TRANSACTIONAL_ID),
                    _allow("t", Op.WRITE, ResourceType.TOPIC),
                ]
            ),
        )
    )

    async def scenario() -> None:
        token = set_identity(RequestIdentity(KafkaPrincipal("User", "alice"), "10.0.0.1"))
        h = await scenario_harness(authz)
        try:
            denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert (await h.init(tid="theirs")).error_code == denied
            init = await h.init(tid="mine")
            assert init.error_code == 0
            r = await h(
                EndTxnRequest(
                    transactional_id="theirs", producer_id=1, producer_epoch=0, committed=True
                )
            )
            assert r.error_code == denied
            r = await h(
                AddOffsetsToTxnRequest(
                    transactional_id="mine",
                    producer_id=init.producer_id,
                    producer_epoch=init.producer_epoch,
                    group_id="g",
                )
            )
            assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            r = await h(
                TxnOffsetCommitRequest(
                    transactional_id="mine",
                    group_id="g",
                    producer_id=init.producer_id,
                    producer_epoch=init.producer_epoch,
                    topics=(
                        TxnOffsetCommitRequestTopic(
                            name="t",
                            partitions=(
                                TxnOffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=5,
                                    committed_leader_epoch=-1,
                                    committed_metadata=None,
                                ),
                            ),
                        ),
                    ),
                )
            )
            assert [
                (t.name, x.partition_index, x.error_code) for t in r.topics for x in t.partitions
            ] == [("t", 0, ErrorCode.GROUP_AUTHORIZATION_FAILED)]
            r = await h(
                AddV4(
                    transactions=(
                        AddPartitionsToTxnTransaction(
                            transactional_id="mine",
                            producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch,
                            verify_only=True,
                            topics=(TopicV4(name="t", partitions=(0,)),),
                        ),
                    )
                )
            )
            assert (r.error_code, r.results_by_transaction) == (
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                (),
            )
            # ListTransactions shows only the ids the caller may DESCRIBE (WRITE implies it).
            await h.runtime.init_producer_id("not-listed", transaction_timeout_ms=1000)
            listed = await h(ListTransactionsRequest())
            assert listed.error_code == 0
            assert [t.transactional_id for t in listed.transaction_states] == ["mine"]
        finally:
            await h.runtime.close()
            reset_identity(token)

    asyncio.run(scenario())


def test_describe_and_list_transactions_in_kafkas_shape() -> None:
    async def scenario(h: Harness) -> None:
        missing = await h(DescribeTransactionsRequest(transactional_ids=("nope",)))
        (state,) = missing.transaction_states
        assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert (state.producer_id, state.producer_epoch, state.topics) == (0, 0, ())

        init = await h.init()
        assert await h.add(init.producer_id, init.producer_epoch) == [("t", 0)]
        (state,) = (
            await h(DescribeTransactionsRequest(transactional_ids=(TID,)))
        ).transaction_states
        assert state.error_code == 0
        assert (state.transaction_state, state.producer_id) == ("Ongoing", init.producer_id)
        assert state.transaction_timeout == datetime.timedelta(seconds=10)
        assert [(t.topic, t.partitions) for t in state.topics] == [("t", (0,))]

        listed = await h(ListTransactionsRequest(state_filters=("Ongoing", "Bogus")))
        assert listed.unknown_state_filters == ("Bogus",)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            (TID, "Ongoing")
        ]

    run(scenario)


def test_find_coordinator_of_another_key_type_without_groups_is_invalid() -> None:
    async def scenario(h: Harness) -> None:
        r = await h(FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        (c,) = r.coordinators
        assert (c.error_code, c.node_id) == (ErrorCode.INVALID_REQUEST, -1)
        r = await h(FindCoordinatorRequest(key_type=1, coordinator_keys=("",)))
        (c,) = r.coordinators
        assert c.error_code == ErrorCode.INVALID_REQUEST

    run(scenario)


def test_partition_codes_fill_in_the_requests_error() -> None:
    answered = [(TopicPartition("a", 1), ErrorCode.NONE)]
    assert partition_codes(
        [("a", 1), ("a", 2)], answered, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    ) == [("a", 1, ErrorCode.NONE), ("a", 2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]


# -- fuzz: the new API keys' requests, corrupted, decode or are refused ---------------------

SAMPLES: tuple[Any, ...] = (
    InitProducerIdRequest(
        transactional_id=TID,
        transaction_timeout=datetime.timedelta(seconds=1),
        producer_id=-1,
        producer_epoch=-1,
    ),
    FindCoordinatorRequest(key_type=1, coordinator_keys=(TID, "other")),
    AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TID,
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name="t", partitions=(0, 1)),),
    ),
    AddOffsetsToTxnRequest(transactional_id=TID, producer_id=7, producer_epoch=0, group_id="g"),
    EndTxnRequest(transactional_id=TID, producer_id=7, producer_epoch=0, committed=True),
    DescribeTransactionsRequest(transactional_ids=(TID,)),
    ListTransactionsRequest(state_filters=("Ongoing",), producer_id_filters=(7,)),
    DescribeProducersRequest(topics=(TopicRequest(name="t", partition_indexes=(0,)),)),
    # The transaction version 2 forms (and the versions that only add an error code).
    EndTxnV5(transactional_id=TID, producer_id=7, producer_epoch=0, committed=False),
    AddOffsetsV4(transactional_id=TID, producer_id=7, producer_epoch=0, group_id="g"),
    InitProducerIdV5(
        transactional_id=TID,
        transaction_timeout=datetime.timedelta(seconds=1),
        producer_id=-1,
        producer_epoch=-1,
    ),
    AddV5(
        transactions=(
            AddTransactionV5(
                transactional_id=TID,
                producer_id=7,
                producer_epoch=0,
                verify_only=True,
                topics=(AddTopicV5(name="t", partitions=(0,)),),
            ),
        )
    ),
)


def test_the_version_2_era_forms_are_answered() -> None:
    """AddOffsetsToTxn v4, InitProducerId v5 and AddPartitionsToTxn v5 are served by the
    same handlers as the versions before them."""

    async def scenario(h: Harness) -> None:
        init = await h(
            InitProducerIdV5(
                transactional_id=TID,
                transaction_timeout=datetime.timedelta(seconds=10),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        assert init.error_code == 0 and init.producer_epoch == 0
        pid = init.producer_id
        added = await h(
            AddOffsetsV4(transactional_id=TID, producer_id=pid, producer_epoch=0, group_id="g")
        )
        assert added.error_code == 0
        verified = await h(
            AddV5(
                transactions=(
                    AddTransactionV5(
                        transactional_id=TID,
                        producer_id=pid,
                        producer_epoch=0,
                        verify_only=True,
                        topics=(AddTopicV5(name="__consumer_offsets", partitions=(0,)),),
                    ),
                )
            )
        )
        [result] = verified.results_by_transaction
        assert [
            x.partition_error_code for t in result.topic_results for x in t.results_by_partition
        ] == [0]
        ended = await _end_v5(h, pid, 0, commit=False)
        assert ended == (0, pid, 1)

    run(scenario)


def _frame(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(RequestHeader)(
        out,
        RequestHeader(
            request_api_key=body.__api_key__,
            request_api_version=body.__version__,
            correlation_id=3,
            client_id="fuzz",
        ),
    )
    entity_writer(type(body))(out, body)
    return out.getvalue()


def test_every_sample_decodes_as_sent() -> None:
    for body in SAMPLES:
        request = p.parse_request(_frame(body))
        assert (request.api_key, request.body) == (body.__api_key__, body)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_fuzz_a_corrupted_transaction_request_decodes_or_raises_frame_error(
    body: Any, data: st.DataObject
) -> None:
    frame = bytearray(_frame(body))
    position = data.draw(st.integers(0, len(frame) - 1))
    frame[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(p.FrameError):
        p.parse_request(bytes(frame))
    with contextlib.suppress(p.FrameError):
        p.parse_request(bytes(frame[:position]))
    assert struct.unpack_from(">h", _frame(body))[0] in p.SUPPORTED


@pytest.mark.parametrize("api_key", [22, 24, 25, 26, 28, 61, 65, 66])
def test_the_transaction_apis_are_advertised(api_key: int) -> None:
    assert api_key in p.SUPPORTED and api_key in p.API_NAMES
