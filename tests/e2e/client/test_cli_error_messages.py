"""The ``headwater`` command's refusals through subprocesses against a real cluster print
one line, ``headwater: error: CODE: message``, naming Kafka's code exactly once (the
servicers once put ``CODE: ...`` in ``error_message`` and the client prefixed it again):
creating an existing topic, a replication factor above the broker count, an illegal name,
a bad config, deleting or growing a topic that does not exist, a partition count that is
not an increase, and deleting a group that does not exist."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest
from headwater.testing import Cluster

pytestmark = pytest.mark.e2e
BASE = [sys.executable, "-m", "headwater.cli.main"]
ONE_LINE = re.compile(r"headwater: error: ([A-Z_]+): (.+)\n")


def hw(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BASE, *args, "--bootstrap", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused_once(result: subprocess.CompletedProcess[str], code: str) -> str:
    """The message after ``CODE: ``; the code appears once in the whole of stderr."""
    assert result.returncode == 1, result
    match = ONE_LINE.fullmatch(result.stderr)
    assert match is not None, result.stderr
    assert match.group(1) == code, result.stderr
    assert result.stderr.count(code) == 1, result.stderr
    return match.group(2)


def test_topic_refusals_name_the_code_once(cluster: Cluster) -> None:
    name = f"err-{uuid.uuid4().hex[:8]}"
    created = hw(
        cluster, "topics", "create", name, "--partitions", "1", "--replication-factor", "1"
    )
    assert created.returncode == 0, created.stderr
    again = hw(cluster, "topics", "create", name, "--partitions", "1", "--replication-factor", "1")
    assert name in refused_once(again, "TOPIC_ALREADY_EXISTS")
    too_many = hw(cluster, "topics", "create", f"{name}-rf", "--replication-factor", "9")
    refused_once(too_many, "INVALID_REPLICATION_FACTOR")
    refused_once(hw(cluster, "topics", "create", "no way"), "INVALID_TOPIC_EXCEPTION")
    bad = hw(cluster, "topics", "create", f"{name}-c", "--config", "retention.ms=abc")
    assert "retention.ms" in refused_once(bad, "INVALID_CONFIG")
    missing = f"{name}-missing"
    assert missing in refused_once(
        hw(cluster, "topics", "delete", missing), "UNKNOWN_TOPIC_OR_PARTITION"
    )
    refused_once(
        hw(cluster, "topics", "alter", missing, "--partitions", "3"), "UNKNOWN_TOPIC_OR_PARTITION"
    )
    refused_once(hw(cluster, "topics", "alter", name, "--partitions", "1"), "INVALID_PARTITIONS")


def test_group_refusal_names_the_code_once(cluster: Cluster) -> None:
    group = f"nobody-{uuid.uuid4().hex[:8]}"
    assert group in refused_once(hw(cluster, "groups", "delete", group), "GROUP_ID_NOT_FOUND")
