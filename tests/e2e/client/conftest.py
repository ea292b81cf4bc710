"""Real local clusters for the client's e2e tests (``headwater.testing.Cluster``).

``cluster`` is one 3-broker cluster per module (sharing the session's ZooKeeper)
that keeps the suite fast on a 2-core machine; each test uses its own uniquely
named topics.  Retention runs every 300 ms there so that the out-of-range tests
see segments deleted quickly.  ``trio`` is a fresh 3-broker cluster with
``min.insync.replicas=2`` for tests that kill, pause or restart brokers, so
their faults never leak into other tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import headwater
import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

TopicFactory = Callable[..., str]


def make_topic(
    bootstrap: str,
    partitions: int = 1,
    replication_factor: int = 3,
    configs: dict[str, str] | None = None,
) -> str:
    """Create a uniquely named topic and wait until every partition has a leader."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    with headwater.Admin(bootstrap) as admin:
        admin.create_topic(name, partitions, replication_factor, configs)
        for _ in range(400):
            desc = admin.describe_topics([name])[name]
            if len(desc.partitions) == partitions and all(p.leader >= 0 for p in desc.partitions):
                return name
            time.sleep(0.05)
    raise AssertionError(f"topic {name} never got leaders")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("client-cluster")
    overrides = {"log.retention.check.interval.ms": "300"}
    with Cluster(
        brokers=3, data_dir=data_dir, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as c:
        yield c


@pytest.fixture
def trio(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    overrides = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "1500"}
    with Cluster(
        brokers=3, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as c:
        yield c


@pytest.fixture
def topic(cluster: Cluster) -> TopicFactory:
    """A factory: ``topic(partitions=1, replication_factor=3, configs=None) -> name``."""

    def make(
        partitions: int = 1, replication_factor: int = 3, configs: dict[str, str] | None = None
    ) -> str:
        return make_topic(cluster.bootstrap, partitions, replication_factor, configs)

    return make
