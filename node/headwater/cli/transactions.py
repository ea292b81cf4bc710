"""``headwater transactions``: list and describe transactional ids, like Kafka's
``kafka-transactions.sh list | describe``.

``list`` asks every broker for the ids of the ``__transaction_state`` partitions it leads
(``--state``, ``--producer-id`` and ``--duration-ms`` filter them, Kafka's KIP-664 and
KIP-994 filters); ``describe`` asks an id's coordinator for its state, producer id and
epoch, timeout, start time and the partitions of its open transaction;
``describe-producers`` asks a partition's leader for its active producers and the start
offset of the transaction each has open there; ``abort`` writes an ABORT marker for the
transaction that starts at ``--start-offset`` of a partition (a hanging transaction).
"""

from __future__ import annotations

import argparse
from typing import Any

from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client import TopicPartition


def cmd_list(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        listed = admin.list_transactions(
            states=args.state or (),
            producer_ids=args.producer_id or (),
            duration_ms=args.duration_ms,
        )
    rows = [t._asdict() for t in listed]
    if args.output == "json":
        print_json(rows)
    else:
        print("TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE")
        for t in listed:
            print(f"{t.transactional_id}\t{t.producer_id}\t{t.state}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    row: dict[str, Any] = {
        **d._asdict(),
        "partitions": [str(tp) for tp in d.partitions],
    }
    if args.output == "json":
        print_json(row)
        return 0
    print(
        "COORDINATOR\tTRANSACTIONAL-ID\tPRODUCER-ID\tPRODUCER-EPOCH\tSTATE\tTIMEOUT-MS\t"
        "START-TIME-MS\tPARTITIONS"
    )
    print(
        f"{d.coordinator}\t{d.transactional_id}\t{d.producer_id}\t{d.producer_epoch}\t"
        f"{d.state}\t{d.transaction_timeout_ms}\t{d.transaction_start_time_ms}\t"
        f"{','.join(row['partitions'])}"
    )
    return 0


def cmd_describe_producers(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        tp = TopicPartition(args.topic, args.partition)
        producers = admin.describe_producers([tp])[tp]
    if args.output == "json":
        print_json([p._asdict() for p in producers])
        return 0
    print("PRODUCER-ID\tPRODUCER-EPOCH\tLAST-SEQUENCE\tCURRENT-TRANSACTION-START-OFFSET")
    for p in producers:
        print(
            f"{p.producer_id}\t{p.producer_epoch}\t{p.last_sequence}\t"
            f"{p.current_transaction_start_offset}"
        )
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    with client_errors(), admin_for(args) as admin:
        producers = admin.describe_producers([tp])[tp]
        hanging = [p for p in producers if p.current_transaction_start_offset == args.start_offset]
        if not hanging:
            raise CliError(f"no transaction of {tp} starts at offset {args.start_offset}")
        (p,) = hanging
        admin.abort_transaction(tp, producer_id=p.producer_id, producer_epoch=p.producer_epoch)
    print(f"aborted the transaction of producer {p.producer_id} in {tp} at {args.start_offset}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("transactions", help="list and describe transactional ids")
    sub = parser.add_subparsers(dest="transactions_command", metavar="ACTION", required=True)
    p = sub.add_parser("list", help="every transactional id of the cluster")
    p.add_argument("--state", action="append", help="only ids in this state (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, help="repeatable")
    p.add_argument(
        "--duration-ms",
        type=int,
        default=-1,
        help="only transactions running longer than this",
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("describe-producers", help="the active producers of one partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_describe_producers)
    p = sub.add_parser("abort", help="abort a hanging transaction in one partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start-offset", type=int, required=True, help="where the transaction starts")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_abort)
    p = sub.add_parser("describe", help="one id's state, producer and open partitions")
    p.add_argument("transactional_id")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_describe)
