"""Broker benchmarks: produce throughput (acks=1, acks=all RF=3) and failover time.

Prints figures; never asserts.  Targets (issue 3): single broker acks=1 with
1 KiB records in ~1 MiB batches >= 200 MB/s; three brokers RF=3 acks=all
>= 0.5x of that; failover (leader SIGKILL -> first acks=all write accepted by
the new leader) <= zookeeper.session.timeout.ms + 2 s.

    .venv/bin/python bench/broker.py [--seconds 5] [--rounds 5] [--session-timeout-ms 4000]
        [--skip-failover] [--single-only] [--profile DIR] [--throughput-rounds 3]

Both clusters run side by side and the two throughput figures alternate round
by round, so they see the same machine: on this machine kind the CPU cost of
fresh page-cache memory drifts during a run (bench/pagecache.py shows it), and
every replica pays it for every byte.  Besides MB/s it notes (stderr) the CPU
milliseconds per MiB each broker (user and system) and the client spent.  ``--profile``
cProfiles every broker's event-loop thread (bench/profile_hook/sitecustomize.py)
and stops them with SIGTERM so the files get written; read them with pstats.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
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


def cpu_seconds(cluster: Cluster) -> dict[int, tuple[float, float]]:
    """(user, system) CPU seconds used so far by each running broker process."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for broker_id, broker in cluster.brokers.items():
        if broker.process is None or not broker.running:
            continue
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{broker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[broker_id] = (int(fields[11]) / tick, int(fields[12]) / tick)
    return out


def throughput(cluster: Cluster, topic: str, *, acks: int, seconds: float, inflight: int) -> float:
    """MB/s of record batch bytes acknowledged, with ``inflight`` pipelined requests.

    Also notes the CPU milliseconds per MiB spent by the brokers and by this client:
    unlike MB/s, those barely move when other work shares the machine.
    """
    broker_cpu = cpu_seconds(cluster)
    client_cpu = time.process_time()
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    stub = broker_pb2_grpc.BrokerStub(
        grpc.insecure_channel(cluster.brokers[leader].address, options=OPTIONS)
    )
    payload = build_batch([Record(None, b"x" * 1024) for _ in range(1000)])
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=30000)
    request.partitions.add(topic=topic, partition=0, records=payload)
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
    mib = sent / (1 << 20)
    after = cpu_seconds(cluster)
    parts = []
    total = 0.0
    for b in sorted(after):
        before = broker_cpu.get(b, (0.0, 0.0))
        user = (after[b][0] - before[0]) * 1000 / mib
        system = (after[b][1] - before[1]) * 1000 / mib
        total += user + system
        role = "leader" if b == leader else "follower"
        parts.append(f"{role} {user + system:.2f} (user {user:.2f} sys {system:.2f})")
    note(
        f"acks={acks}: {sent / elapsed / 1e6:.1f} MB/s; brokers {total:.2f} CPU ms/MiB "
        f"[{', '.join(parts)}], client {(time.process_time() - client_cpu) * 1000 / mib:.2f}"
    )
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


def stop_gracefully(cluster: Cluster) -> None:
    """SIGTERM every broker and wait, so an at-exit profiler hook gets to write its file."""
    for broker in cluster.brokers.values():
        if broker.process is not None and broker.running:
            broker.process.send_signal(signal.SIGTERM)
    for broker in cluster.brokers.values():
        if broker.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                broker.process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="leader kills for failover")
    parser.add_argument(
        "--throughput-rounds", type=int, default=3, help="alternating throughput rounds"
    )
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    parser.add_argument(
        "--skip-failover", action="store_true", help="throughput figures only (quicker)"
    )
    parser.add_argument(
        "--single-only", action="store_true", help="only the single-broker acks=1 figure"
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="cProfile each broker into DIR (via the sitecustomize hook in bench/profile_hook)",
    )
    args = parser.parse_args()
    overrides = {
        "message.max.bytes": str(4 << 20),
        "replica.fetch.max.bytes": str(8 << 20),
        "log.segment.bytes": str(256 << 20),
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "min.insync.replicas": "2",
    }
    if args.profile:
        os.environ["HW_PROFILE_DIR"] = str(Path(args.profile).resolve())
        hook = str(Path(__file__).resolve().parent / "profile_hook")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (hook, os.environ.get("PYTHONPATH", "")) if p
        )
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hw-bench-")))
        note("starting a 1-broker and a 3-broker cluster")
        one = stack.enter_context(Cluster(brokers=1, data_dir=tmp / "one", overrides=overrides))
        create_topic(one, "bench", 1)
        three = None
        if not args.single_only:
            three = stack.enter_context(
                Cluster(brokers=3, data_dir=tmp / "three", overrides=overrides)
            )
            create_topic(three, "bench", 3)
        # Alternate the two figures round by round: this machine's cost of fresh page-cache
        # memory (bench/pagecache.py) drifts over a run, and both figures should see the same.
        singles: list[float] = []
        replicated: list[float] = []
        for round_no in range(1, args.throughput_rounds + 1):
            singles.append(
                throughput(one, "bench", acks=1, seconds=args.seconds, inflight=args.inflight)
            )
            line = f"round {round_no}: single broker acks=1 {singles[-1]:.1f} MB/s"
            if three is not None:
                rf3_round = throughput(
                    three, "bench", acks=-1, seconds=args.seconds, inflight=args.inflight
                )
                replicated.append(rf3_round)
                line += (
                    f", 3 brokers RF=3 acks=all {replicated[-1]:.1f} MB/s "
                    f"({replicated[-1] / singles[-1]:.2f}x)"
                )
            print(line, flush=True)
        if args.profile:
            stop_gracefully(one)
        single = statistics.median(singles)
        print(f"single broker acks=1 produce: {single:.1f} MB/s median (target >= 200)")
        if three is None:
            return 0
        rf3 = statistics.median(replicated)
        ratios = sorted(r / s for r, s in zip(replicated, singles, strict=True))
        print(
            f"3 brokers RF=3 acks=all produce: {rf3:.1f} MB/s median, {rf3 / single:.2f}x of the "
            f"single-broker median (per-round ratios {ratios[0]:.2f}-{ratios[-1]:.2f}; "
            "target >= 0.5x)"
        )
        if args.profile:
            stop_gracefully(three)
        if args.skip_failover or args.profile:
            return 0
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
