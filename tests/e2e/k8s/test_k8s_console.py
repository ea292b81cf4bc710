"""Headwater Console from the chart on a real Kubernetes (``console.enabled``).

1. `helm install` with the local values (TLS on: clients present certificates), then a
   User ``e2e-console`` allowed to describe the cluster, topics and groups; the operator
   writes its Secret.
2. `helm upgrade --reuse-values --set console.enabled=true,console.userSecret=e2e-console`:
   the console's Deployment becomes Ready (it connected: `headwater console` describes
   the cluster before it listens).
3. A pod of the namespace opens the console's Service: the cluster page names the
   brokers, the console is read-only (the default), and a change is refused.
4. The Operator page reads the brokers' StatefulSet with the console's own ServiceAccount
   (console.kubernetesAccess, default true): the brokers, the roll and scaling state.
5. A manual roll (``headwater.io/manual-rolling-update=true`` on the StatefulSet): a pod
   polls the Operator page until it shows that roll finished (having shown it running,
   with the broker being restarted, when a poll fell inside it), all brokers up to date.

Marker ``k8s`` (``make e2e-k8s``); not in the short selection (``K8S_SHORT`` in the
Makefile).  The tests depend on each other's state and run in file order.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.k8s import kube

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(1800)]

USER = "e2e-console"
URL = f"http://{kube.RELEASE}-headwater-console.{kube.NAMESPACE}.svc:8080"
FETCH = """
import sys, urllib.error, urllib.request
for path in sys.argv[1:]:
    try:
        with urllib.request.urlopen(URL + path, timeout=30) as resp:
            status, body = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    print(f"=== {path} {status}")
    print(body)
""".replace("URL", repr(URL))

# Polls the Operator page once a second until it shows a roll that started at or after
# argv[1] (RFC 3339) in a final state, or argv[2] seconds pass (exit 1).  Prints one line per
# change of what the page shows: state, done, current broker.
WATCH_ROLL = r"""
import datetime as dt, re, sys, time, urllib.request
since = dt.datetime.fromisoformat(sys.argv[1])
deadline = time.monotonic() + float(sys.argv[2])
def field(name, body):
    m = re.search(r'id="' + name + r'">([^<]*)<', body)
    return m.group(1) if m else ""
last = None
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(URL + "/operator", timeout=10) as resp:
            body = resp.read().decode()
    except OSError as exc:
        print("fetch failed:", exc, flush=True)
        time.sleep(1)
        continue
    shown = (field("roll-state", body), field("roll-done", body), field("roll-current", body))
    if shown != last:
        print("|".join(shown), flush=True)
        last = shown
    started = field("roll-started", body)
    try:
        ours = dt.datetime.fromisoformat(started) >= since
    except ValueError:
        ours = False
    if ours and shown[0] not in ("Rolling", ""):
        sys.exit(0)
    time.sleep(1)
sys.exit(1)
""".replace("URL", repr(URL))


@pytest.fixture(scope="module")
def release() -> Iterator[None]:
    reason = kube.missing()
    if reason is not None:
        print(f"k8s tier skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    kube.uninstall()
    kube.helm(
        "install", kube.RELEASE, str(kube.CHART), "--create-namespace",
        "-f", str(kube.HERE / "values-local.yaml"), "--wait", "--timeout", "10m",
    )  # fmt: skip
    try:
        yield
    finally:
        if os.environ.get("HEADWATER_K8S_KEEP") != "1":
            kube.uninstall()


def test_console_deployment_connects_as_its_user(release: None) -> None:
    kube.install_workload()
    console_set = "console.enabled=true"
    if kube.TLS:
        describe = [
            {"resource": {"type": "cluster"}, "operations": ["Describe"]},
            {"resource": {"type": "topic", "name": "*"}, "operations": ["Describe"]},
            {"resource": {"type": "group", "name": "*"}, "operations": ["Describe"]},
        ]
        kube.apply({
            "apiVersion": "headwater.io/v1",
            "kind": "User",
            "metadata": {"name": USER, "namespace": kube.NAMESPACE},
            "spec": {"authentication": {"type": "tls"},
                     "authorization": {"type": "simple", "acls": describe}},
        })  # fmt: skip
        kube.wait_until(
            lambda: kube.kubectl("get", "secret", USER, "--ignore-not-found"),
            what=f"the Secret of User {USER}",
            timeout_s=180,
        )
        console_set += f",console.userSecret={USER}"
    kube.helm(
        "upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values",
        "--set", console_set, "--wait", "--timeout", "5m",
    )  # fmt: skip
    kube.wait_until(
        lambda: [p for p in kube.pods("console") if kube.ready(p)],
        what="the console pod Ready",
        timeout_s=300,
    )


def test_console_pages_from_inside_the_namespace(release: None) -> None:
    log = kube.run_pod("console-fetch", ["python", "-c", FETCH, "/cluster", "/topics"])
    cluster, topics = log.split("=== /topics ")
    assert "=== /cluster 200" in cluster, cluster[-2000:]
    assert 'id="read-only"' in cluster  # console.readOnly defaults to true
    assert "hw-headwater-broker-0" in cluster, cluster[-2000:]
    assert topics.startswith("200"), topics[:2000]


def test_operator_page_reads_the_brokers_statefulset(release: None) -> None:
    log = kube.run_pod("console-operator", ["python", "-c", FETCH, "/operator"])
    assert "=== /operator 200" in log, log[-2000:]
    assert 'id="no-kubernetes-access"' not in log, log[-2000:]
    assert 'id="kube-error"' not in log, log[-2000:]  # the Role lets it read
    for ordinal in range(3):
        assert f"{kube.BROKERS}-{ordinal}" in log, log[-2000:]
    assert '<span id="scaling-phase">Steady</span>' in log, log[-2000:]
    assert '<strong id="scaling-desired">3</strong>' in log, log[-2000:]


def test_operator_page_follows_a_manual_roll(release: None) -> None:
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=2)
    kube.kubectl(
        "annotate", "statefulset", kube.BROKERS,
        "headwater.io/manual-rolling-update=true", "--overwrite",
    )  # fmt: skip
    log = kube.run_pod(
        "console-roll",
        ["python", "-c", WATCH_ROLL, since.isoformat(), "1200"],
        timeout_s=1500,
    )
    print("operator page during the roll:\n" + log, file=sys.stderr)
    lines = [line.split("|") for line in log.splitlines() if line.count("|") == 2]
    assert lines, log
    state, done, current = lines[-1]
    assert (state, done, current) == ("Finished", "3 of 3", ""), log
    for state, done, current in lines:
        if state == "Rolling" and current:  # a poll inside the roll names the broker
            assert re.fullmatch(rf"{kube.BROKERS}-[0-2]", current), log
            assert re.fullmatch(r"[0-3] of 3", done), log
    annotations = kube.kubectl_json("get", "statefulset", kube.BROKERS)["metadata"]["annotations"]
    assert "headwater.io/manual-rolling-update" not in annotations  # a finished roll clears it
