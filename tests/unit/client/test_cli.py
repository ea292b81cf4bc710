"""The client commands (topics, produce, consume, cluster, perf) in-process against the
fake broker, and their argument errors: one line on stderr and a non-zero exit."""

from __future__ import annotations

import io
import json
import sys

import pytest
from headwater.cli.main import main
from headwater.cli.perf_stats import percentiles

from tests.unit.client.fake_broker import FakeBroker


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_create_list_describe(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("--bootstrap", broker.bootstrap)
    assert run(capsys, "topics", "create", "orders", "--partitions", "3", *b)[0] == 0
    code, _, err = run(capsys, "topics", "create", "orders", "--partitions", "3", *b)
    assert code == 1 and err.count("\n") == 1 and "TOPIC_ALREADY_EXISTS" in err
    assert run(capsys, "topics", "create", "orders", "--if-not-exists", *b)[0] == 0
    assert run(capsys, "topics", "list", *b)[1] == "orders\n"
    code, out, _ = run(capsys, "topics", "describe", "orders", "-o", "json", *b)
    doc = json.loads(out)
    assert doc["name"] == "orders" and doc["config"] == {}
    assert doc["partitions"][0] == {"partition": 0, "leader": 1, "replicas": [1], "isr": [1]}
    code, out, _ = run(capsys, "topics", "describe", "--under-replicated", "-o", "json", *b)
    assert json.loads(out) == []


def test_produce_then_consume(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.create("t", 1)
    b = ("--bootstrap", broker.bootstrap)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"k1:hello\nk2:world\n")))
    assert run(capsys, "produce", "t", "--key-separator", ":", *b)[0] == 0
    code, out, _ = run(
        capsys, "consume", "t", "--from-beginning", "--max-messages", "2", "--print-key", *b
    )
    assert (code, out) == (0, "k1\thello\nk2\tworld\n")
    code, out, _ = run(
        capsys,
        "consume",
        "t",
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "1",
        "-o",
        "json",
        "--encoding",
        "base64",
        *b,
    )
    rec = json.loads(out)
    assert rec["offset"] == 1 and rec["key"] == "azI=" and rec["value"] == "d29ybGQ="
    assert set(rec) == {"topic", "partition", "offset", "timestamp_ms", "key", "value", "headers"}
    code, out, _ = run(capsys, "consume", "t", "--timeout-ms", "300", *b)
    assert (code, out) == (0, "")


def test_unknown_topic_is_one_line(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "consume", "nope", "--bootstrap", broker.bootstrap)
    assert code == 1 and err.startswith("headwater: error: UNKNOWN_TOPIC_OR_PARTITION")
    assert err.count("\n") == 1


def test_cluster_describe(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    broker.create("t", 2)
    code, out, _ = run(capsys, "cluster", "describe", "-o", "json", "--bootstrap", broker.bootstrap)
    doc = json.loads(out)
    assert code == 0 and doc["controller"] == 1 and doc["partitions"] == 2
    assert doc["offline_partitions"] == [] and doc["under_replicated_partitions"] == []


def test_perf_produce_and_consume(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    broker.create("t", 2)
    b = ("--bootstrap", broker.bootstrap)
    code, out, _ = run(
        capsys,
        "perf",
        "produce",
        "--topic",
        "t",
        "--num-records",
        "200",
        "--record-size",
        "10",
        "-o",
        "json",
        *b,
    )
    doc = json.loads(out)
    assert code == 0 and doc["records"] == 200 and set(doc["latency_ms"]) >= {"p50", "p99"}
    code, out, _ = run(
        capsys, "perf", "consume", "--topic", "t", "--messages", "200", "-o", "json", *b
    )
    assert code == 0 and json.loads(out)["records"] == 200


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["topics", "create", "t", "--partitions", "0"], "--partitions"),
        (["topics", "create", "t", "--config", "novalue"], "KEY=VALUE"),
        (["topics", "alter", "t"], "nothing to alter"),
        (["consume", "t", "--offset", "5"], "--offset needs --partition"),
        (["consume", "t", "--partition", "0", "--offset", "x"], "bad --offset"),
        (["consume", "t", "--max-messages", "0"], "--max-messages"),
        (["perf", "consume", "--topic", "t", "--messages", "1", "--group", ""], "--group"),
        (["topics", "list", "--bootstrap", "nohost"], "HOST:PORT"),
        (
            ["perf", "produce", "--topic", "t", "--num-records", "0", "--record-size", "1"],
            "--num-records",
        ),
    ],
)
def test_argument_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_unreachable_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "topics", "list", "--bootstrap", "127.0.0.1:1", "--request-timeout-ms", "200"
    )
    assert code == 1 and "cannot reach any broker" in err and err.count("\n") == 1


def test_bootstrap_from_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HEADWATER_BOOTSTRAP", "127.0.0.1:2")
    code, _, err = run(capsys, "topics", "list", "--request-timeout-ms", "200")
    assert code == 1 and "127.0.0.1:2" in err


def test_percentiles() -> None:
    p = percentiles([float(i) for i in range(1, 101)])
    assert (p["p50"], p["p99"], p["max"]) == (51.0, 100.0, 100.0)
    assert percentiles([])["p99"] == 0.0
