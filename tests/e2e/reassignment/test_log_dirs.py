"""DescribeLogDirs on real brokers (issue 17): each broker describes its own log dir, the
sizes grow as records are produced and agree with the files on disk, the planners' sizes
are the leaders' measured bytes; ``headwater log-dirs describe`` prints Kafka's JSON,
refuses brokers that are not alive (listing the live ones) and illegal topic names; and the
controller's ``headwater_controller_reassigning_partitions`` gauge is 1 during a throttled
move and back to 0 once it completes."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import headwater
import pytest
from headwater import errors
from headwater.client import NewTopic, TopicPartition
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer, free_ports

from .conftest import (
    TP,
    replica_bytes,
    setup_topic,
    start_move,
    throttle,
    unthrottle,
    wait_moved,
    wait_until,
)
from .helpers import headwater as run_cli
from .helpers import headwater_json, produce

pytestmark = pytest.mark.e2e

SIZES = "sizes"


@pytest.fixture
def scraped(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, int]]]:
    """The reassignment tests' four brokers, each serving Prometheus metrics on its own port."""
    ports = dict(enumerate(free_ports(4)))
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "3000",
        "zookeeper.session.timeout.ms": "4000",
        "auto.leader.rebalance.enable": "false",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "4",
    }
    with Cluster(
        brokers=4,
        data_dir=tmp_path,
        zookeeper=zookeeper.connect_string,
        overrides=overrides,
        broker_overrides={b: {"metrics.port": str(p)} for b, p in ports.items()},
    ) as cluster:
        yield cluster, ports


def gauge(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the scrape")


def sizes_by_broker(admin: headwater.Admin) -> dict[int, dict[TopicPartition, int]]:
    return {
        broker: {tp: info.size for d in dirs.values() for tp, info in d.replica_infos.items()}
        for broker, dirs in admin.describe_log_dirs(topics=[SIZES]).items()
    }


def test_log_dirs_sizes_filters_and_refusals(scraped: tuple[Cluster, dict[int, int]]) -> None:
    cluster, _ = scraped
    bootstrap = cluster.bootstrap
    with headwater.Admin(bootstrap, default_api_timeout_ms=30000) as admin:
        admin.create_topics([NewTopic(SIZES, replica_assignment={0: [0, 1], 1: [1, 2]})])
        wait_until(lambda: cluster.leader_for(SIZES, 1) == 1, timeout_s=30, what="leaders")
        every = admin.describe_log_dirs()
        assert sorted(every) == [0, 1, 2, 3]
        for broker, dirs in every.items():
            ((path, d),) = dirs.items()  # one log dir each
            assert Path(path) == cluster.brokers[broker].log_dir.absolute()
            assert d.error is None and d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
        before = sizes_by_broker(admin)
        t0, t1 = TopicPartition(SIZES, 0), TopicPartition(SIZES, 1)
        assert set(before[1]) == {t0, t1} and set(before[3]) == set()  # only this topic's
        assert before[0][t0] == 0

        produce(bootstrap, SIZES, 600, size=500)
        wait_until(
            lambda: all(
                sizes_by_broker(admin)[b].get(tp, 0) > 0 for b, tp in ((0, t0), (1, t0), (1, t1))
            ),
            timeout_s=30,
            what="the replicas to grow",
        )
        end = admin.list_offsets({t0: "latest"})[t0]
        assert end is not None and end.offset > 0

        def caught_up() -> bool:
            now = sizes_by_broker(admin)
            return now[1][t0] == now[0][t0] and now[2][t1] == now[1][t1]

        # Followers append the leader's batches verbatim: once in sync, the sizes agree.
        wait_until(caught_up, timeout_s=30, what="the followers to catch up")
        after = sizes_by_broker(admin)
        assert after[0][t0] > 500 * end.offset  # every record's 500-byte value, and framing
        for broker, tp in ((0, t0), (2, t1)):
            files = cluster.brokers[broker].log_dir / f"{tp.topic}-{tp.partition}"
            assert after[broker][tp] == sum(f.stat().st_size for f in files.glob("*.log"))
        estimated = admin.estimate_partition_sizes([t0, t1])
        assert estimated == {t0: after[0][t0], t1: after[1][t1]}  # the leaders' bytes

        only = admin.describe_log_dirs([2], topics={SIZES: [1]})
        assert list(only) == [2]
        assert {tp for d in only[2].values() for tp in d.replica_infos} == {t1}
        with pytest.raises(errors.BrokerNotAvailableError, match=r"7 are not alive"):
            admin.describe_log_dirs([0, 7])
        with pytest.raises(errors.InvalidTopicError, match="illegal"):
            admin.describe_log_dirs(topics=["bad name!"])

    out = headwater_json(
        "log-dirs",
        "describe",
        "--bootstrap",
        bootstrap,
        "--broker-list",
        "0,2",
        "--topic-list",
        SIZES,
    )
    assert out["version"] == 1 and [b["broker"] for b in out["brokers"]] == [0, 2]
    (zero,) = out["brokers"][0]["logDirs"]
    assert zero["error"] is None
    assert zero["partitions"] == [
        {"partition": f"{SIZES}-0", "size": after[0][t0], "offsetLag": 0, "isFuture": False}
    ]
    text = run_cli("log-dirs", "describe", "--bootstrap", bootstrap, "--topic-list", SIZES)
    assert text.returncode == 0 and f"{SIZES}-1" in text.stdout
    unknown = run_cli("log-dirs", "describe", "--bootstrap", bootstrap, "--broker-list", "0,9")
    assert unknown.returncode == 1
    assert "do not exist from --broker-list: 9" in unknown.stderr
    assert "Current existent brokers: 0,1,2,3" in unknown.stderr
    bad = run_cli("log-dirs", "describe", "--bootstrap", bootstrap, "--topic-list", "no/way")
    assert bad.returncode == 1 and "illegal" in bad.stderr and bad.stderr.count("\n") == 1


def test_reassigning_partitions_gauge(scraped: tuple[Cluster, dict[int, int]]) -> None:
    cluster, ports = scraped
    name = "headwater_controller_reassigning_partitions"
    with headwater.Admin(cluster.bootstrap, default_api_timeout_ms=60000) as admin:
        roles = setup_topic(cluster, admin, prefill_mib=2.0)
        assert all(gauge(p, name) == 0 for p in ports.values())
        throttle(admin, roles, rate=64 * 1024)  # 2 MiB take about 30 s
        start_move(admin, roles.target)
        wait_until(
            lambda: gauge(ports[roles.controller], name) == 1,
            timeout_s=30,
            what="the gauge to count the move",
        )
        assert all(gauge(p, name) == 0 for b, p in ports.items() if b != roles.controller)
        assert replica_bytes(cluster, roles.arriving) < 2 * 1024 * 1024  # still copying
        unthrottle(admin)
        wait_moved(cluster, admin, roles.target, timeout_s=90)
        wait_until(
            lambda: gauge(ports[roles.controller], name) == 0,
            timeout_s=30,
            what="the gauge back to 0",
        )
        assert TP not in admin.list_partition_reassignments()
