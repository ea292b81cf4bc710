"""Producer and consumer throughput over PLAINTEXT, SSL and SASL_SSL, in one run (issue 18).

    .venv/bin/python bench/security.py [--records 200000] [--size 1024] [--rounds 3]

One broker (``headwater.testing.Cluster``) with three client listeners, so every
figure is measured against the same process, logs and page cache:

- PLAIN: PLAINTEXT;
- TLS: SSL (TLS 1.3, ECDSA P-256 certificate, no client certificate);
- SASL: SASL_SSL with SCRAM-SHA-512 (one exchange per connection, then a session token
  in the metadata of every call);

and an INTERNAL PLAINTEXT inter-broker listener.  Per round and listener: a producer
sends ``--records`` records of ``--size`` bytes (acks=1, batch_size 1 MiB, linger 5 ms)
to a new topic and flushes; a consumer then reads them all back from offset 0.  The
listeners take turns inside each round, so a noisy neighbour slows all three alike.
Prints each figure's median (and range) over ``--rounds``, and the ratios to
plaintext (issue 18's goal: >= 0.7x).  Also prints this process's CPU seconds per
MiB (the client's side of the encryption cost).  Never asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.producer import Producer
from headwater.client.types import TopicPartition
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore

MIB = 1024 * 1024
PASSWORD = "bench-Password-1"
LISTENERS = ("PLAIN", "TLS", "SASL")


def options(listener: str, truststore: Path) -> dict[str, str]:
    if listener == "PLAIN":
        return {}
    out = {"security_protocol": "SSL", "ssl_cafile": str(truststore)}
    if listener == "SASL":
        out |= {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "bench",
            "sasl_plain_password": PASSWORD,
        }
    return out


def produce(
    bootstrap: str, topic: str, opts: dict[str, str], *, count: int, size: int
) -> tuple[float, float]:
    """(seconds, CPU seconds) to send and flush ``count`` records."""
    value = b"x" * size
    with Producer(bootstrap, acks=1, batch_size=MIB, linger_ms=5, **opts) as producer:
        producer.send(topic, value).result(timeout=60)  # connect and authenticate first
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(count):
            producer.send(topic, value)
        producer.flush(timeout=600)
        return time.perf_counter() - start, time.process_time() - cpu


def consume(bootstrap: str, topic: str, opts: dict[str, str], *, count: int) -> tuple[float, float]:
    """(seconds, CPU seconds) to read ``count`` records from offset 0 (the warm-up one
    first)."""
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
        fetch_max_bytes=50 * MIB,
        max_partition_fetch_bytes=8 * MIB,
        **opts,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        seen = 0
        cpu, start = time.process_time(), time.perf_counter()
        for _ in consumer:
            seen += 1
            if seen > count:
                break
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    finally:
        consumer.close()
    if seen <= count:
        raise RuntimeError(f"read {seen} of {count + 1} records of {topic}")
    return elapsed, used


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):>10,.0f}  ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-security-"))
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    cluster = Cluster(
        data_dir=tmp / "cluster",
        listeners={"PLAIN": "PLAINTEXT", "TLS": "SSL", "SASL": "SASL_SSL", "INTERNAL": "PLAINTEXT"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": str(keystore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "offsets.topic.replication.factor": "1",
        },
    )
    produced: dict[str, list[float]] = {name: [] for name in LISTENERS}
    consumed: dict[str, list[float]] = {name: [] for name in LISTENERS}
    cpu_per_mib: dict[str, list[float]] = {name: [] for name in LISTENERS}
    with cluster:
        zk = session.connect(cluster.zookeeper_connect)
        try:
            sha = ScramMechanism.SCRAM_SHA_512
            ScramCredentialStore(zk).alter(
                "bench",
                upsertions={
                    sha: ScramCredential.from_password(
                        sha, PASSWORD, salt=b"bench-salt", iterations=4096
                    )
                },
            )
        finally:
            session.close(zk)
        broker = cluster.brokers[0]
        mib = args.records * args.size / MIB
        print(
            f"one broker, listeners PLAINTEXT / SSL / SASL_SSL; {args.records:,} records of "
            f"{args.size} B ({mib:,.0f} MiB) per figure, {args.rounds} rounds, acks=1",
            flush=True,
        )
        for round_no in range(args.rounds):
            for name in LISTENERS:
                bootstrap = broker.address_of(name)
                opts = options(name, truststore)
                topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:8]}"
                with Admin(bootstrap, **opts) as admin:
                    admin.create_topics([NewTopic(topic, 1, 1)])
                seconds, cpu = produce(bootstrap, topic, opts, count=args.records, size=args.size)
                produced[name].append(args.records / seconds)
                seconds_c, cpu_c = consume(bootstrap, topic, opts, count=args.records)
                consumed[name].append(args.records / seconds_c)
                cpu_per_mib[name].append((cpu + cpu_c) / (2 * mib) * 1000)
                print(
                    f"  round {round_no + 1} {name:5}: produce {produced[name][-1]:>9,.0f} rec/s, "
                    f"consume {consumed[name][-1]:>9,.0f} rec/s",
                    flush=True,
                )
    print()
    print(
        f"{'listener':10} {'producer rec/s (range)':>32} {'consumer rec/s (range)':>32}"
        "  client CPU ms/MiB"
    )
    for name, label in zip(LISTENERS, ("PLAINTEXT", "SSL", "SASL_SSL"), strict=True):
        print(
            f"{label:10} {fmt(produced[name]):>32} {fmt(consumed[name]):>32}  "
            f"{statistics.median(cpu_per_mib[name]):.1f}"
        )
    print()
    base_p, base_c = statistics.median(produced["PLAIN"]), statistics.median(consumed["PLAIN"])
    for name, label in (("TLS", "SSL"), ("SASL", "SASL_SSL")):
        print(
            f"{label:9} / PLAINTEXT: producer {statistics.median(produced[name]) / base_p:.2f}x, "
            f"consumer {statistics.median(consumed[name]) / base_c:.2f}x   (goal >= 0.7x)"
        )
    print(f"MB/s at {args.size} B: multiply rec/s by {args.size / 1e6:.6f}")


if __name__ == "__main__":
    main()
