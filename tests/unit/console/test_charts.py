from __future__ import annotations

from headwater.console import charts


def test_too_few_samples_draw_nothing() -> None:
    assert charts.lag_chart([]) is None
    assert charts.lag_chart([(0, {"total": 5})]) is None


def test_samples_scale_into_the_box_on_one_scale() -> None:
    samples = [
        (1000, {"total": 0, "t-0": 0}),
        (2000, {"total": 10, "t-0": 4}),
        (3000, {"total": 5, "t-0": 5}),
    ]
    got = charts.lag_chart(samples, width=100, height=50)
    assert got is not None
    assert (got.high, got.start_ms, got.end_ms) == (10, 1000, 3000)
    assert got.series == [
        charts.Series("total", "0.0,50.0 50.0,0.0 100.0,25.0", 5),
        charts.Series("t-0", "0.0,50.0 50.0,30.0 100.0,25.0", 5),
    ]


def test_only_the_partitions_lagging_most_are_drawn() -> None:
    latest = {"total": 21, "a-0": 1, "a-1": 9, "b-0": 5, "b-1": 6}
    got = charts.lag_chart([(0, latest), (1, latest)], partitions=2)
    assert got is not None
    assert [s.name for s in got.series] == ["total", "a-1", "b-1"]


def test_a_partition_committed_later_starts_later() -> None:
    got = charts.lag_chart([(0, {"total": 0}), (10, {"total": 2, "t-1": 2})], width=10, height=10)
    assert got is not None
    assert got.series[1] == charts.Series("t-1", "10.0,0.0", 2)


def test_a_flat_zero_line_sits_on_the_axis() -> None:
    got = charts.lag_chart([(0, {"total": 0}), (0, {"total": 0})], width=10, height=10)
    assert got is not None and got.series[0].points == "0.0,10.0 0.0,10.0"
