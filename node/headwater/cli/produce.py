"""``headwater produce TOPIC``: one record per line of stdin (Kafka's console producer).

With ``--key-separator SEP`` each line is ``KEY<SEP>VALUE`` (a line without
the separator is an error, as in Kafka).  Every record is acknowledged before
the command exits; the first delivery failure is reported as one line and a
non-zero exit.  ``--output json`` prints each record's partition and offset.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from headwater import errors
from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
    security_for,
)
from headwater.client.futures import RecordFuture
from headwater.client.producer import Producer
from headwater.client.settings import COMPRESSION_TYPES


def register(sub: Any) -> None:
    p = sub.add_parser("produce", help="send lines of stdin as records")
    p.add_argument("topic")
    p.add_argument("--key-separator", help="split each line into KEY<SEP>VALUE")
    p.add_argument("--acks", default="all", choices=("all", "-1", "0", "1"))
    p.add_argument("--compression", default="none", choices=COMPRESSION_TYPES)
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument(
        "--header", action="append", metavar="KEY=VALUE", help="add a header to every record"
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    headers = []
    for h in args.header or ():
        k, sep, v = h.partition("=")
        if not sep:
            raise CliError(f"bad --header {h!r}; expected KEY=VALUE", exit_code=2)
        headers.append((k, v.encode()))
    with client_errors():
        with admin_for(args) as admin:
            admin.describe_topics([args.topic])  # a missing topic fails now, in one line
        producer = Producer(
            args.bootstrap,
            security=security_for(args),
            acks=args.acks,
            compression_type=args.compression,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            max_block_ms=args.request_timeout_ms,
        )
        pending: list[RecordFuture] = []
        try:
            for lineno, line in enumerate(sys.stdin.buffer, 1):
                line = line.rstrip(b"\r\n")
                key: bytes | None = None
                if args.key_separator is not None:
                    sep = args.key_separator.encode()
                    if sep not in line:
                        raise CliError(f"line {lineno} has no key separator {args.key_separator!r}")
                    key, line = line.split(sep, 1)
                pending.append(
                    producer.send(
                        args.topic, line, key=key, headers=headers, partition=args.partition
                    )
                )
                if len(pending) >= 10000:
                    _report(pending, args.output)
                    pending = []
            producer.flush()
            _report(pending, args.output)
        finally:
            producer.close(timeout=5.0)
    return 0


def _report(futures: list[RecordFuture], output: str) -> None:
    for fut in futures:
        try:
            md = fut.result()
        except errors.HeadwaterError:
            raise
        except TimeoutError as exc:
            raise CliError(str(exc)) from None
        if output == "json":
            print_json(
                {
                    "topic": md.topic,
                    "partition": md.partition,
                    "offset": md.offset,
                    "timestamp_ms": md.timestamp_ms,
                }
            )
