"""Small wrappers over the kind, docker, kubectl and helm commands the kind scenario runs.

Every command is echoed (so a failing run shows what it did), bounded by a timeout, and
raises with its output when it fails.  :func:`missing_tools` says why the scenario cannot
run here, for the skip message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.unit.deploy import chart

REPO = chart.REPO
HERE = Path(__file__).resolve().parent
CLUSTER = os.environ.get("HEADWATER_KIND_CLUSTER", "headwater-e2e")
CONTEXT = f"kind-{CLUSTER}"
NAMESPACE = "headwater"
RELEASE = "hw"
BOOTSTRAP = f"{RELEASE}-headwater-bootstrap.{NAMESPACE}.svc:9092"


def missing_tools() -> str | None:
    """Why the scenario cannot run here, or None when kind, docker, kubectl and helm can."""
    for tool in ("kind", "docker", "kubectl"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (the kind scenario needs kind, docker, kubectl)"
    if chart.helm_binary() is None:
        return "helm not found on PATH nor at .tools/bin/helm (run `make system-deps`)"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if info.returncode != 0:
        return f"no running Docker engine (`docker info`: {info.stderr.strip()[:200]})"
    return None


def run(
    argv: Sequence[str], *, timeout_s: float = 600, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(argv), file=sys.stderr, flush=True)
    done = subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done


def kubectl(*args: str, timeout_s: float = 300, stdin: str | None = None) -> str:
    return run(
        ["kubectl", "--context", CONTEXT, "-n", NAMESPACE, *args], timeout_s=timeout_s, stdin=stdin
    ).stdout


def kubectl_json(*args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json"))


def helm(*args: str, timeout_s: float = 900) -> str:
    helm_bin = chart.helm_binary()
    assert helm_bin is not None
    return run(
        [helm_bin, "--kube-context", CONTEXT, "-n", NAMESPACE, *args], timeout_s=timeout_s
    ).stdout


def wait_until(check: Callable[[], Any], *, what: str, timeout_s: float, every_s: float = 2) -> Any:
    """Poll ``check`` until it returns something truthy; a bounded wait, not a timing test."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def client_pod(name: str, image: str, script: str, *, timeout_s: float = 300) -> str:
    """Run ``sh -c script`` in a one-off pod of ``image`` in the namespace; its output."""
    overrides = {
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
            "containers": [
                {
                    "name": name,
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "env": [{"name": "HEADWATER_BOOTSTRAP", "value": BOOTSTRAP}],
                }
            ],
        }
    }
    return kubectl(
        "run",
        name,
        "--rm",
        "-i",
        "--quiet",
        "--restart=Never",
        f"--image={image}",
        f"--overrides={json.dumps(overrides)}",
        f"--pod-running-timeout={int(timeout_s)}s",
        timeout_s=timeout_s + 60,
    )
