"""Fixtures for the Spark connector's e2e tests: one local[2] SparkSession, one cluster.

Starting Spark costs seconds, so one session serves every test of the module,
as does one single-broker cluster (``headwater.testing.Cluster``); tests use
their own uniquely named topics.  They skip, saying why, without Java or
without the cluster harness.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import headwater
import headwater.testing
import pytest

# Retention runs every second so the data-loss test sees deleted segments quickly.
BROKER_OVERRIDES = {"log.retention.check.interval.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from headwater.testing.cluster import Cluster
    except ImportError as exc:  # pragma: no cover - until the harness lands
        pytest.skip(f"headwater.testing.Cluster is not available: {exc}")
    data_dir: Path = tmp_path_factory.mktemp("spark-cluster")
    with Cluster(brokers=1, data_dir=data_dir, overrides=BROKER_OVERRIDES) as c:
        yield c


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark tests need Java (none on PATH and no JAVA_HOME)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import headwater_spark
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    headwater_spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def make_topic(cluster: Any) -> Callable[..., str]:
    """``make_topic(partitions, configs=None) -> name``, returned once every leader is up."""

    def make(partitions: int = 1, configs: Mapping[str, str] | None = None) -> str:
        name = f"spark-{uuid.uuid4().hex[:10]}"
        with headwater.Admin(cluster.bootstrap) as admin:
            admin.create_topic(name, partitions, 1, configs=configs)
            for _ in range(200):
                desc = admin.describe_topics([name]).get(name)
                if (
                    desc is not None
                    and len(desc.partitions) == partitions
                    and all(p.leader >= 0 for p in desc.partitions)
                ):
                    return name
                time.sleep(0.05)
        raise AssertionError(f"topic {name} never got leaders")

    return make
