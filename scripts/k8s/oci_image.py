#!/usr/bin/env python3
"""Packs one file into a single-layer OCI image (an image-layout tar for `ctr image import`).

Used for the pod sandbox image (the static ``pause`` binary): no registry can be reached
from here, and that image needs no base.  Layout: ``oci-layout``, ``index.json`` naming
the image, and under ``blobs/sha256/`` the gzipped layer, the config and the manifest.

    oci_image.py --name registry.k8s.io/pause:3.10 --file .tools/k8s/pause --out pause.tar
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any


def _tar(members: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (data, mode) in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def build(name: str, binary: Path) -> bytes:
    blobs: dict[str, bytes] = {}

    def blob(data: bytes, media_type: str) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        blobs[f"blobs/sha256/{digest}"] = data
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    entry = f"/{binary.name}"
    layer_tar = _tar({binary.name: (binary.read_bytes(), 0o755)})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [entry], "WorkingDir": "/"},
        "rootfs": {
            "type": "layers",
            "diff_ids": [f"sha256:{hashlib.sha256(layer_tar).hexdigest()}"],
        },
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json"),
        "layers": [
            blob(gzip.compress(layer_tar, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip")
        ],
    }
    descriptor = blob(json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
    descriptor["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [descriptor],
    }
    members = {name_: (data, 0o644) for name_, data in blobs.items()}
    members["oci-layout"] = (b'{"imageLayoutVersion": "1.0.0"}', 0o644)
    members["index.json"] = (json.dumps(index).encode(), 0o644)
    return _tar(members)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--name", required=True, help="image reference, e.g. registry.k8s.io/pause:3.10"
    )
    parser.add_argument(
        "--file", required=True, type=Path, help="the image's only file, its entrypoint"
    )
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(build(args.name, args.file))


if __name__ == "__main__":
    main()
