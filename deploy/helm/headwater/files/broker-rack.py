"""Rack-awareness init container: write server.properties with broker.rack = the node's zone.

Kubernetes' downward API exposes the pod's node name but not the node's labels, so this
script asks the API server for the node (the broker's ServiceAccount may only `get nodes`)
and copies the chart's server.properties into the broker's config volume with
``broker.rack`` set to the value of the topology label (topology.kubernetes.io/zone by
default).  It uses only the standard library, so the broker image needs no kubectl.

Environment: NODE_NAME (downward API), RACK_TOPOLOGY_KEY, RACK_SOURCE, RACK_TARGET, and
optionally KUBERNETES_API_URL (default: the in-cluster https://$KUBERNETES_SERVICE_HOST).
A node without the label is an error: a broker must not silently run without its rack.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.parse
import urllib.request

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def node_zone(
    *, api_url: str, node_name: str, label: str, token: str, context: ssl.SSLContext | None
) -> str:
    """The value of ``label`` on node ``node_name``; raises LookupError when it has none."""
    url = f"{api_url.rstrip('/')}/api/v1/nodes/{urllib.parse.quote(node_name, safe='')}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        node = json.load(response)
    labels = node.get("metadata", {}).get("labels") or {}
    zone = labels.get(label)
    if not zone:
        raise LookupError(f"node {node_name} has no label {label}")
    return str(zone)


def with_rack(properties: str, rack: str) -> str:
    """``properties`` with every broker.rack line replaced by one holding ``rack``."""
    kept = [
        line
        for line in properties.splitlines()
        if not line.replace(" ", "").startswith(("broker.rack=", "broker.rack:"))
    ]
    kept.append(f"broker.rack={rack}")
    return "\n".join(kept) + "\n"


def main() -> int:
    env = os.environ
    api_url = env.get("KUBERNETES_API_URL") or (
        f"https://{env['KUBERNETES_SERVICE_HOST']}:{env.get('KUBERNETES_SERVICE_PORT', '443')}"
    )
    sa_dir = env.get("SERVICE_ACCOUNT_DIR", SERVICE_ACCOUNT_DIR)
    with open(os.path.join(sa_dir, "token"), encoding="ascii") as f:
        token = f.read().strip()
    context = None
    if api_url.startswith("https://"):
        context = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
    label = env.get("RACK_TOPOLOGY_KEY", "topology.kubernetes.io/zone")
    try:
        zone = node_zone(
            api_url=api_url, node_name=env["NODE_NAME"], label=label, token=token, context=context
        )
    except (LookupError, OSError) as e:
        print(f"broker-rack: cannot read the zone of this node: {e}", file=sys.stderr)
        return 1
    with open(env["RACK_SOURCE"], encoding="utf-8") as f:
        properties = f.read()
    with open(env["RACK_TARGET"], "w", encoding="utf-8") as f:
        f.write(with_rack(properties, zone))
    print(f"broker-rack: broker.rack={zone}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
