"""``headwater groups``: list, describe, reset offsets of, and delete consumer groups.

Kafka's ``kafka-consumer-groups.sh``: ``describe`` shows state, protocol, members and per
partition the committed offset, log end offset and lag; ``reset-offsets`` computes new
offsets (``--to-earliest``, ``--to-latest``, ``--to-offset``, ``--to-datetime``,
``--shift-by``, ``--by-duration``), prints them with ``--dry-run`` (the default) and
commits them with ``--execute`` -- only while the group has no active members, as a
running member would overwrite them at its next commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client import Admin, OffsetAndTimestamp, TopicPartition

_DURATION = re.compile(r"^(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """ISO-8601 ``PnDTnHnMnS`` (Kafka's ``--by-duration``) to milliseconds."""
    m = _DURATION.match(text)
    if not m or text in ("P", "-P") or text.endswith("T"):
        raise CliError(f"bad duration {text!r}; expected e.g. P1DT2H or PT30M", exit_code=2)
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups()[1:])
    ms = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000
    return -ms if m.group(1) else ms


def parse_datetime_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"bad datetime {text!r}; expected ISO-8601", exit_code=2) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _describe(admin: Admin, group: str) -> dict[str, Any]:
    g = admin.describe_groups([group])[group]
    committed = admin.list_consumer_group_offsets(group)
    ends = admin.list_offsets(dict.fromkeys(committed, "latest")) if committed else {}
    owner = {tp: m.member_id for m in g.members for tp in m.assignment}
    consumer = g.group_type == "consumer"
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.host,
            "group_instance_id": m.group_instance_id,
            "assignment": [str(tp) for tp in m.assignment],
            **(
                {
                    "member_epoch": m.member_epoch,
                    "member_state": m.state,
                    "target_assignment": [str(tp) for tp in m.target_assignment],
                }
                if consumer
                else {}
            ),
        }
        for m in g.members
    ]
    rows = []
    for tp, om in sorted(committed.items()):
        end = ends.get(tp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": om.offset,
                "log_end_offset": end.offset if end is not None else None,
                "lag": max(0, end.offset - om.offset) if end is not None else None,
                "member_id": owner.get(tp),
            }
        )
    return {
        "group": group,
        "state": g.state,
        "group_type": g.group_type,
        "protocol": g.protocol,
        "generation": g.generation_id,
        **(
            {"group_epoch": g.group_epoch, "target_assignment_epoch": g.target_assignment_epoch}
            if consumer
            else {}
        ),
        "coordinator": g.coordinator,
        "members": members,
        "offsets": rows,
    }


def cmd_list(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        groups = admin.list_groups()
    rows = [
        {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in groups
    ]
    if args.output == "json":
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['group']}\t{r['state']}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        d = _describe(admin, args.group)
    if args.output == "json":
        print_json(d)
        return 0
    if d["group_type"] == "consumer":
        print(
            f"group {d['group']}: {d['state']}, group type consumer, assignor "
            f"{d['protocol'] or '-'}, group epoch {d['group_epoch']}, target assignment epoch "
            f"{d['target_assignment_epoch']}"
        )
    else:
        print(
            f"group {d['group']}: {d['state']}, group type classic, protocol "
            f"{d['protocol'] or '-'}, generation {d['generation']}"
        )
    for m in d["members"]:
        line = (
            f"  member {m['member_id']} client={m['client_id']} host={m['host']} "
            f"instance={m['group_instance_id'] or '-'} assignment={','.join(m['assignment'])}"
        )
        if "member_epoch" in m:
            line += (
                f" epoch={m['member_epoch']} state={m['member_state']} "
                f"target={','.join(m['target_assignment'])}"
            )
        print(line)
    print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG")
    for o in d["offsets"]:
        print(
            f"{o['topic']}\t{o['partition']}\t{o['committed_offset']}\t"
            f"{o['log_end_offset']}\t{o['lag']}"
        )
    return 0


def _reset_targets(admin: Admin, args: argparse.Namespace) -> dict[TopicPartition, int]:
    """The new offset of each partition of ``args.topic``, clamped to the log's range."""
    d = _describe(admin, args.group)
    if d["state"] not in ("Empty", "Dead"):
        raise CliError(
            f"group {args.group} has active members ({d['state']}); "
            "stop them before resetting offsets"
        )
    desc = admin.describe_topics([args.topic]).get(args.topic)
    if desc is None or not desc.partitions:
        raise CliError(f"unknown topic {args.topic!r}")
    tps = [TopicPartition(args.topic, p.partition) for p in desc.partitions]
    current = {
        TopicPartition(o["topic"], o["partition"]): o["committed_offset"] for o in d["offsets"]
    }
    earliest = _offsets(admin.list_offsets(dict.fromkeys(tps, "earliest")))
    latest = _offsets(admin.list_offsets(dict.fromkeys(tps, "latest")))
    when: int | None = None
    if args.to_datetime is not None:
        when = parse_datetime_ms(args.to_datetime)
    elif args.by_duration is not None:
        now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        when = now_ms - parse_duration_ms(args.by_duration)
    by_time = (
        _offsets(admin.list_offsets({tp: max(0, when) for tp in tps})) if when is not None else {}
    )
    target: dict[TopicPartition, int] = {}
    for tp in tps:
        if args.to_earliest:
            new = earliest[tp]
        elif args.to_latest:
            new = latest[tp]
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            new = current.get(tp, latest[tp]) + args.shift_by
        else:
            new = by_time.get(tp, latest[tp])
        target[tp] = min(max(new, earliest[tp]), latest[tp])
    return target


def _offsets(
    found: Mapping[TopicPartition, OffsetAndTimestamp | None],
) -> dict[TopicPartition, int]:
    return {tp: o.offset for tp, o in found.items() if o is not None and o.offset >= 0}


def cmd_reset(args: argparse.Namespace) -> int:
    specs = [
        args.to_earliest,
        args.to_latest,
        args.to_offset is not None,
        args.to_datetime is not None,
        args.shift_by is not None,
        args.by_duration is not None,
    ]
    if sum(bool(s) for s in specs) != 1:
        raise CliError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, "
            "--to-datetime, --shift-by, --by-duration",
            exit_code=2,
        )
    if args.dry_run and args.execute:
        raise CliError("--dry-run and --execute are exclusive", exit_code=2)
    with client_errors(), admin_for(args) as admin:
        target = _reset_targets(admin, args)
        if args.execute:
            admin.alter_consumer_group_offsets(args.group, target)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "new_offset": o}
        for tp, o in sorted(target.items())
    ]
    if args.output == "json":
        print_json({"group": args.group, "executed": bool(args.execute), "offsets": rows})
    else:
        for r in rows:
            print(f"{r['topic']}\t{r['partition']}\t{r['new_offset']}")
        if not args.execute:
            print("(dry run: add --execute to commit these offsets)")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        error = admin.delete_groups([args.group], raise_on_error=False)[args.group]
    if args.output == "json":
        print_json({"group": args.group, "error": error.code.name if error else None})
    if error is not None:
        raise CliError(str(error))  # CODE: message, as every CLI error
    if args.output != "json":
        print(f"deleted group {args.group}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("groups", help="list, describe, reset and delete groups")
    sub = parser.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    p = sub.add_parser("list", help="every consumer group")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("describe", help="state, members, committed offsets and lag")
    p.add_argument("group")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("reset-offsets", help="move a stopped group's committed offsets")
    p.add_argument("group")
    p.add_argument("--topic", required=True)
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--to-datetime", metavar="ISO-8601")
    p.add_argument("--shift-by", type=int)
    p.add_argument("--by-duration", metavar="PnDTnH")
    p.add_argument("--dry-run", action="store_true", help="print only (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_reset)
    p = sub.add_parser("delete", help="delete an empty group and its offsets")
    p.add_argument("group")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_delete)
