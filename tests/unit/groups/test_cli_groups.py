"""``headwater groups``: argument parsing and refusals that need no cluster
(durations, datetimes, exactly one reset spec, --dry-run vs --execute)."""

from __future__ import annotations

import pytest
from headwater.cli import main
from headwater.cli._common import CliError
from headwater.cli.groups import parse_datetime_ms, parse_duration_ms


def test_durations() -> None:
    assert parse_duration_ms("PT30M") == 30 * 60 * 1000
    assert parse_duration_ms("P1DT2H") == 26 * 3600 * 1000
    assert parse_duration_ms("-PT1S") == -1000
    for bad in ("", "P", "1D", "PT", "P1H"):
        with pytest.raises(CliError):
            parse_duration_ms(bad)


def test_datetimes() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:01+01:00") == 1000
    with pytest.raises(CliError):
        parse_datetime_ms("yesterday")


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--to-earliest", "--to-latest"],
        ["--to-earliest", "--dry-run", "--execute"],
    ],
)
def test_reset_offsets_refuses_bad_arguments(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main.main(["groups", "reset-offsets", "g", "--topic", "t", *extra])
    assert code == 2
    assert "headwater: error:" in capsys.readouterr().err


def test_groups_help_lists_actions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["groups", "--help"])
    out = capsys.readouterr().out
    for action in ("list", "describe", "reset-offsets", "delete"):
        assert action in out
