"""FindCoordinator: which broker coordinates a key (a group id or a transactional id)."""

from __future__ import annotations

from collections.abc import Iterable

from headwater import errors
from headwater.client.transport import connection
from headwater.v1 import group_pb2, group_pb2_grpc


def find_coordinator(
    channels: connection.Channels,
    addresses: Iterable[str],
    *,
    key: str,
    key_type: int,
    timeout_ms: int,
) -> str:
    """The coordinator's ``host:port`` as the first broker of ``addresses`` that answers
    tells it.  An unreachable broker is skipped; an error answer is raised as Kafka's
    error; no answer at all is the last network error or COORDINATOR_NOT_AVAILABLE."""
    last: errors.HeadwaterError | None = None
    for address in addresses:
        stub = group_pb2_grpc.GroupStub(channels.channel(address))
        try:
            resp = connection.call(
                stub.FindCoordinator,
                group_pb2.FindCoordinatorRequest(key=key, key_type=key_type),
                address=address,
                timeout_ms=timeout_ms,
            )
        except errors.NetworkError as exc:
            last = exc
            continue
        if resp.error_code:
            raise errors.for_code(resp.error_code, resp.error_message or "FindCoordinator")
        return f"{resp.host}:{resp.port}"
    raise last or errors.CoordinatorNotAvailableError("no broker answered FindCoordinator")
