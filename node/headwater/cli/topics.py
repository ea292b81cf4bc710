"""``headwater topics``: create, list, describe, alter and delete topics.

Also home of the options and error handling every client command shares
(``--bootstrap`` with ``HEADWATER_BOOTSTRAP`` as its default, and turning
client errors into one-line :class:`CliError`\\ s), which ``produce``,
``consume``, ``cluster`` and ``perf`` import from here.
"""

from __future__ import annotations

import argparse
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
from headwater.client.admin import TopicDescription


def parse_configs(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"bad --config {item!r}; expected KEY=VALUE", exit_code=2)
        out[key.strip()] = value
    return out


def register(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    p.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if it exists")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_create)

    p = tsub.add_parser("list", help="list topics")
    p.add_argument("--include-internal", action="store_true")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_list)

    p = tsub.add_parser("describe", help="partitions (leader, replicas, ISR) and configs")
    p.add_argument("name", nargs="?")
    p.add_argument(
        "--under-replicated", action="store_true", help="only partitions with ISR < replicas"
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_describe)

    p = tsub.add_parser("alter", help="add partitions or change configs")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, help="the new total number of partitions")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a config")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="remove a config")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_alter)

    p = tsub.add_parser("delete", help="delete a topic")
    p.add_argument("name")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_delete)


def _create(args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    if args.partitions == 0 or args.partitions < -1:
        raise CliError("--partitions must be >= 1", exit_code=2)
    if args.replication_factor == 0 or args.replication_factor < -1:
        raise CliError("--replication-factor must be >= 1", exit_code=2)
    with client_errors(), admin_for(args) as admin:
        try:
            admin.create_topic(args.name, args.partitions, args.replication_factor, configs)
            created = True
        except errors.TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
            created = False
    if args.output == "json":
        print_json({"name": args.name, "created": created})
    else:
        print(f"{'Created' if created else 'Exists'} topic {args.name}")
    return 0


def _list(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        names = admin.list_topics(include_internal=args.include_internal)
    if args.output == "json":
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def describe_json(
    desc: TopicDescription, config: dict[str, str], *, under_only: bool
) -> dict[str, Any]:
    return {
        "name": desc.name,
        "internal": desc.internal,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in desc.partitions
            if not under_only or p.under_replicated
        ],
        "config": config,
    }


def _describe(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        descs = admin.describe_topics([args.name] if args.name else None)
        try:
            configs = admin.describe_configs(list(descs))
        except errors.UnsupportedVersionError:
            configs = {}
    out = [
        describe_json(
            d,
            {k: e.value for k, e in configs.get(d.name, {}).items()},
            under_only=args.under_replicated,
        )
        for d in descs.values()
    ]
    if args.under_replicated:
        out = [t for t in out if t["partitions"]]
    if args.output == "json":
        print_json(out[0] if args.name and out else out)
        return 0
    for t in out:
        rf = len(t["partitions"][0]["replicas"]) if t["partitions"] else 0
        cfg = ",".join(f"{k}={v}" for k, v in sorted(t["config"].items()))
        print(
            f"Topic: {t['name']}\tPartitions: {len(descs[t['name']].partitions)}\t"
            f"ReplicationFactor: {rf}\tConfigs: {cfg}"
        )
        for p in t["partitions"]:
            print(
                f"\tTopic: {t['name']}\tPartition: {p['partition']}\tLeader: {p['leader']}\t"
                f"Replicas: {','.join(map(str, p['replicas']))}\t"
                f"Isr: {','.join(map(str, p['isr']))}"
            )
    return 0


def _alter(args: argparse.Namespace) -> int:
    configs = parse_configs(args.config)
    if args.partitions is None and not configs and not args.delete_config:
        raise CliError(
            "nothing to alter: give --partitions N and/or --config KEY=VALUE", exit_code=2
        )
    with client_errors(), admin_for(args) as admin:
        if args.partitions is not None:
            admin.create_partitions({args.name: args.partitions})
        if configs or args.delete_config:
            admin.alter_topic_configs(
                args.name, set_configs=configs, delete_configs=args.delete_config or ()
            )
    if args.output == "json":
        print_json({"name": args.name, "altered": True})
    else:
        print(f"Altered topic {args.name}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        admin.delete_topics([args.name])
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"Deleted topic {args.name}")
    return 0
