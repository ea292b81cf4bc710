"""A real local cluster for the client's e2e tests (``headwater.testing.Cluster``).

One 3-broker cluster per module keeps the suite fast on a 2-core machine; each
test uses its own uniquely named topics.  Until the harness exists the tests
skip with that reason printed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import headwater
import headwater.testing
import pytest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cluster_cls = getattr(headwater.testing, "Cluster", None)
    if cluster_cls is None:
        pytest.skip("headwater.testing.Cluster is not available yet")
    data_dir: Path = tmp_path_factory.mktemp("client-cluster")
    with cluster_cls(brokers=3, data_dir=data_dir) as c:
        yield c


@pytest.fixture
def topic(cluster: Any) -> Any:
    """A factory: ``topic(partitions=1, replication_factor=3) -> name`` with leaders up."""

    def make(partitions: int = 1, replication_factor: int = 3) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        with headwater.Admin(cluster.bootstrap) as admin:
            admin.create_topic(name, partitions, replication_factor)
            for _ in range(200):
                desc = admin.describe_topics([name])[name]
                if len(desc.partitions) == partitions and all(
                    p.leader >= 0 for p in desc.partitions
                ):
                    return name
                time.sleep(0.05)
        raise AssertionError(f"topic {name} never got leaders")

    return make
