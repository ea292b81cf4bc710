"""The ``headwater`` command: one entry point, a module per command group.

Each command module exposes ``register(subparsers)``, which adds its parser and
sets ``func`` to a callable taking the parsed namespace and returning an exit
code.  Errors that a user can act on are raised as :class:`CliError` and
printed as one line on stderr with a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from headwater.cli._common import CliError

# Command modules, in the order `headwater --help` lists them.  A module that
# is not there yet (a later issue) is skipped rather than breaking the CLI.
COMMAND_MODULES = (
    "headwater.cli.broker",
    "headwater.cli.dev",
    "headwater.cli.topics",
    "headwater.cli.partitions",
    "headwater.cli.produce",
    "headwater.cli.consume",
    "headwater.cli.groups",
    "headwater.cli.transactions",
    "headwater.cli.cluster",
    "headwater.cli.log_dirs",
    "headwater.cli.users",
    "headwater.cli.quotas",
    "headwater.cli.acls",
    "headwater.cli.perf",
    "headwater.cli.console",
    "headwater.cli.operator",
)


class _OneLineErrorParser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr (exit 2), not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(
        prog="headwater",
        description="Headwater: a Kafka-style distributed commit log.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from headwater import __version__

    return f"headwater {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f"headwater: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
