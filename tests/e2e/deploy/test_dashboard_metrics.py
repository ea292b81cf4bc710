"""Every expression of the chart's Grafana dashboards and alerts names series and labels
that real brokers export.

Two real brokers serve Prometheus metrics, each with a TLS listener beside the plaintext
one (so the certificate expiry gauge has a sample); a topic is produced to and read, and
a consumer group joins (a rebalance), consumes and commits, so every kind of series
exists.  Each
broker's /metrics is scraped and parsed with prometheus_client's own parser, and each
dashboard query (panel targets, variable queries, legends) and alert (with the labels
its annotations use) must name only series found
there and labels those series carry (or that Prometheus adds: instance, job, pod, ...).
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import headwater
import pytest
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_ports
from prometheus_client.parser import text_string_to_metric_families

from tests.unit.deploy import dashboards

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def scraped(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, set[str]]]:
    """Each exported series name with the labels it carries, over both brokers."""
    ports = dict(enumerate(free_ports(2)))
    data_dir: Path = tmp_path_factory.mktemp("dashboard-metrics")
    keystore = write_keystore(
        data_dir / "broker.pem", CertificateAuthority.create().issue("headwater-broker")
    )
    with Cluster(
        brokers=2,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        listeners={"PLAINTEXT": "PLAINTEXT", "SECURE": "SSL"},
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.name.secure.ssl.keystore.location": str(keystore),
        },
        broker_overrides={b: {"metrics.port": str(p)} for b, p in ports.items()},
    ) as cluster:
        topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        with headwater.Admin(cluster.bootstrap) as admin:
            admin.create_topic(topic, 2, 2)
        with headwater.Producer(cluster.bootstrap) as producer:
            for i in range(20):
                producer.send(topic, b"v", partition=i % 2)
            producer.flush()
        with headwater.Consumer(
            topic,
            bootstrap_servers=cluster.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 20 and time.monotonic() < deadline:
                seen += len(consumer.poll(1000))
            consumer.commit()
        with headwater.Producer(cluster.bootstrap) as producer:
            producer.send(topic, b"late", partition=0)  # some lag
            producer.flush()
        found: dict[str, set[str]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = {}
            for port in ports.values():
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=10) as resp:
                    text = resp.read().decode()
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        found.setdefault(sample.name, set()).update(sample.labels)
            if "headwater_group_lag" in found and "headwater_group_rebalances_total" in found:
                break
            time.sleep(0.5)
        yield found


def test_the_scrape_has_what_the_dashboards_need_to_be_tested(
    scraped: dict[str, set[str]],
) -> None:
    """So the next test cannot pass on an empty scrape."""
    for name in (
        "headwater_group_lag",
        "headwater_broker_topic_bytes_in_total",
        "headwater_log_dir_free_bytes",
        "headwater_tls_certificate_expiry_timestamp_seconds",
    ):
        assert name in scraped, sorted(scraped)


def problems_of(queries: list[dashboards.Query], scraped: dict[str, set[str]]) -> list[str]:
    problems = []
    for query in queries:
        names = dashboards.names(query)
        if not names.metrics:
            problems.append(f"{query.where}: names no headwater series: {query.expr}")
        labels: set[str] = set(dashboards.TARGET_LABELS)
        for metric in sorted(names.metrics):
            if metric not in scraped:
                problems.append(f"{query.where}: {metric} is not exported")
            labels |= scraped.get(metric, set())
        for label in sorted(names.labels - labels):
            problems.append(f"{query.where}: no series of {sorted(names.metrics)} has {label!r}")
    return problems


@pytest.mark.parametrize("path", dashboards.files(), ids=lambda p: p.stem)
def test_every_expression_names_exported_series(scraped: dict[str, set[str]], path: Path) -> None:
    assert problems_of(list(dashboards.queries(path)), scraped) == []


def test_every_alert_names_exported_series(scraped: dict[str, set[str]]) -> None:
    """The alerts' expressions, and the labels their annotations use."""
    queries = list(dashboards.rule_queries())
    assert len(queries) == len(dashboards.rules())
    assert problems_of(queries, scraped) == []


def test_the_check_finds_a_series_no_broker_exports(scraped: dict[str, set[str]]) -> None:
    missing = dashboards.Query("x", "alert Made-up", "headwater_disk_not_a_series < 1")
    assert problems_of([missing], scraped) == [
        "alert Made-up: headwater_disk_not_a_series is not exported"
    ]
