"""Keys, values and headers shown as text, JSON or hex (no I/O; the templates escape).

Bytes that are not UTF-8 fall back to hex with the reason shown, so no format hides a
value; a value longer than :data:`MAX_SHOWN` bytes is cut, and the cut is said.
"""

from __future__ import annotations

import json
from typing import NamedTuple

MAX_SHOWN = 16 * 1024
"""The most bytes of one key or value a page shows."""


class Shown(NamedTuple):
    """What a page prints for some bytes: ``text`` and a note (``""`` when none)."""

    text: str
    note: str = ""


def hexdump(data: bytes) -> str:
    return " ".join(data[i : i + 4].hex() for i in range(0, len(data), 4))


def show(data: bytes | memoryview | None, fmt: str) -> Shown:
    """``data`` as ``fmt`` (text, json or hex); a view of fetched bytes is read as bytes."""
    if data is None:
        return Shown("", "null")
    cut = bytes(data[:MAX_SHOWN])
    note = f"first {MAX_SHOWN} of {len(data)} bytes" if len(data) > MAX_SHOWN else ""
    if fmt == "hex":
        return Shown(hexdump(cut), note)
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError:
        if note:  # the cut may split a character: show what decodes
            text = cut.decode("utf-8", errors="ignore")
        else:
            return Shown(hexdump(cut), "not UTF-8: shown as hex")
    if fmt == "json" and not note:
        try:
            return Shown(json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            return Shown(text, "not JSON: shown as text")
    return Shown(text, note)
