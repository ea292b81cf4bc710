#!/usr/bin/env python3
"""Dynamic volumes for the local cluster: an external provisioner in the CSI-less style.

A StorageClass whose ``provisioner`` is ``headwater.io/local-path`` (scripts/k8s/
storageclass.yaml, the cluster's default) is served by this process, which runs on the
node's host, started and stopped by scripts/k8s/up.sh and down.sh:

* a Pending claim of such a class gets a directory of its own under ``--volumes`` (mode
  0777, since pods run as unprivileged users and hostPath volumes ignore fsGroup) and a
  PersistentVolume bound to it through ``claimRef``, pinned to the node ``localhost``;
* a Released volume it provisioned, with reclaim policy Delete, has its directory removed
  and is deleted.

The reconciliation is level-based: every second it lists claims and volumes and acts on
the difference, so a restart of this process or of the API server loses nothing.  It
needs only kubectl and the standard library.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROVISIONER = "headwater.io/local-path"
NODE = "localhost"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


class Kubectl:
    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self(*args, "-o", "json"))["items"]
        return items


def volume_for(claim: dict[str, Any], cls: dict[str, Any], path: Path) -> dict[str, Any]:
    """The PersistentVolume that satisfies ``claim`` from the directory ``path``."""
    meta, spec = claim["metadata"], claim["spec"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": cls.get("reclaimPolicy", "Delete"),
            "storageClassName": cls["metadata"]["name"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "hostPath": {"path": str(path), "type": "Directory"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [NODE],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def reconcile(kubectl: Kubectl, volumes: Path) -> None:
    classes = {
        c["metadata"]["name"]: c
        for c in kubectl.items("get", "storageclass")
        if c.get("provisioner") == PROVISIONER
    }
    defaults = [
        name
        for name, c in classes.items()
        if c["metadata"].get("annotations", {}).get(DEFAULT_CLASS) == "true"
    ]
    existing = {v["metadata"]["name"]: v for v in kubectl.items("get", "pv")}
    for claim in kubectl.items("get", "pvc", "--all-namespaces"):
        meta, spec = claim["metadata"], claim["spec"]
        name = spec.get("storageClassName") or (defaults[0] if defaults else None)
        if claim.get("status", {}).get("phase") != "Pending" or spec.get("volumeName"):
            continue
        if name not in classes or f"pvc-{meta['uid']}" in existing:
            continue
        path = volumes / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        kubectl("create", "-f", "-", stdin=json.dumps(volume_for(claim, classes[name], path)))
        print(f"provisioned {path.name} for {meta['namespace']}/{meta['name']}", flush=True)
    for volume in existing.values():
        annotations = volume["metadata"].get("annotations", {})
        if annotations.get(PROVISIONED_BY) != PROVISIONER:
            continue
        if volume.get("status", {}).get("phase") != "Released":
            continue
        if volume["spec"].get("persistentVolumeReclaimPolicy") != "Delete":
            continue
        path = Path(volume["spec"]["hostPath"]["path"])
        if path.parent == volumes:
            shutil.rmtree(path, ignore_errors=True)
        kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false")
        print(f"deleted {volume['metadata']['name']} and {path.name}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes", required=True, type=Path, help="directory for the volumes")
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args()
    volumes: Path = args.volumes.resolve()
    volumes.mkdir(parents=True, exist_ok=True)
    kubectl = Kubectl(args.kubeconfig)
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        try:
            reconcile(kubectl, volumes)
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as exc:
            print(f"reconcile failed, retrying: {exc}", file=sys.stderr, flush=True)
        time.sleep(args.interval_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
