"""``headwater consume TOPIC``: print records (Kafka's console consumer).

Text output prints each value on a line (``--print-key`` puts the key and a
tab before it).  ``--output json`` prints one JSON object per record per line
with ``topic``, ``partition``, ``offset``, ``timestamp_ms``, ``key``, ``value``
and ``headers`` (a list of ``[key, value]`` pairs); keys and values are UTF-8
text (undecodable bytes replaced) unless ``--encoding base64``, and null
stays ``null``.  ``--timeout-ms`` ends the command after that long without a
record; ``--max-messages`` after that many.
"""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
    security_for,
)
from headwater.client.consumer.consumer import Consumer
from headwater.client.types import ConsumerRecord, TopicPartition


def register(sub: Any) -> None:
    p = sub.add_parser("consume", help="print records of a topic")
    p.add_argument("topic")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: new records only)",
    )
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="start offset in --partition: N, 'earliest' or 'latest'")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    p.add_argument("--group", help="consumer group id")
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: only committed transactions, up to the last stable offset",
    )
    p.add_argument("--print-key", action="store_true", help="text output: KEY<TAB>VALUE")
    p.add_argument("--key-separator", default="\t", help="text output separator (tab)")
    p.add_argument(
        "--encoding",
        choices=("utf8", "base64"),
        default="utf8",
        help="how json output renders keys, values and header values",
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> int | None:
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition", exit_code=2)
    if args.max_messages is not None and args.max_messages <= 0:
        raise CliError("--max-messages must be > 0", exit_code=2)
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise CliError("--timeout-ms must be >= 0", exit_code=2)
    if args.offset is None or args.offset in ("earliest", "latest"):
        return None
    try:
        offset = int(args.offset)
    except ValueError:
        raise CliError(
            f"bad --offset {args.offset!r}; expected N, earliest or latest", exit_code=2
        ) from None
    if offset < 0:
        raise CliError("--offset must be >= 0", exit_code=2)
    return offset


def run(args: argparse.Namespace) -> int:
    offset = _check(args)
    reset = "earliest" if args.from_beginning or args.offset == "earliest" else "latest"
    count = 0
    with client_errors():
        with admin_for(args) as admin:
            desc = admin.describe_topics([args.topic])[args.topic]
        partitions = [p.partition for p in desc.partitions]
        if args.partition is not None and args.partition not in partitions:
            raise CliError(
                f"topic {args.topic!r} has no partition {args.partition} (it has {len(partitions)})"
            )
        consumer = Consumer(
            bootstrap_servers=args.bootstrap,
            security=security_for(args),
            group_id=args.group,
            auto_offset_reset=reset,
            isolation_level=args.isolation_level,
            consumer_timeout_ms=args.timeout_ms,
            default_api_timeout_ms=args.request_timeout_ms,
        )
        try:
            chosen = [args.partition] if args.partition is not None else partitions
            consumer.assign([TopicPartition(args.topic, p) for p in chosen])
            if offset is not None:
                consumer.seek(TopicPartition(args.topic, args.partition), offset)
            for record in consumer:
                _print(record, args)
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
        finally:
            consumer.close()
    if args.output != "json":
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _text(data: bytes | None, encoding: str) -> str | None:
    if data is None:
        return None
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", errors="replace")


def record_json(record: ConsumerRecord, encoding: str) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "key": _text(record.key, encoding),
        "value": _text(record.value, encoding),
        "headers": [[k, _text(v, encoding)] for k, v in record.headers],
    }


def _print(record: ConsumerRecord, args: argparse.Namespace) -> None:
    if args.output == "json":
        print_json(record_json(record, args.encoding))
        return
    value = _text(record.value, "utf8")
    line = "null" if value is None else value
    if args.print_key:
        key = _text(record.key, "utf8")
        line = f"{'null' if key is None else key}{args.key_separator}{line}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
