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
from typing import Any

from headwater.cli._common import CliError, add_output_option, print_json
from headwater.cli.topics import add_bootstrap_option, admin_for, client_errors
from headwater.client import Consumer, TopicPartition, connection
from headwater.client.group import protocol
from headwater.client.group.listener import OffsetAndMetadata
from headwater.errors import ErrorCode, for_code
from headwater.v1 import group_pb2, group_pb2_grpc

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


def _consumer(args: argparse.Namespace, group: str | None) -> Consumer:
    return Consumer(
        bootstrap_servers=args.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=args.request_timeout_ms,
        default_api_timeout_ms=args.request_timeout_ms,
    )


def _group_call(consumer: Consumer, method: str, request: Any) -> Any:
    coordinator = consumer._require_group()  # the CLI is the consumer's friend
    return coordinator._with_coordinator(
        lambda: _checked(coordinator._call(method, request)),
        timeout_ms=consumer.settings.request_timeout_ms,
    )


def _checked(resp: Any) -> Any:
    code = getattr(resp, "error_code", 0)
    if code in (
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ):
        raise for_code(code)
    return resp


def _describe(args: argparse.Namespace, consumer: Consumer) -> dict[str, Any]:
    resp = _group_call(
        consumer, "DescribeGroups", group_pb2.DescribeGroupsRequest(groups=[args.group])
    )
    g = resp.groups[0]
    if g.error_code:
        raise for_code(g.error_code, g.error_message)
    committed = _group_call(
        consumer, "OffsetFetch", group_pb2.OffsetFetchRequest(group_id=args.group)
    )
    offsets = {
        TopicPartition(p.topic, p.partition_index): p.committed_offset
        for p in committed.partitions
        if p.committed_offset >= 0
    }
    ends = consumer.end_offsets(offsets) if offsets else {}
    owner = {}
    members = []
    for m in g.members:
        assigned = sorted(protocol.decode_assignment(m.member_assignment).partitions)
        for tp in assigned:
            owner[tp] = m.member_id
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "group_instance_id": m.group_instance_id or None,
                "assignment": [str(tp) for tp in assigned],
            }
        )
    return {
        "group": args.group,
        "state": g.group_state,
        "protocol": g.protocol_data,
        "generation": g.generation_id,
        "members": members,
        "offsets": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": off,
                "log_end_offset": ends.get(tp),
                "lag": max(0, ends[tp] - off) if tp in ends else None,
                "member_id": owner.get(tp),
            }
            for tp, off in sorted(offsets.items())
        ],
    }


def cmd_list(args: argparse.Namespace) -> int:
    with client_errors():
        cluster = admin_for(args).describe_cluster()
        consumer = _consumer(args, None)
        found: dict[str, dict[str, str]] = {}
        try:
            for b in cluster.brokers:
                stub = group_pb2_grpc.GroupStub(consumer._channels.channel(b.address))
                resp = connection.call(
                    stub.ListGroups,
                    group_pb2.ListGroupsRequest(),
                    address=b.address,
                    timeout_ms=args.request_timeout_ms,
                )
                for g in resp.groups:
                    found[g.group_id] = {
                        "group": g.group_id,
                        "state": g.group_state,
                        "protocol_type": g.protocol_type,
                    }
        finally:
            consumer.close()
    rows = [found[k] for k in sorted(found)]
    if args.output == "json":
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['group']}\t{r['state']}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with client_errors():
        consumer = _consumer(args, args.group)
        try:
            d = _describe(args, consumer)
        finally:
            consumer.close()
    if args.output == "json":
        print_json(d)
        return 0
    print(
        f"group {d['group']}: {d['state']}, protocol {d['protocol'] or '-'}, "
        f"generation {d['generation']}"
    )
    for m in d["members"]:
        print(
            f"  member {m['member_id']} client={m['client_id']} host={m['host']} "
            f"instance={m['group_instance_id'] or '-'} assignment={','.join(m['assignment'])}"
        )
    print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG")
    for o in d["offsets"]:
        print(
            f"{o['topic']}\t{o['partition']}\t{o['committed_offset']}\t"
            f"{o['log_end_offset']}\t{o['lag']}"
        )
    return 0


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
    with client_errors():
        consumer = _consumer(args, args.group)
        try:
            d = _describe(args, consumer)
            if d["state"] not in ("Empty", "Dead"):
                raise CliError(
                    f"group {args.group} has active members ({d['state']}); "
                    "stop them before resetting offsets"
                )
            tps = [
                TopicPartition(args.topic, p)
                for p in sorted(consumer.partitions_for_topic(args.topic))
            ]
            current = {
                TopicPartition(o["topic"], o["partition"]): o["committed_offset"]
                for o in d["offsets"]
            }
            earliest, latest = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
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
                    when = (
                        parse_datetime_ms(args.to_datetime)
                        if args.to_datetime is not None
                        else int(dt.datetime.now(dt.UTC).timestamp() * 1000)
                        - parse_duration_ms(args.by_duration)
                    )
                    found = consumer.offsets_for_times({tp: max(0, when)})[tp]
                    new = found.offset if found is not None else latest[tp]
                target[tp] = min(max(new, earliest[tp]), latest[tp])
            if args.execute:
                consumer.commit({tp: OffsetAndMetadata(o) for tp, o in target.items()})
        finally:
            consumer.close()
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
    with client_errors():
        consumer = _consumer(args, args.group)
        try:
            resp = _group_call(
                consumer, "DeleteGroups", group_pb2.DeleteGroupsRequest(groups_names=[args.group])
            )
        finally:
            consumer.close()
    code = resp.results[0].error_code
    if args.output == "json":
        print_json({"group": args.group, "error": ErrorCode(code).name if code else None})
    if code:
        raise CliError(f"cannot delete group {args.group}: {ErrorCode(code).name}")
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
