"""Small charts drawn on the server as SVG (no script, nothing inline for the CSP to refuse).

:func:`line` scales ``(time, value)`` samples into an SVG polyline's points; the template
draws it.  No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Line(NamedTuple):
    """An SVG polyline's ``points`` in a ``width`` x ``height`` box, and the axis ends."""

    points: str
    width: int
    height: int
    low: int
    high: int
    start_ms: int
    end_ms: int


def line(samples: Sequence[tuple[int, int]], width: int = 600, height: int = 120) -> Line | None:
    """``samples`` (time in ms, value; oldest first) as a line from 0 up to the highest
    value; None with fewer than two samples (nothing to draw yet)."""
    if len(samples) < 2:
        return None
    start, end = samples[0][0], samples[-1][0]
    high = max(max(v for _, v in samples), 1)
    span = max(end - start, 1)
    points = " ".join(
        f"{(t - start) * width / span:.1f},{height - v * height / high:.1f}" for t, v in samples
    )
    return Line(points, width, height, 0, high, start, end)
