"""A Kafka client pod's whole use of the Kafka listener, with Kafka's own Python client
(kafka-python 3, mounted as the zip :mod:`kafka_bundle` makes: the Headwater image does not
ship it), for the Kubernetes
tier's cross-namespace test.

    python kafka_client.py --bootstrap HOST:PORT --topic T --records N --certs DIR

Over TLS with a User's client certificate (``DIR/{ca.crt,user.crt,user.key}``, hostnames
checked, as kafka-python does by default; without ``--certs`` PLAINTEXT, for trying the
script against a local cluster): describes the cluster, creates the topic (3 partitions,
RF 3 unless ``--replication-factor``), produces N keyed records with acks=all, consumes
them in a group that commits, deletes the topic, and prints one JSON line prefixed
``SUMMARY ``.
"""

from __future__ import annotations

import argparse
import json

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]


def security(certs: str | None) -> dict[str, str]:
    if certs is None:
        return {}
    return {
        "security_protocol": "SSL",
        "ssl_cafile": f"{certs}/ca.crt",
        "ssl_certfile": f"{certs}/user.crt",
        "ssl_keyfile": f"{certs}/user.key",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=30)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--certs", help="directory of ca.crt, user.crt, user.key")
    args = parser.parse_args()
    common = {"bootstrap_servers": args.bootstrap, **security(args.certs)}

    admin = KafkaAdminClient(**common)
    cluster = admin.describe_cluster()
    admin.create_topics(
        {args.topic: {"num_partitions": 3, "replication_factor": args.replication_factor}},
        wait_for_metadata=True,
    )

    producer = KafkaProducer(acks="all", **common)
    sent: dict[str, list[int]] = {}
    for i in range(args.records):
        meta = producer.send(args.topic, key=f"k{i}".encode(), value=f"v{i}".encode()).get(60)
        sent[f"v{i}"] = [meta.partition, meta.offset]
    producer.close(10)

    consumer = KafkaConsumer(
        args.topic,
        group_id=f"{args.topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
        **common,
    )
    received: dict[str, list[int]] = {}
    for record in consumer:
        received[record.value.decode()] = [record.partition, record.offset]
        if len(received) >= args.records:
            break
    consumer.commit()
    committed = {str(tp.partition): consumer.committed(tp) for tp in sorted(consumer.assignment())}
    consumer.close()
    admin.delete_topics([args.topic])
    admin.close()

    summary = {
        "brokers": sorted([b["broker_id"], b["host"], b["port"]] for b in cluster["brokers"]),
        "controller_id": cluster["controller_id"],
        "sent": sent,
        "received": received,
        "committed": committed,
    }
    print("SUMMARY " + json.dumps(summary, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
