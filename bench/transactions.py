"""Transactional produce and read_committed consume on a REAL local 3-broker cluster
(``headwater.testing.Cluster``), each side by side with its plain counterpart in one run.

* produce: 1 KiB records for ``--seconds`` to a 6-partition topic (replication 3,
  acks=all): plain idempotent, then transactional with a commit every
  ``--transaction-ms`` (Kafka's ProducerPerformance ``--transaction-duration-ms``);
* consume: the transactional topic read from the start with ``read_uncommitted``, then
  with ``read_committed``, then both again (the ratio is of the summed times).

Prints records/s and MiB/s; the ratios are the issue's goals (transactional produce
>= 0.8x plain, read_committed >= 0.9x read_uncommitted).  Also the CPU time per
record of this client and of the brokers in each phase: on a shared machine records/s
swing with the neighbours' load, CPU per record far less.  And, per 1,000 records of
each produce phase, the client's Produce requests and batches (records and KiB per
batch) and the RPCs the brokers handled (their ``headwater_requests`` metric), so that
the two modes' per-request costs can be compared.

A plain warm-up (on a topic of its own, not counted) runs first, until the brokers'
system CPU per record steps up (at least twice that of its first 2 s), at most
``--warmup-seconds``.  On the project's machine kind (a VM) writing into page cache
costs about 0.2 s of system CPU per GB for the first few GB and about 2.2 s per GB after
them (``bench/ceiling.py`` prints it), for any program, and how many GB are cheap
depends on what ran before: without the warm-up the phases before that step run at the
cheap price, so whichever mode goes first looks faster.  The price also falls again
later in a run (the VM reclaims cold page cache in the background, and pages freed that
way are cheap again), so ``--drop-caches`` (root) frees the page cache before each phase
instead: every phase then writes into memory just freed.

    .venv/bin/python bench/transactions.py [--seconds 10] [--transaction-ms 100] [--alternate]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import headwater
from headwater.testing import Cluster, free_port

RECORD = b"x" * 1024
PARTITIONS = 6
OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "log.cleaner.backoff.ms": "60000",
}


class CpuMeter:
    """CPU seconds (user + system) of this client process and of the brokers over a
    phase: per record these barely move when other work shares the machine, unlike
    records/s."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._client = 0.0
        self._brokers = (0.0, 0.0)

    def broker_seconds(self) -> tuple[float, float]:
        """The brokers' user and system CPU seconds."""
        tick = os.sysconf("SC_CLK_TCK")
        user = system = 0.0
        for broker in self._cluster.brokers.values():
            if broker.pid is None:
                continue
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{broker.pid}/stat").read_text().rsplit(")", 1)[1].split()
                user += int(stat[11]) / tick
                system += int(stat[12]) / tick
        return user, system

    def start(self) -> None:
        self._client, self._brokers = time.process_time(), self.broker_seconds()

    def per_record(self, records: int) -> str:
        """'client X us, brokers Y us (user U, system S)' of CPU per record since
        :meth:`start`."""
        client = (time.process_time() - self._client) * 1e6 / max(records, 1)
        user, system = (
            (now - then) * 1e6 / max(records, 1)
            for now, then in zip(self.broker_seconds(), self._brokers, strict=True)
        )
        return (
            f"CPU/record: client {client:.1f} us, brokers {user + system:.1f} us "
            f"(user {user:.1f}, system {system:.1f})"
        )


_REQUESTS = re.compile(r"^headwater_requests_total\{([^}]*)\} ([0-9.e+]+)$", re.M)
_RPC = re.compile(r'rpc="([^"]*)"')


class RequestCounter:
    """Produce requests and batches this client sent (by wrapping its sender) and the
    RPCs the brokers handled (scraped from their metrics endpoints) over a phase."""

    def __init__(self, metrics_ports: list[int]) -> None:
        self._ports = metrics_ports
        self._brokers: dict[str, float] = {}
        self.requests = self.batches = self.records = 0
        self.batch_bytes = 0

    def _scrape(self) -> dict[str, float]:
        total: dict[str, float] = defaultdict(float)
        for port in self._ports:
            with contextlib.suppress(OSError):
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                for labels, value in _REQUESTS.findall(text.read().decode()):
                    rpc = _RPC.search(labels)
                    if rpc is not None:
                        total[rpc.group(1)] += float(value)
        return total

    def start(self) -> None:
        self._brokers = self._scrape()
        self.requests = self.batches = self.records = self.batch_bytes = 0

    def wrap(self, producer: headwater.Producer) -> None:
        sender: Any = producer._sender  # a bench probe
        send = sender._send

        def counted(address: str, batches: list[Any], now: float, **kwargs: Any) -> None:
            self.requests += 1
            self.batches += len(batches)
            self.records += sum(len(b) for b in batches)
            self.batch_bytes += sum(b.size_bytes for b in batches)
            send(address, batches, now, **kwargs)

        sender._send = counted

    def per_thousand(self, records: int) -> str:
        """The phase's requests per 1,000 records since :meth:`start`."""
        k = max(records, 1) / 1000.0
        after = self._scrape()
        rpcs = {
            rpc: (after[rpc] - self._brokers.get(rpc, 0.0)) / k
            for rpc in sorted(after)
            if after[rpc] - self._brokers.get(rpc, 0.0) > 0
        }
        batches = max(self.batches, 1)
        return (
            f"per 1,000 records: client Produce requests {self.requests / k:.2f}, "
            f"batches {self.batches / k:.2f} ({self.records / batches:.0f} records, "
            f"{self.batch_bytes / batches / 1024:.0f} KiB each); brokers "
            + ", ".join(f"{rpc} {n:.2f}" for rpc, n in rpcs.items())
        )


def make_topic(admin: headwater.Admin) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    admin.create_topic(name, PARTITIONS, 3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            parts = admin.describe_topics([name])[name].partitions
        except headwater.errors.UnknownTopicOrPartitionError:
            parts = ()  # created, not yet in the metadata this broker answers from
        if parts and len(parts) == PARTITIONS and all(p.leader >= 0 for p in parts):
            return name
        time.sleep(0.1)
    raise SystemExit(f"{name} has no leaders after 60 s")


def send_for(p: headwater.Producer, topic: str, seconds: float) -> int:
    """Sends RECORD to ``topic`` for ``seconds``, then flushes; how many were sent."""
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            p.send(topic, RECORD)
        sent += 1000
    p.flush(120)
    return sent


def produce_plain(bootstrap: str, topic: str, seconds: float, counter: RequestCounter) -> int:
    with headwater.Producer(bootstrap, linger_ms=5, batch_size=256 * 1024) as p:
        counter.wrap(p)
        return send_for(p, topic, seconds)


def drop_page_cache() -> None:
    """Drops the clean page cache (what ``sync`` has written back); needs root."""
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as e:
        raise SystemExit(f"--drop-caches: cannot write /proc/sys/vm/drop_caches ({e})") from e


def warm_up(bootstrap: str, topic: str, limit_s: float, cpu: CpuMeter) -> str:
    """Plain produce in 2 s slices until a slice costs the brokers at least twice the
    system CPU per record of the first, or ``limit_s`` has passed; says which."""
    first = last = 0.0
    records = 0
    start = time.monotonic()
    with headwater.Producer(bootstrap, linger_ms=5, batch_size=256 * 1024) as p:
        while time.monotonic() - start < limit_s:
            system0 = cpu.broker_seconds()[1]
            sent = send_for(p, topic, 2.0)
            records += sent
            last = (cpu.broker_seconds()[1] - system0) * 1e6 / sent
            if not first:
                first = last
            elif last >= 2 * first:
                break
    took = time.monotonic() - start
    stepped = "stepped" if first and last >= 2 * first else "did not step"
    return (
        f"warm-up, plain, not counted: {records:,} records in {took:.0f} s; the brokers' "
        f"system CPU per record {stepped} ({first:.1f} us in the first 2 s, {last:.1f} in the last)"
    )


class Phases:
    """Client-side time of each phase of a transaction, in ms, from wrapping the
    producer's transaction manager: ``flush`` (commit start to the last batch
    acknowledged), ``end_txn`` (EndTxn sent to answered, retries included),
    ``first_add`` (begin to the first AddPartitionsToTxn accepted) and how many
    AddPartitionsToTxn calls that took (CONCURRENT_TRANSACTIONS answers)."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.add_calls: list[int] = []
        self._begun = 0.0
        self._calls = 0
        self._first_pending = False

    def wrap(self, producer: headwater.Producer) -> None:
        txn: Any = producer._transactions  # a bench probe
        add, end_or_add, end = txn.maybe_add_partitions, txn._end_or_add, txn.end_transaction

        def timed_add(tps: Any) -> Any:
            self._calls += 1
            start = time.monotonic()
            result = add(tps)
            self.ms["add_call"].append((time.monotonic() - start) * 1000)
            if self._first_pending and result.added:
                self.ms["first_add"].append((time.monotonic() - self._begun) * 1000)
                self.add_calls.append(self._calls)
                self._first_pending = False
            return result

        def timed_end_or_add(method: str, request: Any) -> Any:
            start = time.monotonic()
            try:
                return end_or_add(method, request)
            finally:
                self.ms["end_txn" if method == "EndTxn" else method].append(
                    (time.monotonic() - start) * 1000
                )

        def timed_end(*, commit: bool, flush: Any) -> None:
            def timed_flush() -> None:
                start = time.monotonic()
                flush()
                self.ms["flush"].append((time.monotonic() - start) * 1000)

            end(commit=commit, flush=timed_flush)

        txn.maybe_add_partitions = timed_add
        txn._end_or_add = timed_end_or_add
        txn.end_transaction = timed_end

    def begun(self) -> None:
        self._begun, self._calls, self._first_pending = time.monotonic(), 0, True

    def report(self) -> str:
        parts = []
        parts.append(f"AddPartitionsToTxn calls {len(self.ms['add_call'])}")
        for name in ("first_add", "add_call", "flush", "end_txn"):
            values = self.ms.get(name) or [0.0]
            parts.append(
                f"{name} median {statistics.median(values):.1f} ms, max {max(values):.1f} ms"
            )
        if self.add_calls:
            parts.append(
                f"AddPartitionsToTxn calls to the first accepted: "
                f"mean {statistics.mean(self.add_calls):.2f}"
            )
        return "; ".join(parts)


def produce_transactional(
    bootstrap: str,
    topic: str,
    seconds: float,
    txn_ms: float,
    phases: Phases,
    counter: RequestCounter,
) -> tuple[int, int]:
    sent = transactions = 0
    with headwater.Producer(
        bootstrap,
        linger_ms=5,
        batch_size=256 * 1024,
        transactional_id=f"bench-{uuid.uuid4().hex[:6]}",
    ) as p:
        p.init_transactions()
        phases.wrap(p)
        counter.wrap(p)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            p.begin_transaction()
            phases.begun()
            txn_end = time.monotonic() + txn_ms / 1000.0
            while time.monotonic() < txn_end:
                for _ in range(100):
                    p.send(topic, RECORD)
                sent += 100
            p.commit_transaction()
            transactions += 1
    return sent, transactions


def consume(bootstrap: str, topic: str, count: int, level: str) -> float:
    with headwater.Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=level
    ) as c:
        c.assign([headwater.TopicPartition(topic, p) for p in range(PARTITIONS)])
        got, start = 0, time.monotonic()
        while got < count and time.monotonic() - start < 300:
            got += len(c.poll(500, max_records=10_000))
        return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--transaction-ms", type=float, default=100.0)
    parser.add_argument(
        "--produce-only", action="store_true", help="skip the read_committed consume half"
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="sync(2) before each produce phase: the page cache's writeback of what the "
        "phases before wrote then runs between phases, not during the next one",
    )
    parser.add_argument(
        "--drop-caches",
        action="store_true",
        help="sync(2) and drop the page cache (root: /proc/sys/vm/drop_caches) before each "
        "produce phase, so that every phase writes into memory just freed, the cheap kind "
        "on this VM",
    )
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="produce plain, transactional, transactional, plain (each on a topic of its "
        "own) and compare the sums, so that a drift over the run weighs on both modes alike",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=60.0,
        help="plain produce before the measured phases, not counted, until the brokers' "
        "system CPU per record steps up, at most this long (0: none; default 60)",
    )
    args = parser.parse_args()
    if args.seconds <= 0 or args.transaction_ms <= 0 or args.warmup_seconds < 0:
        parser.error("--seconds and --transaction-ms must be > 0, --warmup-seconds >= 0")
    mib = len(RECORD) / (1 << 20)
    ports = [free_port() for _ in range(3)]
    with (
        Cluster(
            brokers=3,
            overrides=OVERRIDES,
            broker_overrides={i: {"metrics.port": str(port)} for i, port in enumerate(ports)},
        ) as c,
        headwater.Admin(c.bootstrap) as admin,
    ):
        cpu, counter = CpuMeter(c), RequestCounter(ports)
        phases = Phases()
        order = ("plain", "txn", "txn", "plain") if args.alternate else ("plain", "txn")
        sent: dict[str, int] = defaultdict(int)
        lines: dict[str, list[str]] = defaultdict(list)
        transactions = 0
        txn_topic, txn_count = "", 0
        if args.warmup_seconds:
            print(warm_up(c.bootstrap, make_topic(admin), args.warmup_seconds, cpu), flush=True)
        for mode in order:
            if args.sync or args.drop_caches:
                os.sync()
            if args.drop_caches:
                drop_page_cache()
            topic = make_topic(admin)
            counter.start()
            cpu.start()
            if mode == "plain":
                n = produce_plain(c.bootstrap, topic, args.seconds, counter)
            else:
                n, t = produce_transactional(
                    c.bootstrap, topic, args.seconds, args.transaction_ms, phases, counter
                )
                transactions += t
                if not txn_topic:
                    txn_topic, txn_count = topic, n
            sent[mode] += n
            lines[mode] += [cpu.per_record(n), counter.per_thousand(n)]
        runs = len(order) // 2
        plain = sent["plain"] / (runs * args.seconds)
        txn = sent["txn"] / (runs * args.seconds)
        print(f"produce plain (idempotent, acks=all): {plain:,.0f} rec/s, {plain * mib:.1f} MiB/s")
        for line in lines["plain"]:
            print(f"  {line}")
        print(
            f"produce transactional ({args.transaction_ms:.0f} ms transactions): "
            f"{txn:,.0f} rec/s, {txn * mib:.1f} MiB/s ({txn / plain:.2f}x plain)"
        )
        for line in lines["txn"]:
            print(f"  {line}")
        print(f"  {transactions} transactions; {phases.report()}")
        if args.produce_only:
            return
        count = txn_count
        # Each isolation level twice, alternated, so that neither gains from going
        # second (caches, a quieter minute); the ratio is of the summed times.
        seconds: dict[str, float] = defaultdict(float)
        cpu_lines: dict[str, list[str]] = defaultdict(list)
        for level in ("read_uncommitted", "read_committed") * 2:
            cpu.start()
            seconds[level] += consume(c.bootstrap, txn_topic, count, level)
            cpu_lines[level].append(cpu.per_record(count))
        uncommitted = 2 * count / seconds["read_uncommitted"]
        committed = 2 * count / seconds["read_committed"]
        print(f"consume read_uncommitted: {uncommitted:,.0f} rec/s (two runs)")
        for line in cpu_lines["read_uncommitted"]:
            print(f"  {line}")
        print(
            f"consume read_committed: {committed:,.0f} rec/s "
            f"({committed / uncommitted:.2f}x read_uncommitted; two runs)"
        )
        for line in cpu_lines["read_committed"]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
