"""``headwater partitions reassign`` and ``headwater cluster rebalance|drain``.

``partitions reassign`` is ``kafka-reassign-partitions``: the same actions
(``--generate``, ``--execute``, ``--verify``, ``--cancel``), the same JSON plan
files, the same ``--throttle`` configs, the same messages.  ``cluster
rebalance`` and ``cluster drain BROKER`` plan the moves themselves
(:mod:`headwater.client.reassignment`), print every move and the bytes it
copies, then execute the plan (throttled if asked), show progress until it
completes (``--wait``, the default, bounded by ``--timeout``), remove the
throttle and elect the preferred leaders the plan changed.  ``--dry-run``
stops after printing.  Every failure is one line on stderr and a non-zero
exit; a bad plan is refused before anything changes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater import errors
from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client.admin import Admin
from headwater.client.reassignment import (
    ReassignmentPlan,
    RebalanceGoals,
    RebalancePlan,
    VerifyResult,
    parse_plan,
    parse_topics_to_move,
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "partitions",
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    psub = parser.add_subparsers(dest="partitions_command", metavar="ACTION", required=True)
    r = psub.add_parser(
        "reassign",
        help="generate, execute, verify or cancel a reassignment plan",
        description=(
            "Move partition replicas with a kafka-reassign-partitions JSON plan "
            '({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}).'
        ),
        epilog=(
            "examples:\n"
            "  headwater partitions reassign --generate --topics orders --brokers 0,1,2,3"
            " > plan.json\n"
            "  headwater partitions reassign --execute proposed.json --throttle 10000000\n"
            "  headwater partitions reassign --verify proposed.json   # removes the throttle"
            " when done\n"
            "  headwater partitions reassign --cancel proposed.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = r.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--generate", action="store_true", help="propose a plan placing --topics over --brokers"
    )
    action.add_argument(
        "--execute", metavar="FILE", help="start the moves of a plan file (- stdin)"
    )
    action.add_argument("--verify", metavar="FILE", help="report a plan's progress")
    action.add_argument("--cancel", metavar="FILE", help="cancel a plan's ongoing moves")
    r.add_argument("--topics", metavar="A,B", help="topics to move (--generate)")
    r.add_argument(
        "--topics-to-move-json-file", metavar="FILE", help='{"topics":[{"topic":"a"}]} (--generate)'
    )
    r.add_argument(
        "--brokers", "--broker-list", metavar="0,1,2", help="brokers to place on (--generate)"
    )
    r.add_argument(
        "--throttle",
        type=_rate,
        metavar="BYTES/S",
        help="replication throttle for the moves (--execute)",
    )
    r.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="keep the throttle configs (--verify, --cancel)",
    )
    add_bootstrap_option(r)
    add_output_option(r)
    r.set_defaults(func=_reassign)


def register_cluster_actions(csub: Any) -> None:
    """``cluster rebalance`` and ``cluster drain`` (called from :mod:`headwater.cli.cluster`)."""
    p = csub.add_parser(
        "rebalance",
        help="even out replicas, bytes and preferred leaders across brokers",
        description=(
            "Plan moves that even replica counts, bytes and preferred leaders across brokers "
            "and racks (rack diversity kept, as little data moved as possible), print them, "
            "then execute and follow them."
        ),
    )
    p.add_argument(
        "--brokers", metavar="0,1,2", help="brokers to spread over (default: every live broker)"
    )
    p.add_argument(
        "--bytes-tolerance",
        type=_tolerance,
        default=0.10,
        metavar="FRACTION|off",
        help="even bytes until each broker is within this fraction of the mean "
        "(default 0.10; off: only replica counts and leaders, moving the least data)",
    )
    _move_options(p)
    p.set_defaults(func=_rebalance)
    d = csub.add_parser(
        "drain",
        help="move every replica off a broker (before decommissioning it)",
        description="Move every replica off BROKER onto the others, rack-aware, and follow it.",
    )
    d.add_argument("broker", type=int, metavar="BROKER")
    _move_options(d)
    d.set_defaults(func=_drain)


def _move_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")
    p.add_argument("--throttle", type=_rate, metavar="BYTES/S", help="replication throttle")
    p.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="follow the moves until complete (default; --no-wait returns once started)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="longest wait for the moves (default %(default)s)",
    )
    p.add_argument("--save-plan", type=Path, metavar="FILE", help="write the plan JSON here")
    add_bootstrap_option(p)
    add_output_option(p)


def _rate(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes/s: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of bytes/s")
    return value


def _tolerance(text: str) -> float | None:
    if text == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction or 'off': {text!r}") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError("must be a fraction >= 0 (0.10 is 10 %), or off")
    return value


def parse_ids(text: str, what: str) -> list[int]:
    """``"0,1,2"`` as ids; a bad list is a usage error."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"{what} must be comma-separated broker ids, not {text!r}", 2) from None
    if not ids:
        raise CliError(f"{what} is empty", 2)
    if len(set(ids)) != len(ids):
        raise CliError(f"{what} contains duplicate entries: {text}", 2)
    return ids


def read_plan(path: str) -> ReassignmentPlan:
    """A plan file (``-``: stdin), parsed and checked on its own."""
    text = _read(path)
    with client_errors():
        return parse_plan(text)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


# -- partitions reassign -------------------------------------------------------------------


def _reassign(args: argparse.Namespace) -> int:
    if args.generate:
        return _generate(args)
    for flag, allowed in (
        ("topics", False),
        ("topics_to_move_json_file", False),
        ("brokers", False),
        ("throttle", bool(args.execute)),
        ("preserve_throttles", not args.execute),
    ):
        if getattr(args, flag) not in (None, False) and not allowed:
            raise CliError(f"--{flag.replace('_', '-')} does not go with this action", 2)
    plan = read_plan(args.execute or args.verify or args.cancel)
    with client_errors(), admin_for(args) as admin:
        if args.execute:
            return _execute(admin, plan, args)
        if args.verify:
            return _verify(admin, plan, args)
        results = admin.cancel_reassignment(plan, preserve_throttles=args.preserve_throttles)
    return _report_results(results, args, done="Successfully cancelled reassignment for")


def _generate(args: argparse.Namespace) -> int:
    if args.topics and args.topics_to_move_json_file:
        raise CliError("give --topics or --topics-to-move-json-file, not both", 2)
    if args.topics_to_move_json_file:
        with client_errors():
            topics = list(parse_topics_to_move(_read(args.topics_to_move_json_file)).topics)
    elif args.topics:
        topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    else:
        raise CliError("--generate needs --topics A,B (or --topics-to-move-json-file)", 2)
    if not args.brokers:
        raise CliError("--generate needs --brokers 0,1,2", 2)
    brokers = parse_ids(args.brokers, "--brokers")
    with client_errors(), admin_for(args) as admin:
        current, proposed = admin.generate_reassignment(topics, brokers)
    if args.output == "json":
        print_json({"current": current.to_json(), "proposed": proposed.to_json()})
    else:
        print("Current partition replica assignment")
        print(current.dumps())
        print()
        print("Proposed partition reassignment configuration")
        print(proposed.dumps())
    return 0


def _execute(admin: Admin, plan: ReassignmentPlan, args: argparse.Namespace) -> int:
    current = ReassignmentPlan.of(
        {tp: replicas for tp, replicas in admin.current_assignment().items() if tp in plan.targets}
    )
    results = admin.execute_reassignment(
        plan, throttle_bytes_per_s=args.throttle, raise_on_error=False
    )
    if args.output != "json":
        print("Current partition replica assignment")
        print()
        print(current.dumps())
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
        if args.throttle:
            print(
                "Warning: You must run --verify periodically, until the reassignment "
                "completes, to ensure the throttle is removed."
            )
            print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    return _report_results(
        results,
        args,
        done="Successfully started partition reassignments for",
        extra={"current": current.to_json()},
    )


def _report_results(
    results: dict[Any, errors.HeadwaterError | None],
    args: argparse.Namespace,
    *,
    done: str,
    extra: dict[str, Any] | None = None,
) -> int:
    failed = {str(tp): err for tp, err in results.items() if err is not None}
    ok = [str(tp) for tp, err in results.items() if err is None]
    if args.output == "json":
        print_json(
            {
                **(extra or {}),
                "succeeded": ok,
                "errors": {tp: str(err) for tp, err in failed.items()},
            }
        )
    elif ok:
        print(f"{done} {','.join(ok)}")
    if failed:
        first_tp, first = next(iter(failed.items()))
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise CliError(f"{first_tp}: {first}{more}")
    return 0


def _verify(admin: Admin, plan: ReassignmentPlan, args: argparse.Namespace) -> int:
    result = admin.verify_reassignment(plan, preserve_throttles=args.preserve_throttles)
    if args.output == "json":
        print_json(verify_json(result))
    else:
        print("Status of partition reassignment:")
        for p in result.partitions:
            print(p.message)
        if result.throttles_removed:
            print()
            print("Clearing broker-level throttles on brokers and topic-level throttles")
    if result.failed:
        raise CliError(f"reassignment failed for {','.join(str(p.tp) for p in result.failed)}")
    return 0


def verify_json(result: VerifyResult) -> dict[str, Any]:
    return {
        "complete": result.complete,
        "throttles_removed": result.throttles_removed,
        "partitions": [
            {
                "topic": p.tp.topic,
                "partition": p.tp.partition,
                "status": p.status.value,
                "target": list(p.target),
                "current": list(p.current),
            }
            for p in result.partitions
        ],
    }


# -- cluster rebalance / drain ---------------------------------------------------------------


def _rebalance(args: argparse.Namespace) -> int:
    brokers = parse_ids(args.brokers, "--brokers") if args.brokers else None
    goals = RebalanceGoals(bytes_tolerance=args.bytes_tolerance)
    return run_planned(
        args, lambda admin: admin.plan_rebalance(brokers=brokers, goals=goals), "rebalance"
    )


def _drain(args: argparse.Namespace) -> int:
    return run_planned(args, lambda admin: admin.plan_drain(args.broker), f"drain {args.broker}")


def plan_json(plan: RebalancePlan) -> dict[str, Any]:
    return {
        "moves": [
            {
                "topic": m.tp.topic,
                "partition": m.tp.partition,
                "from": m.source,
                "to": m.destination,
                "bytes": m.size_bytes,
            }
            for m in plan.moves
        ],
        "bytes_to_move": plan.bytes_to_move,
        "leader_changes": [str(tp) for tp in plan.leader_changes],
        "brokers": [
            {
                "id": a.broker_id,
                "rack": a.rack,
                "replicas": [b.replicas, a.replicas],
                "leaders": [b.leaders, a.leaders],
                "bytes": [b.size_bytes, a.size_bytes],
            }
            for b, a in zip(plan.before, plan.after, strict=True)
        ],
        "plan": ReassignmentPlan.of(plan.changed).to_json(),
    }


def print_plan(plan: RebalancePlan) -> None:
    for m in plan.moves:
        print(f"move {m.tp}: broker {m.source} -> {m.destination} ({human_bytes(m.size_bytes)})")
    print(
        f"{len(plan.moves)} replica move(s), {human_bytes(plan.bytes_to_move)} to copy, "
        f"{len(plan.leader_changes)} preferred-leader change(s)"
    )
    print("broker\track\treplicas\tleaders\tbytes (before -> after)")
    for b, a in zip(plan.before, plan.after, strict=True):
        print(
            f"{a.broker_id}\t{a.rack or '-'}\t{b.replicas} -> {a.replicas}\t"
            f"{b.leaders} -> {a.leaders}\t{human_bytes(b.size_bytes)} -> "
            f"{human_bytes(a.size_bytes)}"
        )


def _note(message: str) -> None:
    print(f"headwater: {message}", file=sys.stderr, flush=True)


def run_planned(
    args: argparse.Namespace, make_plan: Callable[[Admin], RebalancePlan], what: str
) -> int:
    """Plan, print, then (unless ``--dry-run``) execute and follow; see the module."""
    with client_errors(), admin_for(args) as admin:
        plan = make_plan(admin)
        out = plan_json(plan)
        if args.save_plan:
            args.save_plan.write_text(ReassignmentPlan.of(plan.changed).dumps() + "\n")
        if args.output != "json":
            print_plan(plan)
        if plan.empty or args.dry_run:
            out["executed"] = False
            if args.output == "json":
                print_json(out)
            elif plan.empty:
                print(f"{what}: nothing to move")
            return 0
        follow = follow_plan(admin, plan, args=args, what=what)
    out.update(follow)
    if args.output == "json":
        print_json(out)
    else:
        print(f"{what}: {follow['state']}")
    return 0


def follow_plan(
    admin: Admin, plan: RebalancePlan, *, args: argparse.Namespace, what: str
) -> dict[str, Any]:
    """Execute ``plan``; with ``args.wait``, follow it to the end (bounded by ``args.timeout``)."""
    admin.execute_reassignment(plan, throttle_bytes_per_s=args.throttle)
    total = len(plan.changed)
    _note(f"{what}: started moving {total} partition(s)")
    if not args.wait:
        return {"executed": True, "state": "started"}
    started = time.monotonic()
    deadline = started + args.timeout
    delay = 0.2
    last = -1
    while True:
        result = admin.verify_reassignment(plan)
        done = total - len(result.in_progress) - len(result.failed)
        if result.failed:
            raise CliError(
                f"{what}: reassignment failed for "
                f"{','.join(str(p.tp) for p in result.failed)} "
                f"(replicas are {result.failed[0].current}, wanted {result.failed[0].target})"
            )
        if result.complete:
            break
        if done != last:
            _note(f"{what}: {done}/{total} partition(s) moved ({time.monotonic() - started:.0f}s)")
            last = done
        if time.monotonic() >= deadline:
            raise CliError(
                f"{what}: {len(result.in_progress)} of {total} partition(s) still moving after "
                f"{args.timeout:.0f}s (the moves go on; check with `headwater partitions reassign "
                f"--verify` on the plan, e.g. from --save-plan)"
            )
        time.sleep(delay)
        delay = min(2.0, delay * 1.5)
    elected = []
    if plan.leader_changes:
        results = admin.elect_leaders(plan.leader_changes)
        elected = [str(tp) for tp, err in results.items() if err is None]
    seconds = round(time.monotonic() - started, 1)
    _note(f"{what}: {total}/{total} partition(s) moved in {seconds}s")
    return {
        "executed": True,
        "state": "complete",
        "seconds": seconds,
        "throttles_removed": result.throttles_removed,
        "leaders_elected": elected,
    }
