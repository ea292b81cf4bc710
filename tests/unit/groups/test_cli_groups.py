"""``headwater groups``: argument parsing and refusals that need no cluster
(durations, datetimes, exactly one reset spec, --dry-run vs --execute), and the describe
of a consumer-protocol group over a fake admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from headwater.cli import main
from headwater.cli._common import CliError
from headwater.cli.groups import parse_datetime_ms, parse_duration_ms
from headwater.client import TopicPartition


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


class _FakeAdmin:
    """Answers ``groups describe``'s three calls for one consumer-protocol group."""

    def __enter__(self) -> _FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def describe_groups(self, ids: list[str]) -> dict[str, Any]:
        from headwater.client.group.admin import ConsumerGroupDescription, MemberDescription

        tp = TopicPartition
        member = MemberDescription(
            "m1", "i1", "c", "h", (tp("t", 0), tp("t", 1)), 3, "unrevoked_partitions", (tp("t", 0),)
        )
        return {
            "g": ConsumerGroupDescription(
                "g", "Reconciling", "consumer", "uniform", 4, (member,), "b:1", "consumer", 4, 4
            )
        }

    def list_consumer_group_offsets(self, group: str) -> dict[Any, Any]:
        return {}


def test_describe_a_consumer_protocol_group(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from headwater.cli import groups

    monkeypatch.setattr(groups, "admin_for", lambda args: _FakeAdmin())
    assert main.main(["groups", "describe", "g", "--output", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["group_type"], d["group_epoch"], d["target_assignment_epoch"]) == ("consumer", 4, 4)
    (m,) = d["members"]
    assert (m["member_epoch"], m["member_state"]) == (3, "unrevoked_partitions")
    assert m["assignment"] == ["t-0", "t-1"] and m["target_assignment"] == ["t-0"]
    assert main.main(["groups", "describe", "g"]) == 0
    out = capsys.readouterr().out
    assert "group type consumer" in out and "group epoch 4, target assignment epoch 4" in out
    assert "epoch=3 state=unrevoked_partitions target=t-0" in out
