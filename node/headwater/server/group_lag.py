"""End offsets of partitions this broker does not host, for the group lag metric.

The coordinator exports ``headwater_group_lag`` for every partition its groups have
committed; a scrape does no network I/O, so for partitions with no replica here (most
of them, in a cluster of more than a few brokers) the broker's periodic scheduler calls
:meth:`RemoteEndOffsets.refresh` every :data:`REFRESH_INTERVAL_S`, which asks each leader
for its latest offset (ListOffsets, which answers with the high watermark), and the
scrape reads the last answers.  A lag sample is at most that
old; one whose leader did not answer is left out until it does.

Runs on the broker's event loop; :meth:`RemoteEndOffsets.get` may be called from the
metrics thread (it reads one dict entry).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping

import grpc

from headwater import errors
from headwater.server.runtime import channels
from headwater.v1 import broker_pb2, broker_pb2_grpc
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

REFRESH_INTERVAL_S = 10.0
"""How often the leaders are asked: the lag metric's staleness, at most."""

Ask = Callable[[str, list[TopicPartition]], Awaitable[Mapping[TopicPartition, int]]]
"""``ask(leader address, partitions) -> latest offset of each that answered``."""


def by_leader(
    wanted: Iterable[TopicPartition], leader_address: Callable[[TopicPartition], str | None]
) -> dict[str, list[TopicPartition]]:
    """The partitions to ask each leader about (those with no known leader left out)."""
    out: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in sorted(set(wanted)):
        address = leader_address(tp)
        if address is not None:
            out[address].append(tp)
    return dict(out)


class RemoteEndOffsets:
    """The last known end offset of remote partitions (see the module docstring)."""

    def __init__(
        self,
        *,
        wanted: Callable[[], Iterable[TopicPartition]],
        leader_address: Callable[[TopicPartition], str | None],
        ask: Ask,
    ) -> None:
        self._wanted = wanted
        self._leader_address = leader_address
        self._ask = ask
        self._ends: dict[TopicPartition, int] = {}

    def get(self, tp: TopicPartition) -> int | None:
        return self._ends.get(tp)

    async def refresh(self) -> None:
        """Ask every leader once; keep only partitions still wanted."""
        plan = by_leader(self._wanted(), self._leader_address)
        ends: dict[TopicPartition, int] = {}
        for address, tps in plan.items():
            try:
                ends.update(await self._ask(address, tps))
            except (grpc.RpcError, OSError, errors.HeadwaterError) as exc:  # SASL refusals too
                log.debug(
                    "end offsets from %s for the lag metric: %s", address, errors.describe(exc)
                )
                ends.update({tp: e for tp in tps if (e := self._ends.get(tp)) is not None})
        self._ends = ends


def list_latest(timeout_s: float) -> Ask:
    """An :data:`Ask` that sends ListOffsets (latest) over a short-lived channel."""

    async def ask(address: str, tps: list[TopicPartition]) -> Mapping[TopicPartition, int]:
        request = broker_pb2.ListOffsetsRequest(
            replica_id=-1,
            partitions=[
                broker_pb2.ListOffsetsPartition(topic=t, partition=p, timestamp=-1) for t, p in tps
            ],
        )
        async with channels.aio_channel(address) as channel:
            resp = await broker_pb2_grpc.BrokerStub(channel).ListOffsets(request, timeout=timeout_s)
        return {
            TopicPartition(p.topic, p.partition): p.offset
            for p in resp.partitions
            if p.error == 0 and p.offset >= 0
        }

    return ask
