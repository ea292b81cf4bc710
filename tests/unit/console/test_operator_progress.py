"""The operator's rolls and scaling read from the brokers' StatefulSet and pods
(headwater.console.operator_progress), and the Operator page that shows them.

The StatefulSets and pods are Kubernetes JSON as the operator leaves them
(operator/headwater_operator/roll_kube.py and scaling_kube.py write the annotations)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from headwater.console import operator_progress as op
from headwater.console.app import OperatorAccess, Settings, make_app

from tests.unit.console.test_app import EVIL, StandIn

STS = "hw-headwater-broker"
STARTED = "2026-11-27T10:00:00Z"


def sts(
    annotations: dict[str, str] | None = None,
    *,
    replicas: int = 3,
    update_revision: str = "rev-2",
) -> dict[str, Any]:
    return {
        "metadata": {"name": STS, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "broker"}}},
        "status": {"updateRevision": update_revision},
    }


def pod(
    ordinal: int,
    *,
    revision: str = "rev-2",
    ready: bool = True,
    created: str = "2026-11-27T09:00:00Z",
    deleting: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name or f"{STS}-{ordinal}",
        "labels": {op.REVISION_LABEL: revision},
        "creationTimestamp": created,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-27T10:01:00Z"
    return {
        "metadata": meta,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def rolling(current: str, **more: str) -> dict[str, str]:
    return {
        op.STATE_ANNOTATION: "Rolling",
        op.CURRENT_ANNOTATION: current,
        op.STARTED_ANNOTATION: STARTED,
        **more,
    }


def test_a_revision_roll_counts_the_brokers_on_the_new_revision() -> None:
    pods = [pod(2, revision="rev-1"), pod(0), pod(1, ready=False)]
    got = op.progress("ns", sts(rolling(f"{STS}-1")), pods)
    assert [b.broker_id for b in got.brokers] == [0, 1, 2]
    assert got.roll.running
    assert (got.roll.done, got.roll.total) == (1, 3)
    assert got.roll.current == f"{STS}-1"
    assert got.roll.waiting == (f"{STS}-1", f"{STS}-2")
    assert [b.restarting for b in got.brokers] == [False, True, False]
    assert got.roll.percent == 33


def test_a_manual_roll_counts_the_pods_created_since_it_started() -> None:
    ann = rolling(f"{STS}-1", **{op.MANUAL_ROLL_ANNOTATION: "true"})
    pods = [pod(0, created="2026-11-27T10:00:30Z"), pod(1, deleting=True), pod(2)]
    got = op.progress("ns", sts(ann, update_revision="rev-2"), pods)
    assert (got.roll.done, got.roll.total) == (1, 3)
    assert [b.updated for b in got.brokers] == [True, False, False]


def test_a_manual_roll_without_a_start_time_counts_nothing_done() -> None:
    ann = {op.STATE_ANNOTATION: "Rolling", op.MANUAL_ROLL_ANNOTATION: "true"}
    got = op.progress("ns", sts(ann), [pod(0), pod(1)])
    assert got.roll.done == 0


def test_a_finished_roll_keeps_its_times_and_message_and_no_current_broker() -> None:
    ann = {
        op.STATE_ANNOTATION: "Finished",
        op.CURRENT_ANNOTATION: f"{STS}-2",  # left over: only a running roll has one
        op.STARTED_ANNOTATION: STARTED,
        op.FINISHED_ANNOTATION: "2026-11-27T10:05:00Z",
        op.MESSAGE_ANNOTATION: "restarted 3 brokers",
    }
    got = op.progress("ns", sts(ann), [pod(0), pod(1), pod(2)])
    assert not got.roll.running
    assert got.roll.current is None
    assert not any(b.restarting for b in got.brokers)
    assert (got.roll.state, got.roll.done, got.roll.total) == ("Finished", 3, 3)
    assert got.roll.finished == "2026-11-27T10:05:00Z"
    assert got.roll.message == "restarted 3 brokers"


def test_never_rolled_and_steady() -> None:
    got = op.progress("ns", sts(), [pod(0), pod(1), pod(2)])
    assert got.roll.state == ""
    assert got.scaling.phase == "Steady"
    assert (got.scaling.desired, got.scaling.replicas, got.scaling.ready) == (3, 3, 3)
    assert not got.scaling.running
    assert got.scaling.scaled is None


def test_pods_of_other_workloads_are_ignored() -> None:
    others = [pod(0, name="hw-headwater-broker-config-0"), pod(0, name="zk-0"), pod(0)]
    got = op.progress("ns", sts(), others)
    assert [b.name for b in got.brokers] == [f"{STS}-0"]


def test_scaling_up_shows_target_against_current() -> None:
    status = {
        "phase": "Rebalancing",
        "desired": 5,
        "replicas": 5,
        "message": "moving replicas onto brokers 3, 4",
        "partitions": 12,
        "moves": 14,
        "bytes": 1 << 20,
        "throttleBytesPerSecond": 10485760,
        "partitionsMoving": 7,
        "conditions": [{"type": "Scaled", "status": "False", "reason": "Rebalancing"}],
    }
    ann = {op.DESIRED_ANNOTATION: "5", op.SCALING_STATUS_ANNOTATION: json.dumps(status)}
    got = op.progress("ns", sts(ann, replicas=5), [pod(i) for i in range(4)]).scaling
    assert (got.phase, got.desired, got.replicas, got.ready) == ("Rebalancing", 5, 5, 4)
    assert (got.partitions, got.moves, got.bytes) == (12, 14, 1 << 20)
    assert (got.throttle_bytes_per_s, got.partitions_moving) == (10485760, 7)
    assert got.scaled is False
    assert got.running
    assert got.message == "moving replicas onto brokers 3, 4"


def test_desired_comes_from_the_annotation_then_the_status_then_spec() -> None:
    recorded = {op.SCALING_STATUS_ANNOTATION: json.dumps({"desired": 4})}
    assert op.progress("ns", sts(recorded), []).scaling.desired == 4
    both = {**recorded, op.DESIRED_ANNOTATION: "2"}
    assert op.progress("ns", sts(both), []).scaling.desired == 2
    assert op.progress("ns", sts(replicas=6), []).scaling.desired == 6


@pytest.mark.parametrize(
    "raw", ["{not json", "[1, 2]", json.dumps({"phase": 3, "partitions": -1, "moves": True})]
)
def test_an_unreadable_scaling_status_reads_as_absent(raw: str) -> None:
    got = op.progress("ns", sts({op.SCALING_STATUS_ANNOTATION: raw}), []).scaling
    assert got.phase == "Steady"
    assert (got.partitions, got.moves) == (None, None)


def test_odd_objects_do_not_raise() -> None:
    weird: dict[str, Any] = {"metadata": {"name": STS, "annotations": None}, "spec": None}
    got = op.progress("ns", weird, [{"metadata": {"name": f"{STS}-0"}, "status": None}])
    assert got.brokers[0].ready is False
    assert got.scaling.replicas == 1


def test_without_kubeconfig_or_service_account_there_is_no_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    reader, why = op.reader_from(kubeconfig=None, namespace=None, statefulset=STS)
    assert reader is None
    assert "need Kubernetes access" in why


def test_a_missing_kubeconfig_is_said_so(tmp_path: Any) -> None:
    missing = str(tmp_path / "nope")
    reader, why = op.reader_from(kubeconfig=missing, namespace=None, statefulset=STS)
    assert reader is None
    assert why.startswith("The operator's rolls and scaling are not shown")


def kubeconfig(path: Path, server: str) -> str:
    path.write_text(
        json.dumps({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [
                {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "hw"}}
            ],
            "current-context": "x",
        })
    )  # fmt: skip
    return str(path)


def test_a_kubeconfig_gives_a_reader_in_its_context_namespace(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    reader, why = op.reader_from(kubeconfig=config, namespace=None, statefulset=STS)
    assert reader is not None, why
    assert (reader.namespace, reader.statefulset) == ("hw", STS)
    with pytest.raises(op.KubeAccessError, match="did not answer reading StatefulSet hw/"):
        reader.read()


class FakeApiServer(BaseHTTPRequestHandler):
    """Kubernetes' two read paths the reader uses; anything else is 404, no token 401."""

    objects: dict[str, Any] = {}
    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        url = urllib.parse.urlsplit(self.path)
        body = self.objects.get(url.path)
        if self.headers.get("Authorization") != "Bearer t":
            code, body = 401, {"kind": "Status", "code": 401}
        elif body is None:
            code, body = 404, {"kind": "Status", "code": 404}
        else:
            code = 200
            selector = urllib.parse.parse_qs(url.query).get("labelSelector")
            if url.path.endswith("/pods") and selector != ["app=broker"]:
                body = {"items": []}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_reader_gets_the_statefulset_and_lists_its_pods(
    tmp_path: Path, api_server: str
) -> None:
    FakeApiServer.objects = {
        f"/apis/apps/v1/namespaces/hw/statefulsets/{STS}": sts(rolling(f"{STS}-0")),
        "/api/v1/namespaces/hw/pods": {"items": [pod(0, ready=False), pod(1)]},
    }
    config = kubeconfig(tmp_path / "kubeconfig", api_server)
    reader, why = op.reader_from(kubeconfig=config, namespace=None, statefulset=STS)
    assert reader is not None, why
    got = reader.read()
    assert (got.namespace, got.statefulset) == ("hw", STS)
    assert (got.roll.state, got.roll.done, got.roll.total) == ("Rolling", 1, 2)

    other, _ = op.reader_from(kubeconfig=config, namespace="elsewhere", statefulset=STS)
    assert other is not None
    with pytest.raises(op.KubeAccessError, match=r"refused reading StatefulSet elsewhere/.*404"):
        other.read()


# -- the page ----------------------------------------------------------------------------


class StandInReader(op.KubeReader):
    """Answers with fixed objects (or fails), as Kubernetes would through the client."""

    def __init__(self, sts: dict[str, Any], pods: list[dict[str, Any]], fail: str = "") -> None:
        self.namespace, self.statefulset = "hw", STS
        self.sts, self.pods, self.fail = sts, pods, fail

    def read(self) -> op.OperatorProgress:
        if self.fail:
            raise op.KubeAccessError(self.fail)
        return op.progress(self.namespace, self.sts, self.pods)


@pytest_asyncio.fixture
async def page_of() -> AsyncIterator[Any]:
    clients: list[TestClient[Any, Any]] = []

    async def get(access: OperatorAccess | None) -> tuple[int, str]:
        client = TestClient(TestServer(make_app(StandIn(), Settings(), access)))
        await client.start_server()
        clients.append(client)
        resp = await client.get("/operator")
        return resp.status, await resp.text()

    yield get
    for c in clients:
        await c.close()


@pytest.mark.asyncio
async def test_the_page_without_kubernetes_says_it_needs_access(page_of: Any) -> None:
    status, body = await page_of(None)
    assert status == 200
    assert 'id="no-kubernetes-access"' in body
    assert "need Kubernetes access" in body


@pytest.mark.asyncio
async def test_the_page_shows_the_rolling_broker_and_how_many_are_done(page_of: Any) -> None:
    ann = rolling(f"{STS}-1", **{op.MESSAGE_ANNOTATION: EVIL})
    reader = StandInReader(sts(ann), [pod(0), pod(1, ready=False), pod(2, revision="rev-1")])
    status, body = await page_of(OperatorAccess(reader, ""))
    assert status == 200
    assert '<span id="roll-state">Rolling</span>' in body
    assert '<span id="roll-done">1 of 3</span>' in body
    assert f'<strong id="roll-current">{STS}-1</strong>' in body
    assert 'hx-trigger="every 3s"' in body  # refreshes itself like the cluster page
    assert EVIL not in body


@pytest.mark.asyncio
async def test_the_page_shows_scaling_target_against_current(page_of: Any) -> None:
    status_json = {"phase": "ScalingUp", "desired": 4, "replicas": 4, "message": "waiting"}
    ann = {op.DESIRED_ANNOTATION: "4", op.SCALING_STATUS_ANNOTATION: json.dumps(status_json)}
    reader = StandInReader(sts(ann, replicas=4), [pod(i) for i in range(3)])
    _, body = await page_of(OperatorAccess(reader, ""))
    assert '<span id="scaling-phase">ScalingUp</span>' in body
    assert '<strong id="scaling-desired">4</strong>' in body
    assert '<span id="scaling-ready">3</span>' in body


@pytest.mark.asyncio
async def test_kubernetes_failing_is_shown_inside_the_live_section(page_of: Any) -> None:
    reader = StandInReader(sts(), [], fail="Kubernetes refused reading StatefulSet: 403 Forbidden")
    status, body = await page_of(OperatorAccess(reader, ""))
    assert status == 200  # so the next refresh replaces it
    live = body[body.index('<section id="live"') :]
    assert "403 Forbidden" in live
