"""Client settings validation: every bad value fails the constructor with its name."""

from __future__ import annotations

import pytest
from headwater.client.settings import (
    ConsumerSettings,
    ProducerSettings,
    parse_acks,
    parse_bootstrap,
)
from headwater.retry import RetryPolicy

BOOT = ("127.0.0.1:9092",)


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,") == ("a:1", "b:2")
    assert parse_bootstrap(["a:1"]) == ("a:1",)
    for bad in ("", "a", "a:x", ":1", "a:70000"):
        with pytest.raises(ValueError, match=r"bootstrap|HOST:PORT"):
            parse_bootstrap(bad)


def test_parse_acks() -> None:
    assert [parse_acks(a) for a in ("all", -1, "1", 1, 0, "0")] == [-1, -1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="acks"):
        parse_acks(2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"linger_ms": -1}, "linger_ms"),
        ({"batch_size": 0}, "batch_size"),
        ({"buffer_memory": 0}, "buffer_memory"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"acks": 1, "enable_idempotence": True}, "idempotence"),
        ({"max_in_flight_requests_per_connection": 6}, "max_in_flight"),
        ({"delivery_timeout_ms": 100, "request_timeout_ms": 1000}, "delivery_timeout_ms"),
    ],
)
def test_bad_producer_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ProducerSettings(bootstrap_servers=BOOT, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"auto_offset_reset": "smallest"}, "auto_offset_reset"),
        ({"max_poll_records": 0}, "max_poll_records"),
        ({"fetch_max_wait_ms": -1}, "fetch_max_wait_ms"),
    ],
)
def test_bad_consumer_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ConsumerSettings(bootstrap_servers=BOOT, **kwargs)  # type: ignore[arg-type]


def test_defaults_are_kafkas() -> None:
    p = ProducerSettings(bootstrap_servers=BOOT)
    assert (p.acks, p.linger_ms, p.batch_size, p.delivery_timeout_ms) == (-1, 5, 16384, 120000)
    c = ConsumerSettings(bootstrap_servers=BOOT)
    assert (c.fetch_max_wait_ms, c.max_poll_records, c.max_partition_fetch_bytes) == (
        500,
        500,
        1024 * 1024,
    )


def test_batches_pipeline_per_partition_only_when_order_survives_retries() -> None:
    def depth(**kwargs: object) -> int:
        settings = ProducerSettings(bootstrap_servers=BOOT, **kwargs)  # type: ignore[arg-type]
        return settings.max_in_flight_per_partition

    assert depth() == 5  # idempotent: sequence numbers keep the order
    assert depth(max_in_flight_requests_per_connection=3) == 3
    assert depth(acks=1, enable_idempotence=False) == 1  # retries could reorder: one at a time
    # acks=1 with idempotence left unset: batches are numbered, so they pipeline.
    assert depth(acks=1, enable_idempotence=False, sequence_acks_1=True) == 5
    assert depth(acks=1, enable_idempotence=False, retry=RetryPolicy(retries=0)) == 5
    assert depth(acks=0, enable_idempotence=False) == 5


def test_acks_1_is_sequenced_only_when_idempotence_was_left_unset() -> None:
    def sequenced(**kwargs: object) -> bool:
        settings = ProducerSettings(bootstrap_servers=BOOT, **kwargs)  # type: ignore[arg-type]
        return settings.sequenced

    assert sequenced()  # acks=all, idempotent
    assert sequenced(acks=1, enable_idempotence=False, sequence_acks_1=True)
    assert not sequenced(acks=1, enable_idempotence=False)  # explicitly off
    assert not sequenced(acks=0, enable_idempotence=False, sequence_acks_1=True)
    assert not sequenced(
        acks=1,
        enable_idempotence=False,
        sequence_acks_1=True,
        max_in_flight_requests_per_connection=6,
    )
