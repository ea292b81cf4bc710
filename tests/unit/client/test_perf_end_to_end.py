"""``headwater perf end-to-end`` in-process against the fake broker: one record at a
time and at a fixed ``--throughput``, the JSON and text summaries (count, mode,
percentile keys in order), progress on stderr, and each bad argument refused in one
line with exit code 2 before anything is sent."""

from __future__ import annotations

import json

import pytest
from headwater.cli.main import main

from tests.unit.client.fake_broker import FakeBroker

LATENCY_KEYS = ["avg", "p50", "p95", "p99", "p999", "max"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_one_at_a_time_reports_every_timed_record(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    broker.create("t", 2)
    code, out, _ = run(
        capsys,
        "perf",
        "end-to-end",
        "--topic",
        "t",
        "--num-records",
        "30",
        "--warmup-records",
        "3",
        "-o",
        "json",
        "--bootstrap",
        broker.bootstrap,
    )
    doc = json.loads(out)
    assert code == 0 and doc["mode"] == "one-at-a-time" and doc["records"] == 30
    assert list(doc["latency_ms"]) == LATENCY_KEYS
    lat = doc["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert doc["target_records_per_s"] is None


def test_fixed_throughput_in_text_with_progress(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    broker.create("t", 1)
    code, out, err = run(
        capsys,
        "perf",
        "end-to-end",
        "--topic",
        "t",
        "--num-records",
        "60",
        "--throughput",
        "200",
        "--reporting-interval-ms",
        "50",
        "--bootstrap",
        broker.bootstrap,
    )
    assert code == 0
    assert out.startswith("60 records end to end (throughput, ") and "p99.9" in out
    assert out.count("\n") == 1
    assert "records, last latency" in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--num-records", "0"], "--num-records"),
        (["--warmup-records", "-1"], "--warmup-records"),
        (["--record-size", "0"], "--record-size"),
        (["--record-size", "4", "--throughput", "10"], ">= 8 with --throughput"),
        (["--throughput", "0"], "--throughput"),
        (["--throughput", "-5"], "--throughput"),
        (["--acks", "0"], "requires synchronous acknowledgement"),
    ],
)
def test_bad_arguments_are_one_line_and_send_nothing(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    broker.create("t", 1)
    code, out, err = run(
        capsys, "perf", "end-to-end", "--topic", "t", *extra, "--bootstrap", broker.bootstrap
    )
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1
    assert broker.offsets("t", 0) == []


def test_unknown_topic_is_one_line(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "perf", "end-to-end", "--topic", "nope", "--bootstrap", broker.bootstrap
    )
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and err.count("\n") == 1
