"""Reset-offsets plans, lag, and how keys and values are shown."""

from __future__ import annotations

from headwater.client import TopicPartition
from headwater.console import formats, offsets
from headwater.console.inputs import ResetForm

TP = [TopicPartition("t", 0), TopicPartition("t", 1)]
EARLIEST = {TP[0]: 10, TP[1]: 0}
LATEST = {TP[0]: 100, TP[1]: 5}


def plan(spec: str, amount: int = 0, committed: dict[TopicPartition, int] | None = None) -> list:
    return [
        r.new
        for r in offsets.plan_reset(
            ResetForm("t", spec, amount, False),
            TP,
            earliest=EARLIEST,
            latest=LATEST,
            committed=committed or {},
            by_time={TP[0]: 50},
        )
    ]


def test_plans_clamp_to_the_log() -> None:
    assert plan("to-earliest") == [10, 0]
    assert plan("to-latest") == [100, 5]
    assert plan("to-offset", 3) == [10, 3]
    assert plan("to-offset", 1000) == [100, 5]
    assert plan("shift-by", -20, {TP[0]: 25, TP[1]: 4}) == [10, 0]
    assert plan("shift-by", 2, {TP[0]: 25}) == [27, 5]  # never committed: from the log end
    assert plan("to-datetime", 123) == [50, 5]  # no offset at that time: the log end


def test_lag_is_never_negative() -> None:
    rows = offsets.lag_rows({TP[0]: 90, TP[1]: 9}, {TP[0]: 100, TP[1]: 5}, {TP[0]: "m1"})
    assert [(r.lag, r.member) for r in rows] == [(10, "m1"), (0, None)]
    assert offsets.lag_rows({TP[0]: 1}, {}, {})[0].lag is None


def test_formats() -> None:
    assert formats.show(None, "text") == formats.Shown("", "null")
    assert formats.show(b"hi", "text") == formats.Shown("hi")
    assert formats.show(b"hi", "hex") == formats.Shown("6869")
    assert formats.show(b"\x00\x01\x02\x03\x04", "hex").text == "00010203 04"
    assert formats.show(b'{"a":[1]}', "json").text == '{\n  "a": [\n    1\n  ]\n}'
    assert formats.show(b"{nope", "json") == formats.Shown("{nope", "not JSON: shown as text")
    assert formats.show(b"\xff\xfe", "text") == formats.Shown("fffe", "not UTF-8: shown as hex")
    big = formats.show(b"a" * (formats.MAX_SHOWN + 10), "text")
    assert len(big.text) == formats.MAX_SHOWN
    assert big.note == f"first {formats.MAX_SHOWN} of {formats.MAX_SHOWN + 10} bytes"
