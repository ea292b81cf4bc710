"""``headwater log-dirs describe``: Kafka's ``kafka-log-dirs --describe``.

Asks each broker (``--broker-list``, default every live broker) for its log
dirs through DescribeLogDirs, and prints each dir with its partitions' sizes
in bytes and offset lags; ``--topic-list`` keeps only those topics' partitions.
As Kafka's tool (3.x), a ``--broker-list`` naming brokers that are not alive is
refused with the live brokers listed, before any broker is asked.  An
illegal topic name is the brokers' INVALID_TOPIC_EXCEPTION, as one line.

``--output json`` prints Kafka's JSON exactly (``{"version": 1, "brokers":
[{"broker", "logDirs": [{"logDir", "error", "partitions": [{"partition":
"topic-N", "size", "offsetLag", "isFuture"}]}]}]}``), so scripts written for
kafka-log-dirs keep working.
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
from headwater.client.admin_log_dirs import LogDirs


def register(sub: Any) -> None:
    log_dirs = sub.add_parser("log-dirs", help="describe the brokers' log dirs (kafka-log-dirs)")
    lsub = log_dirs.add_subparsers(dest="log_dirs_command", metavar="ACTION", required=True)
    p = lsub.add_parser("describe", help="each broker's log dirs with partition sizes")
    add_bootstrap_option(p)
    p.add_argument(
        "--broker-list",
        metavar="0,1,...",
        help="brokers to describe (default: every live broker)",
    )
    p.add_argument(
        "--topic-list",
        metavar="a,b,...",
        help="only these topics' partitions (default: every topic)",
    )
    add_output_option(p)
    p.set_defaults(func=_describe)


def _ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return sorted({int(b) for b in text.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"bad --broker-list {text!r}; expected broker ids like 0,1,2", 2) from None


def _describe(args: argparse.Namespace) -> int:
    brokers = _ids(args.broker_list)
    topics = [t.strip() for t in args.topic_list.split(",") if t.strip()] if args.topic_list else []
    with client_errors(), admin_for(args) as admin:
        live = sorted(b.broker_id for b in admin.describe_cluster().brokers)
        missing = sorted(set(brokers or ()) - set(live))
        if missing:
            raise CliError(
                "The given brokers do not exist from --broker-list: "
                f"{','.join(map(str, missing))}. Current existent brokers: "
                f"{','.join(map(str, live))}"
            )
        described = admin.describe_log_dirs(brokers, topics=topics or None)
    if args.output == "json":
        print_json(as_kafka_json(described))
        return 0
    print(f"{'BROKER':>6}  {'LOG DIR':<40}  {'PARTITION':<30}  {'SIZE':>12}  {'OFFSET LAG':>10}")
    for broker, dirs in sorted(described.items()):
        for path, d in sorted(dirs.items()):
            if d.error is not None:
                print(f"{broker:>6}  {path:<40}  {'(' + _error_name(d.error) + ')':<30}")
                continue
            if not d.replica_infos:
                print(f"{broker:>6}  {path:<40}  {'-':<30}")
            for tp, info in sorted(d.replica_infos.items()):
                name = f"{tp.topic}-{tp.partition}"
                print(
                    f"{broker:>6}  {path:<40}  {name:<30}  {info.size:>12}  {info.offset_lag:>10}"
                )
    return 0


def _error_name(error: errors.HeadwaterError) -> str:
    return error.code.name


def as_kafka_json(described: dict[int, LogDirs]) -> dict[str, Any]:
    """kafka-log-dirs' JSON (``LogDirsCommand.formatAsJson``)."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": path,
                        "error": type(d.error).__name__ if d.error is not None else None,
                        "partitions": [
                            {
                                "partition": f"{tp.topic}-{tp.partition}",
                                "size": info.size,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                            }
                            for tp, info in sorted(d.replica_infos.items())
                        ],
                    }
                    for path, d in sorted(dirs.items())
                ],
            }
            for broker, dirs in sorted(described.items())
        ],
    }
