"""FindCoordinator's answer, shared by the group (key type 0) and transaction (1) handlers.

Each handler decides per key (:data:`Coordinator`); this module builds the answer in the
request's version: one coordinator before v4, one per ``coordinator_keys`` entry from v4
(KIP-699), and finds the coordinator partition's leader on the client's listener.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from headwater.coordination.model import PartitionState
from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.server.runtime.metadata_cache import MetadataCache

__all__ = ["Coordinator", "answer", "leader_on_listener", "no_coordinator"]

Coordinator = tuple[ErrorCode, str, int, str, int]
"""(error, message, node id, host, port) of one key."""

_NO_THROTTLE = datetime.timedelta(0)


def no_coordinator(code: ErrorCode, message: str) -> Coordinator:
    return code, message, -1, "", -1


def leader_on_listener(
    metadata: MetadataCache, listener: str, partition: PartitionState | None
) -> Coordinator:
    """The coordinator partition's leader as the client's listener reaches it;
    COORDINATOR_NOT_AVAILABLE while it has no leader or the leader lacks that listener."""
    leader = partition.leader_and_isr.leader if partition is not None else -1
    broker = metadata.brokers.get(leader)
    address = broker.endpoint_for(listener) if broker and broker.endpoints else None
    if address is None:
        return no_coordinator(
            ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is not reachable"
        )
    return ErrorCode.NONE, "", leader, address[0], address[1]


def answer(request: Request, coordinator_of: Callable[[str, int], Coordinator]) -> Any:
    """The FindCoordinatorResponse for ``request``, asking ``coordinator_of(key, key_type)``."""
    body, module = request.body, response_module(10, request.api_version)
    key_type = getattr(body, "key_type", 0)
    keys = body.coordinator_keys if hasattr(body, "coordinator_keys") else (body.key,)
    answers = [coordinator_of(key, key_type) for key in keys]
    if hasattr(module, "Coordinator"):
        return build(
            module.FindCoordinatorResponse,
            throttle_time=_NO_THROTTLE,
            coordinators=tuple(
                build(
                    module.Coordinator,
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error_code(code),
                    error_message=message or None,
                )
                for key, (code, message, node, host, port) in zip(keys, answers, strict=True)
            ),
        )
    code, message, node, host, port = answers[0]
    return build(
        module.FindCoordinatorResponse,
        throttle_time=_NO_THROTTLE,
        error_code=error_code(code),
        error_message=message or None,
        node_id=node,
        host=host,
        port=port,
    )
