"""Helpers shared by the command modules: one-line errors, output formats, and the options
and clients of the commands that talk to a cluster (``--bootstrap``, ``--command-config``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from headwater import errors
from headwater.client import security as client_security
from headwater.client.admin import Admin
from headwater.client.security import ClientSecurity
from headwater.server.config import parse_properties


class CliError(Exception):
    """An error the user can act on: printed as one line, exit code non-zero."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="output format (json for machines)",
    )


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, sort_keys=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT[,...]",
        default=os.environ.get("HEADWATER_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        help="brokers to connect to (default: $HEADWATER_BOOTSTRAP or %(default)s)",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=10000,
        help="how long to keep trying to reach the cluster (default: %(default)s)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        default=None,
        help="client properties, as Kafka's tools take them: security.protocol, "
        "ssl.truststore.location, ssl.keystore.location (PEM), sasl.mechanism, sasl.jaas.config",
    )


def security_for(args: argparse.Namespace) -> ClientSecurity:
    """The client security of ``--command-config`` (read once per command); CliError
    names the file and the bad key, never a password."""
    cached = getattr(args, "_client_security", None)
    if isinstance(cached, ClientSecurity):
        return cached
    path: Path | None = getattr(args, "command_config", None)
    security = client_security.PLAINTEXT
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--command-config {path}: {exc.strerror or exc}", exit_code=2) from None
        try:
            security = client_security.from_java_properties(parse_properties(text))
        except ValueError as exc:
            raise CliError(f"--command-config {path}: {exc}", exit_code=2) from None
    args._client_security = security
    return security


@contextlib.contextmanager
def client_errors() -> Iterator[None]:
    """Report client failures as one clear line and a non-zero exit."""
    try:
        yield
    except errors.HeadwaterError as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:  # a setting the client refused (bad bootstrap, acks, ...)
        raise CliError(str(exc), exit_code=2) from None


def admin_for(args: argparse.Namespace) -> Admin:
    return Admin(
        args.bootstrap,
        request_timeout_ms=args.request_timeout_ms,
        default_api_timeout_ms=args.request_timeout_ms,
        security=security_for(args),
    )
