"""A ``headwater dev`` cluster's state file and processes, shared by the ``dev`` commands
(:mod:`headwater.cli.dev`, :mod:`headwater.cli.dev_scale`) and ``cluster roll``.

``DIR/state.json`` records ZooKeeper's connect string (and pid, when ``dev up`` started
it) and each broker's id, port, Kafka-listener port, pid and log file.  Brokers run in
their own process groups so they outlive the command; stopping one is SIGTERM (a
controlled shutdown), then SIGKILL if it is still alive after the wait.  Progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from headwater.cli._common import CliError, add_output_option

STATE_FILE = "state.json"
DEV_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "controlled.shutdown.retry.backoff.ms": "500",
}


def add_dev_options(parser: argparse.ArgumentParser) -> None:
    """``--data-dir`` and ``--output``, the options of every ``dev`` command."""
    parser.add_argument(
        "--data-dir", type=Path, default=Path(".headwater-dev"), help="state and data directory"
    )
    add_output_option(parser)


def note(message: str) -> None:
    print(f"headwater dev: {message}", file=sys.stderr, flush=True)


def alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (a zombie child counts as dead)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    with (
        contextlib.suppress(OSError),
        open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f,
    ):
        if f.read().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def load_state(data_dir: Path) -> dict[str, Any]:
    path = data_dir / STATE_FILE
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"no dev cluster in {data_dir} (run `headwater dev up` first)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    return state


def save_state(data_dir: Path, state: dict[str, Any]) -> None:
    path = data_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
    tmp.replace(path)


def kafka_overrides(entry: dict[str, Any], overrides: dict[str, str]) -> dict[str, str]:
    """The broker's Kafka listener on a port of its own, kept in ``entry`` (restarts
    reuse it); none when the overrides configure Kafka listeners themselves."""
    if "kafka.listeners" in overrides:
        return {}
    if not entry.get("kafka_port"):
        from headwater.testing.zookeeper import free_port

        entry["kafka_port"] = free_port()
    return {
        "kafka.listeners": f"KAFKA://127.0.0.1:{entry['kafka_port']}",
        "listener.security.protocol.map": overrides.get(
            "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT"
        ),
    }


def start_broker(state: dict[str, Any], entry: dict[str, Any]) -> None:
    from headwater.testing.cluster import broker_command, broker_environment

    data_dir = Path(state["data_dir"]) / f"broker-{entry['id']}"
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = broker_command(
        entry["id"],
        port=entry["port"],
        log_dir=data_dir / "logs",
        zookeeper_connect=state["zookeeper"] + state["chroot"],
        overrides={
            **DEV_OVERRIDES,
            **state.get("overrides", {}),
            **kafka_overrides(entry, state.get("overrides", {})),
        },
    )
    cmd.remove("--test-hooks")
    with open(data_dir / "broker.log", "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=broker_environment(),
        )
    entry["pid"] = proc.pid
    entry["log"] = str(data_dir / "broker.log")


def wait_healthy(state: dict[str, Any], ids: list[int], timeout_s: float) -> None:
    from headwater.testing.cluster import is_healthy

    deadline = time.monotonic() + timeout_s
    pending = set(ids)
    next_note = time.monotonic() + 3.0
    while pending:
        for entry in state["brokers"]:
            if entry["id"] not in pending:
                continue
            if not alive(entry["pid"]):
                raise CliError(f"broker {entry['id']} exited; see {entry['log']}")
            if is_healthy(f"127.0.0.1:{entry['port']}"):
                pending.discard(entry["id"])
                note(f"broker {entry['id']} is ready on 127.0.0.1:{entry['port']}")
        if not pending:
            return
        now = time.monotonic()
        if now >= deadline:
            raise CliError(f"brokers {sorted(pending)} not ready after {timeout_s:.0f}s")
        if now >= next_note:
            note(f"waiting for brokers {sorted(pending)}...")
            next_note = now + 3.0
        time.sleep(0.1)


def summary(state: dict[str, Any]) -> dict[str, Any]:
    kafka = [b["kafka_port"] for b in state["brokers"] if b.get("kafka_port")]
    return {
        "bootstrap": ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"]),
        "kafka_bootstrap": ",".join(f"127.0.0.1:{port}" for port in kafka),
        "zookeeper": state["zookeeper"] + state["chroot"],
        "brokers": [
            {"id": b["id"], "port": b["port"], "kafka_port": b.get("kafka_port"), "pid": b["pid"]}
            for b in state["brokers"]
        ],
    }


def signal_group(pid: int | None, sig: signal.Signals) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def wait_dead(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [p for p in pids if alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    return pids


def stop_all(state: dict[str, Any]) -> None:
    pids = [b["pid"] for b in state["brokers"] if alive(b.get("pid"))]
    for pid in pids:
        signal_group(pid, signal.SIGTERM)
    for pid in wait_dead(pids, 60.0):
        signal_group(pid, signal.SIGKILL)
    wait_dead(pids, 10.0)
    zk_pid = state.get("zookeeper_pid")
    if zk_pid and alive(zk_pid):
        signal_group(zk_pid, signal.SIGKILL)
        wait_dead([zk_pid], 10.0)
