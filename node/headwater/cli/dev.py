"""``headwater dev up|status|down|restart|add-broker|remove-broker``: a local dev cluster.

``dev up`` starts ZooKeeper (unless ``--zookeeper`` names one) and N brokers
on 127.0.0.1, each in its own process group so they outlive the command,
records them in ``DIR/state.json`` and returns once every broker is healthy.
Every broker also gets a Kafka-protocol listener (``kafka.listeners=KAFKA://...``), so
Kafka's own clients and kcat can use the cluster at once: ``kafka_bootstrap`` in the
JSON output (and on stderr in text mode, where stdout stays the gRPC bootstrap alone).
The other commands read that state file (``add-broker`` and ``remove-broker``
live in :mod:`headwater.cli.dev_scale`).  Progress goes to stderr; stdout
carries only the result (text, or JSON with ``--output json``).
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

from headwater.cli._common import CliError, add_output_option, print_json

STATE_FILE = "state.json"
DEV_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "controlled.shutdown.retry.backoff.ms": "500",
}


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dev", help="run a local development cluster", description=__doc__
    )
    sub = parser.add_subparsers(dest="dev_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start ZooKeeper and N brokers, detached")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--zookeeper", help="use this ZooKeeper (host:port) instead of starting one")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker config"
    )
    _common(up)
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="show the cluster's processes and health")
    _common(status)
    status.set_defaults(func=cmd_status)

    down = sub.add_parser("down", help="stop every process of the cluster")
    _common(down)
    down.set_defaults(func=cmd_down)

    restart = sub.add_parser("restart", help="restart one broker (graceful) and wait for it")
    restart.add_argument("broker_id", type=int)
    restart.add_argument("--timeout", type=float, default=90.0)
    _common(restart)
    restart.set_defaults(func=cmd_restart)

    from headwater.cli import dev_scale  # add-broker, remove-broker (it imports this module)

    dev_scale.register(sub)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", type=Path, default=Path(".headwater-dev"), help="state and data directory"
    )
    add_output_option(parser)


def _note(message: str) -> None:
    print(f"headwater dev: {message}", file=sys.stderr, flush=True)


def _alive(pid: int | None) -> bool:
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


def _load_state(data_dir: Path) -> dict[str, Any]:
    path = data_dir / STATE_FILE
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"no dev cluster in {data_dir} (run `headwater dev up` first)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    return state


def _save_state(data_dir: Path, state: dict[str, Any]) -> None:
    path = data_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
    tmp.replace(path)


def _kafka_overrides(entry: dict[str, Any], overrides: dict[str, str]) -> dict[str, str]:
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


def _start_broker(state: dict[str, Any], entry: dict[str, Any]) -> None:
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
            **_kafka_overrides(entry, state.get("overrides", {})),
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


def _wait_healthy(state: dict[str, Any], ids: list[int], timeout_s: float) -> None:
    from headwater.testing.cluster import is_healthy

    deadline = time.monotonic() + timeout_s
    pending = set(ids)
    next_note = time.monotonic() + 3.0
    while pending:
        for entry in state["brokers"]:
            if entry["id"] not in pending:
                continue
            if not _alive(entry["pid"]):
                raise CliError(f"broker {entry['id']} exited; see {entry['log']}")
            if is_healthy(f"127.0.0.1:{entry['port']}"):
                pending.discard(entry["id"])
                _note(f"broker {entry['id']} is ready on 127.0.0.1:{entry['port']}")
        if not pending:
            return
        now = time.monotonic()
        if now >= deadline:
            raise CliError(f"brokers {sorted(pending)} not ready after {timeout_s:.0f}s")
        if now >= next_note:
            _note(f"waiting for brokers {sorted(pending)}...")
            next_note = now + 3.0
        time.sleep(0.1)


def _summary(state: dict[str, Any]) -> dict[str, Any]:
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


def cmd_up(args: argparse.Namespace) -> int:
    from headwater.testing.zookeeper import ZooKeeperServer, free_port

    if args.brokers < 1:
        raise CliError("--brokers must be at least 1")
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if (data_dir / STATE_FILE).exists():
        old = _load_state(data_dir)
        if any(_alive(b.get("pid")) for b in old["brokers"]):
            raise CliError(f"a dev cluster is already running in {data_dir} (`headwater dev down`)")
    overrides = dict(item.split("=", 1) for item in args.override if "=" in item)
    overrides.setdefault("default.replication.factor", str(min(args.brokers, 3)))
    state: dict[str, Any] = {
        "data_dir": str(data_dir),
        "chroot": "/headwater",
        "overrides": overrides,
        "zookeeper_pid": None,
        "brokers": [],
    }
    if args.zookeeper:
        state["zookeeper"] = args.zookeeper
    else:
        _note("starting ZooKeeper")
        server = ZooKeeperServer(data_dir / "zookeeper")
        server.start()
        assert server.process is not None
        state["zookeeper"] = server.connect_string
        state["zookeeper_pid"] = server.process.pid
        # Detach: the dev cluster outlives this command (dev down stops it).
        server.process = None
    try:
        for broker_id in range(args.brokers):
            entry: dict[str, Any] = {"id": broker_id, "port": free_port(), "pid": None}
            state["brokers"].append(entry)
            _start_broker(state, entry)
            _note(f"started broker {broker_id} (pid {entry['pid']})")
        _save_state(data_dir, state)
        _wait_healthy(state, [b["id"] for b in state["brokers"]], args.timeout)
    except BaseException:
        _stop_all(state)
        raise
    summary = _summary(state)
    if args.output == "json":
        print_json(summary)
    else:
        if summary["kafka_bootstrap"]:
            _note(f"kafka_bootstrap: {summary['kafka_bootstrap']} (e.g. kcat -b ... -L)")
        print(summary["bootstrap"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from headwater.testing.cluster import is_healthy

    state = _load_state(args.data_dir.resolve())
    summary = _summary(state)
    for entry, out in zip(state["brokers"], summary["brokers"], strict=True):
        out["alive"] = _alive(entry["pid"])
        out["healthy"] = out["alive"] and is_healthy(f"127.0.0.1:{entry['port']}")
    zk_pid = state.get("zookeeper_pid")
    summary["zookeeper_alive"] = _alive(zk_pid) if zk_pid else None
    if args.output == "json":
        print_json(summary)
    else:
        print(f"bootstrap: {summary['bootstrap']}")
        if summary["kafka_bootstrap"]:
            print(f"kafka_bootstrap: {summary['kafka_bootstrap']}")
        print(f"zookeeper: {summary['zookeeper']}")
        for b in summary["brokers"]:
            health = "healthy" if b["healthy"] else ("running" if b["alive"] else "down")
            print(f"broker {b['id']}: port {b['port']} pid {b['pid']} {health}")
    return 0 if all(b["healthy"] for b in summary["brokers"]) else 1


def _signal_group(pid: int | None, sig: signal.Signals) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def _wait_dead(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    return pids


def _stop_all(state: dict[str, Any]) -> None:
    pids = [b["pid"] for b in state["brokers"] if _alive(b.get("pid"))]
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    for pid in _wait_dead(pids, 60.0):
        _signal_group(pid, signal.SIGKILL)
    _wait_dead(pids, 10.0)
    zk_pid = state.get("zookeeper_pid")
    if zk_pid and _alive(zk_pid):
        _signal_group(zk_pid, signal.SIGKILL)
        _wait_dead([zk_pid], 10.0)


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.resolve()
    state = _load_state(data_dir)
    _note("stopping brokers (controlled shutdown) and ZooKeeper")
    _stop_all(state)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    if args.output == "json":
        print_json({"stopped": [b["id"] for b in state["brokers"]]})
    else:
        print("stopped")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.resolve()
    state = _load_state(data_dir)
    entry = next((b for b in state["brokers"] if b["id"] == args.broker_id), None)
    if entry is None:
        raise CliError(f"no broker {args.broker_id} in this dev cluster")
    if _alive(entry["pid"]):
        _note(f"stopping broker {args.broker_id}")
        _signal_group(entry["pid"], signal.SIGTERM)
        if _wait_dead([entry["pid"]], 60.0):
            _signal_group(entry["pid"], signal.SIGKILL)
            _wait_dead([entry["pid"]], 10.0)
    _start_broker(state, entry)
    _save_state(data_dir, state)
    _wait_healthy(state, [args.broker_id], args.timeout)
    if args.output == "json":
        print_json({"id": entry["id"], "port": entry["port"], "pid": entry["pid"]})
    else:
        print(f"broker {entry['id']} restarted (pid {entry['pid']})")
    return 0
