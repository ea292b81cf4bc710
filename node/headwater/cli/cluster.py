"""``headwater cluster describe``: brokers, the controller, and partitions needing care.

Lists the live brokers and the controller, then every under-replicated
partition (ISR smaller than the replica set) and every offline partition (no
leader), internal topics included, since those are what an operator acts on.
"""

from __future__ import annotations

import argparse
from typing import Any

from headwater.cli._common import add_output_option, print_json
from headwater.cli.topics import add_bootstrap_option, admin_for, client_errors


def register(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="describe the cluster")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    p = csub.add_parser("describe", help="brokers, controller, unhealthy partitions")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_describe)


def _describe(args: argparse.Namespace) -> int:
    with client_errors(), admin_for(args) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics(None)
    under: list[dict[str, Any]] = []
    offline: list[dict[str, Any]] = []
    for desc in topics.values():
        for p in desc.partitions:
            entry: dict[str, Any] = {
                "topic": desc.name,
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            if p.offline:
                offline.append(entry)
            elif p.under_replicated:
                under.append(entry)
    result = {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": [
            {"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cluster.brokers
        ],
        "topics": len(topics),
        "partitions": sum(len(d.partitions) for d in topics.values()),
        "under_replicated_partitions": under,
        "offline_partitions": offline,
    }
    if args.output == "json":
        print_json(result)
        return 0
    print(f"Cluster: {cluster.cluster_id}\tController: {cluster.controller_id}")
    for b in cluster.brokers:
        rack = f"\tRack: {b.rack}" if b.rack else ""
        print(f"Broker: {b.broker_id}\t{b.address}{rack}")
    print(
        f"Topics: {result['topics']}\tPartitions: {result['partitions']}\t"
        f"Under-replicated: {len(under)}\tOffline: {len(offline)}"
    )
    for label, items in (("Under-replicated", under), ("Offline", offline)):
        for e in items:
            print(
                f"{label}: {e['topic']}-{e['partition']}\tLeader: {e['leader']}\t"
                f"Replicas: {','.join(map(str, e['replicas']))}\t"
                f"Isr: {','.join(map(str, e['isr']))}"
            )
    return 0
