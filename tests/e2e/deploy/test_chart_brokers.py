"""The chart is real: its broker pods, run as rendered, form a cluster that serves clients.

`helm template` renders the chart (real helm) with ``zookeeper.external`` pointing at a
real local ZooKeeper.  The broker container's command, args and env (downward-API fields
filled in as a kubelet would: HOSTNAME=hw-headwater-broker-<i>, POD_NAMESPACE, POD_IP) and
the ConfigMap's server.properties are taken as rendered; only host names, ports and paths
change (tests/e2e/deploy/localize.py, asserted here).  Three such processes must register
in ZooKeeper with ids taken from their hostnames' ordinals, elect a controller, pass the
readiness probe (gRPC health) and serve a produce/consume on a topic with RF=3 and the
chart's min.insync.replicas=2.  It also checks that the rendered advertised.listeners
expands to the pod's stable DNS name, which is what clients on Kubernetes connect to, and
that ZooKeeper ACLs are on as rendered: the brokers' znodes carry the digest ACL of the
chart's identity (password from the chart's Secret, in no log), and an unauthenticated
client can read but not change them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.request import urlopen

import headwater
import pytest
from headwater.testing.cluster import is_healthy
from headwater.testing.zookeeper import ZooKeeperServer, free_ports
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions, make_digest_acl_credential

from tests.e2e.deploy import localize
from tests.e2e.deploy.pods import LocalPod, image_environment, wait_for
from tests.unit.deploy import chart

pytestmark = pytest.mark.e2e

BROKERS = 3
RECORDS = 30
ZK_PASSWORD_ENV = "HEADWATER_ZOOKEEPER_DIGEST_PASSWORD"


class RenderedBroker(NamedTuple):
    """What the chart renders for broker pod ``ordinal`` (downward API resolved)."""

    hostname: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    properties: str


def rendered_brokers(values: dict[str, Any]) -> list[RenderedBroker]:
    objs = chart.render(values)
    container = chart.broker_container(objs)
    properties = chart.broker_properties(objs)
    sts = chart.broker_statefulset(objs)["metadata"]["name"]
    out = []
    for i in range(BROKERS):
        hostname = f"{sts}-{i}"
        env = chart.broker_env(objs, hostname=hostname, pod_ip=localize.LOCALHOST)
        out.append(
            RenderedBroker(hostname, container["command"], container["args"], env, properties)
        )
    return out


class Running(NamedTuple):
    pods: list[LocalPod]
    bootstrap: str
    kafka_bootstrap: str
    metrics_ports: list[int]
    chroot: str
    zk_password: str


@pytest.fixture
def brokers(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Running]:
    chart.require_helm()
    chroot = f"/hw-chart-{uuid.uuid4().hex[:10]}"
    rendered = rendered_brokers(
        {
            "zookeeper": {"external": zookeeper.chroot_connect_string(chroot)},
            "brokers": {"replicas": BROKERS},
            "tls": {"enabled": False},  # TLS: test_chart_tls_brokers.py
        }
    )
    pods: list[LocalPod] = []
    distinct = free_ports(3 * BROKERS)
    ports, metrics_ports = distinct[:BROKERS], distinct[BROKERS : 2 * BROKERS]
    kafka_ports = distinct[2 * BROKERS :]
    for i, broker in enumerate(rendered):
        home = tmp_path / broker.hostname
        (home / "data").mkdir(parents=True)
        config = home / "server.properties"
        config.write_text(
            localize.localize_properties(
                broker.properties,
                listener_port=ports[i],
                metrics_port=metrics_ports[i],
                log_dir=home / "data",
                kafka_port=kafka_ports[i],
            ),
            encoding="utf-8",
        )
        argv = localize.local_command(broker.command) + localize.localize_args(
            broker.args, config_path=config
        )
        pods.append(
            LocalPod(
                broker.hostname,
                argv=argv,
                env=image_environment(broker.env),
                log_path=home / "broker.log",
            )
        )
    try:
        for pod in pods:
            pod.start(tmp_path)
        yield Running(
            pods,
            ",".join(f"127.0.0.1:{p}" for p in ports),
            ",".join(f"127.0.0.1:{p}" for p in kafka_ports),
            metrics_ports,
            chroot,
            rendered[0].env[ZK_PASSWORD_ENV],
        )
    finally:
        for pod in pods:
            pod.stop(grace_s=5.0)


def test_only_addresses_and_paths_are_rewritten(zookeeper: ZooKeeperServer) -> None:
    chart.require_helm()
    (broker, *_) = rendered_brokers(
        {"zookeeper": {"external": zookeeper.connect_string}, "tls": {"enabled": False}}
    )
    before = chart.parse_properties(broker.properties)
    after = chart.parse_properties(
        localize.localize_properties(
            broker.properties,
            listener_port=1111,
            metrics_port=2222,
            log_dir=Path("/tmp/x"),
            kafka_port=3333,
        )
    )
    assert localize.changed_keys(before, after) == (
        localize.ADDRESS_KEYS | localize.KAFKA_ADDRESS_KEYS | localize.PATH_KEYS
    )
    assert after["listeners"] == after["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1111"
    assert (
        after["kafka.listeners"]
        == after["kafka.advertised.listeners"]
        == ("KAFKA://127.0.0.1:3333")
    )
    assert (after["metrics.port"], after["log.dirs"]) == ("2222", "/tmp/x")
    assert broker.args[: broker.args.index("--config")] == ["broker"]
    assert "--broker-id-from-hostname" in broker.args
    # On Kubernetes the broker advertises its pod's stable DNS name, port unchanged.
    assert chart.expand_env(before["advertised.listeners"], broker.env) == (
        f"PLAINTEXT://{broker.hostname}.hw-headwater-broker-headless."
        f"{chart.NAMESPACE}.svc.cluster.local:9092"
    )
    # And its Kafka listener the same name on the Kafka port (what Metadata advertises).
    assert chart.expand_env(before["kafka.advertised.listeners"], broker.env) == (
        f"KAFKA://{broker.hostname}.hw-headwater-broker-headless."
        f"{chart.NAMESPACE}.svc.cluster.local:9093"
    )
    assert before["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT"
    # The one HEADWATER_* variable: the ZooKeeper digest password, from its Secret.
    assert {n for n in broker.env if n.startswith("HEADWATER_")} == {ZK_PASSWORD_ENV}
    assert before["zookeeper.set.acl"] == "true"
    assert broker.env[ZK_PASSWORD_ENV] not in broker.properties


def check_znode_acls(stranger: KazooClient, brokers: Running, connect: str) -> None:
    """zookeeper.set.acl as rendered: the brokers' znodes are the digest identity's
    (``zookeeper.acl.username``, the Secret's password) to change, world-readable only.
    ZooKeeper shows a digest's hash only to a client with ADMIN on the znode (others see
    ``user:x``), so the exact identity is read with the brokers' credentials."""
    root = brokers.chroot
    identity = make_digest_acl_credential("headwater", brokers.zk_password)
    paths = (f"{root}/brokers/ids/0", f"{root}/brokers/ids", f"{root}/controller")
    owner = KazooClient(hosts=connect, auth_data=[("digest", f"headwater:{brokers.zk_password}")])
    owner.start(timeout=15)
    try:
        for client, digest in ((owner, identity), (stranger, "headwater:x")):
            for path in paths:
                acls, _ = client.get_acls(path)
                by_scheme = {(a.id.scheme, a.id.id): a.perms for a in acls}
                assert by_scheme == {("digest", digest): Permissions.ALL,
                                     ("world", "anyone"): Permissions.READ}, path  # fmt: skip
    finally:
        owner.stop()
        owner.close()
    with pytest.raises(NoAuthError):
        stranger.create(f"{root}/brokers/ids/9", b"{}")
    with pytest.raises(NoAuthError):
        stranger.delete(f"{root}/controller")
    assert stranger.exists(f"{root}/brokers/ids/9") is None


def test_rendered_brokers_form_a_cluster_and_serve_clients(
    brokers: Running, zookeeper: ZooKeeperServer
) -> None:
    addresses = brokers.bootstrap.split(",")
    wait_for(
        lambda: all(is_healthy(a, timeout_s=0.5) for a in addresses),
        what="every broker's readiness probe (gRPC health SERVING)",
        pods=brokers.pods,
    )
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=15)
    try:
        ids = f"{brokers.chroot}/brokers/ids"
        wait_for(
            lambda: (
                sorted(zk.get_children(ids)) == ["0", "1", "2"]
                and zk.exists(f"{brokers.chroot}/controller") is not None
            ),
            what="3 broker registrations and a controller in ZooKeeper",
            pods=brokers.pods,
        )
        check_znode_acls(zk, brokers, zookeeper.connect_string)
    finally:
        zk.stop()
        zk.close()

    with headwater.Admin(brokers.bootstrap) as admin:
        cluster = admin.describe_cluster()
        assert [b.broker_id for b in cluster.brokers] == [0, 1, 2]
        assert {f"{b.host}:{b.port}" for b in cluster.brokers} == set(addresses)
        assert cluster.controller_id in (0, 1, 2)
        # The versions the operator's roll checks against the pod template's annotations.
        assert {b.version for b in cluster.brokers} == {headwater.__version__}
        assert all(b.protocol_version for b in cluster.brokers)
        topic = f"chart-{uuid.uuid4().hex[:8]}"
        admin.create_topic(topic, 3, 3)

        def leaders_elected() -> bool:
            desc = admin.describe_topics([topic])[topic]
            return len(desc.partitions) == 3 and all(
                p.leader >= 0 and len(p.isr) == 3 for p in desc.partitions
            )

        wait_for(leaders_elected, what=f"leaders and full ISRs of {topic}", pods=brokers.pods)

    sent = [f"record-{i}".encode() for i in range(RECORDS)]
    with headwater.Producer(brokers.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, value, key=value) for value in sent]
        producer.flush(30)
    assert all(f.result(0).offset >= 0 for f in futures)

    got: list[bytes] = []
    with headwater.Consumer(bootstrap_servers=brokers.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([headwater.TopicPartition(topic, p) for p in range(3)])
        for _ in range(100):
            got += [r.value for r in c.poll(200) if r.value is not None]
            if len(got) >= RECORDS:
                break
    assert sorted(got) == sorted(sent)

    # The rendered Kafka listener serves the same records to Kafka's own client.
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=brokers.kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(3)])
        over_kafka = []
        for record in consumer:
            over_kafka.append(record.value)
            if len(over_kafka) >= RECORDS:
                break
    finally:
        consumer.close()
    assert sorted(over_kafka) == sorted(sent)
    admin = kafka.KafkaAdminClient(bootstrap_servers=brokers.kafka_bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert {(b["broker_id"], f"{b['host']}:{b['port']}") for b in described["brokers"]} == set(
        enumerate(brokers.kafka_bootstrap.split(","))
    )

    for pod in brokers.pods:
        assert brokers.zk_password not in pod.log_path.read_text(errors="replace"), pod.name
    # The container's named port "metrics" serves Prometheus text.
    with urlopen(f"http://127.0.0.1:{brokers.metrics_ports[0]}/metrics", timeout=5) as resp:
        assert resp.status == 200
        assert b"# TYPE" in resp.read()
