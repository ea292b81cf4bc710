"""The coordinator broker's consumer-group metrics: committed offset and lag per group
and partition, rebalance counts and durations, read from callbacks at scrape time."""

from __future__ import annotations

from headwater.server.metrics import BrokerMetrics, GroupOffset, RebalanceFigures


def test_group_offsets_lag_and_rebalances_are_exported() -> None:
    metrics = BrokerMetrics()
    ends = {("t", 0): 50}
    metrics.register_groups(
        committed=lambda: [GroupOffset("g", "t", 0, 42), GroupOffset("g", "u", 1, 7)],
        end_offset=lambda topic, partition: ends.get((topic, partition)),
        rebalances=lambda: {"g": RebalanceFigures(3, 250, 900)},
    )
    value = metrics.registry.get_sample_value
    labels = {"group": "g", "topic": "t", "partition": "0"}
    assert value("headwater_group_committed_offset", labels) == 42
    assert value("headwater_group_lag", labels) == 8
    other = {"group": "g", "topic": "u", "partition": "1"}
    assert value("headwater_group_committed_offset", other) == 7
    assert value("headwater_group_lag", other) is None  # no replica here: no lag sample
    assert value("headwater_group_rebalances_total", {"group": "g"}) == 3
    assert value("headwater_group_rebalance_time_seconds_total", {"group": "g"}) == 0.9
    assert value("headwater_group_last_rebalance_seconds", {"group": "g"}) == 0.25
