"""Small charts drawn on the server as SVG (no script, nothing inline for the CSP to refuse).

:func:`lag_chart` scales a group's lag samples into SVG polylines' points, on one scale;
the template draws them.  No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

TOTAL = "total"

LagSample = tuple[int, Mapping[str, int]]
"""(time in ms, lag by series): ``"total"`` and ``"<topic>-<partition>"``."""


class Series(NamedTuple):
    name: str
    points: str
    """An SVG polyline's ``points``."""
    latest: int


class Chart(NamedTuple):
    """Lines in a ``width`` x ``height`` box from 0 (bottom) to ``high`` (top), over
    ``start_ms`` to ``end_ms``."""

    series: list[Series]
    width: int
    height: int
    high: int
    start_ms: int
    end_ms: int


def lag_chart(
    samples: Sequence[LagSample], *, width: int = 600, height: int = 160, partitions: int = 5
) -> Chart | None:
    """The total lag and the ``partitions`` partitions lagging most in the latest sample;
    None with fewer than two samples (nothing to draw yet).  A series missing from a
    sample (a partition not committed then) has no point there."""
    if len(samples) < 2:
        return None
    latest = samples[-1][1]
    names = [TOTAL] if TOTAL in latest else []
    names += sorted((n for n in latest if n != TOTAL), key=lambda n: (-latest[n], n))[:partitions]
    start, end = samples[0][0], samples[-1][0]
    span = max(end - start, 1)
    high = max([v for _, by in samples for n, v in by.items() if n in names] + [1])
    series = []
    for name in names:
        points = " ".join(
            f"{(t - start) * width / span:.1f},{height - by[name] * height / high:.1f}"
            for t, by in samples
            if name in by
        )
        series.append(Series(name, points, latest[name]))
    return Chart(series, width, height, high, start, end)
