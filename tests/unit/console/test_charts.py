from __future__ import annotations

from headwater.console import charts


def test_too_few_samples_draw_nothing() -> None:
    assert charts.line([]) is None
    assert charts.line([(0, 5)]) is None


def test_samples_scale_into_the_box() -> None:
    got = charts.line([(1000, 0), (2000, 10), (3000, 5)], width=100, height=50)
    assert got is not None
    assert got.points == "0.0,50.0 50.0,0.0 100.0,25.0"
    assert (got.low, got.high, got.start_ms, got.end_ms) == (0, 10, 1000, 3000)


def test_a_flat_zero_line_sits_on_the_axis() -> None:
    got = charts.line([(0, 0), (0, 0)], width=10, height=10)
    assert got is not None and got.points == "0.0,10.0 0.0,10.0"
