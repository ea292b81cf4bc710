"""The ``headwater`` command's refusals and machine output, run in-process with nothing to
reach: a cluster that refuses connections, files that are missing or wrong, a dev cluster
whose brokers are not running.  Each refusal is one line on stderr, ``headwater: error:
<reason>``, with exit 1 (the cluster or the state said no) or 2 (the user's input), and
nothing on stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from headwater.cli.main import main

REFUSING = ("--bootstrap", "127.0.0.1:1", "--request-timeout-ms", "200")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *argv: str, code: int) -> str:
    """The one-line reason of a refusal with exit ``code``."""
    got, out, err = run(capsys, *argv)
    assert (got, out) == (code, "")
    assert err.startswith("headwater: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list"],
        ["topics", "describe", "t"],
        ["produce", "t"],
        ["consume", "t", "--max-messages", "1"],
        ["groups", "list"],
        ["cluster", "describe"],
        ["log-dirs", "describe"],
        ["users", "describe"],
        ["acls", "list"],
    ],
    ids=" ".join,
)
def test_a_cluster_that_refuses_is_one_line_and_exit_1(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, *argv, *REFUSING, code=1)
    assert "NETWORK_EXCEPTION: cannot reach any broker" in err


def test_a_missing_command_config_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "client.properties"
    err = refused(capsys, "topics", "list", "--command-config", str(missing), code=2)
    assert f"--command-config {missing}: No such file or directory" in err


def test_a_bad_command_config_names_the_key_not_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nssl.key.password=pw-s3cret\n")
    err = refused(capsys, "topics", "list", "--command-config", str(path), *REFUSING, code=2)
    assert "ssl.key.password: encrypted PEM keys are not supported" in err
    assert "pw-s3cret" not in err


def test_the_broker_refuses_a_config_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "server.properties"
    err = refused(capsys, "broker", "--config", str(missing), code=1)
    assert f"config: cannot read config file {missing}" in err


def test_the_broker_names_an_unknown_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HEADWATER_NUM_PARTITION", "3")
    err = refused(capsys, "broker", "--override", "broker.id=0", code=1)
    assert "HEADWATER_NUM_PARTITION" in err and "'num.partition'" in err


def test_the_operator_without_its_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "headwater_operator.run", None)  # as if not installed
    err = refused(capsys, "operator", "--standalone", code=1)
    assert "the operator needs the [operator] extra" in err
    assert "pip install 'headwater[operator]'" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["dev", "status"],
        ["dev", "down"],
        ["dev", "restart", "0"],
        ["dev", "add-broker"],
        ["dev", "remove-broker", "0"],
        ["cluster", "roll"],
    ],
    ids=" ".join,
)
def test_dev_commands_without_a_dev_cluster(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, *argv, "--data-dir", str(tmp_path), code=1)
    assert f"no dev cluster in {tmp_path} (run `headwater dev up` first)" in err


def test_dev_up_needs_a_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "dev"
    err = refused(capsys, "dev", "up", "--brokers", "0", "--data-dir", str(data_dir), code=1)
    assert "--brokers must be at least 1" in err
    assert not data_dir.exists()


def stopped_cluster(data_dir: Path) -> dict[str, Any]:
    """The state file of a dev cluster whose brokers and ZooKeeper are not running."""
    state: dict[str, Any] = {
        "data_dir": str(data_dir),
        "chroot": "/headwater",
        "overrides": {},
        "zookeeper": "127.0.0.1:2181",
        "zookeeper_pid": None,
        "brokers": [
            {
                "id": 0,
                "port": 19092,
                "kafka_port": 19192,
                "pid": None,
                "log": str(data_dir / "broker-0.log"),
            },
            {
                "id": 1,
                "port": 19093,
                "kafka_port": 19193,
                "pid": None,
                "log": str(data_dir / "broker-1.log"),
            },
        ],
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "state.json").write_text(json.dumps(state))
    return state


def test_dev_status_json_of_a_stopped_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_cluster(tmp_path)
    code, out, err = run(capsys, "dev", "status", "--data-dir", str(tmp_path), "-o", "json")
    assert code == 1 and err == ""  # not every broker is healthy
    assert json.loads(out) == {
        "bootstrap": "127.0.0.1:19092,127.0.0.1:19093",
        "kafka_bootstrap": "127.0.0.1:19192,127.0.0.1:19193",
        "zookeeper": "127.0.0.1:2181/headwater",
        "brokers": [
            {
                "id": 0,
                "port": 19092,
                "kafka_port": 19192,
                "pid": None,
                "alive": False,
                "healthy": False,
            },
            {
                "id": 1,
                "port": 19093,
                "kafka_port": 19193,
                "pid": None,
                "alive": False,
                "healthy": False,
            },
        ],
        "zookeeper_alive": None,
    }


def test_dev_status_text_of_a_stopped_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_cluster(tmp_path)
    code, out, _ = run(capsys, "dev", "status", "--data-dir", str(tmp_path))
    assert code == 1
    assert out.splitlines() == [
        "bootstrap: 127.0.0.1:19092,127.0.0.1:19093",
        "kafka_bootstrap: 127.0.0.1:19192,127.0.0.1:19193",
        "zookeeper: 127.0.0.1:2181/headwater",
        "broker 0: port 19092 pid None down",
        "broker 1: port 19093 pid None down",
    ]


def test_dev_down_json_forgets_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_cluster(tmp_path)
    code, out, _ = run(capsys, "dev", "down", "--data-dir", str(tmp_path), "-o", "json")
    assert code == 0 and json.loads(out) == {"stopped": [0, 1]}
    assert not (tmp_path / "state.json").exists()
    err = refused(capsys, "dev", "status", "--data-dir", str(tmp_path), code=1)
    assert "no dev cluster" in err


def test_dev_restart_of_an_unknown_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_cluster(tmp_path)
    err = refused(capsys, "dev", "restart", "7", "--data-dir", str(tmp_path), code=1)
    assert "no broker 7 in this dev cluster" in err


def test_dev_add_broker_refuses_an_id_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped_cluster(tmp_path)
    err = refused(capsys, "dev", "add-broker", "--id", "1", "--data-dir", str(tmp_path), code=1)
    assert "broker 1 is already in this dev cluster" in err
    err = refused(capsys, "dev", "add-broker", "--id", "-1", "--data-dir", str(tmp_path), code=2)
    assert "--id must be >= 0" in err


def test_the_console_without_its_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("headwater.console.app", "headwater.console.server"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if not installed
    err = refused(capsys, "console", *REFUSING, code=1)
    assert "the console needs the [console] extra (aiohttp is missing)" in err
    assert "pip install 'headwater[console]'" in err


def test_the_console_refuses_what_it_cannot_serve(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "console", *REFUSING, code=1)
    assert err.startswith("headwater: error: cannot describe the cluster at 127.0.0.1:1: ")
    err = refused(capsys, "console", "--port", "-1", code=2)
    assert err == "headwater: error: --port -1: expected 0 to 65535\n"
