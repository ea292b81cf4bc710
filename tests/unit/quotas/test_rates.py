"""Sampled rates and throttle times, Kafka's formulas."""

from __future__ import annotations

import pytest
from headwater.quotas.entities import QuotaEntity, QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.quotas.rates import QuotaSensors, SampledRate, WindowConfig, throttle_ms

CONFIG = WindowConfig(num=11, size_seconds=1)


def test_first_bytes_are_spread_over_num_minus_one_windows() -> None:
    rate = SampledRate(CONFIG, now_ms=0)
    rate.record(10_000, now_ms=0)
    assert rate.window_ms(0) == 10_000
    assert rate.rate(0) == pytest.approx(1000.0)


def test_steady_rate_is_measured() -> None:
    rate = SampledRate(CONFIG, now_ms=0)
    for t in range(0, 30_000, 100):
        rate.record(100, now_ms=t)  # 1000 bytes/s
    assert rate.rate(29_999) == pytest.approx(1000.0, rel=0.1)


def test_old_samples_are_forgotten() -> None:
    rate = SampledRate(CONFIG, now_ms=0)
    rate.record(1_000_000, now_ms=0)
    assert rate.rate(20_000) == 0.0


def test_throttle_time_is_kafkas() -> None:
    # twice the bound over a 10 s window: stay silent one more window
    assert throttle_ms(2000.0, 1000.0, 10_000, CONFIG) == 10_000
    assert throttle_ms(1500.0, 1000.0, 10_000, CONFIG) == 5_000
    assert throttle_ms(1000.0, 1000.0, 10_000, CONFIG) == 0


def test_throttle_time_is_capped_at_the_whole_window() -> None:
    assert throttle_ms(1e9, 1.0, 10_000, CONFIG) == CONFIG.max_throttle_ms == 11_000


def test_a_client_that_honours_throttles_converges_on_the_bound() -> None:
    sensors = QuotaSensors(CONFIG)
    now, sent, batch = 0, 0, 4096
    while now < 60_000:
        delay = sensors.record("p", batch, 10_000.0, now)
        sent += batch
        now += max(delay, 10)
    assert sent / 60 == pytest.approx(10_000, rel=0.2)


def test_window_config_is_validated() -> None:
    with pytest.raises(ValueError, match=r"quota\.window\.num"):
        WindowConfig(num=0)
    with pytest.raises(ValueError, match=r"quota\.window\.size\.seconds"):
        WindowConfig(size_seconds=0)


def test_idle_sensors_expire() -> None:
    sensors = QuotaSensors(CONFIG)
    sensors.record("p", 1, 1.0, 0)
    sensors.expire(QuotaSensors.IDLE_EXPIRY_MS)
    assert sensors.rate("p", QuotaSensors.IDLE_EXPIRY_MS) == 0.0


def test_manager_shares_a_user_budget_across_client_ids() -> None:
    quotas = ClientQuotas(CONFIG)
    assert (
        quotas.record(QuotaKey.PRODUCER_BYTE_RATE, user="a", client_id="x", value=1e6, now_ms=0)
        == 0
    )
    quotas.replace({QuotaEntity.of(user="a"): {QuotaKey.PRODUCER_BYTE_RATE: 1000.0}})
    p = QuotaKey.PRODUCER_BYTE_RATE
    assert quotas.record(p, user="a", client_id="x", value=10_000, now_ms=0) == 0
    # the same user's other client id spends the same budget: now twice the bound
    assert quotas.record(p, user="a", client_id="y", value=10_000, now_ms=0) == 10_000
    # another user has no quota
    assert quotas.record(p, user="b", client_id="y", value=1e9, now_ms=0) == 0
    assert quotas.rate(p, user="a", client_id="z", now_ms=0) == pytest.approx(2000.0)
    assert not quotas.enabled(QuotaKey.CONSUMER_BYTE_RATE)
