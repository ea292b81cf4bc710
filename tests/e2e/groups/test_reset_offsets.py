"""``headwater groups`` against a real cluster: reset-offsets each way (--to-earliest,
--to-latest, --to-offset, --to-datetime, --shift-by, --by-duration), --dry-run changes
nothing, refused while the group has members, invalid arguments; describe and list."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest
from headwater.cli import main

from tests.e2e.groups.conftest import produce, wait_until

pytestmark = pytest.mark.e2e


def groups_cli(
    capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str
) -> tuple[int, Any, str]:
    code = main.main(["groups", *args, "--bootstrap", bootstrap, "--output", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_reset_offsets_each_way(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], capsys: Any
) -> None:
    name, group = topic(2), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 20, partitions=2)  # offsets 0..9 on each partition
    time.sleep(0.05)
    middle = dt.datetime.now(dt.UTC).isoformat()
    time.sleep(0.05)
    produce(cluster.bootstrap, name, 20, partitions=2)  # offsets 10..19
    tps = [headwater.TopicPartition(name, p) for p in range(2)]
    admin.alter_consumer_group_offsets(group, dict.fromkeys(tps, 5))

    def reset(*spec: str, execute: bool = True) -> dict[int, int]:
        mode = "--execute" if execute else "--dry-run"
        code, out, err = groups_cli(
            capsys, cluster.bootstrap, "reset-offsets", group, "--topic", name, *spec, mode
        )
        assert code == 0, err
        assert out["executed"] is execute
        return {r["partition"]: r["new_offset"] for r in out["offsets"]}

    def committed() -> dict[int, int]:
        return {
            tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()
        }

    assert reset("--to-latest", execute=False) == {0: 20, 1: 20}
    assert committed() == {0: 5, 1: 5}, "--dry-run changes nothing"
    assert reset("--to-latest") == committed() == {0: 20, 1: 20}
    assert reset("--to-earliest") == committed() == {0: 0, 1: 0}
    assert reset("--to-offset", "7") == committed() == {0: 7, 1: 7}
    assert reset("--shift-by", "-3") == committed() == {0: 4, 1: 4}
    assert reset("--shift-by", "100") == committed() == {0: 20, 1: 20}  # clamped
    assert reset("--to-datetime", middle) == committed() == {0: 10, 1: 10}
    assert reset("--by-duration", "PT1H") == committed() == {0: 0, 1: 0}

    code, desc, _ = groups_cli(capsys, cluster.bootstrap, "describe", group)
    assert code == 0 and desc["state"] == "Empty"
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in desc["offsets"]] == [
        (0, 0, 20),
        (1, 0, 20),
    ]
    code, listed, _ = groups_cli(capsys, cluster.bootstrap, "list")
    assert code == 0 and {"group": group, "state": "Empty", "protocol_type": ""} in listed


def test_reset_refused_on_active_group_and_bad_arguments(
    cluster: Any, topic: Callable[..., str], members: Any, capsys: Any, admin: headwater.Admin
) -> None:
    name, group = topic(1), f"grp-{uuid.uuid4().hex[:8]}"
    m = members(cluster.bootstrap, group, name)
    wait_until(lambda: bool(m.assignment), timeout_s=30, what="the member's assignment")
    code, _, err = groups_cli(
        capsys,
        cluster.bootstrap,
        "reset-offsets",
        group,
        "--topic",
        name,
        "--to-earliest",
        "--execute",
    )
    assert code == 1 and "active members" in err
    with pytest.raises(headwater.errors.UnknownMemberIdError):
        admin.alter_consumer_group_offsets(group, {headwater.TopicPartition(name, 0): 0})
    for bad in (
        [],
        ["--to-earliest", "--to-latest"],
        ["--to-datetime", "yesterday"],
        ["--by-duration", "1 hour"],
        ["--to-earliest", "--dry-run", "--execute"],
    ):
        code, _, err = groups_cli(
            capsys, cluster.bootstrap, "reset-offsets", "idle-group", "--topic", name, *bad
        )
        assert code == 2, (bad, err)
    code, _, err = groups_cli(capsys, cluster.bootstrap, "delete", group)
    assert code == 1 and "NON_EMPTY_GROUP" in err
