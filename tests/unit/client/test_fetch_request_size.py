"""How many bytes a consumer's Fetch asks each broker for: ``fetch_max_bytes``, capped at
``FETCH_REQUEST_MAX_BYTES`` but never below ``max_partition_fetch_bytes``; and the
request the fetcher sends carries that figure."""

from __future__ import annotations

import pytest
from headwater.client.consumer.fetcher import FETCH_REQUEST_MAX_BYTES, request_max_bytes
from headwater.client.settings import ConsumerSettings

from tests.unit.client.test_inline_fetch import Harness

MIB = 1024 * 1024


def settings(**kw: int) -> ConsumerSettings:
    return ConsumerSettings(bootstrap_servers=("a:9092",), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fetch_max_bytes", "max_partition_fetch_bytes", "expected"),
    [
        (50 * MIB, 1 * MIB, FETCH_REQUEST_MAX_BYTES),  # Kafka's defaults: capped
        (2 * MIB, 1 * MIB, 2 * MIB),  # below the cap: as set
        (50 * MIB, 20 * MIB, 20 * MIB),  # one whole partition's worth at least
        (10 * MIB, 20 * MIB, 10 * MIB),  # but never above fetch_max_bytes
    ],
)
def test_request_max_bytes(
    fetch_max_bytes: int, max_partition_fetch_bytes: int, expected: int
) -> None:
    s = settings(
        fetch_max_bytes=fetch_max_bytes, max_partition_fetch_bytes=max_partition_fetch_bytes
    )
    assert request_max_bytes(s) == expected


def test_the_cap_is_below_glibcs_largest_mmap_threshold() -> None:
    assert FETCH_REQUEST_MAX_BYTES < 32 * MIB


def test_the_fetch_request_asks_for_request_max_bytes() -> None:
    h = Harness()
    h.a.append(h.subs.assigned_list()[0])
    h.step()
    ((_, request, _, _),) = h.channels.pool.pending
    assert request.max_bytes == request_max_bytes(h.fetcher._settings) == FETCH_REQUEST_MAX_BYTES
    assert {p.partition_max_bytes for p in request.partitions} == {MIB}
