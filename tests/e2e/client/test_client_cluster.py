"""The client against real brokers: acknowledgements and ordering, keyed placement,
compression through the broker, every acks setting, seek/re-consumption,
offsets_for_times, auto_offset_reset, the long poll, leader failover without loss
or reordering, and the CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import headwater
import pytest
from headwater import errors
from headwater.client.partitioner import partition_for_key

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def poll_n(c: headwater.Consumer, n: int, rounds: int = 100) -> list[headwater.ConsumerRecord]:
    got: list[headwater.ConsumerRecord] = []
    for _ in range(rounds):
        got += c.poll(200)
        if len(got) >= n:
            break
    return got


def read_all(
    bootstrap: str, topic: str, n: int, partition: int = 0
) -> list[headwater.ConsumerRecord]:
    with headwater.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(topic, partition)])
        return poll_n(c, n)


@pytest.mark.parametrize("acks", ["all", 1, 0])
def test_acks_settings(cluster: Any, topic: Any, acks: str | int) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, acks=acks) as p:
        futs = [p.send(name, str(i).encode()) for i in range(100)]
        p.flush(30)
    offsets = [f.result(0).offset for f in futs]
    assert offsets == (list(range(100)) if acks != 0 else [-1] * 100)
    assert [r.value for r in read_all(cluster.bootstrap, name, 100)] == [
        str(i).encode() for i in range(100)
    ]


def test_keys_land_where_kafka_puts_them(cluster: Any, topic: Any) -> None:
    name = topic(partitions=6)
    with headwater.Producer(cluster.bootstrap) as p:
        for k in (b"a", b"customer-1", b"zzz"):
            assert p.send(name, b"v", key=k).result(30).partition == partition_for_key(k, 6)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_round_trip(cluster: Any, topic: Any, codec: str) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, compression_type=codec, linger_ms=50) as p:
        for i in range(200):
            p.send(name, b"payload " * 20, key=str(i).encode(), headers={"i": str(i).encode()})
    got = read_all(cluster.bootstrap, name, 200)
    assert [r.key for r in got] == [str(i).encode() for i in range(200)]
    assert got[7].headers == (("i", b"7"),)


def test_seek_offsets_for_times_and_reset(cluster: Any, topic: Any) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, linger_ms=0) as p:
        for i in range(10):
            p.send(name, str(i).encode(), timestamp_ms=1_000_000 + i * 1000).result(30)
    tp = TP(name, 0)
    with headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert [r.offset for r in poll_n(c, 10)] == list(range(10))
        c.seek(tp, 4)
        assert [r.offset for r in poll_n(c, 6)] == list(range(4, 10))
        found = c.offsets_for_times({tp: 1_004_500})[tp]
        assert found is not None and found.offset == 5
        assert c.end_offsets([tp]) == {tp: 10}
    with headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.position(tp) == 10
    with headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(errors.NoOffsetForPartitionError):
            c.poll(100)


def test_long_poll_answers_when_data_arrives(cluster: Any, topic: Any) -> None:
    name = topic()
    with headwater.Consumer(bootstrap_servers=cluster.bootstrap, fetch_max_wait_ms=120_000) as c:
        c.assign([TP(name, 0)])
        c.position(TP(name, 0))
        got: list[headwater.ConsumerRecord] = []
        t = threading.Thread(target=lambda: got.extend(poll_n(c, 1)))
        t.start()
        with headwater.Producer(cluster.bootstrap) as p:
            p.send(name, b"now").result(30)
        t.join(60)  # max wait is two minutes: finishing proves the broker answered early
        assert not t.is_alive()
    assert [r.value for r in got] == [b"now"]


def test_leader_failover_keeps_order_without_loss(cluster: Any, topic: Any) -> None:
    if not hasattr(cluster, "kill"):
        pytest.skip("the cluster harness cannot kill brokers")
    name = topic()
    with headwater.Admin(cluster.bootstrap) as admin:
        leader = admin.describe_topics([name])[name].partitions[0].leader
    with headwater.Producer(cluster.bootstrap, retry_backoff_ms=50) as p:
        futs = [p.send(name, str(i).encode()) for i in range(500)]
        cluster.kill(leader)
        futs += [p.send(name, str(i).encode()) for i in range(500, 1000)]
        p.flush(60)
    assert [f.result(0).offset for f in futs] == list(range(1000))
    values = [r.value for r in read_all(cluster.bootstrap, name, 1000)]
    assert values == [str(i).encode() for i in range(1000)]
    cluster.restart(leader)


def test_cli_end_to_end(cluster: Any) -> None:
    name = "cli-topic"
    base = [sys.executable, "-m", "headwater.cli.main"]
    boot = ["--bootstrap", cluster.bootstrap]

    def hw(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args, *boot],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert (
        hw("topics", "create", name, "--partitions", "2", "--replication-factor", "3").returncode
        == 0
    )
    assert "TOPIC_ALREADY_EXISTS" in hw("topics", "create", name).stderr
    desc = json.loads(hw("topics", "describe", name, "-o", "json").stdout)
    assert desc["name"] == name and len(desc["partitions"]) == 2
    assert all(len(p["replicas"]) == 3 for p in desc["partitions"])
    assert hw("produce", name, "--partition", "0", stdin="a\nb\nc\n").returncode == 0
    out = hw("consume", name, "--from-beginning", "--max-messages", "3", "-o", "json")
    assert [json.loads(line)["value"] for line in out.stdout.splitlines()] == ["a", "b", "c"]
    assert hw("topics", "alter", name, "--partitions", "3").returncode == 0
    assert json.loads(hw("cluster", "describe", "-o", "json").stdout)["controller"] >= 0
    bad = hw("consume", "no-such-topic")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    assert hw("topics", "delete", name).returncode == 0
