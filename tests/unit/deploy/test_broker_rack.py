"""The rack init container's script sets broker.rack from its node's zone label.

files/broker-rack.py (shipped in a ConfigMap when brokers.rack.enabled) is run as the
init container runs it, against a stand-in API server on 127.0.0.1 that serves one node:
it must send the ServiceAccount token, write server.properties with broker.rack = the
node's zone (replacing any broker.rack already there), and fail when the label is missing.
"""

from __future__ import annotations

import http.server
import json
import runpy
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.deploy import chart

SCRIPT = chart.CHART_DIR / "files" / "broker-rack.py"
TOKEN = "secret-token"


class _Api(http.server.BaseHTTPRequestHandler):
    nodes: dict[str, dict[str, str]] = {}
    seen_auth: list[str] = []

    def do_GET(self) -> None:
        self.seen_auth.append(self.headers.get("Authorization", ""))
        name = self.path.removeprefix("/api/v1/nodes/")
        if name not in self.nodes:
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"metadata": {"name": name, "labels": self.nodes[name]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    _Api.nodes = {
        "node-a": {"topology.kubernetes.io/zone": "eu-west-1a", "kubernetes.io/hostname": "a"},
        "node-b": {"kubernetes.io/hostname": "b"},
    }
    _Api.seen_auth = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def run_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, api: str, node: str, properties: str
) -> tuple[int, Path]:
    sa = tmp_path / "sa"
    sa.mkdir(parents=True)
    (sa / "token").write_text(TOKEN + "\n")
    source = tmp_path / "template.properties"
    source.write_text(properties)
    target = tmp_path / "server.properties"
    for key, value in {
        "KUBERNETES_API_URL": api,
        "SERVICE_ACCOUNT_DIR": str(sa),
        "NODE_NAME": node,
        "RACK_TOPOLOGY_KEY": "topology.kubernetes.io/zone",
        "RACK_SOURCE": str(source),
        "RACK_TARGET": str(target),
    }.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    return int(exit_info.value.code or 0), target


def test_writes_the_node_zone_as_broker_rack(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = chart.render({"brokers": {"rack": {"enabled": True}}})
    properties = chart.broker_properties(objs) + "broker.rack=${BROKER_RACK}\n"
    code, target = run_script(tmp_path, monkeypatch, api=api, node="node-a", properties=properties)
    assert code == 0
    written = chart.parse_properties(target.read_text())
    assert written["broker.rack"] == "eu-west-1a"
    assert written == {**chart.parse_properties(properties), "broker.rack": "eu-west-1a"}
    assert _Api.seen_auth == [f"Bearer {TOKEN}"]


def test_refuses_a_node_without_the_label(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, target = run_script(tmp_path, monkeypatch, api=api, node="node-b", properties="a=1\n")
    assert code == 1
    assert not target.exists()
    code, target = run_script(tmp_path / "x", monkeypatch, api=api, node="gone", properties="")
    assert code == 1


def test_the_script_in_the_configmap_is_the_file() -> None:
    objs = chart.render({"brokers": {"rack": {"enabled": True}}})
    (cm,) = [c for c in chart.find(objs, "ConfigMap") if "broker-rack.py" in c["data"]]
    assert cm["data"]["broker-rack.py"] == SCRIPT.read_text()
