"""The ``headwater`` command's argument parsing, run in-process: every command and action
has a ``--help`` that exits 0, and a bad argument is one line on stderr naming the
command, exit 2, before anything is contacted."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from headwater import __version__
from headwater.cli.main import COMMAND_MODULES, build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's --help, --version and usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def command_paths(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command and action of the parser, as argv prefixes."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


COMMANDS = sorted(command_paths(build_parser()))


def test_every_command_module_registers_a_command() -> None:
    top = {path[0] for path in COMMANDS}
    assert len(top) == len(COMMAND_MODULES)
    assert {"broker", "dev", "topics", "operator", "perf"} <= top
    assert ("dev", "add-broker") in COMMANDS and ("perf", "end-to-end") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *path, "--help")
    assert code == 0 and err == ""
    assert out.startswith(f"usage: headwater {' '.join(path)}")


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in {path[0] for path in COMMANDS}:
        assert name in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"headwater {__version__}\n", "")


def test_no_command_prints_the_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 2 and out.startswith("usage: headwater") and err == ""


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["nosuch"], "headwater: error: argument COMMAND: invalid choice: 'nosuch'"),
        (["topics"], "headwater topics: error: the following arguments are required: ACTION"),
        (["dev", "up", "--brokers", "x"], "headwater dev up: error: argument --brokers"),
        (["dev", "restart"], "headwater dev restart: error: the following arguments are required"),
        (["produce"], "headwater produce: error: the following arguments are required: topic"),
        (
            ["partitions", "reassign"],
            "headwater partitions reassign: error: one of the arguments --generate",
        ),
        (["consume", "t", "--output", "yaml"], "argument --output/-o: invalid choice: 'yaml'"),
        (["operator", "--standalone", "--peering", "p"], "not allowed with argument"),
        (["broker", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert reason in err and err.count("\n") == 1
    assert err.rstrip().endswith("--help)")  # points at the help of the command that failed
