"""``headwater dev add-broker`` and ``dev remove-broker ID``: grow and shrink a dev cluster.

``add-broker`` starts one more broker (the next free id, or ``--id``) with
the cluster's settings, records it in the state file and waits until it is
healthy.  It holds no replica until something moves some there: follow it
with ``headwater cluster rebalance``.

``remove-broker ID`` decommissions a broker safely: it drains it first (every
replica moved onto the others, rack-aware, throttled with ``--throttle``, and
followed to the end within ``--timeout``), then stops it (controlled
shutdown), waits until it has left the cluster (its ``/brokers/ids``
registration is gone), removes it from the state file and deletes its data
directory, so a broker added later under the same id starts clean.  If the
drain fails or times out, the broker keeps running and stays registered.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from headwater.cli import dev_cluster, partitions
from headwater.cli._common import CliError, client_errors, print_json


def register(sub: Any) -> None:
    add = sub.add_parser("add-broker", help="start one more broker and wait for it")
    add.add_argument("--id", type=int, dest="broker_id", help="broker id (default: highest + 1)")
    add.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    dev_cluster.add_dev_options(add)
    add.set_defaults(func=cmd_add_broker)

    rm = sub.add_parser(
        "remove-broker", help="drain a broker, then stop it and remove it from the cluster"
    )
    rm.add_argument("broker_id", type=int, metavar="ID")
    rm.add_argument("--throttle", type=partitions._rate, metavar="BYTES/S", help="drain throttle")
    rm.add_argument(
        "--timeout", type=float, default=600.0, help="longest wait for the drain (default 600)"
    )
    dev_cluster.add_dev_options(rm)
    rm.set_defaults(func=cmd_remove_broker)


def cmd_add_broker(args: argparse.Namespace) -> int:
    from headwater.testing.zookeeper import free_port

    data_dir: Path = args.data_dir.resolve()
    state = dev_cluster.load_state(data_dir)
    ids = [int(b["id"]) for b in state["brokers"]]
    broker_id = args.broker_id if args.broker_id is not None else max(ids, default=-1) + 1
    if broker_id < 0:
        raise CliError("--id must be >= 0", 2)
    if broker_id in ids:
        raise CliError(f"broker {broker_id} is already in this dev cluster")
    entry: dict[str, Any] = {"id": broker_id, "port": free_port(), "pid": None}
    state["brokers"].append(entry)
    dev_cluster.start_broker(state, entry)
    dev_cluster.save_state(data_dir, state)
    dev_cluster.note(f"started broker {broker_id} (pid {entry['pid']})")
    dev_cluster.wait_healthy(state, [broker_id], args.timeout)
    out = {"id": broker_id, "port": entry["port"], "pid": entry["pid"]}
    if args.output == "json":
        print_json(out)
    else:
        print(f"broker {broker_id} is up on 127.0.0.1:{entry['port']} (pid {entry['pid']})")
    return 0


def cmd_remove_broker(args: argparse.Namespace) -> int:
    from headwater.client import Admin

    data_dir: Path = args.data_dir.resolve()
    state = dev_cluster.load_state(data_dir)
    entry = next((b for b in state["brokers"] if b["id"] == args.broker_id), None)
    if entry is None:
        raise CliError(f"no broker {args.broker_id} in this dev cluster")
    others = [b for b in state["brokers"] if b is not entry and dev_cluster.alive(b.get("pid"))]
    if not others:
        raise CliError(f"broker {args.broker_id} is the last running broker; use `dev down`")
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in others)
    follow_args = argparse.Namespace(throttle=args.throttle, wait=True, timeout=args.timeout)
    what = f"drain {args.broker_id}"
    with client_errors(), Admin(bootstrap) as admin:
        plan = admin.plan_drain(args.broker_id)
        if args.output != "json":
            partitions.print_plan(plan)
        follow = (
            {"state": "nothing to move"}
            if plan.empty
            else partitions.follow_plan(admin, plan, args=follow_args, what=what)
        )
        dev_cluster.note(f"stopping broker {args.broker_id}")
        _stop(entry)
        _wait_gone(admin, args.broker_id, timeout_s=60.0)
    state["brokers"].remove(entry)
    dev_cluster.save_state(data_dir, state)
    shutil.rmtree(Path(state["data_dir"]) / f"broker-{args.broker_id}", ignore_errors=True)
    out = {
        "id": args.broker_id,
        "moves": len(plan.moves),
        "bytes_moved": plan.bytes_to_move,
        "drain": follow["state"],
        "removed": True,
    }
    if args.output == "json":
        print_json(out)
    else:
        print(
            f"broker {args.broker_id} drained ({len(plan.moves)} replica move(s)), "
            "stopped and removed"
        )
    return 0


def _stop(entry: dict[str, Any]) -> None:
    pid: int | None = entry.get("pid")
    if pid is None or not dev_cluster.alive(pid):
        return
    dev_cluster.signal_group(pid, signal.SIGTERM)  # controlled shutdown
    if dev_cluster.wait_dead([pid], 60.0):
        dev_cluster.signal_group(pid, signal.SIGKILL)
        dev_cluster.wait_dead([pid], 10.0)


def _wait_gone(admin: Any, broker_id: int, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(b.broker_id == broker_id for b in admin.describe_cluster().brokers):
        if time.monotonic() >= deadline:
            raise CliError(f"broker {broker_id} still registered {timeout_s:.0f}s after stopping")
        time.sleep(0.2)
