"""The ``headwater`` command end to end through subprocesses against a real cluster:
topics create/list/describe/alter/delete (text and ``--output json``), produce from
stdin with keys, consume with ``--output json``/``--print-key``/``--partition --offset``,
cluster describe, quick ``perf produce``/``perf consume``/``perf end-to-end`` runs, the
HEADWATER_BOOTSTRAP default, and bad arguments, unknown topics and an unreachable
bootstrap each giving one line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import free_port

pytestmark = pytest.mark.e2e
BASE = [sys.executable, "-m", "headwater.cli.main"]


def run(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BASE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0, result
    assert result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_topic_lifecycle_and_records(cluster: Cluster) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"

    def hw(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run(*args, "--bootstrap", cluster.bootstrap, stdin=stdin)

    created = hw(
        "topics",
        "create",
        name,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=100000",
    )
    assert created.returncode == 0, created.stderr
    one_line_error(hw("topics", "create", name), "TOPIC_ALREADY_EXISTS")
    assert hw("topics", "create", name, "--if-not-exists").returncode == 0
    assert name in hw("topics", "list").stdout.split()

    desc = json.loads(hw("topics", "describe", name, "-o", "json").stdout)
    assert desc["name"] == name and desc["config"]["retention.ms"] == "100000"
    assert [p["partition"] for p in desc["partitions"]] == [0, 1]
    for p in desc["partitions"]:
        assert len(p["replicas"]) == 3 and p["leader"] in p["replicas"]
        assert set(p["isr"]) <= set(p["replicas"])
    text = hw("topics", "describe", name)
    assert text.returncode == 0 and name in text.stdout and "Leader" in text.stdout
    assert name not in hw("topics", "describe", "--under-replicated").stdout

    assert (
        hw(
            "produce", name, "--partition", "0", "--key-separator", ":", stdin="k1:a\nk2:b\nk3:c\n"
        ).returncode
        == 0
    )
    out = hw("consume", name, "--from-beginning", "--max-messages", "3", "-o", "json")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["key"], r["value"], r["partition"], r["offset"]) for r in rows] == [
        ("k1", "a", 0, 0),
        ("k2", "b", 0, 1),
        ("k3", "c", 0, 2),
    ]
    assert set(rows[0]) == {
        "topic",
        "partition",
        "offset",
        "timestamp_ms",
        "key",
        "value",
        "headers",
    }
    keyed = hw(
        "consume", name, "--partition", "0", "--offset", "1", "--max-messages", "2", "--print-key"
    )
    assert keyed.stdout.splitlines() == ["k2\tb", "k3\tc"]

    assert hw("topics", "alter", name, "--partitions", "3").returncode == 0
    assert hw("topics", "alter", name, "--config", "retention.ms=200000").returncode == 0
    desc = json.loads(hw("topics", "describe", name, "-o", "json").stdout)
    assert len(desc["partitions"]) == 3 and desc["config"]["retention.ms"] == "200000"
    one_line_error(hw("topics", "alter", name, "--partitions", "1"), "INVALID_PARTITIONS")

    assert hw("topics", "delete", name).returncode == 0
    one_line_error(hw("topics", "describe", name), "UNKNOWN_TOPIC_OR_PARTITION")


def test_cluster_describe_and_env_bootstrap(cluster: Cluster) -> None:
    out = run("cluster", "describe", "-o", "json", env={"HEADWATER_BOOTSTRAP": cluster.bootstrap})
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["controller"] in {b["id"] for b in info["brokers"]}
    assert len(info["brokers"]) == 3
    text = run("cluster", "describe", "--bootstrap", cluster.bootstrap)
    assert text.returncode == 0 and "controller" in text.stdout.lower()


def test_perf_quick_runs(cluster: Cluster) -> None:
    name = f"perf-{uuid.uuid4().hex[:8]}"
    boot = ["--bootstrap", cluster.bootstrap]
    assert (
        run(
            "topics", "create", name, "--partitions", "1", "--replication-factor", "1", *boot
        ).returncode
        == 0
    )
    produced = run(
        "perf",
        "produce",
        "--topic",
        name,
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "-o",
        "json",
        *boot,
    )
    assert produced.returncode == 0, produced.stderr
    figures = json.loads(produced.stdout)
    assert figures["records"] == 3000 and figures["records_per_s"] > 0
    assert set(figures["latency_ms"]) >= {"p50", "p99", "max"}
    consumed = run("perf", "consume", "--topic", name, "--messages", "3000", *boot)
    assert consumed.returncode == 0, consumed.stderr
    assert "3000 records" in consumed.stdout and "records/s" in consumed.stdout
    group = f"perf-group-{uuid.uuid4().hex[:8]}"
    as_member = run(
        "perf",
        "consume",
        "--topic",
        name,
        "--messages",
        "3000",
        "--group",
        group,
        "-o",
        "json",
        *boot,
    )
    assert as_member.returncode == 0, as_member.stderr
    figures = json.loads(as_member.stdout.strip().splitlines()[-1])
    assert figures["records"] == 3000 and figures["rebalance_ms"] > 0
    # Read as the group's member: closing auto-commits the position, the end of the log.
    described = run("groups", "describe", group, "-o", "json", *boot)
    assert described.returncode == 0, described.stderr
    offsets = json.loads(described.stdout)["offsets"]
    assert [(o["topic"], o["committed_offset"]) for o in offsets] == [(name, 3000)]


def test_perf_end_to_end_one_at_a_time_and_at_a_rate(cluster: Cluster) -> None:
    name = f"perf-e2e-{uuid.uuid4().hex[:8]}"
    boot = ["--bootstrap", cluster.bootstrap]
    create = ("topics", "create", name, "--partitions", "2", "--replication-factor", "3")
    assert run(*create, *boot).returncode == 0
    base = ("perf", "end-to-end", "--topic", name, "--warmup-records", "5", *boot)
    one = run(*base, "--num-records", "50", "--acks", "all", "-o", "json")
    assert one.returncode == 0, one.stderr
    doc = json.loads(one.stdout)
    assert doc["mode"] == "one-at-a-time" and doc["records"] == 50
    assert list(doc["latency_ms"]) == ["avg", "p50", "p95", "p99", "p999", "max"]
    assert 0 < doc["latency_ms"]["p50"] <= doc["latency_ms"]["p99"] <= doc["latency_ms"]["max"]
    paced = run(*base, "--num-records", "200", "--throughput", "100", "-o", "json")
    assert paced.returncode == 0, paced.stderr
    doc = json.loads(paced.stdout)
    assert doc["mode"] == "throughput" and doc["records"] == 200
    assert doc["target_records_per_s"] == 100.0 and doc["latency_ms"]["p999"] > 0
    text = run(*base, "--num-records", "20")
    assert text.returncode == 0 and text.stdout.startswith("20 records end to end")
    one_line_error(run(*base, "--acks", "0"), "synchronous acknowledgement")
    one_line_error(run("perf", "end-to-end", "--topic", "no-such-topic", *boot))


def test_bad_arguments_and_unreachable_bootstrap_fail_in_one_line(cluster: Cluster) -> None:
    nowhere = ["--bootstrap", f"127.0.0.1:{free_port()}"]
    one_line_error(run("topics", "list", *nowhere), "cannot reach")  # default timeouts
    nowhere += ["--request-timeout-ms", "1500"]  # the rest give up sooner
    one_line_error(run("cluster", "describe", *nowhere), "cannot reach")
    one_line_error(run("produce", "t", *nowhere, stdin="x\n"), "cannot reach")
    one_line_error(run("topics", "create", *nowhere), "required")
    one_line_error(run("produce", "t", "--acks", "7", *nowhere), "--acks")
    one_line_error(run("topics", "create", "x", "--partitions", "0", *nowhere), "--partitions")
    one_line_error(run("consume", "t", "--bootstrap", "no-port"), "HOST:PORT")
    one_line_error(run("nosuch"), "invalid choice")
    boot = ["--bootstrap", cluster.bootstrap]
    one_line_error(run("consume", "no-such-topic", "--timeout-ms", "2000", *boot))
    one_line_error(run("topics", "create", "bad/name", *boot), "INVALID_TOPIC")
