"""The reassignment commands' argument handling and plan files, without a cluster.

Bad arguments and bad plans are refused before any connection is made: one
line on stderr and a non-zero exit (2 for usage, 1 for a bad plan).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from headwater.cli.main import main
from headwater.cli.partitions import human_bytes, plan_json, print_plan
from headwater.client.reassignment import BrokerInfo, plan_rebalance
from headwater.values import TopicPartition

NOWHERE = ("--bootstrap", "127.0.0.1:1", "--request-timeout-ms", "200")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> bool:
    return err.count("\n") == 1


def test_an_action_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "partitions", "reassign", *NOWHERE)
    assert code == 2 and _one_line(err) and "--generate" in err
    code, _, err = run(capsys, "partitions", "reassign", "--verify", "a", "--cancel", "b")
    assert code == 2 and "not allowed with" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--generate", "--brokers", "0,1"), "needs --topics"),
        (("--generate", "--topics", "a"), "needs --brokers"),
        (("--generate", "--topics", "a", "--brokers", "0,x"), "comma-separated broker ids"),
        (("--generate", "--topics", "a", "--brokers", "0,0"), "duplicate"),
        (("--verify", "p.json", "--throttle", "100"), "--throttle does not go"),
        (("--execute", "p.json", "--preserve-throttles"), "--preserve-throttles does not go"),
        (("--execute", "p.json", "--topics", "a"), "--topics does not go"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], words: str
) -> None:
    code, out, err = run(capsys, "partitions", "reassign", *argv, *NOWHERE)
    assert code == 2 and out == "" and _one_line(err) and words in err


def test_throttle_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "partitions", "reassign", "--execute", "x", "--throttle", "0")
    assert code == 2 and "positive" in err
    code, _, err = run(capsys, "cluster", "rebalance", "--throttle", "fast")
    assert code == 2 and "bytes/s" in err
    for bad in ("-1", "lots"):
        code, _, err = run(capsys, "cluster", "rebalance", "--bytes-tolerance", bad)
        assert code == 2 and "off" in err and _one_line(err)


def test_bad_plan_files_are_refused_before_connecting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.json"
    code, _, err = run(capsys, "partitions", "reassign", "--execute", str(missing), *NOWHERE)
    assert code == 1 and _one_line(err) and "cannot read" in err
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]}
        )
    )
    for action in ("--execute", "--verify", "--cancel"):
        code, out, err = run(capsys, "partitions", "reassign", action, str(bad), *NOWHERE)
        assert code == 1 and out == "" and _one_line(err)
        assert "INVALID_REPLICA_ASSIGNMENT" in err and "a-0 contains 1,1" in err


def test_a_plan_can_come_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"version": 1, "partitions": []}'))
    code, _, err = run(capsys, "partitions", "reassign", "--execute", "-", *NOWHERE)
    assert code == 1 and "cannot be empty" in err


def test_cluster_drain_needs_a_broker_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cluster", "drain", "zero")
    assert code == 2 and _one_line(err)
    code, _, err = run(capsys, "cluster", "rebalance", "--brokers", "1,a", *NOWHERE)
    assert code == 2 and "comma-separated" in err


def test_unreachable_cluster_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cluster", "rebalance", "--dry-run", *NOWHERE)
    assert code == 1 and _one_line(err) and "cannot reach" in err


def test_help_explains_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ("partitions", "reassign"),
        ("cluster", "rebalance"),
        ("cluster", "drain"),
        ("dev", "add-broker"),
        ("dev", "remove-broker"),
    ):
        code, out, _ = run(capsys, *argv, "--help")
        assert code == 0 and "usage:" in out
    assert "--throttle" in run(capsys, "partitions", "reassign", "--help")[1]
    assert "--dry-run" in run(capsys, "cluster", "rebalance", "--help")[1]


def test_plan_printing(capsys: pytest.CaptureFixture[str]) -> None:
    layout = {TopicPartition("a", p): (0, 1) for p in range(4)}
    sizes = {tp: 3 * 1024 * 1024 for tp in layout}
    plan = plan_rebalance(layout, brokers=[BrokerInfo(b) for b in range(4)], sizes=sizes)
    doc = plan_json(plan)
    assert doc["bytes_to_move"] == 4 * 3 * 1024 * 1024
    assert len(doc["moves"]) == 4 and doc["plan"]["version"] == 1
    assert doc["brokers"][2] == {
        "id": 2,
        "rack": None,
        "replicas": [0, 2],
        "leaders": [0, 1],
        "bytes": [0, 2 * 3 * 1024 * 1024],
    }
    print_plan(plan)
    out = capsys.readouterr().out
    assert "4 replica move(s), 12.0 MiB to copy" in out
    assert "move a-" in out and "(3.0 MiB)" in out


def test_human_bytes() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(5 * 1024**3) == "5.0 GiB"
