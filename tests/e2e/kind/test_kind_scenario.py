"""The real scenario on a real Kubernetes (kind): what a user does with the chart, in order.

1. A kind cluster (created unless HEADWATER_KIND_CLUSTER names one that exists), the image
   built from the Dockerfile and loaded into it under two tags (e2e-1, e2e-2), and
   `helm install` of the chart (tests/e2e/kind/values-kind.yaml: laptop-sized requests).
2. A Topic applied with kubectl becomes Ready (the operator created it in the cluster), and
   a client pod produces to it and consumes it back through the bootstrap Service.
3. `helm upgrade --set image.tag=e2e-2` changes the broker pod template; with
   updateStrategy OnDelete nothing restarts by itself, and the operator rolls the brokers
   one at a time (never two broker pods unready at once) until all run e2e-2; the data
   written before is still there.
4. A Spark-on-Kubernetes job (deploy/spark/spark-submit.sh, image from spark/Dockerfile)
   reads the topic through the headwater data source.

Run it with one command: `make e2e-kind` (or `tests/e2e/kind/run.sh`).  It needs kind,
docker (a running engine), kubectl, helm and a reachable registry for the base images;
where any is missing every test skips with the reason printed.  The cluster is deleted at
the end unless it was given or HEADWATER_KIND_KEEP=1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.kind import kube

pytestmark = [pytest.mark.kind, pytest.mark.timeout(3600)]

TAG_1, TAG_2 = "e2e-1", "e2e-2"
TOPIC = "orders"
RECORDS = 50


@pytest.fixture(scope="module")
def release() -> Iterator[None]:
    """A kind cluster with the chart installed from the freshly built image."""
    reason = kube.missing_tools()
    if reason is not None:
        print(f"kind scenario skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    existing = kube.run(["kind", "get", "clusters"]).stdout.split()
    created = kube.CLUSTER not in existing
    if created:
        kube.run(["kind", "create", "cluster", "--name", kube.CLUSTER, "--wait", "5m"])
    try:
        base = os.environ.get("HEADWATER_BASE_IMAGE")
        build_args = ["--build-arg", f"PYTHON_IMAGE={base}"] if base else []
        image_1, image_2 = f"headwater:{TAG_1}", f"headwater:{TAG_2}"
        kube.run(["docker", "build", *build_args, "-t", image_1, str(kube.REPO)], timeout_s=1800)
        kube.run(["docker", "tag", image_1, image_2])
        for image in (image_1, image_2):
            kube.run(["kind", "load", "docker-image", image, "--name", kube.CLUSTER])
        kube.helm(
            "upgrade",
            "--install",
            kube.RELEASE,
            str(kube.REPO / "deploy" / "helm" / "headwater"),
            "--create-namespace",
            "-f",
            str(kube.HERE / "values-kind.yaml"),
            "--set",
            f"image.tag={TAG_1}",
            "--wait",
            "--timeout",
            "15m",
        )
        yield
    finally:
        if created and os.environ.get("HEADWATER_KIND_KEEP") != "1":
            kube.run(["kind", "delete", "cluster", "--name", kube.CLUSTER], check=False)


def broker_pods() -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = kube.kubectl_json(
        "get", "pods", "-l", "app.kubernetes.io/component=broker"
    )["items"]
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def topic_ready() -> bool:
    obj = kube.kubectl_json("get", "topic", TOPIC)
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def consume_all(name: str, image: str) -> list[str]:
    out = kube.client_pod(
        name,
        image,
        f"headwater consume {TOPIC} --from-beginning --max-messages {RECORDS} --timeout-ms 60000",
    )
    return sorted(line for line in out.splitlines() if line.startswith("order-"))


EXPECTED = sorted(f"order-{i}" for i in range(RECORDS))


def test_topic_is_created_and_serves_a_pod(release: None) -> None:
    topic = {
        "apiVersion": "headwater.io/v1",
        "kind": "Topic",
        "metadata": {"name": TOPIC, "namespace": kube.NAMESPACE},
        "spec": {"partitions": 3, "replicas": 3, "config": {"min.insync.replicas": "2"}},
    }
    kube.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(topic))
    kube.wait_until(topic_ready, what=f"Topic {TOPIC} Ready", timeout_s=180)
    kube.client_pod(
        f"produce-{uuid.uuid4().hex[:6]}",
        f"headwater:{TAG_1}",
        f"seq 0 {RECORDS - 1} | sed 's/^/order-/' | headwater produce {TOPIC} --acks all",
    )
    assert consume_all(f"consume-{uuid.uuid4().hex[:6]}", f"headwater:{TAG_1}") == EXPECTED


def test_upgrade_is_rolled_by_the_operator_one_broker_at_a_time(release: None) -> None:
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods()}
    assert len(before) == 3
    kube.helm(
        "upgrade",
        kube.RELEASE,
        str(kube.REPO / "deploy" / "helm" / "headwater"),
        "--reuse-values",
        "--set",
        f"image.tag={TAG_2}",
    )
    most_unready = 0

    def rolled() -> bool:
        nonlocal most_unready
        pods = broker_pods()
        most_unready = max(most_unready, sum(not ready(p) for p in pods) + 3 - len(pods))
        return len(pods) == 3 and all(
            ready(p)
            and p["spec"]["containers"][0]["image"] == f"headwater:{TAG_2}"
            and p["metadata"]["uid"] != before[p["metadata"]["name"]]
            for p in pods
        )

    kube.wait_until(rolled, what="every broker to run the new tag", timeout_s=1200, every_s=1)
    assert most_unready <= 1, "the operator must roll one broker at a time"
    assert consume_all(f"consume-{uuid.uuid4().hex[:6]}", f"headwater:{TAG_2}") == EXPECTED


def test_spark_on_kubernetes_reads_the_topic(release: None) -> None:
    spark_submit = shutil.which("spark-submit") or str(kube.REPO / ".venv" / "bin" / "spark-submit")
    if not os.access(spark_submit, os.X_OK):
        pytest.skip("spark-submit not found (pip install 'headwater[spark]')")
    image = "headwater-spark:0.1.0"
    base = os.environ.get("HEADWATER_BASE_IMAGE")
    build_args = ["--build-arg", f"PYTHON_IMAGE={base}"] if base else []
    spark_dockerfile = str(kube.REPO / "spark" / "Dockerfile")
    kube.run(
        ["docker", "build", *build_args, "-f", spark_dockerfile, "-t", image, str(kube.REPO)],
        timeout_s=1800,
    )
    kube.run(["kind", "load", "docker-image", image, "--name", kube.CLUSTER])
    kube.run(
        ["kubectl", "--context", kube.CONTEXT, "-n", kube.NAMESPACE, "create", "sa", "spark"],
        check=False,
    )
    kube.run(
        [
            "kubectl", "--context", kube.CONTEXT, "-n", kube.NAMESPACE, "create", "rolebinding",
            "spark", "--clusterrole=edit", f"--serviceaccount={kube.NAMESPACE}:spark",
        ],
        check=False,
    )  # fmt: skip
    env = {
        **os.environ,
        "PATH": f"{os.path.dirname(spark_submit)}:{os.environ.get('PATH', '')}",
        "NAMESPACE": kube.NAMESPACE,
        "IMAGE": image,
        "TOPIC": TOPIC,
        "BOOTSTRAP": kube.BOOTSTRAP,
    }
    subprocess.run(
        ["kubectl", "config", "use-context", kube.CONTEXT], check=True, capture_output=True
    )
    done = subprocess.run(
        ["bash", str(kube.REPO / "deploy" / "spark" / "spark-submit.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    driver = kube.kubectl(
        "get", "pods", "-l", "spark-role=driver", "--sort-by=.metadata.creationTimestamp",
        "-o", "jsonpath={.items[-1:].metadata.name}",
    )  # fmt: skip
    logs = kube.kubectl("logs", driver)
    # DataFrame.show() of (partition, count): "|        0|   17|" rows.
    counts = [int(m[1]) for m in re.finditer(r"^\|\s*\d+\|\s*(\d+)\|$", logs, re.MULTILINE)]
    assert sum(counts) == RECORDS, logs[-4000:]
