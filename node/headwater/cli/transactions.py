"""``headwater transactions``: list and describe transactional ids, like Kafka's
``kafka-transactions.sh list | describe``.

``list`` asks every broker for the ids of the ``__transaction_state`` partitions it leads
(``--state``, ``--producer-id`` and ``--duration-ms`` filter them, Kafka's KIP-664 and
KIP-994 filters); ``describe`` asks an id's coordinator for its state, producer id and
epoch, timeout, start time and the partitions of its open transaction;
``describe-producers`` asks a partition's leader for its active producers and the start
offset of the transaction each has open there; ``abort`` writes an ABORT marker for the
transaction that starts at ``--start-offset`` of a partition (a hanging transaction);
``find-hanging`` names those transactions, as Kafka's ``find-hanging`` does: open in a
partition (DescribeProducers) with no write for longer than the longest timeout a
transaction may have (``--max-transaction-timeout``, minutes, Kafka's
``transaction.max.timeout.ms`` default 15), and not known to their coordinator as an
open transaction holding that partition (ListTransactions by producer id, then
DescribeTransactions) -- see :func:`hanging_transactions`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client import TopicPartition
from headwater.client.admin.transactions import ProducerState, TransactionDescription

OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})
"""Coordinator states in which a transaction still holds its partitions."""


class OpenTransaction(NamedTuple):
    """A transaction a partition's leader has open (one row of find-hanging)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_timestamp: int
    """The producer's last write to the partition (-1: unknown)."""
    duration_min: int
    """Minutes since that write (-1: unknown)."""


def stale_open_transactions(
    producers: Mapping[TopicPartition, Iterable[ProducerState]],
    *,
    now_ms: int,
    max_transaction_timeout_ms: int,
) -> list[OpenTransaction]:
    """The open transactions whose producer wrote nothing for longer than a transaction
    may last: the candidates (a producer with no known timestamp is one)."""
    out = []
    for tp, states in producers.items():
        for p in states:
            if p.current_transaction_start_offset < 0:
                continue
            age = now_ms - p.last_timestamp if p.last_timestamp >= 0 else -1
            if 0 <= age <= max_transaction_timeout_ms:
                continue
            out.append(
                OpenTransaction(
                    tp.topic,
                    tp.partition,
                    p.producer_id,
                    p.producer_epoch,
                    p.current_transaction_start_offset,
                    p.last_timestamp,
                    age // 60_000 if age >= 0 else -1,
                )
            )
    return sorted(out)


def hanging_transactions(
    candidates: Iterable[OpenTransaction], described: Iterable[TransactionDescription]
) -> list[OpenTransaction]:
    """The candidates no coordinator keeps: a transaction is *not* hanging while a
    transactional id with its producer id is open (Ongoing, PrepareCommit,
    PrepareAbort) and holds its partition -- the coordinator will end it."""
    held = {(d.producer_id, tp) for d in described if d.state in OPEN_STATES for tp in d.partitions}
    return [
        c for c in candidates if (c.producer_id, TopicPartition(c.topic, c.partition)) not in held
    ]


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


def _partitions(admin: Any, args: argparse.Namespace) -> list[TopicPartition]:
    topics = admin.describe_topics(None if args.topic is None else [args.topic])
    out = []
    for desc in topics.values():
        for p in desc.partitions:
            if args.partition is not None and p.partition != args.partition:
                continue
            if args.broker_id is not None and p.leader != args.broker_id:
                continue
            out.append(TopicPartition(p.topic, p.partition))
    if args.partition is not None and not out:
        raise CliError(f"{args.topic} has no partition {args.partition}")
    return sorted(out)


def cmd_find_hanging(args: argparse.Namespace) -> int:
    if (args.topic is None) == (args.broker_id is None):
        raise CliError("give exactly one of --topic or --broker-id")
    if args.partition is not None and args.topic is None:
        raise CliError("--partition needs --topic")
    if args.max_transaction_timeout < 0:
        raise CliError("--max-transaction-timeout must be >= 0 (minutes)")
    with client_errors(), admin_for(args) as admin:
        candidates = stale_open_transactions(
            admin.describe_producers(_partitions(admin, args)),
            now_ms=int(time.time() * 1000),
            max_transaction_timeout_ms=args.max_transaction_timeout * 60_000,
        )
        pids = sorted({c.producer_id for c in candidates})
        listed = admin.list_transactions(producer_ids=pids) if pids else []
        ids = [t.transactional_id for t in listed]
        described = admin.describe_transactions(ids).values() if ids else []
        hanging = hanging_transactions(candidates, described)
    if args.output == "json":
        print_json([h._asdict() for h in hanging])
        return 0
    print(
        "TOPIC\tPARTITION\tPRODUCER-ID\tPRODUCER-EPOCH\tSTART-OFFSET\tLAST-TIMESTAMP\tDURATION(MIN)"
    )
    for h in hanging:
        print("\t".join(str(v) for v in h))
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
    p = sub.add_parser(
        "find-hanging",
        help="open transactions of partitions that their coordinator does not know",
    )
    p.add_argument("--topic", help="the partitions of this topic")
    p.add_argument("--partition", type=int, help="only this partition of --topic")
    p.add_argument("--broker-id", type=int, help="the partitions this broker leads")
    p.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        help="minutes a transaction may last (the brokers' transaction.max.timeout.ms)",
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_find_hanging)
    p = sub.add_parser("describe", help="one id's state, producer and open partitions")
    p.add_argument("transactional_id")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=cmd_describe)
