"""Helpers shared by the command modules: one-line errors and output formats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


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
