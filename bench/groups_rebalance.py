"""Rebalance pauses on a REAL local 3-broker cluster: classic eager (``range``), classic
``cooperative-sticky`` and the consumer protocol (KIP-848, ``group_protocol="consumer"``),
one after the other in one run, each a fresh group of 10 members on a 100-partition topic.
For each: (1) one member leaves (``close()``), then (2) a new member joins.  Prints, per
protocol and change:

- **owned**: time until every partition is owned again by the member that keeps it,
  i.e. the last ``on_partitions_assigned`` of the final assignment;
- **fetching**: time until every partition has delivered a record to that owner since
  it acquired the partition (and since the change);
- **unaffected partitions**: those with the same owner before and after the change (the
  change did not concern them): how many were revoked and given back in between (the
  listener's callbacks: an eager rebalance revokes everything), how many more went
  without a record for longer than ``--pause-ms``, and the longest gap between two of
  their records, beside the same partitions' longest gap in the quiet stretch just
  before the change (the trickle's own noise on this machine);
- for the consumer protocol, owned and fetching as multiples of its heartbeat interval.
  The goal (issue 15): no unaffected partition pauses, and re-owning takes at most
  2x the heartbeat interval.

The observable.  A producer thread writes one record to every partition every
``--tick-ms`` (200 ms): a partition is *fetching* on a member when ``poll()`` hands that
member its records, which is what an application sees, stalls of the fetcher or of
``poll`` included.  Ownership is taken from the rebalance listener (callback times,
inside ``poll``) and cross-checked with ``assignment()``; a new owner's first record comes
from its committed offset (auto-commit every second, and on every revoke and close), so
"fetching" is not held back waiting for the next tick.  Gap resolution is the tick plus
the poll loop (``poll(100)``), hence the quiet baseline printed beside each pause.

The change time is taken inside the member's process: just before ``close()`` for a
leave, just before the joining member's ``Consumer`` is created (imports already done)
for a join.  The end is the first moment the group is complete (every partition owned
by exactly one member), balanced (sizes differ by at most one) and every partition
fetched by its owner; it must then hold unchanged, with no revocation, for ``--hold-s``,
otherwise the measurement restarts from the later moment.

Members are processes, not threads: each consumer has a poll loop, a fetcher thread and
a heartbeat thread, and 10 of them behind one GIL would delay one member's heartbeat
behind another's record decoding, which is exactly what is being timed.  As separate
processes they share only the machine (its cores, with the 3 brokers and ZooKeeper), as
real consumers would.  Times from different processes are comparable: CLOCK_MONOTONIC
is system-wide on Linux.

The heartbeat interval is the same for both protocols (``--heartbeat-ms``, default
1000 ms: classic ``heartbeat_interval_ms`` and the broker's
``group.consumer.heartbeat.interval.ms``), so the comparison is about the protocols and
not their defaults (Kafka's are 3 s classic, 5 s consumer; the heartbeat-bound parts of
the figures scale with it).  Session timeouts are 10 s; every leave is a clean one.

    .venv/bin/python bench/groups_rebalance.py [--quick] [--members 10] [--partitions 100]
        [--heartbeat-ms 1000] [--tick-ms 200] [--pause-ms 1000] [--hold-s 4]

Progress goes to stderr, figures to stdout.  Never asserts; every wait is bounded.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import multiprocessing.synchronize
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import headwater
from headwater import errors
from headwater.client.group.listener import ConsumerRebalanceListener
from headwater.testing import Cluster

PROTOCOLS = (  # label, group_protocol, partition_assignment_strategy
    ("classic eager (range)", "classic", "range"),
    ("classic cooperative-sticky", "classic", "cooperative-sticky"),
    ("consumer protocol (uniform)", "consumer", "uniform"),
)
SETTLE_TIMEOUT_S = 120.0
MEMBER_LIFETIME_S = 900.0


def note(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- a member, in its own process ---------------------------------------------------------


class MemberSpec(NamedTuple):
    member: int
    bootstrap: str
    group: str
    topic: str
    protocol: str
    strategy: str
    heartbeat_ms: int


class _Reporter(ConsumerRebalanceListener):
    """Sends each callback, timed, to the parent (runs inside ``poll``)."""

    def __init__(self, index: int, events: Any) -> None:
        self.index, self.events = index, events

    def _send(self, kind: str, tps: set[headwater.TopicPartition]) -> None:
        self.events.put((kind, self.index, time.monotonic(), sorted(tp.partition for tp in tps)))

    def on_partitions_revoked(self, revoked: set[headwater.TopicPartition]) -> None:
        self._send("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[headwater.TopicPartition]) -> None:
        self._send("assigned", assigned)

    def on_partitions_lost(self, lost: set[headwater.TopicPartition]) -> None:
        self._send("lost", lost)


def run_member(
    spec: MemberSpec,
    events: Any,
    go: multiprocessing.synchronize.Event,
    leave: multiprocessing.synchronize.Event,
) -> None:
    """A group member: waits for ``go``, polls until ``leave``, then closes.  Reports
    ``join``, every callback, each poll's partitions with records, each change of
    ``assignment()``, ``leaving`` (just before ``close()``), ``left`` and any error."""
    if not go.wait(MEMBER_LIFETIME_S) or leave.is_set():
        return
    try:
        events.put(("join", spec.member, time.monotonic(), []))
        settings: dict[str, Any] = (
            {"group_protocol": "consumer"}
            if spec.protocol == "consumer"
            else {
                "partition_assignment_strategy": spec.strategy,
                "heartbeat_interval_ms": spec.heartbeat_ms,
                "session_timeout_ms": 10000,
            }
        )
        consumer = headwater.Consumer(
            bootstrap_servers=spec.bootstrap,
            group_id=spec.group,
            auto_offset_reset="latest",
            auto_commit_interval_ms=1000,
            request_timeout_ms=15000,
            **settings,
        )
        consumer.subscribe([spec.topic], listener=_Reporter(spec.member, events))
        owned: list[int] = []
        deadline = time.monotonic() + MEMBER_LIFETIME_S
        while not leave.is_set() and time.monotonic() < deadline:
            records = consumer.poll(100)
            now = time.monotonic()
            if records:
                events.put(("records", spec.member, now, sorted({r.partition for r in records})))
            current = sorted(tp.partition for tp in consumer.assignment())
            if current != owned:
                owned = current
                events.put(("assignment", spec.member, now, owned))
        events.put(("leaving", spec.member, time.monotonic(), []))
        consumer.close()
        events.put(("left", spec.member, time.monotonic(), []))
    except Exception as exc:  # reported, and the parent stops waiting for this member
        events.put(("error", spec.member, time.monotonic(), [repr(exc)]))


# -- what the parent knows: a timeline of the members' reports ---------------------------


@dataclass
class Timeline:
    """Every member's reports, in arrival order (only the drain thread appends; readers
    take ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    assignment: dict[int, frozenset[int]] = field(default_factory=dict)
    acquired: dict[tuple[int, int], float] = field(default_factory=dict)
    revocations: list[tuple[float, int, int]] = field(default_factory=list)
    deliveries: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    marks: dict[tuple[str, int], float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    last_change: float = 0.0

    def add(self, kind: str, member: int, at: float, partitions: list[Any]) -> None:
        """One report; ``partitions`` holds the error text for an ``error``."""
        with self.lock:
            if kind == "records":
                for p in partitions:
                    self.deliveries.setdefault((member, p), []).append(at)
            elif kind == "assigned":
                for p in partitions:
                    self.acquired[(member, p)] = at
            elif kind in ("revoked", "lost"):
                self.revocations += [(at, member, p) for p in partitions]
                self.last_change = max(self.last_change, at)
            elif kind == "assignment":
                self.assignment[member] = frozenset(partitions)
                self.last_change = max(self.last_change, at)
            elif kind == "error":
                self.errors.append(f"member {member}: {partitions[0]}")
            else:
                self.marks[(kind, member)] = at


def drain(events: Any, timeline: Timeline, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            timeline.add(*events.get(timeout=0.1))
        except queue.Empty:
            continue


def owners(timeline: Timeline, members: set[int]) -> dict[int, int] | None:
    """partition -> member if ``members`` own every partition exactly once, balanced."""
    sizes = [len(timeline.assignment.get(m, ())) for m in members]
    out: dict[int, int] = {}
    for m in members:
        for p in timeline.assignment.get(m, ()):
            if p in out:
                return None
            out[p] = m
    return out if max(sizes) - min(sizes) <= 1 else None


def fetched_at(timeline: Timeline, owner: dict[int, int], since: float) -> float | None:
    """When the last partition delivered its first record to its owner after acquiring
    it and after ``since``; None while one has not."""
    latest = since
    for p, m in owner.items():
        start = max(since, timeline.acquired.get((m, p), since))
        first = next((t for t in timeline.deliveries.get((m, p), []) if t >= start), None)
        if first is None:
            return None
        latest = max(latest, first)
    return latest


def settle(
    timeline: Timeline, members: set[int], partitions: int, *, since: float, hold_s: float
) -> tuple[dict[int, int], float]:
    """Waits until the group is complete, balanced and fetching (see the module
    docstring) and stays so for ``hold_s``; returns the owners and when it got there."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    reached: tuple[dict[int, int], float] | None = None
    next_note = time.monotonic() + 10
    while time.monotonic() < deadline:
        if time.monotonic() > next_note:
            next_note += 10
            with timeline.lock:
                held = sum(len(timeline.assignment.get(m, ())) for m in members)
            note(f"  still settling: {held} of {partitions} partitions owned by the members")
        with timeline.lock:
            if timeline.errors:
                raise RuntimeError("; ".join(timeline.errors))
            owner = owners(timeline, members)
            at = fetched_at(timeline, owner, since) if owner and len(owner) == partitions else None
            changed = timeline.last_change
        if owner is None or at is None:
            reached = None
        elif reached is None or reached[0] != owner or changed > reached[1]:
            reached = (owner, max(at, changed))
        elif time.monotonic() - reached[1] >= hold_s:
            return reached
        time.sleep(0.05)
    raise TimeoutError(f"the group did not settle within {SETTLE_TIMEOUT_S:.0f}s")


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


class Figures(NamedTuple):
    owned_ms: float
    fetching_ms: float
    unaffected: int
    others: int
    revoked: int
    stalled: int
    longest_ms: float
    baseline_ms: float


def measure(
    timeline: Timeline,
    *,
    before: dict[int, int],
    after: dict[int, int],
    t0: float,
    end: float,
    quiet_s: float,
    pause_ms: float,
) -> Figures:
    with timeline.lock:
        owned = max((timeline.acquired.get((m, p), t0) for p, m in after.items()), default=t0)
        fetching = fetched_at(timeline, after, t0) or end
        same = [p for p, m in after.items() if before.get(p) == m]
        revoked = {p for t, m, p in timeline.revocations if t >= t0 and after.get(p) == m}
        gaps = [longest_gap(timeline.deliveries.get((after[p], p), []), t0, end) for p in same]
        quiet = [
            longest_gap(timeline.deliveries.get((after[p], p), []), t0 - quiet_s, t0) for p in same
        ]
    return Figures(
        owned_ms=max(0.0, owned - t0) * 1000,
        fetching_ms=(fetching - t0) * 1000,
        unaffected=len(same),
        others=len(after),
        revoked=len(revoked & set(same)),
        stalled=sum(
            g * 1000 > pause_ms for p, g in zip(same, gaps, strict=True) if p not in revoked
        ),
        longest_ms=max(gaps, default=0.0) * 1000,
        baseline_ms=max(quiet, default=0.0) * 1000,
    )


# -- one protocol: start a group, one leaves, one joins -----------------------------------


@dataclass
class Group:
    ctx: Any
    events: Any
    specs: list[MemberSpec]
    processes: dict[int, Any] = field(default_factory=dict)
    go: dict[int, multiprocessing.synchronize.Event] = field(default_factory=dict)
    leave: dict[int, multiprocessing.synchronize.Event] = field(default_factory=dict)

    def spawn(self, spec: MemberSpec) -> None:
        self.go[spec.member], self.leave[spec.member] = self.ctx.Event(), self.ctx.Event()
        proc = self.ctx.Process(
            target=run_member,
            args=(spec, self.events, self.go[spec.member], self.leave[spec.member]),
            daemon=True,
        )
        proc.start()
        self.processes[spec.member] = proc

    def stop(self, index: int, timeout_s: float = 30.0) -> None:
        self.go[index].set()  # a member never started leaves at once
        self.leave[index].set()
        proc = self.processes[index]
        proc.join(timeout_s)
        if proc.is_alive():
            note(f"member {index} did not close within {timeout_s:.0f}s: killing it")
            proc.kill()
            proc.join(10)

    def stop_all(self) -> None:
        for index in list(self.processes):
            self.leave[index].set()
            self.go[index].set()
        for index in list(self.processes):
            self.stop(index)


def progress(f: Figures) -> str:
    return (
        f"(owned {f.owned_ms:.0f} ms, fetching {f.fetching_ms:.0f} ms, {f.revoked} of "
        f"{f.unaffected} unaffected partitions revoked)"
    )


def wait_for(pred: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


def run_protocol(
    ctx: Any,
    c: Cluster,
    admin: headwater.Admin,
    topic: str,
    args: argparse.Namespace,
    *,
    label: str,
    protocol: str,
    strategy: str,
) -> dict[str, Figures]:
    events = ctx.Queue()
    timeline = Timeline()
    stop_drain = threading.Event()
    drainer = threading.Thread(target=drain, args=(events, timeline, stop_drain), daemon=True)
    drainer.start()
    group_id = f"bench-{protocol}-{strategy}-{uuid.uuid4().hex[:6]}"
    specs = [
        MemberSpec(i, c.bootstrap, group_id, topic, protocol, strategy, args.heartbeat_ms)
        for i in range(args.members + 1)
    ]
    group = Group(ctx, events, specs)
    figures: dict[str, Figures] = {}
    try:
        for spec in specs:  # the last one is the joiner, started (imports done) but idle
            group.spawn(spec)
        members = set(range(args.members))
        note(f"{label}: {args.members} members starting")
        for m in members:
            group.go[m].set()
        before, _ = settle(
            timeline, members, args.partitions, since=time.monotonic(), hold_s=args.hold_s
        )
        note(f"{label}: stable; member {args.members - 1} leaves")

        leaver = args.members - 1
        group.leave[leaver].set()
        wait_for(lambda: ("leaving", leaver) in timeline.marks, timeout_s=30, what="the leave")
        t0 = timeline.marks[("leaving", leaver)]
        members.discard(leaver)
        after, at = settle(timeline, members, args.partitions, since=t0, hold_s=args.hold_s)
        figures["leave"] = measure(
            timeline,
            before=before,
            after=after,
            t0=t0,
            end=at + args.hold_s,
            quiet_s=args.hold_s,
            pause_ms=args.pause_ms,
        )
        group.stop(leaver)
        note(f"{label}: settled after the leave {progress(figures['leave'])}")
        note(f"{label}: member {args.members} joins")

        joiner = args.members
        group.go[joiner].set()
        wait_for(lambda: ("join", joiner) in timeline.marks, timeout_s=60, what="the join")
        t0 = timeline.marks[("join", joiner)]
        members.add(joiner)
        before = after
        after, at = settle(timeline, members, args.partitions, since=t0, hold_s=args.hold_s)
        figures["join"] = measure(
            timeline,
            before=before,
            after=after,
            t0=t0,
            end=at + args.hold_s,
            quiet_s=args.hold_s,
            pause_ms=args.pause_ms,
        )
        d = admin.describe_groups([group_id])[group_id]
        if d.state != "Stable" or len(d.members) != len(members):
            note(f"{label}: the coordinator says {d.state} with {len(d.members)} members")
        note(f"{label}: settled after the join {progress(figures['join'])}")
    finally:
        group.stop_all()
        stop_drain.set()
        drainer.join(5)
    return figures


# -- the trickle, and main -----------------------------------------------------------------


def trickle(
    bootstrap: str, topic: str, partitions: int, tick_s: float, stop: threading.Event
) -> None:
    """One record to every partition every ``tick_s``, until ``stop``."""
    with headwater.Producer(bootstrap, acks=1, linger_ms=5) as producer:
        n = 0
        while not stop.wait(tick_s):
            for p in range(partitions):
                producer.send(topic, f"t{n}".encode(), partition=p)
            n += 1
        producer.flush(10)


def topic_ready(admin: headwater.Admin, topic: str, partitions: int) -> bool:
    """Every partition has a leader (a just-created topic may not be known yet)."""
    try:
        found = admin.describe_topics([topic])[topic].partitions
    except errors.UnknownTopicOrPartitionError:
        return False
    return len(found) == partitions and all(p.leader >= 0 for p in found)


def report(label: str, protocol: str, change: str, f: Figures, args: argparse.Namespace) -> None:
    ratio = ""
    if protocol == "consumer":
        ratio = (
            f" ({f.owned_ms / args.heartbeat_ms:.2f}x / {f.fetching_ms / args.heartbeat_ms:.2f}x "
            f"the {args.heartbeat_ms} ms heartbeat interval)"
        )
    print(
        f"{change}, {label}: every partition owned after {f.owned_ms:.0f} ms, fetching after "
        f"{f.fetching_ms:.0f} ms{ratio}; unaffected partitions {f.unaffected}/{f.others}: "
        f"{f.revoked} revoked (and given back), {f.stalled} more with no record for "
        f"> {args.pause_ms:.0f} ms; longest gap between records {f.longest_ms:.0f} ms "
        f"(quiet baseline {f.baseline_ms:.0f} ms)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=10, help="group size before the leave")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=1000,
        help="heartbeat interval of both protocols (classic heartbeat_interval_ms and the "
        "broker's group.consumer.heartbeat.interval.ms)",
    )
    parser.add_argument(
        "--tick-ms",
        type=int,
        default=200,
        help="the trickle: one record to every partition every TICK_MS",
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=1000.0,
        help="a gap longer than this between records of a partition counts as a pause",
    )
    parser.add_argument(
        "--hold-s",
        type=float,
        default=4.0,
        help="how long a settled group must stay unchanged (also the quiet baseline window)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a rehearsal: 4 members, 20 partitions, 3 s holds",
    )
    args = parser.parse_args()
    if args.quick:
        args.members, args.partitions, args.hold_s = 4, 20, 3.0
    overrides = {
        "offsets.topic.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.backoff.ms": "60000",
        "group.consumer.min.heartbeat.interval.ms": str(min(100, args.heartbeat_ms)),
        "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms),
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.session.timeout.ms": "10000",
    }
    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding gRPC threads
    note(f"starting 3 brokers; {args.members} members, {args.partitions} partitions")
    results: list[tuple[str, str, dict[str, Figures]]] = []
    with Cluster(brokers=3, overrides=overrides) as c, headwater.Admin(c.bootstrap) as admin:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        admin.create_topic(topic, args.partitions, 3)
        wait_for(lambda: topic_ready(admin, topic, args.partitions), timeout_s=60, what="leaders")
        stop = threading.Event()
        producer = threading.Thread(
            target=trickle,
            args=(c.bootstrap, topic, args.partitions, args.tick_ms / 1000, stop),
            daemon=True,
        )
        producer.start()
        try:
            for label, protocol, strategy in PROTOCOLS:
                figures = run_protocol(
                    ctx, c, admin, topic, args, label=label, protocol=protocol, strategy=strategy
                )
                results.append((label, protocol, figures))
        finally:
            stop.set()
            producer.join(30)
    print(
        f"{args.members} members on {args.partitions} partitions (3 brokers, RF 3); heartbeat "
        f"interval {args.heartbeat_ms} ms for both protocols; one record per partition every "
        f"{args.tick_ms} ms"
    )
    for change in ("leave", "join"):
        for label, protocol, figures in results:
            report(label, protocol, change, figures[change], args)


if __name__ == "__main__":
    main()
