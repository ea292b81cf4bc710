"""Broker benchmarks: produce throughput (acks=1, acks=all RF=3) and failover time.

Prints figures; never asserts.  Targets (issue 3): single broker acks=1 with
1 KiB records in ~1 MiB batches >= 200 MB/s; three brokers RF=3 acks=all
>= 0.5x of that; failover (leader SIGKILL -> first acks=all write accepted by
the new leader) <= zookeeper.session.timeout.ms + 2 s.

    .venv/bin/python bench/broker.py [--seconds 5] [--rounds 5] [--session-timeout-ms 4000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.testing import Cluster
from headwater.v1 import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc

OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


def note(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def create_topic(cluster: Cluster, name: str, rf: int) -> None:
    stub = admin_pb2_grpc.AdminStub(grpc.insecure_channel(cluster.brokers[0].address))
    response = stub.CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[admin_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=rf)],
            timeout_ms=20000,
        ),
        timeout=30,
    )
    assert response.topics[0].error == ErrorCode.NONE, response
    cluster.wait_for(lambda: cluster.leader_for(name, 0) is not None, what="a leader")


def throughput(cluster: Cluster, topic: str, *, acks: int, seconds: float, inflight: int) -> float:
    """MB/s of record batch bytes acknowledged, with ``inflight`` pipelined requests."""
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    stub = broker_pb2_grpc.BrokerStub(
        grpc.insecure_channel(cluster.brokers[leader].address, options=OPTIONS)
    )
    payload = build_batch([Record(None, b"x" * 1024) for _ in range(1000)])
    request = broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=30000,
        partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=payload)],
    )
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    pending = [stub.Produce.future(request, timeout=60) for _ in range(inflight)]
    while pending:
        response = pending.pop(0).result()
        assert response.partitions[0].error == ErrorCode.NONE, response
        sent += len(payload)
        if time.perf_counter() < deadline:
            pending.append(stub.Produce.future(request, timeout=60))
    elapsed = time.perf_counter() - start
    return sent / elapsed / 1e6


def produce_once(cluster: Cluster, topic: str, payload: bytes) -> bool:
    leader = cluster.leader_for(topic, 0)
    if leader is None or not cluster.brokers[leader].running:
        return False
    stub = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.brokers[leader].address))
    try:
        response = stub.Produce(
            broker_pb2.ProduceRequest(
                acks=-1,
                timeout_ms=2000,
                partitions=[
                    broker_pb2.ProducePartitionData(topic=topic, partition=0, records=payload)
                ],
            ),
            timeout=3,
        )
    except grpc.RpcError:
        return False
    return bool(response.partitions[0].error == ErrorCode.NONE)


def failover(cluster: Cluster, topic: str, *, rounds: int) -> list[float]:
    payload = build_batch([Record(None, b"failover")])
    times = []
    for i in range(rounds):
        cluster.wait_for(lambda: len(cluster.isr_for(topic, 0)) == 3, what="full ISR", timeout_s=60)
        assert produce_once(cluster, topic, payload)
        leader = cluster.leader_for(topic, 0)
        assert leader is not None
        start = time.monotonic()
        cluster.kill(leader)
        for _ in range(4000):
            if produce_once(cluster, topic, payload):
                break
            time.sleep(0.01)
        times.append(time.monotonic() - start)
        note(f"failover round {i + 1}/{rounds}: {times[-1]:.2f}s")
        cluster.start_broker(leader)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    args = parser.parse_args()
    overrides = {
        "message.max.bytes": str(4 << 20),
        "replica.fetch.max.bytes": str(8 << 20),
        "log.segment.bytes": str(256 << 20),
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "min.insync.replicas": "2",
    }
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        note("single broker, acks=1")
        with Cluster(brokers=1, data_dir=Path(tmp) / "one", overrides=overrides) as one:
            create_topic(one, "bench", 1)
            single = throughput(one, "bench", acks=1, seconds=args.seconds, inflight=args.inflight)
        print(f"single broker acks=1 produce: {single:.1f} MB/s (target >= 200)")
        note("three brokers, RF=3, acks=all")
        with Cluster(brokers=3, data_dir=Path(tmp) / "three", overrides=overrides) as three:
            create_topic(three, "bench", 3)
            replicated = throughput(
                three, "bench", acks=-1, seconds=args.seconds, inflight=args.inflight
            )
            same = throughput(three, "bench", acks=1, seconds=args.seconds, inflight=args.inflight)
            print(
                f"3 brokers RF=3 acks=all produce: {replicated:.1f} MB/s "
                f"({replicated / single:.2f}x of single-broker acks=1; target >= 0.5x; "
                f"{replicated / same:.2f}x of acks=1 on the same 3 brokers, {same:.1f} MB/s)"
            )
            create_topic(three, "failover", 3)
            times = failover(three, "failover", rounds=args.rounds)
        ordered = sorted(times)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        print(
            f"failover over {len(times)} leader SIGKILLs: min {ordered[0]:.2f}s "
            f"median {statistics.median(ordered):.2f}s p90 {p90:.2f}s max {ordered[-1]:.2f}s "
            f"(target <= {args.session_timeout_ms / 1000 + 2:.1f}s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
