"""Consumer-group figures: rebalance time when one of 10 members leaves (eager vs
cooperative) on 100 partitions, and commit throughput / p99 latency.

MEASURED IN-PROCESS against the pure coordinator state machine
(:class:`headwater.groups.coordinator.GroupCoordinator`) plus the real client assignors
and ConsumerProtocol codec, with records encoded as a RecordBatch (what the runtime
appends) -- no network, no replication, no disk.  These are the CPU costs of the
protocol; a real cluster adds a JoinGroup/SyncGroup round trip per member and the
acks=all append of __consumer_offsets.

    .venv/bin/python bench/groups.py
"""

from __future__ import annotations

import itertools
import statistics
import time

from headwater.client.group.classic import protocol
from headwater.client.group.classic.assignors import Subscription, assign
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.groups.coordinator import Decision, GroupCoordinator
from headwater.groups.values import (
    GroupConfig,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommit,
    OffsetCommitRequest,
    Protocol,
    Response,
    SyncGroupRequest,
)
from headwater.records import Record, build_batch

MEMBERS, PARTITIONS = 10, 100


class Driver:
    def __init__(self) -> None:
        n = itertools.count()
        self.c = GroupCoordinator(
            config=GroupConfig(group_initial_rebalance_delay_ms=0),
            member_id_factory=lambda _c: f"m{next(n):03d}",
        )
        self.ids = itertools.count(1)
        self.replies: dict[int, Response] = {}
        self.now = 0

    def apply(self, d: Decision) -> None:
        if d.records:
            build_batch([Record(r.key, r.value) for r in d.records], timestamp_ms=self.now)
        self.replies.update(d.replies)

    def join(self, member: str, name: str, owned: tuple[TopicPartition, ...], gen: int) -> int:
        rid = next(self.ids)
        meta = protocol.encode_subscription(protocol.ConsumerSubscription(("t",), owned, gen))
        req = JoinGroupRequest("g", member, "consumer", (Protocol(name, meta),), 10_000, 30_000)
        self.apply(self.c.join_group(req, request_id=rid, now_ms=self.now))
        return rid


def rebalance_round(
    d: Driver, name: str, owned: dict[str, tuple[TopicPartition, ...]], gen: int
) -> dict[str, tuple[TopicPartition, ...]]:
    """Every member rejoins and syncs once; returns the new assignment."""
    rids = {m: d.join(m, name, owned.get(m, ()), gen) for m in owned}
    resps = {m: d.replies[r] for m, r in rids.items()}
    leader_resp = next(r for r in resps.values() if isinstance(r, JoinGroupResponse) and r.members)
    assert isinstance(leader_resp, JoinGroupResponse)
    subs = {}
    for jm in leader_resp.members:
        s = protocol.decode_subscription(jm.metadata)
        subs[jm.member_id] = Subscription(s.topics, s.owned_partitions, s.generation)
    result = assign(name, {"t": PARTITIONS}, subs)
    generation = leader_resp.generation_id
    for m in owned:
        if m == leader_resp.leader:
            continue
        d.apply(
            d.c.sync_group(
                SyncGroupRequest("g", generation, m), request_id=next(d.ids), now_ms=d.now
            )
        )
    encoded = tuple(
        (m, protocol.encode_assignment(protocol.ConsumerAssignment(tuple(tps))))
        for m, tps in result.items()
    )
    rid = next(d.ids)
    d.apply(
        d.c.sync_group(
            SyncGroupRequest("g", generation, leader_resp.leader, assignments=encoded),
            request_id=rid,
            now_ms=d.now,
        )
    )
    return {m: tuple(result[m]) for m in owned}


def form(name: str) -> tuple[Driver, dict[str, tuple[TopicPartition, ...]]]:
    d = Driver()
    members = []
    for _ in range(MEMBERS):
        rid = d.join("", name, (), -1)
        resp = d.replies[rid]
        assert (
            isinstance(resp, JoinGroupResponse) and resp.error_code is ErrorCode.MEMBER_ID_REQUIRED
        )
        members.append(resp.member_id)
    owned: dict[str, tuple[TopicPartition, ...]] = {m: () for m in members}
    return d, rebalance_round(d, name, owned, -1)


def bench_rebalance(name: str, rounds: int) -> tuple[float, int]:
    samples, revoked = [], 0
    for _ in range(20):
        d, owned = form(name)
        leaver = sorted(owned)[-1]
        t0 = time.perf_counter()
        d.apply(
            d.c.leave_group(
                LeaveGroupRequest("g", (MemberIdentity(leaver),)),
                request_id=next(d.ids),
                now_ms=d.now,
            )
        )
        rest = {m: v for m, v in owned.items() if m != leaver}
        gen = d.c.groups["g"].generation_id
        before = rest
        if name != "cooperative-sticky":
            revoked += sum(len(v) for v in rest.values())  # eager: everything is revoked
            rest = {m: () for m in rest}
        for _r in range(rounds):
            new = rebalance_round(d, name, rest, gen)
            if name == "cooperative-sticky":
                revoked += sum(len(set(rest[m]) - set(new[m])) for m in rest)
            rest, gen = new, gen + 1
        samples.append((time.perf_counter() - t0) * 1000)
        assert sorted(tp for v in rest.values() for tp in v) == [
            TopicPartition("t", p) for p in range(PARTITIONS)
        ], (name, before)
    return statistics.median(samples), revoked // 20


def bench_commits(n: int = 20_000) -> tuple[float, float]:
    d, owned = form("range")
    gen = d.c.groups["g"].generation_id
    members = sorted(owned)
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        m = members[i % len(members)]
        req = OffsetCommitRequest(
            "g", tuple(OffsetCommit(tp.topic, tp.partition, i) for tp in owned[m]), gen, m
        )
        s = time.perf_counter()
        d.apply(d.c.commit_offsets(req, request_id=next(d.ids), now_ms=d.now))
        lat.append((time.perf_counter() - s) * 1000)
    total = time.perf_counter() - t0
    lat.sort()
    return n / total, lat[int(0.99 * len(lat))]


def main() -> None:
    print(f"in-process coordinator state machine; {MEMBERS} members, {PARTITIONS} partitions")
    eager_ms, eager_revoked = bench_rebalance("range", rounds=1)
    sticky_ms, sticky_revoked = bench_rebalance("sticky", rounds=1)
    coop_ms, coop_revoked = bench_rebalance("cooperative-sticky", rounds=2)
    print(
        f"rebalance after one leaves, eager range:        {eager_ms:7.2f} ms median, "
        f"{eager_revoked} partitions revoked"
    )
    print(
        f"rebalance after one leaves, eager sticky:       {sticky_ms:7.2f} ms median, "
        f"{sticky_revoked} partitions revoked"
    )
    print(
        f"rebalance after one leaves, cooperative-sticky: {coop_ms:7.2f} ms median "
        f"(2 rounds), {coop_revoked} partitions revoked"
    )
    rate, p99 = bench_commits()
    print(f"commits (10 partitions each): {rate:,.0f} commits/s, p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
