"""The users' whole path on a real Kubernetes, in order (`make e2e-k8s`).

1. `helm install` of deploy/helm/headwater with the default topology (values-local.yaml
   changes only image names and sizes), waiting for ZooKeeper, 3 brokers and the operator
   to be Ready by their own probes.  ZooKeeper ACLs are on: broker-created znodes carry
   the brokers' digest ACL (checked again after the upgrades of 3: the Secret is kept).
2. A Topic applied with kubectl becomes Ready, serves a producer and a consumer pod through
   the bootstrap Service, takes a config and a partition change, refuses a partition
   decrease with its condition, and is deleted.  Kafka's own client, in a pod of another
   namespace, bootstraps from the bootstrap Service on the Kafka port over TLS with a
   User's certificate and follows Metadata to each broker's headless name.
3. `helm upgrade` to a new image tag and a config change (phase 1, protocol pinned): the
   operator rolls the brokers one at a time, the controller last, while an acks=all
   producer, a consumer group and an ISR watcher run in pods: nothing acknowledged is
   lost or duplicated, no partition drops below min.insync.replicas.  Phase 2 raises
   inter.broker.protocol.version (another roll); lowering it again is refused.  A
   transactional producer commits (and aborts) transactions through one more roll, made
   by a transaction setting: a read_committed consumer reads each committed transaction
   whole and once, nothing aborted.
4. Spark on Kubernetes: spark-submit --master k8s:// with the project's Spark image; the
   executors read a topic, write a result topic and commit the job's group.
5. Faults under load: a broker pod deleted, and the node's kubelet killed for a minute.
6. RBAC is real throughout: the operator runs under the chart's ServiceAccount.

Figures are printed (``FIGURE name: value``) for docs/performance.md.  The tests depend
on each other's state and run in file order; the release is uninstalled at the end
unless HEADWATER_K8S_KEEP=1.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.k8s import kafka_bundle, kube

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]

TOPIC = "orders"
ROLL_TOPIC = "payments"
MIN_ISR = 2
STATE: dict[str, float] = {}


def figure(name: str, value: str) -> None:
    print(f"FIGURE {name}: {value}", file=sys.stderr, flush=True)
    with open(kube.REPO / ".tools" / "k8s" / "figures.txt", "a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {name}: {value}\n")


@pytest.fixture(scope="module")
def release() -> Iterator[None]:
    """A fresh install of the chart; uninstalled afterwards unless HEADWATER_K8S_KEEP=1."""
    reason = kube.missing()
    if reason is not None:
        print(f"k8s tier skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    kube.uninstall()
    STATE["install_started"] = time.time()
    kube.helm(
        "install", kube.RELEASE, str(kube.CHART), "--create-namespace",
        "-f", str(kube.HERE / "values-local.yaml"), "--wait", "--timeout", "10m",
    )  # fmt: skip
    try:
        yield
    finally:
        if os.environ.get("HEADWATER_K8S_KEEP") != "1":
            kube.uninstall()


def topic(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "headwater.io/v1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": kube.NAMESPACE},
        "spec": spec,
    }


def ready_condition(name: str) -> dict[str, Any] | None:
    obj = kube.kubectl_json("get", "topic", name)
    if obj.get("status", {}).get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    for c in obj.get("status", {}).get("conditions") or []:
        if c["type"] == "Ready":
            return dict(c)
    return None


def wait_topic(name: str, status: str = "True") -> dict[str, Any]:
    condition: dict[str, Any] = kube.wait_until(
        lambda: (c := ready_condition(name)) is not None and c["status"] == status and c,
        what=f"Topic {name} Ready={status}",
        timeout_s=180,
    )
    return condition


def describe(name: str) -> dict[str, Any]:
    out: dict[str, Any] = kube.cli(f"describe-{name}", "topics", "describe", name)
    return out


def consume_values(pod: str, topic_name: str, group: str, expect: int) -> dict[str, Any]:
    out = kube.run_pod(
        pod,
        ["python", "/work/workload.py", "consume", "--topic", topic_name, "--group", group,
         "--count", str(expect), "--max-seconds", "120"],
        timeout_s=200,
    )  # fmt: skip
    summary = parse_summary(out)
    assert summary["records"] >= expect, summary
    return summary


def parse_summary(log: str) -> dict[str, Any]:
    import json

    lines = [line for line in log.splitlines() if line.startswith("SUMMARY ")]
    assert lines, log[-3000:]
    parsed: dict[str, Any] = json.loads(lines[-1].removeprefix("SUMMARY "))
    return parsed


# -- 1. install ------------------------------------------------------------------------------


def test_install_brings_up_zookeeper_brokers_and_operator(release: None) -> None:
    def all_ready() -> bool:
        zk, brokers, operator = kube.pods("zookeeper"), kube.pods("broker"), kube.pods("operator")
        return (
            len(zk) == 3 and len(brokers) == 3 and len(operator) == 1
            and all(kube.ready(p) for p in zk + brokers + operator)
        )  # fmt: skip

    kube.wait_until(all_ready, what="3 ZooKeeper, 3 brokers and the operator Ready", timeout_s=600)
    figure("install -> all pods Ready", f"{time.time() - STATE['install_started']:.1f} s")
    operator = kube.pods("operator")[0]
    assert operator["spec"]["serviceAccountName"] == f"{kube.RELEASE}-headwater-operator"
    kube.install_workload()


# ZooKeeper ACLs (zookeeper.acl.enabled, the chart's default), checked from inside a broker
# pod: only brokers may reach ZooKeeper (NetworkPolicy), and the pod has what a broker has
# (server.properties, the digest password in its environment from the chart's Secret).  The
# script prints ACLs with the brokers' digest replaced by a placeholder: never a password
# or its hash.
ZNODE_ACLS_SCRIPT = r"""
import json, os
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import make_digest_acl_credential
lines = open("/etc/headwater/server.properties").read().splitlines()
props = dict(l.split("=", 1) for l in lines if "=" in l and not l.startswith("#"))
user = props["zookeeper.digest.username"]
password = os.environ["HEADWATER_ZOOKEEPER_DIGEST_PASSWORD"]
digest = make_digest_acl_credential(user, password)
owner = KazooClient(hosts=props["zookeeper.connect"], auth_data=[("digest", user + ":" + password)])
stranger = KazooClient(hosts=props["zookeeper.connect"])
owner.start(timeout=30)
stranger.start(timeout=30)
out = {"zookeeper.set.acl": props.get("zookeeper.set.acl"), "user": user, "acls": {}}
for path in ("/brokers/ids", "/brokers/ids/0", "/controller"):
    acls, _ = owner.get_acls(path)
    out["acls"][path] = sorted(
        [a.id.scheme, "<brokers>" if a.id.id == digest else a.id.id, a.perms] for a in acls
    )
def attempt(action):
    try:
        action()
        return "allowed"
    except NoAuthError:
        return "NoAuthError"
    except NoNodeError:
        return "NoNodeError"
out["stranger create /brokers/ids/99"] = attempt(
    lambda: stranger.create("/brokers/ids/99", b"{}", ephemeral=True))
out["stranger list /config/users"] = attempt(lambda: stranger.get_children("/config/users"))
owner.stop()
stranger.stop()
print(json.dumps(out))
"""
ZK_DIGEST_SECRET = f"{kube.RELEASE}-headwater-zookeeper-digest"
ZK_DIGEST_HASH: dict[str, str] = {}
"""sha256 of the digest Secret's data at install (never the password itself)."""


def znode_acls() -> dict[str, Any]:
    out = kube.kubectl("exec", f"{kube.BROKERS}-0", "-c", "broker", "--",
                       "python", "-c", ZNODE_ACLS_SCRIPT, timeout_s=120)  # fmt: skip
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def check_znode_acls() -> None:
    """Broker-created znodes: ALL for the brokers' digest identity, READ for the world;
    an unauthenticated client can change nothing nor list the SCRAM credentials."""
    found = znode_acls()
    owned = [["digest", "<brokers>", 31], ["world", "anyone", 1]]  # Perms.ALL, Perms.READ
    assert found == {
        "zookeeper.set.acl": "true",
        "user": "headwater",
        "acls": {"/brokers/ids": owned, "/brokers/ids/0": owned, "/controller": owned},
        "stranger create /brokers/ids/99": "NoAuthError",
        "stranger list /config/users": "NoAuthError",
    }, found


def zk_digest_hash() -> str:
    data = kube.kubectl("get", "secret", ZK_DIGEST_SECRET, "-o", "jsonpath={.data}")
    return hashlib.sha256(data.encode()).hexdigest()


def test_install_sets_zookeeper_acls_on_broker_znodes(release: None) -> None:
    check_znode_acls()
    ZK_DIGEST_HASH["install"] = zk_digest_hash()


# -- 2. Topic --------------------------------------------------------------------------------


def test_topic_becomes_ready_and_serves_pods(release: None) -> None:
    kube.apply(topic(TOPIC, {"partitions": 3, "replicas": 3,
                             "config": {"min.insync.replicas": str(MIN_ISR)}}))  # fmt: skip
    condition = wait_topic(TOPIC)
    assert condition["reason"] == "Reconciled", condition
    out = kube.run_pod(
        "produce-first", ["python", "/work/workload.py", "produce", "--topic", TOPIC,
                          "--prefix", "order", "--count", "100"],
    )  # fmt: skip
    produced = parse_summary(out)
    assert produced["acked_count"] == 100 and produced["failure_count"] == 0, produced
    first = produced["first_acked_at"] - STATE["install_started"]
    figure("helm install -> first produced record acknowledged", f"{first:.1f} s")
    consumed = consume_values("consume-first", TOPIC, "first-readers", 100)
    assert consumed["values"] == sorted(f"order-{n}" for n in range(100))
    assert consumed["redelivered_count"] == 0


def test_topic_config_and_partition_changes_and_refusal_and_delete(release: None) -> None:
    name = "lifecycle"
    kube.apply(topic(name, {"partitions": 2, "replicas": 3}))
    wait_topic(name)
    kube.apply(topic(name, {"partitions": 4, "replicas": 3,
                            "config": {"retention.ms": "3600000"}}))  # fmt: skip
    wait_topic(name)
    described = describe(name)
    assert len(described["partitions"]) == 4, described
    assert described["config"]["retention.ms"] == "3600000", described["config"]

    # A decrease is refused by the API server itself (the CRD's rule): nothing changes.
    decrease = topic(name, {"partitions": 1, "replicas": 3, "config": {"retention.ms": "3600000"}})
    done = kube.run([str(kube.tool("kubectl")), "apply", "-f", "-"],
                    stdin=yaml.safe_dump(decrease), check=False)  # fmt: skip
    assert done.returncode != 0 and "never decreased" in done.stderr, done.stderr
    assert kube.kubectl_json("get", "topic", name)["spec"]["partitions"] == 4

    # Drift the operator must refuse: the topic grew to 6 partitions outside Kubernetes, so
    # spec.partitions 4 now asks for a decrease; the next change is refused, with its
    # condition and a Warning event, and applies nothing (retention.ms stays).
    kube.cli("grow-outside", "topics", "alter", name, "--partitions", "6")
    kube.apply(topic(name, {"partitions": 4, "replicas": 3, "config": {"retention.ms": "7200000"}}))
    refused = wait_topic(name, status="False")
    assert refused["reason"] == "NotSupported", refused
    assert "cannot decrease from 6 to 4" in refused["message"], refused
    described = describe(name)
    assert len(described["partitions"]) == 6, "a refused change must change nothing"
    assert described["config"]["retention.ms"] == "3600000", described["config"]
    events = kube.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}")
    assert "NotSupported" in events, events
    kube.apply(topic(name, {"partitions": 6, "replicas": 3, "config": {"retention.ms": "7200000"}}))
    wait_topic(name)
    assert describe(name)["config"]["retention.ms"] == "7200000"

    kube.kubectl("delete", "topic", name, "--wait=true", timeout_s=180)
    kube.wait_until(
        lambda: name not in kube.cli(f"list-{int(time.time())}", "topics", "list"),
        what=f"topic {name} gone from the cluster", timeout_s=60, every_s=3,
    )  # fmt: skip


# -- 2b. Kafka's protocol from another namespace -------------------------------------------------

KAFKA_CLIENT_NAMESPACE = "headwater-kafka-client"
KAFKA_BOOTSTRAP = f"{kube.RELEASE}-headwater-bootstrap.{kube.NAMESPACE}.svc.cluster.local:9093"
KAFKA_RECORDS = 30
KAFKA_CLIENT_USER = "kafka-door-client"
"""The cross-namespace client's own User (tls, ACLs for all it does), made by its test."""


def kafka_client_objects(topic_name: str) -> list[dict[str, Any]]:
    """The client namespace's Secret (copied from its User's, as an application team
    would), the client's code and the pod that runs it."""
    ns = KAFKA_CLIENT_NAMESPACE
    user_secret = kube.kubectl_json("get", "secret", KAFKA_CLIENT_USER)["data"]
    secret = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "kafka-client-cert", "namespace": ns},
        "data": {k: user_secret[k] for k in ("ca.crt", "user.crt", "user.key")},
    }  # fmt: skip
    bundle = base64.b64encode(kafka_bundle.kafka_python_zip()).decode()
    code = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kafka-client-code", "namespace": ns},
        "data": {"kafka_client.py": (kube.HERE / "kafka_client.py").read_text()},
        "binaryData": {"kafka-python.zip": bundle},
    }  # fmt: skip
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kafka-client", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
            "containers": [{
                "name": "main", "image": kube.IMAGE_1, "imagePullPolicy": "Never",
                "command": ["python", "/opt/kafka-client/kafka_client.py",
                            "--bootstrap", KAFKA_BOOTSTRAP, "--topic", topic_name,
                            "--records", str(KAFKA_RECORDS), "--certs", "/etc/kafka-client"],
                "env": [{"name": "PYTHONPATH", "value": "/opt/kafka-client/kafka-python.zip"}],
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                "volumeMounts": [
                    {"name": "code", "mountPath": "/opt/kafka-client", "readOnly": True},
                    {"name": "cert", "mountPath": "/etc/kafka-client", "readOnly": True},
                ],
            }],
            "volumes": [
                {"name": "code", "configMap": {"name": "kafka-client-code"}},
                {"name": "cert", "secret": {"secretName": "kafka-client-cert"}},
            ],
        },
    }  # fmt: skip
    return [secret, code, pod]


def test_kafka_client_in_another_namespace_produces_and_consumes_over_tls(release: None) -> None:
    """Kafka's own client (kafka-python), in a namespace of its own, bootstraps from the
    bootstrap Service's name on the Kafka port over TLS with a User's client certificate
    (hostnames checked), then follows Metadata to each broker's headless name: it creates a
    topic, produces with acks=all, consumes in a group that commits, deletes the topic.
    Its User is its own (made here, deleted at the end), so it runs alone."""
    assert kube.TLS, "the chart's default is TLS; this test is about the TLS door"
    pytest.importorskip("kafka")
    kubectl = str(kube.tool("kubectl"))
    ns = KAFKA_CLIENT_NAMESPACE
    kube.run([kubectl, "delete", "namespace", ns, "--ignore-not-found", "--wait=true"],
             timeout_s=300)  # fmt: skip
    kube.install_user(KAFKA_CLIENT_USER, kube.ACLS_FOR_EVERYTHING)
    kube.run([kubectl, "create", "namespace", ns])
    try:
        for obj in kafka_client_objects("kafka-door"):
            # create, not apply: the zip is too big for apply's last-applied annotation.
            kube.run([kubectl, "create", "-f", "-"], stdin=yaml.safe_dump(obj))

        def phase() -> str:
            return kube.run([kubectl, "-n", ns, "get", "pod", "kafka-client", "-o",
                             "jsonpath={.status.phase}"]).stdout  # fmt: skip

        final = kube.wait_until(
            lambda: phase() in ("Succeeded", "Failed") and phase(),
            what="the Kafka client pod to finish", timeout_s=300, every_s=2,
        )  # fmt: skip
        log = kube.run([kubectl, "-n", ns, "logs", "kafka-client"]).stdout
        assert final == "Succeeded", log[-4000:]
        summary = parse_summary(log)
    finally:
        kube.run([kubectl, "delete", "namespace", ns, "--ignore-not-found", "--wait=false"],
                 check=False)  # fmt: skip
        kube.kubectl("delete", "user", KAFKA_CLIENT_USER, "--ignore-not-found", check=False)
    headless = f"{kube.BROKERS}-headless.{kube.NAMESPACE}.svc.cluster.local"
    assert summary["brokers"] == [[i, f"{kube.BROKERS}-{i}.{headless}", 9093] for i in range(3)], (
        summary["brokers"]
    )
    assert summary["controller_id"] in (0, 1, 2)
    values = sorted(f"v{i}" for i in range(KAFKA_RECORDS))
    assert sorted(summary["sent"]) == sorted(summary["received"]) == values
    assert summary["received"] == summary["sent"], "each record read at its produced offset"
    assert {p for p, _ in summary["sent"].values()} == {0, 1, 2}, "records in every partition"
    ends = {str(p): 1 + max(o for q, o in summary["sent"].values() if q == p) for p in range(3)}
    assert summary["committed"] == ends


# -- 3. rolling upgrade -------------------------------------------------------------------------


def broker_uids() -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.pods("broker")}


def controller_id() -> int:
    described = kube.cli(f"cluster-{int(time.time())}", "cluster", "describe")
    return int(described["controller"])


def roll(upgrade_args: list[str], *, image: str, figure_name: str) -> list[str]:
    """helm upgrade with ``upgrade_args``; waits for every broker to be replaced and Ready.
    Returns the pods in the order they were restarted; asserts one at a time."""
    before = broker_uids()
    started = time.monotonic()
    kube.helm("upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values", *upgrade_args)
    order: list[str] = []
    most_unready = 0

    def rolled() -> bool:
        nonlocal most_unready
        pods = kube.pods("broker")
        most_unready = max(most_unready, sum(not kube.ready(p) for p in pods) + 3 - len(pods))
        for p in pods:
            name = p["metadata"]["name"]
            if p["metadata"]["uid"] != before.get(name) and name not in order:
                order.append(name)
        return len(pods) == 3 and all(
            kube.ready(p)
            and p["spec"]["containers"][0]["image"] == image
            and p["metadata"]["uid"] != before[p["metadata"]["name"]]
            for p in pods
        )

    kube.wait_until(rolled, what="every broker replaced and Ready", timeout_s=1200, every_s=0.5)
    figure(figure_name, f"{time.monotonic() - started:.1f} s for 3 brokers, order {order}")
    assert most_unready <= 1, "the operator must roll one broker at a time"
    sts = kube.kubectl_json("get", "statefulset", kube.BROKERS)
    annotations = sts["metadata"].get("annotations") or {}
    kube.wait_until(
        lambda: (kube.kubectl_json("get", "statefulset", kube.BROKERS)["metadata"]
                 .get("annotations", {}).get("headwater.io/roll-state")) == "Finished",
        what="the operator to record the roll Finished", timeout_s=120,
    )  # fmt: skip
    print("roll annotations:", annotations, file=sys.stderr)
    return order


def test_upgrade_rolls_one_broker_at_a_time_with_no_loss(release: None) -> None:
    kube.apply(topic(ROLL_TOPIC, {"partitions": 3, "replicas": 3,
                                  "config": {"min.insync.replicas": str(MIN_ISR)}}))  # fmt: skip
    wait_topic(ROLL_TOPIC)
    controller = controller_id()
    producer = kube.Workload("roll-producer", "produce", "--topic", ROLL_TOPIC, "--prefix", "pay")
    consumer = kube.Workload("roll-consumer", "consume", "--topic", ROLL_TOPIC, "--group", "payers")
    watcher = kube.Workload(
        "roll-isr", "watch-isr", "--topic", ROLL_TOPIC, "--min-isr", str(MIN_ISR)
    )
    time.sleep(10)  # steady state first
    order = roll(
        ["--set", "image.tag=e2e-2",
         "--set-string", "brokers.config.inter\\.broker\\.protocol\\.version=1",
         "--set-string", "brokers.config.log\\.retention\\.check\\.interval\\.ms=120000"],
        image=kube.IMAGE_2, figure_name="roll (phase 1: new tag + config)",
    )  # fmt: skip
    assert order[-1] == f"{kube.BROKERS}-{controller}", (
        f"the controller (broker {controller}) must be rolled last: {order}"
    )
    time.sleep(5)
    produced = producer.stop()
    isr = watcher.stop()
    consumed = consumer.stop()
    figure(
        "producer during the roll (acks=all, one record at a time)",
        f"p50 {produced['p50_ms']} ms, p99 {produced['p99_ms']} ms, "
        f"longest stall {produced['max_ms']} ms, {produced['acked_count']} acked",
    )
    acked = {f"pay-{n}" for n in kube.expand(produced["acked"])}
    seen = set(consumed["values"])
    assert acked and not acked - seen, (
        f"acknowledged but never consumed: {sorted(acked - seen)[:20]}"
    )
    assert consumed["duplicate_values"] == [], consumed["duplicate_values"][:20]
    assert consumed["redelivered_count"] == 0, consumed["redelivered"]
    assert isr["samples"] > 20 and isr["below_min_isr"] == 0, isr
    broker_config = kube.kubectl_json("get", "configmap", f"{kube.RELEASE}-headwater-broker-config")
    assert "log.retention.check.interval.ms=120000" in str(broker_config["data"])


def test_protocol_upgrade_phase_two_and_refused_downgrade(release: None) -> None:
    roll(
        ["--set-string", "brokers.config.inter\\.broker\\.protocol\\.version=2"],
        image=kube.IMAGE_2, figure_name="roll (phase 2: inter.broker.protocol.version 1 -> 2)",
    )  # fmt: skip
    before = broker_uids()
    kube.helm("upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values",
              "--set-string", "brokers.config.inter\\.broker\\.protocol\\.version=1")  # fmt: skip

    def refused() -> str | None:
        ann = kube.kubectl_json("get", "statefulset", kube.BROKERS)["metadata"].get("annotations")
        ann = ann or {}
        return ann.get("headwater.io/roll-message") if ann.get(
            "headwater.io/roll-state") == "Refused" else None  # fmt: skip

    message = kube.wait_until(refused, what="the downgrade to be refused", timeout_s=180)
    assert "lower" in message, message
    assert broker_uids() == before, "a refused roll must restart nothing"
    kube.helm("upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values",
              "--set-string", "brokers.config.inter\\.broker\\.protocol\\.version=2")  # fmt: skip


TXN_TOPIC = "ledger"
TXN_RECORDS = 3
"""Records per transaction of the transactional workload."""


def broker_image() -> str:
    sts = kube.kubectl_json("get", "statefulset", kube.BROKERS)
    image: str = sts["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def test_transactions_under_a_roll_commit_exactly_once(release: None) -> None:
    """A transactional producer (Headwater's client, in a pod) commits transactions of
    known records, aborting every fifth, while a change of a transaction setting
    (transaction.max.timeout.ms) makes the operator roll every broker, the transaction
    coordinators and the partitions' leaders moving with it.  Afterwards a read_committed
    consumer sees every committed record exactly once, no record of an aborted
    transaction, and each transaction whole or not at all (a transaction whose call failed
    is settled by the next producer's init_transactions, one way or the other)."""
    kube.apply(topic(TXN_TOPIC, {"partitions": 3, "replicas": 3,
                                 "config": {"min.insync.replicas": str(MIN_ISR)}}))  # fmt: skip
    wait_topic(TXN_TOPIC)
    producer = kube.Workload(
        "txn-producer", "txn-produce", "--topic", TXN_TOPIC, "--prefix", "led",
        "--per-txn", str(TXN_RECORDS), "--abort-every", "5",
        "--count", "20000", "--max-seconds", "1500",
    )  # fmt: skip
    time.sleep(10)  # steady state first
    roll(
        ["--set", "brokers.config.transaction\\.max\\.timeout\\.ms=600000"],
        image=broker_image(), figure_name="roll (transactional producer)",
    )  # fmt: skip
    time.sleep(5)
    produced = producer.stop(timeout_s=420)
    figure(
        "transactional producer during the roll (3 records a transaction)",
        f"p50 {produced['p50_ms']} ms, p99 {produced['p99_ms']} ms, longest "
        f"{produced['max_ms']} ms; {produced['committed_count']} committed, "
        f"{len(produced['aborted'])} aborted, {len(produced['uncertain'])} failed",
    )
    assert produced["settled"], produced["failures"]
    committed = kube.expand(produced["committed"])
    aborted = set(produced["aborted"])
    uncertain = set(produced["uncertain"])
    assert len(committed) >= 50 and aborted, produced
    assert len(uncertain) <= 10, produced["failures"]

    out = kube.run_pod(
        "txn-audit",
        ["python", "/work/workload.py", "consume", "--topic", TXN_TOPIC, "--group", "ledger-audit",
         "--isolation-level", "read_committed", "--count", str(len(committed) * TXN_RECORDS),
         "--idle-s", "15", "--max-seconds", "300"],
        timeout_s=420,
    )  # fmt: skip
    consumed = parse_summary(out)
    assert consumed["duplicate_values"] == [], consumed["duplicate_values"][:20]
    assert consumed["redelivered_count"] == 0, consumed["redelivered"]
    seen: dict[int, set[int]] = {}
    for value in consumed["values"]:
        prefix, n, i = value.split("-")
        assert prefix == "led", value
        seen.setdefault(int(n), set()).add(int(i))
    whole = set(range(TXN_RECORDS))
    missing = sorted(n for n in committed if seen.get(n) != whole)
    assert not missing, f"committed but not read whole: {[(n, seen.get(n)) for n in missing[:20]]}"
    assert not aborted & seen.keys(), f"aborted but read: {sorted(aborted & seen.keys())[:20]}"
    partial = sorted(n for n in uncertain & seen.keys() if seen[n] != whole)
    assert not partial, f"failed transactions read in part: {[(n, seen[n]) for n in partial]}"
    assert seen.keys() <= committed | uncertain, sorted(seen.keys() - committed - uncertain)[:20]
    broker_config = kube.kubectl_json("get", "configmap", f"{kube.RELEASE}-headwater-broker-config")
    assert "transaction.max.timeout.ms=600000" in str(broker_config["data"])
    kube.kubectl("delete", "topic", TXN_TOPIC, "--wait=false")


def test_zookeeper_acls_survive_upgrade_rolls(release: None) -> None:
    """After the `helm upgrade`s (named to run in e2e-k8s-short too) the Secret is the one
    of the install (lookup), and the brokers restarted by the rolls registered again with
    that identity."""
    assert ZK_DIGEST_HASH, "test_install_sets_zookeeper_acls_on_broker_znodes did not run"
    assert zk_digest_hash() == ZK_DIGEST_HASH["install"]
    check_znode_acls()


# -- 4. Spark on Kubernetes ------------------------------------------------------------------


def test_spark_on_kubernetes_reads_writes_and_commits(release: None) -> None:
    spark_submit = str(kube.REPO / ".venv" / "bin" / "spark-submit")
    assert os.access(spark_submit, os.X_OK), "spark-submit missing: make venv installs pyspark"
    kube.kubectl("create", "serviceaccount", "spark", check=False)
    kube.kubectl("create", "rolebinding", "spark", "--clusterrole=edit",
                 f"--serviceaccount={kube.NAMESPACE}:spark", check=False)  # fmt: skip
    result = "orders-upper"
    kube.apply(topic(result, {"partitions": 1, "replicas": 3}))
    wait_topic(result)
    started = time.monotonic()
    done = kube.run(
        ["bash", str(kube.REPO / "deploy" / "spark" / "spark-submit.sh")],
        env={
            "PATH": f"{os.path.dirname(spark_submit)}:{os.path.dirname(str(kube.tool('kubectl')))}"
                    f":{os.environ.get('PATH', '')}",
            "NAMESPACE": kube.NAMESPACE, "IMAGE": kube.SPARK_IMAGE, "TOPIC": TOPIC,
            "JOB": "copy_topic.py", "BOOTSTRAP": kube.BOOTSTRAP,
            "JOB_ARGS": f"--output {result} --group spark-copy",
            **({"CLIENT_SECRET": kube.CLIENT_USER} if kube.TLS else {}),
        },
        timeout_s=1200, check=False,
    )  # fmt: skip
    figure("Spark on Kubernetes job (submit -> driver done)", f"{time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    consumed = consume_values("consume-spark", result, "spark-checker", 100)
    assert consumed["values"] == sorted(f"ORDER-{n}" for n in range(100)), consumed["values"][:5]
    group = kube.cli("spark-group", "groups", "describe", "spark-copy")
    rows = [(o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"])
            for o in group["offsets"]]  # fmt: skip
    assert sorted(r[1] for r in rows) == [0, 1, 2] and all(r[0] == TOPIC for r in rows), rows
    assert all(committed == end for _, _, committed, end in rows), rows


# -- 5. faults -------------------------------------------------------------------------------


def check_no_loss(produced: dict[str, Any], consumed: dict[str, Any], prefix: str) -> None:
    acked = {f"{prefix}-{n}" for n in kube.expand(produced["acked"])}
    missing = acked - set(consumed["values"])
    assert acked and not missing, f"acknowledged but lost: {sorted(missing)[:20]}"
    assert consumed["duplicate_values"] == [], consumed["duplicate_values"][:20]


def test_deleting_a_broker_pod_under_load_loses_nothing(release: None) -> None:
    producer = kube.Workload("fault-producer", "produce", "--topic", ROLL_TOPIC, "--prefix", "del")
    consumer = kube.Workload("fault-consumer", "consume", "--topic", ROLL_TOPIC, "--group", "del")
    time.sleep(5)
    victim = f"{kube.BROKERS}-{controller_id()}"
    old_uid = broker_uids()[victim]
    kube.kubectl("delete", "pod", victim, "--wait=false")
    kube.wait_until(
        lambda: any(p["metadata"]["name"] == victim and p["metadata"]["uid"] != old_uid
                    and kube.ready(p) for p in kube.pods("broker")),
        what=f"{victim} recreated and Ready", timeout_s=300,
    )  # fmt: skip
    time.sleep(5)
    produced = producer.stop()
    consumed = consumer.stop()
    figure("broker pod deleted under load: producer", f"longest stall {produced['max_ms']} ms")
    check_no_loss(produced, consumed, "del")


def test_killing_the_kubelet_loses_nothing(release: None) -> None:
    state = kube.REPO / ".tools" / "k8s" / "state"
    if not (state / "kubelet.sh").exists():
        pytest.skip("not the local cluster of `make k8s-up` (no state/kubelet.sh)")
    producer = kube.Workload("kubelet-producer", "produce", "--topic", ROLL_TOPIC, "--prefix", "kl")
    consumer = kube.Workload("kubelet-consumer", "consume", "--topic", ROLL_TOPIC, "--group", "kl")
    time.sleep(5)
    pid = int((state / "kubelet.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    time.sleep(60)  # pods keep running under containerd while the node has no kubelet
    # Started again the way `make k8s-up` started it, detached from this test (a shell that
    # backgrounds it and exits), so `make k8s-down` stops it by the PID recorded here.
    started = subprocess.run(
        ["setsid", "bash", "-c",
         f'bash "{state / "kubelet.sh"}" >> "{state / "logs" / "kubelet.log"}" 2>&1 '
         "< /dev/null & echo $!"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    (state / "kubelet.pid").write_text(started.stdout.strip() + "\n")

    def node_ready() -> bool:
        node = kube.run(
            [
                str(kube.tool("kubectl")),
                "get",
                "node",
                "localhost",
                "-o",
                'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            ]
        ).stdout
        return node == "True" and all(kube.ready(p) for p in kube.pods("broker"))  # fmt: skip

    kube.wait_until(node_ready, what="the node and brokers Ready again", timeout_s=300)
    time.sleep(5)
    produced = producer.stop()
    consumed = consumer.stop()
    figure("kubelet killed 60 s under load: producer", f"longest stall {produced['max_ms']} ms")
    check_no_loss(produced, consumed, "kl")


def test_release_still_serves_after_everything(release: None) -> None:
    consumed = consume_values("consume-last", TOPIC, "last-readers", 100)
    assert set(consumed["values"]) >= {f"order-{n}" for n in range(100)}
    assert not re.search(r"CrashLoopBackOff", kube.kubectl("get", "pods"))
