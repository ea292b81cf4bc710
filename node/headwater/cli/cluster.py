"""``headwater cluster describe|roll``: the cluster's health, and safe rolling restarts.

``describe`` lists the live brokers (with the software and
inter.broker.protocol.version each runs) and the controller, then every
under-replicated partition (ISR smaller than the replica set) and every
offline partition (no leader), internal topics included, since those are what
an operator acts on.

``roll --data-dir DIR`` restarts the brokers of a ``headwater dev`` cluster one
at a time with the roll engine the operator also uses (:mod:`headwater.roll`): the
controller last, never taking a partition below min.insync.replicas, waiting
for each broker to be back in sync; ``--to-version V`` raises
``inter.broker.protocol.version`` to V on the way (refused while brokers run
mixed software, and below the version in force).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, NamedTuple

from headwater.cli import dev_cluster, partitions
from headwater.cli._common import (
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.roll import engine, local, probe


def register(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="describe the cluster")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    p = csub.add_parser("describe", help="brokers, controller, unhealthy partitions")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_describe)
    r = csub.add_parser("roll", help="restart a `headwater dev` cluster's brokers safely")
    r.add_argument(
        "--data-dir", type=Path, default=Path(".headwater-dev"), help="the dev cluster's directory"
    )
    r.add_argument("--to-version", metavar="V", help="raise inter.broker.protocol.version to V")
    r.add_argument(
        "--operation-timeout-s",
        type=float,
        default=300.0,
        help="longest wait for one broker to be safe to restart or to come back (%(default)s)",
    )
    add_output_option(r)
    r.set_defaults(func=_roll)
    partitions.register_cluster_actions(csub)  # rebalance, drain


def _describe(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics(None)
    under: list[dict[str, Any]] = []
    offline: list[dict[str, Any]] = []
    for desc in topics.values():
        for p in desc.partitions:
            entry: dict[str, Any] = {
                "topic": desc.name,
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            if p.offline:
                offline.append(entry)
            elif p.under_replicated:
                under.append(entry)
    result = {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": [
            {
                "id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "version": b.version,
                "protocol_version": b.protocol_version,
            }
            for b in cluster.brokers
        ],
        "topics": len(topics),
        "partitions": sum(len(d.partitions) for d in topics.values()),
        "under_replicated_partitions": under,
        "offline_partitions": offline,
    }
    if args.output == "json":
        print_json(result)
        return 0
    print(f"Cluster: {cluster.cluster_id}\tController: {cluster.controller_id}")
    for b in cluster.brokers:
        rack = f"\tRack: {b.rack}" if b.rack else ""
        versions = f"\tVersion: {b.version or '?'}\tProtocol: {b.protocol_version or '?'}"
        print(f"Broker: {b.broker_id}\t{b.address}{rack}{versions}")
    print(
        f"Topics: {result['topics']}\tPartitions: {result['partitions']}\t"
        f"Under-replicated: {len(under)}\tOffline: {len(offline)}"
    )
    for label, items in (("Under-replicated", under), ("Offline", offline)):
        for e in items:
            print(
                f"{label}: {e['topic']}-{e['partition']}\tLeader: {e['leader']}\t"
                f"Replicas: {','.join(map(str, e['replicas']))}\t"
                f"Isr: {','.join(map(str, e['isr']))}"
            )
    return 0


class DevClusterOps(NamedTuple):
    """What ``cluster roll`` needs from ``headwater dev``'s state file and processes."""

    alive: Callable[[int | None], bool]
    load_state: Callable[[Path], dict[str, Any]]
    save_state: Callable[[Path, dict[str, Any]], None]
    start_broker: Callable[[dict[str, Any], dict[str, Any]], None]
    signal_group: Callable[[int | None, signal.Signals], None]
    wait_dead: Callable[[list[int], float], list[int]]
    """Waits up to the timeout; returns the pids still alive."""


def dev_cluster_ops() -> DevClusterOps:
    """The dev cluster's state file and processes (:mod:`headwater.cli.dev_cluster`)."""
    return DevClusterOps(
        alive=dev_cluster.alive,
        load_state=dev_cluster.load_state,
        save_state=dev_cluster.save_state,
        start_broker=dev_cluster.start_broker,
        signal_group=dev_cluster.signal_group,
        wait_dead=dev_cluster.wait_dead,
    )


class _DevBroker:
    def __init__(self, entry: dict[str, Any], ops: DevClusterOps) -> None:
        self.entry = entry
        self._ops = ops

    @property
    def pid(self) -> int | None:
        pid: int | None = self.entry.get("pid")
        return pid

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.entry['port']}"

    @property
    def running(self) -> bool:
        return self._ops.alive(self.pid)


class _DevProcesses:
    """The roll engine's ``LocalProcesses`` over a ``headwater dev`` state file."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._ops = dev_cluster_ops()
        self.state = self._ops.load_state(data_dir)
        self._brokers = {int(e["id"]): _DevBroker(e, self._ops) for e in self.state["brokers"]}

    @property
    def brokers(self) -> dict[int, _DevBroker]:
        return self._brokers

    @property
    def overrides(self) -> MutableMapping[str, str]:
        found: MutableMapping[str, str] = self.state.setdefault("overrides", {})
        return found

    def stop(self, broker_id: int, *, timeout_s: float = 120.0) -> int | None:
        pid = self._brokers[broker_id].pid
        self._ops.signal_group(pid, signal.SIGTERM)  # controlled shutdown
        if pid and self._ops.wait_dead([pid], timeout_s):
            self._ops.signal_group(pid, signal.SIGKILL)
            self._ops.wait_dead([pid], 10.0)
        return None

    def start_broker(self, broker_id: int, *, wait: bool = False) -> None:
        self._ops.start_broker(self.state, self._brokers[broker_id].entry)
        self._ops.save_state(self.data_dir, self.state)


def _roll(args: argparse.Namespace) -> int:
    from headwater.client import Admin
    from headwater.testing.cluster import is_healthy

    processes = _DevProcesses(args.data_dir.resolve())
    bootstrap = ",".join(b.address for b in processes.brokers.values())
    backend = local.LocalBackend(processes, healthy=is_healthy, protocol_version=args.to_version)

    def note(event: engine.RollEvent) -> None:
        print(f"headwater cluster roll: {event.reason}: {event.message}", file=sys.stderr)

    started = time.monotonic()
    with client_errors(), Admin(bootstrap) as admin:
        result = engine.Roller(
            backend,
            probe.AdminProbe(admin),
            settings=engine.RollSettings(operation_timeout_s=args.operation_timeout_s),
            notify=note,
        ).run()
    out = {
        "state": str(result.state),
        "restarted": list(result.restarted),
        "message": result.message,
        "seconds": round(time.monotonic() - started, 3),
    }
    if args.output == "json":
        print_json(out)
    else:
        print(f"{out['state']}: {result.message} ({out['seconds']}s)")
    return 0 if out["state"] in ("Finished", "NothingToDo") else 1
