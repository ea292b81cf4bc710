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
import signal
from pathlib import Path
from typing import Any

from headwater.cli import dev_cluster, dev_scale
from headwater.cli._common import CliError, print_json


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
    dev_cluster.add_dev_options(up)
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="show the cluster's processes and health")
    dev_cluster.add_dev_options(status)
    status.set_defaults(func=cmd_status)

    down = sub.add_parser("down", help="stop every process of the cluster")
    dev_cluster.add_dev_options(down)
    down.set_defaults(func=cmd_down)

    restart = sub.add_parser("restart", help="restart one broker (graceful) and wait for it")
    restart.add_argument("broker_id", type=int)
    restart.add_argument("--timeout", type=float, default=90.0)
    dev_cluster.add_dev_options(restart)
    restart.set_defaults(func=cmd_restart)

    dev_scale.register(sub)


def cmd_up(args: argparse.Namespace) -> int:
    from headwater.testing.zookeeper import ZooKeeperServer, free_port

    if args.brokers < 1:
        raise CliError("--brokers must be at least 1")
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if (data_dir / dev_cluster.STATE_FILE).exists():
        old = dev_cluster.load_state(data_dir)
        if any(dev_cluster.alive(b.get("pid")) for b in old["brokers"]):
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
        dev_cluster.note("starting ZooKeeper")
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
            dev_cluster.start_broker(state, entry)
            dev_cluster.note(f"started broker {broker_id} (pid {entry['pid']})")
        dev_cluster.save_state(data_dir, state)
        dev_cluster.wait_healthy(state, [b["id"] for b in state["brokers"]], args.timeout)
    except BaseException:
        dev_cluster.stop_all(state)
        raise
    summary = dev_cluster.summary(state)
    if args.output == "json":
        print_json(summary)
    else:
        if summary["kafka_bootstrap"]:
            dev_cluster.note(f"kafka_bootstrap: {summary['kafka_bootstrap']} (e.g. kcat -b ... -L)")
        print(summary["bootstrap"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from headwater.testing.cluster import is_healthy

    state = dev_cluster.load_state(args.data_dir.resolve())
    summary = dev_cluster.summary(state)
    for entry, out in zip(state["brokers"], summary["brokers"], strict=True):
        out["alive"] = dev_cluster.alive(entry["pid"])
        out["healthy"] = out["alive"] and is_healthy(f"127.0.0.1:{entry['port']}")
    zk_pid = state.get("zookeeper_pid")
    summary["zookeeper_alive"] = dev_cluster.alive(zk_pid) if zk_pid else None
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


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.resolve()
    state = dev_cluster.load_state(data_dir)
    dev_cluster.note("stopping brokers (controlled shutdown) and ZooKeeper")
    dev_cluster.stop_all(state)
    (data_dir / dev_cluster.STATE_FILE).unlink(missing_ok=True)
    if args.output == "json":
        print_json({"stopped": [b["id"] for b in state["brokers"]]})
    else:
        print("stopped")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.resolve()
    state = dev_cluster.load_state(data_dir)
    entry = next((b for b in state["brokers"] if b["id"] == args.broker_id), None)
    if entry is None:
        raise CliError(f"no broker {args.broker_id} in this dev cluster")
    if dev_cluster.alive(entry["pid"]):
        dev_cluster.note(f"stopping broker {args.broker_id}")
        dev_cluster.signal_group(entry["pid"], signal.SIGTERM)
        if dev_cluster.wait_dead([entry["pid"]], 60.0):
            dev_cluster.signal_group(entry["pid"], signal.SIGKILL)
            dev_cluster.wait_dead([entry["pid"]], 10.0)
    dev_cluster.start_broker(state, entry)
    dev_cluster.save_state(data_dir, state)
    dev_cluster.wait_healthy(state, [args.broker_id], args.timeout)
    if args.output == "json":
        print_json({"id": entry["id"], "port": entry["port"], "pid": entry["pid"]})
    else:
        print(f"broker {entry['id']} restarted (pid {entry['pid']})")
    return 0
