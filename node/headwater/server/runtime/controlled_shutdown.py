"""Controlled shutdown: have the controller move this broker's leaderships away first.

Kafka's ``controlled.shutdown.enable``: before a broker stops serving, the
controller elects other leaders for the partitions it leads, so clients move
over at once instead of waiting for the broker's ZooKeeper session to expire.
One *attempt* asks the controller and learns how many partitions this broker
still leads; the shutdown is done when none remain.  Attempts are bounded by
``controlled.shutdown.max.retries``, each by the controller socket timeout, and
separated by a fixed ``controlled.shutdown.retry.backoff.ms``; every failure is
retried (a controller failover, an unreachable controller), and after the last
attempt the broker shuts down anyway.  :class:`headwater.retry.RetryPolicy` is
not used: it retries only retriable errors, counts retries rather than attempts,
grows its backoff and jitters it, none of which is Kafka's behaviour here.

:func:`controlled_shutdown` is the retry loop over an injected attempt, so its
transitions are tested without a controller; :func:`ask_controller` is the real
attempt.  Runs on the broker's event loop; ZooKeeper calls are off-loaded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from headwater import errors
from headwater.coordination.broker import BrokerCoordinator
from headwater.errors import ErrorCode
from headwater.server.runtime import channels
from headwater.server.runtime.offload import run_blocking
from headwater.v1 import control_pb2, control_pb2_grpc

log = logging.getLogger(__name__)

Attempt = Callable[[], Awaitable[int]]
"""One controlled-shutdown request; returns how many partitions this broker still leads."""

ATTEMPT_TIMEOUT_MARGIN_S = 1.0
"""Added to the controller socket timeout to bound one attempt as a whole."""


async def controlled_shutdown(
    attempt: Attempt,
    *,
    max_retries: int,
    attempt_timeout_s: float,
    backoff_ms: int,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> bool:
    """Run ``attempt`` until no partition remains, at most ``max_retries`` times.

    True once an attempt reports no partition left; False when every attempt
    failed, timed out or left partitions (the broker then shuts down anyway).
    Each unsuccessful attempt is followed by a ``backoff_ms`` wait.
    """
    for number in range(1, max_retries + 1):
        try:
            remaining = await asyncio.wait_for(attempt(), attempt_timeout_s)
            if remaining == 0:
                log.info("controlled shutdown succeeded")
                return True
            log.info("controlled shutdown: %d partitions remain (attempt %d)", remaining, number)
        except Exception as exc:
            log.warning("controlled shutdown attempt %d failed: %s", number, errors.describe(exc))
        await sleep(backoff_ms / 1000.0)
    log.warning("controlled shutdown did not complete; shutting down anyway")
    return False


def ask_controller(coordinator: BrokerCoordinator, *, broker_id: int, timeout_ms: int) -> Attempt:
    """The real attempt: the local controller directly, else ControlledShutdown over gRPC.

    Raises NotControllerError when no controller is active or registered, and
    the controller's error when it refuses.
    """
    timeout_s = timeout_ms / 1000.0

    async def attempt() -> int:
        epoch = coordinator.broker_epoch
        if coordinator.is_controller:
            remaining = await run_blocking(
                coordinator.controller.controlled_shutdown, broker_id, epoch
            )
            return len(remaining)
        controller_id = await run_blocking(coordinator.controller_id)
        if controller_id is None:
            raise errors.NotControllerError("no active controller")
        brokers = (await run_blocking(coordinator.describe_cluster)).brokers
        target = next((b for b in brokers if b.broker_id == controller_id), None)
        if target is None:
            raise errors.NotControllerError(f"controller {controller_id} is not registered")
        address = channels.control_plane_address(target)
        async with channels.aio_channel(address, control_plane=True) as channel:
            response = await control_pb2_grpc.ControlStub(channel).ControlledShutdown(
                control_pb2.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch),
                timeout=timeout_s,
            )
        if ErrorCode(response.error) is not ErrorCode.NONE:
            raise errors.for_code(response.error, response.error_message)
        return len(response.remaining_partitions)

    return attempt
