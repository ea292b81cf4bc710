"""Readiness of a broker whose listeners all use TLS (the kubelet's gRPC probe cannot).

Asks the gRPC health service of the INTERNAL listener on 127.0.0.1, over mTLS with the
broker's own certificate (the PEM keystore: key then chain) and the chart's CA, checking
the server's name as the pod's DNS name under the headless Service.  Exit 0 when SERVING.

    python broker-ready.py PORT DNS_SUFFIX   # e.g. 9091 .hw-headwater-broker-headless.ns.svc.cluster.local
"""

import os
import re
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TLS_DIR = "/etc/headwater/tls"
PEM = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----\s*", re.S)


def main() -> int:
    port, suffix = sys.argv[1], sys.argv[2]
    with open(os.path.join(TLS_DIR, "tls-combined.pem"), "rb") as f:
        blocks = [m.group(0) for m in PEM.finditer(f.read())]
    key = b"".join(b for b in blocks if b"PRIVATE KEY" in b.split(b"\n", 1)[0])
    chain = b"".join(b for b in blocks if b"CERTIFICATE" in b.split(b"\n", 1)[0])
    with open(os.path.join(TLS_DIR, "ca.crt"), "rb") as f:
        ca = f.read()
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=chain
    )
    name = os.environ["HOSTNAME"] + suffix
    with grpc.secure_channel(
        f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", name)]
    ) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=4
        )
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as exc:
        print(f"not ready: {exc.code()}", file=sys.stderr)
        sys.exit(1)
