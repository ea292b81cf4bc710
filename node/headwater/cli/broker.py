"""``headwater broker``: run one broker process (logs to stderr)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from headwater.cli._common import CliError


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "broker",
        help="run a broker",
        description="Run one Headwater broker until SIGTERM (Kafka's kafka-server-start).",
    )
    parser.add_argument("--config", type=Path, help="a Java-properties file (server.properties)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key, winning over the file and HEADWATER_* env vars (repeatable)",
    )
    parser.add_argument(
        "--broker-id-from-hostname",
        action="store_true",
        help="set broker.id from the trailing integer of $HOSTNAME (StatefulSet ordinal)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--test-hooks", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from headwater.server.app import run_broker
    from headwater.server.config import ConfigError, load_config

    try:
        config = load_config(
            config_file=args.config,
            overrides=args.override,
            broker_id_from_hostname=args.broker_id_from_hostname,
        )
    except ConfigError as exc:
        raise CliError(f"config: {exc}") from None
    logging.basicConfig(
        level=str(args.log_level).upper(),
        format="%(asctime)s %(levelname)s [broker "
        + str(config.broker_id)
        + "] %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    return run_broker(config, test_hooks=args.test_hooks)
