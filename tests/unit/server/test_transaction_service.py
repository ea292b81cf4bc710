"""The Transaction servicer over a real coordinator runtime and a real ReplicaManager:
Kafka's per-partition answers for AddPartitionsToTxn (unknown partitions fail, the
others OPERATION_NOT_ATTEMPTED), verify_only changing nothing, EndTxn's bumped epoch,
WriteTxnMarkers appending control batches, Describe/ListTransactions."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from headwater.errors import ErrorCode
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.records import read_batches
from headwater.security.acls import (
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)
from headwater.security.acls import AclOperation as Op
from headwater.security.authorizer import AclAuthorizer, AclSnapshot, AuthorizerSettings
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.services.transaction import TransactionService
from headwater.transactions.coordinator_runtime import MarkerRequest, TransactionCoordinatorRuntime
from headwater.v1 import common_pb2, transaction_pb2
from headwater.values import TopicPartition

from tests.unit.transactions.helpers import ProducerIds
from tests.unit.transactions.test_coordinator_runtime import FakeLog

from .conftest import TP, Harness

CTX: Any = None


async def no_markers(_request: MarkerRequest) -> Mapping[TopicPartition, ErrorCode]:
    return dict.fromkeys(_request.partitions, ErrorCode.NONE)


async def service(harness: Harness) -> tuple[TransactionService, TransactionCoordinatorRuntime]:
    log = FakeLog()
    runtime = TransactionCoordinatorRuntime(
        num_partitions=1,
        append=log.append,
        read=log.read,
        write_markers=no_markers,
        allocate_producer_id=ProducerIds(),
    )
    await runtime.on_become_leader(0, 1)
    groups = GroupCoordinatorRuntime(num_partitions=1, append=log.append, read=log.read)
    svc = TransactionService(
        runtime=runtime,
        groups=groups,
        replicas=harness.manager,
        is_known_partition=lambda tp: tp == TP,
        offsets_partition=lambda group: TopicPartition("__consumer_offsets", 0),
    )
    return svc, runtime


def tp_pb(tp: TopicPartition) -> common_pb2.TopicPartition:
    return common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)


def test_add_partitions_with_an_unknown_partition_adds_none(harness: Harness) -> None:
    async def scenario() -> None:
        svc, runtime = await service(harness)
        init = await runtime.init_producer_id("x", transaction_timeout_ms=10_000)
        missing = TopicPartition("nope", 0)
        resp = await svc.AddPartitionsToTxn(
            transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                partitions=[tp_pb(TP), tp_pb(missing)],
            ),
            CTX,
        )
        codes = {(p.topic, p.partition): ErrorCode(p.error) for p in resp.partitions}
        assert codes == {
            (TP.topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert runtime.describe("x").state == "Empty"  # nothing added
        verify = await svc.AddPartitionsToTxn(
            transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                partitions=[tp_pb(TP)],
                verify_only=True,
            ),
            CTX,
        )
        assert ErrorCode(verify.partitions[0].error) is ErrorCode.INVALID_TXN_STATE
        assert runtime.describe("x").state == "Empty"  # verify_only changes nothing
        added = await svc.AddPartitionsToTxn(
            transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                partitions=[tp_pb(TP)],
            ),
            CTX,
        )
        assert added.error == 0 and [p.error for p in added.partitions] == [0]
        ended = await svc.EndTxn(
            transaction_pb2.EndTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                committed=True,
            ),
            CTX,
        )
        assert ended.error == 0 and ended.producer_epoch == init.producer_epoch + 1
        described = await svc.DescribeTransactions(
            transaction_pb2.DescribeTransactionsRequest(transactional_ids=["x", "unknown"]), CTX
        )
        states = {t.transactional_id: t for t in described.transaction_states}
        assert states["x"].transaction_state in ("PrepareCommit", "CompleteCommit")
        assert ErrorCode(states["unknown"].error) is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        listed = await svc.ListTransactions(
            transaction_pb2.ListTransactionsRequest(state_filters=["Bogus"]), CTX
        )
        assert list(listed.unknown_state_filters) == ["Bogus"]
        await runtime.close()

    asyncio.run(scenario())


def test_write_txn_markers_appends_a_control_batch(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0,), epoch=1)]
        )
        m.partitions[TP].state.min_insync_replicas = 1  # a one-replica ISR may take acks=all
        svc, runtime = await service(harness)
        resp = await svc.WriteTxnMarkers(
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[
                    transaction_pb2.WritableTxnMarker(
                        producer_id=5,
                        producer_epoch=1,
                        committed=False,
                        partitions=[tp_pb(TP)],
                        coordinator_epoch=3,
                    )
                ]
            ),
            CTX,
        )
        [result] = resp.markers
        assert [ErrorCode(p.error) for p in result.partitions] == [ErrorCode.NONE]
        [batch] = list(read_batches(m.read_local(TP, 0, 1 << 20)))
        assert batch.is_control and batch.producer_id == 5
        await runtime.close()

    asyncio.run(scenario())


def test_txn_offset_commit_needs_the_group_added_by_add_offsets_to_txn(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        svc, runtime = await service(harness)
        await svc._groups.on_become_leader(0, 1)

        async def verify(tid: str, pid: int, epoch: int, tp: TopicPartition) -> ErrorCode:
            return runtime.verify_partition(
                tid, producer_id=pid, producer_epoch=epoch, partition=tp
            )

        harness.manager.verify_transaction = verify
        init = await runtime.init_producer_id("x", transaction_timeout_ms=10_000)
        commit = transaction_pb2.TxnOffsetCommitRequest(
            transactional_id="x",
            group_id="g",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            generation_id=-1,
            partitions=[
                transaction_pb2.TxnOffsetCommitPartition(topic="t", partition=0, committed_offset=5)
            ],
        )
        refused = await svc.TxnOffsetCommit(commit, CTX)
        assert ErrorCode(refused.error) is ErrorCode.INVALID_TXN_STATE
        assert [ErrorCode(p.error) for p in refused.partitions] == [ErrorCode.INVALID_TXN_STATE]
        assert "AddOffsetsToTxn" in refused.error_message
        added = await svc.AddOffsetsToTxn(
            transaction_pb2.AddOffsetsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                group_id="g",
            ),
            CTX,
        )
        assert added.error == 0
        accepted = await svc.TxnOffsetCommit(commit, CTX)
        assert ErrorCode(accepted.error) is not ErrorCode.INVALID_TXN_STATE
        assert [ErrorCode(p.error) for p in accepted.partitions] == [ErrorCode.NONE]
        await runtime.close()

    asyncio.run(scenario())


class _Peer:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


def _secured(svc: TransactionService, *bindings: AclBinding) -> None:
    snapshot = AclSnapshot.of(list(bindings))
    svc._authz = RequestAuthorizer(AclAuthorizer(AuthorizerSettings(), snapshot))


def _allow(name: str, op: Op, rtype: ResourceType) -> AclBinding:
    return binding(
        resource_type=rtype,
        name=name,
        principal="User:ANONYMOUS",
        operation=op,
        permission_type=AclPermissionType.ALLOW,
        host="*",
        pattern_type=PatternType.LITERAL,
    )


def test_acls_are_kafkas(harness: Harness) -> None:
    """TRANSACTIONAL_ID WRITE for the producer's calls, TOPIC WRITE on each added
    partition, GROUP READ for offsets, CLUSTER_ACTION for the broker-to-broker calls."""

    async def scenario() -> None:
        svc, runtime = await service(harness)
        init = await runtime.init_producer_id("x", transaction_timeout_ms=10_000)
        _secured(svc, _allow("x", Op.WRITE, ResourceType.TRANSACTIONAL_ID))
        ctx: Any = _Peer()
        add = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id="x",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            partitions=[tp_pb(TP)],
        )
        resp = await svc.AddPartitionsToTxn(add, ctx)
        assert [ErrorCode(p.error) for p in resp.partitions] == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
        ]
        other = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id="y", producer_id=1, producer_epoch=0, partitions=[tp_pb(TP)]
        )
        denied = await svc.AddPartitionsToTxn(other, ctx)
        assert ErrorCode(denied.error) is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        offsets = await svc.AddOffsetsToTxn(
            transaction_pb2.AddOffsetsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                group_id="g",
            ),
            ctx,
        )
        assert ErrorCode(offsets.error) is ErrorCode.GROUP_AUTHORIZATION_FAILED
        verify = await svc.AddPartitionsToTxn(
            transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="x", partitions=[tp_pb(TP)], verify_only=True
            ),
            ctx,
        )
        assert ErrorCode(verify.error) is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        markers = await svc.WriteTxnMarkers(
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[transaction_pb2.WritableTxnMarker(producer_id=1, partitions=[tp_pb(TP)])]
            ),
            ctx,
        )
        assert [ErrorCode(p.error) for p in markers.markers[0].partitions] == [
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        ]
        assert runtime.describe("x").state == "Empty"  # nothing changed
        await runtime.close()

    asyncio.run(scenario())


def test_a_broker_with_cluster_action_adds_a_partition_for_its_producer(harness: Harness) -> None:
    """A partition leader's implicit add (transaction version 2) comes with the broker's
    identity: CLUSTER_ACTION suffices (the leader checked the producer's ACLs), an
    unknown partition is still refused, and the add opens the transaction."""

    async def scenario() -> None:
        svc, runtime = await service(harness)
        init = await runtime.init_producer_id("x", transaction_timeout_ms=10_000)
        _secured(svc, _allow("kafka-cluster", Op.CLUSTER_ACTION, ResourceType.CLUSTER))
        ctx: Any = _Peer()

        def add(*tps: TopicPartition) -> transaction_pb2.AddPartitionsToTxnRequest:
            return transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="x",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                partitions=[tp_pb(tp) for tp in tps],
            )

        missing = await svc.AddPartitionsToTxn(add(TopicPartition("nope", 0)), ctx)
        assert [ErrorCode(p.error) for p in missing.partitions] == [
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ]
        assert runtime.describe("x").state == "Empty"
        added = await svc.AddPartitionsToTxn(add(TP), ctx)
        assert added.error == 0 and [p.error for p in added.partitions] == [0]
        assert runtime.describe("x").state == "Ongoing"
        assert runtime.describe("x").partitions == (TP,)
        # Without CLUSTER_ACTION (and no ACL on the id) the same request is refused.
        _secured(svc)
        refused = await svc.AddPartitionsToTxn(add(TP), ctx)
        assert ErrorCode(refused.error) is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        await runtime.close()

    asyncio.run(scenario())
