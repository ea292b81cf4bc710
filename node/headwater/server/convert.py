"""Protobuf <-> domain values, in one place so the servicers stay thin (docs/style.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import grpc

from headwater import __version__
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.v1 import common_pb2, control_pb2


def broker_to_proto(
    reg: BrokerRegistration, *, address: tuple[str, int] | None = None
) -> common_pb2.BrokerInfo:
    """The registration (``address`` replacing its host and port when given)."""
    host, port = address or (reg.host, reg.port)
    return common_pb2.BrokerInfo(
        id=reg.broker_id,
        host=host,
        port=port,
        rack=reg.rack or "",
        version=reg.version or __version__,
        protocol_version=reg.protocol_version,
        endpoints=reg.endpoints,
        listener_security_protocol_map=dict(reg.security_protocol_map),
    )


def brokers_to_proto(
    regs: Iterable[BrokerRegistration], *, listener: str
) -> list[common_pb2.BrokerInfo]:
    """The brokers as a client of ``listener`` must reach them: Kafka answers Metadata with
    the endpoints of the listener the request came in on, leaving out brokers without it."""
    return [
        broker_to_proto(reg, address=address)
        for reg in regs
        if (address := reg.endpoint_for(listener)) is not None
    ]


def broker_from_proto(info: common_pb2.BrokerInfo) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=info.id,
        host=info.host,
        port=info.port,
        rack=info.rack or None,
        version=info.version,
        protocol_version=info.protocol_version,
        endpoints=tuple(info.endpoints),
        security_protocol_map=tuple(sorted(info.listener_security_protocol_map.items())),
    )


def partition_state_to_proto(
    ps: PartitionState, *, controller_epoch: int
) -> control_pb2.PartitionState:
    lai = ps.leader_and_isr
    return control_pb2.PartitionState(
        topic=ps.topic,
        partition=ps.partition,
        controller_epoch=lai.controller_epoch if lai.controller_epoch >= 0 else controller_epoch,
        leader=lai.leader,
        leader_epoch=lai.leader_epoch,
        isr=list(lai.isr),
        zk_version=lai.zk_version,
        replicas=list(ps.replicas),
        topic_id=ps.topic_id,
    )


def partition_state_from_proto(msg: control_pb2.PartitionState) -> PartitionState:
    return PartitionState(
        topic=msg.topic,
        partition=msg.partition,
        leader_and_isr=LeaderAndIsr(
            leader=msg.leader,
            leader_epoch=msg.leader_epoch,
            isr=tuple(msg.isr),
            controller_epoch=msg.controller_epoch,
            zk_version=msg.zk_version,
        ),
        replicas=tuple(msg.replicas),
        topic_id=msg.topic_id,
    )


def partition_states_from_proto(
    msgs: Iterable[control_pb2.PartitionState],
) -> list[PartitionState]:
    return [partition_state_from_proto(m) for m in msgs]


def pb_error(code: int) -> common_pb2.ErrorCode.ValueType:
    """An :class:`headwater.errors.ErrorCode` as the proto enum (same numbers)."""
    return cast("common_pb2.ErrorCode.ValueType", int(code))


Context = grpc.aio.ServicerContext[Any, Any]
"""The servicer context type, for annotations."""
