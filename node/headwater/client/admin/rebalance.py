"""``Admin``'s rebalancing and decommissioning: plan, execute (throttled), verify, cancel.

The ``kafka-reassign-partitions`` workflow and a Cruise-Control-like
rebalance, through ``headwater.Admin``.  Planning is pure
(:mod:`headwater.client.reassignment`); this class gathers what the planners
need (brokers and racks from DescribeCluster, replica lists from Metadata,
partition sizes), and drives the broker's reassignment RPCs
(``alter_partition_reassignments`` / ``list_partition_reassignments`` of
:mod:`headwater.client.admin.reassignments`).

**Sizes.**  :meth:`RebalanceAdmin.estimate_partition_sizes` takes each
partition's bytes on disk from DescribeLogDirs (the leader's replica, as
Cruise Control does; a partition without a leader takes its largest reported
replica).  Only for partitions none of whose brokers answered (an older
broker without the RPC answers UNSUPPORTED_VERSION, or it is unavailable) it
falls back to an estimate: the record count (log end minus log start,
ListOffsets) times the topic's mean record size, sampled from the tail of its
fullest partition (keys, values and headers, plus Kafka's per-record framing;
compression is not seen).  Callers that know better pass ``sizes=``.

**Throttles** are set as ``kafka-reassign-partitions --throttle`` sets them:
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``
on every broker that a moving partition is or will be on, and per topic
``leader.replication.throttled.replicas`` (``partition:broker`` for each
current replica of a moving partition) and
``follower.replication.throttled.replicas`` (each broker it is moving to).
:meth:`RebalanceAdmin.verify_reassignment` removes all of them once every
partition of the plan is complete, as ``--verify`` does, and so does
:meth:`RebalanceAdmin.cancel_reassignment`.

Every plan is checked against the cluster (topics, partitions, brokers)
before anything is set or sent, so a bad plan changes nothing.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from headwater import errors
from headwater.client.admin.values import ClusterDescription, LogDirDescription, TopicDescription
from headwater.client.reassignment import (
    BrokerInfo,
    ReassignmentPlan,
    RebalanceGoals,
    RebalancePlan,
    VerifyResult,
    check_plan,
    classify,
    generate,
    plan_drain,
    plan_rebalance,
)
from headwater.values import TopicPartition

if TYPE_CHECKING:
    from headwater.client.types import OffsetAndTimestamp

BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
RECORD_OVERHEAD_BYTES = 16
"""Per-record framing added to the sampled key/value/header bytes (varints, attributes)."""
SAMPLE_RECORDS = 100


class AdminOperations(Protocol):
    """What :class:`RebalanceAdmin` uses of :class:`~headwater.client.admin.client.Admin`:
    its public calls (a fake cluster in the unit tests)."""

    @property
    def bootstrap_servers(self) -> Sequence[str]: ...

    def describe_cluster(self) -> ClusterDescription: ...

    def describe_topics(
        self, names: Iterable[str] | None = None
    ) -> dict[str, TopicDescription]: ...

    def list_offsets(
        self, specs: Mapping[TopicPartition, int | str]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]: ...

    def alter_topic_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None: ...

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]: ...

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> Mapping[TopicPartition, Any]: ...

    def alter_broker_configs(
        self, broker_id: int | None, configs: Mapping[str, str | None]
    ) -> Any: ...

    def describe_log_dirs_each(
        self,
        brokers: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Sequence[int]] | Iterable[str] | None = None,
    ) -> Mapping[int, Mapping[str, LogDirDescription] | errors.HeadwaterError]: ...


def as_plan(plan: ReassignmentPlan | RebalancePlan) -> ReassignmentPlan:
    """A planner's answer as the JSON plan of the partitions it changes."""
    if isinstance(plan, ReassignmentPlan):
        return plan
    return ReassignmentPlan.of(plan.changed)


def throttled_replicas(
    current: Mapping[TopicPartition, Sequence[int]],
    targets: Mapping[TopicPartition, Sequence[int]],
) -> dict[str, dict[str, str]]:
    """Kafka's per-topic throttled-replica lists for a move (partitions whose set changes)."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for tp in sorted(targets, key=lambda t: (t.topic, t.partition)):
        before, after = list(current.get(tp, ())), list(targets[tp])
        if set(before) == set(after):
            continue
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in before)
        follower.setdefault(tp.topic, []).extend(
            f"{tp.partition}:{b}" for b in after if b not in before
        )
    return {
        topic: {
            TOPIC_THROTTLES[0]: ",".join(leader[topic]),
            TOPIC_THROTTLES[1]: ",".join(follower.get(topic, [])),
        }
        for topic in leader
    }


class RebalanceAdmin:
    """``Admin``'s reassignment tools (see the module docstring), over the Admin's own calls."""

    def __init__(self, admin: AdminOperations) -> None:
        self._admin = admin

    # -- what the planners need --------------------------------------------------------

    def broker_infos(self) -> list[BrokerInfo]:
        """The live brokers with their racks."""
        return [BrokerInfo(b.broker_id, b.rack) for b in self._admin.describe_cluster().brokers]

    def current_assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Every partition's replicas (internal topics included), preferred leader first."""
        return {
            TopicPartition(p.topic, p.partition): tuple(p.replicas)
            for desc in self._admin.describe_topics(None).values()
            for p in desc.partitions
        }

    def estimate_partition_sizes(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Each partition's bytes: measured by DescribeLogDirs, else estimated (module doc)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        if not tps:
            return {}
        wanted: dict[str, list[int]] = {}
        for tp in tps:
            wanted.setdefault(tp.topic, []).append(tp.partition)
        described = self._admin.describe_topics(list(wanted))
        leaders = {
            TopicPartition(p.topic, p.partition): p.leader
            for d in described.values()
            for p in d.partitions
        }
        reported: dict[int, dict[TopicPartition, int]] = {}
        for broker, answer in self._admin.describe_log_dirs_each(None, topics=wanted).items():
            if isinstance(answer, errors.HeadwaterError):
                continue  # UNSUPPORTED_VERSION, unavailable: estimated below
            reported[broker] = {
                tp: info.size
                for d in answer.values()
                if d.error is None
                for tp, info in d.replica_infos.items()
            }
        sizes = {tp: measured_size(tp, leaders.get(tp, -1), reported) for tp in tps}
        missing = [tp for tp, size in sizes.items() if size is None]
        estimated = self._estimate_from_records(missing) if missing else {}
        return {
            tp: size if size is not None else estimated.get(tp, 0) for tp, size in sizes.items()
        }

    def _estimate_from_records(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Each partition's bytes estimated from its record count (see the module docstring)."""
        tps = list(partitions)
        if not tps:
            return {}
        earliest = self._admin.list_offsets(dict.fromkeys(tps, "earliest"))
        latest = self._admin.list_offsets(dict.fromkeys(tps, "latest"))
        counts: dict[TopicPartition, int] = {}
        for tp in tps:
            lo, hi = earliest.get(tp), latest.get(tp)
            counts[tp] = max(0, hi.offset - lo.offset) if lo is not None and hi is not None else 0
        fullest: dict[str, TopicPartition] = {}
        for tp, n in counts.items():
            if n and (tp.topic not in fullest or n > counts[fullest[tp.topic]]):
                fullest[tp.topic] = tp
        mean = _sample_record_bytes(
            self._admin.bootstrap_servers, {tp: latest[tp] for tp in fullest.values()}
        )
        return {tp: n * mean.get(tp.topic, 0) for tp, n in counts.items()}

    # -- planning ----------------------------------------------------------------------

    def plan_rebalance(
        self,
        *,
        brokers: Sequence[int] | None = None,
        sizes: Mapping[TopicPartition, int] | None = None,
        goals: RebalanceGoals | None = None,
    ) -> RebalancePlan:
        """A plan that evens replicas, bytes and preferred leaders over ``brokers``.

        ``brokers`` (default: every live broker) are the brokers that should
        hold replicas afterwards; replicas elsewhere are moved onto them.  With
        the default, a replica on a broker that is down is refused
        (``BrokerNotAvailableError``): start it again, or drain it.
        """
        live = self.broker_infos()
        live_ids = {b.broker_id for b in live}
        current = self.current_assignment()
        if brokers is None:
            targets = live
            down = sorted({b for ids in current.values() for b in ids} - live_ids)
            if down:
                raise errors.BrokerNotAvailableError(
                    f"broker(s) {','.join(map(str, down))} hold replicas but are not alive: "
                    "start them again, or drain them"
                )
        else:
            unknown = sorted(set(brokers) - live_ids)
            if unknown:
                raise errors.BrokerNotAvailableError(
                    f"Unknown broker id(s): {','.join(map(str, unknown))}"
                )
            targets = [b for b in live if b.broker_id in set(brokers)]
        if sizes is None:
            sizes = self.estimate_partition_sizes(current)
        return plan_rebalance(current, brokers=targets, sizes=sizes, goals=goals)

    def plan_drain(
        self, broker_id: int, *, sizes: Mapping[TopicPartition, int] | None = None
    ) -> RebalancePlan:
        """A plan moving every replica off ``broker_id`` (which may be down), nothing else."""
        current = self.current_assignment()
        if sizes is None:  # all of them: the before/after table shows every broker's bytes
            sizes = self.estimate_partition_sizes(current)
        return plan_drain(current, brokers=self.broker_infos(), drain=[broker_id], sizes=sizes)

    def generate_reassignment(
        self, topics: Sequence[str], brokers: Sequence[int], *, seed: int | None = None
    ) -> tuple[ReassignmentPlan, ReassignmentPlan]:
        """``--generate``: the (current, proposed) plans placing ``topics`` over ``brokers``."""
        live = {b.broker_id: b for b in self.broker_infos()}
        unknown = sorted(set(brokers) - set(live))
        if unknown:
            raise errors.BrokerNotAvailableError(
                f"Unknown broker id(s): {','.join(map(str, unknown))}"
            )
        described = self._admin.describe_topics(list(topics))
        current = {
            TopicPartition(p.topic, p.partition): tuple(p.replicas)
            for d in described.values()
            for p in d.partitions
        }
        return generate(
            current,
            topics=list(topics),
            brokers=[live[b] for b in brokers],
            rng=random.Random(seed),
        )

    # -- executing ---------------------------------------------------------------------

    def check_reassignment(self, plan: ReassignmentPlan) -> None:
        """Refuse (Kafka's errors) a plan naming unknown topics, partitions or brokers."""
        try:
            described = self._admin.describe_topics(plan.topics)
        except errors.UnknownTopicOrPartitionError:
            described = {}
            for topic in plan.topics:
                with contextlib.suppress(errors.UnknownTopicOrPartitionError):
                    described.update(self._admin.describe_topics([topic]))
        check_plan(
            plan,
            partition_counts={name: len(d.partitions) for name, d in described.items()},
            broker_ids=[b.broker_id for b in self.broker_infos()],
        )

    def execute_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        throttle_bytes_per_s: int | None = None,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Start moving the plan's partitions; with a throttle, set it first (see module).

        The plan is checked first; a bad one raises and changes nothing.  Each
        partition's error (or None) is returned; with ``raise_on_error`` the
        first one raises.
        """
        reassignment = as_plan(plan)
        if not reassignment.partitions:
            return {}
        self.check_reassignment(reassignment)
        targets = reassignment.targets
        if throttle_bytes_per_s is not None:
            if throttle_bytes_per_s <= 0:
                raise errors.InvalidConfigError("the throttle must be a positive number of bytes/s")
            current = {
                TopicPartition(p.topic, p.partition): tuple(p.replicas)
                for d in self._admin.describe_topics(reassignment.topics).values()
                for p in d.partitions
            }
            moving = {tp for tp in targets if set(current.get(tp, ())) != set(targets[tp])}
            involved = sorted({b for tp in moving for b in (*current.get(tp, ()), *targets[tp])})
            rate = str(int(throttle_bytes_per_s))
            for broker in involved:
                self._admin.alter_broker_configs(broker, dict.fromkeys(BROKER_THROTTLES, rate))
            for topic, configs in throttled_replicas(current, targets).items():
                self._admin.alter_topic_configs(topic, set_configs=configs)
        results = self._admin.alter_partition_reassignments(targets, timeout_ms=timeout_ms)
        if raise_on_error:
            for err in results.values():
                if err is not None:
                    raise err
        return results

    def verify_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        preserve_throttles: bool = False,
        settle_s: float = 2.0,
    ) -> VerifyResult:
        """Each partition complete, in progress or failed; throttles removed when all complete.

        The moves in progress are read from ZooKeeper (ListPartitionReassignments)
        but the replica lists from a broker's metadata, which can lag a just-finished
        move by a moment; so a partition that looks failed is read again, for up to
        ``settle_s``, before it is reported failed.
        """
        reassignment = as_plan(plan)
        targets = reassignment.targets
        if not targets:
            return VerifyResult(())
        deadline = time.monotonic() + settle_s
        while True:
            ongoing = self._admin.list_partition_reassignments(list(targets))
            current = {
                TopicPartition(p.topic, p.partition): tuple(p.replicas)
                for d in self._admin.describe_topics(reassignment.topics).values()
                for p in d.partitions
            }
            result = VerifyResult(
                tuple(
                    classify(
                        tp,
                        target=targets[tp],
                        current=current.get(tp, ()),
                        reassigning=tp in ongoing,
                    )
                    for tp in targets
                )
            )
            if not result.failed or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        if result.complete and not preserve_throttles:
            self._clear_throttles(reassignment.topics)
            result = result._replace(throttles_removed=True)
        return result

    def cancel_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        preserve_throttles: bool = False,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Cancel the plan's ongoing moves (back to the original replicas); each partition's
        error, NO_REASSIGNMENT_IN_PROGRESS for one not moving.  Throttles are removed."""
        reassignment = as_plan(plan)
        if not reassignment.partitions:
            return {}
        results = self._admin.alter_partition_reassignments(
            dict.fromkeys(reassignment.targets, None)
        )
        if not preserve_throttles:
            self._clear_throttles(reassignment.topics)
        return results

    def _clear_throttles(self, topics: Iterable[str]) -> None:
        for topic in topics:
            with contextlib.suppress(errors.UnknownTopicOrPartitionError):
                self._admin.alter_topic_configs(topic, delete_configs=TOPIC_THROTTLES)
        for broker in self.broker_infos():
            self._admin.alter_broker_configs(
                broker.broker_id, dict.fromkeys(BROKER_THROTTLES, None)
            )


def measured_size(
    tp: TopicPartition, leader: int, reported: Mapping[int, Mapping[TopicPartition, int]]
) -> int | None:
    """``tp``'s size as the leader reports it; with no report from the leader, the largest
    any broker reports; None if no broker reported it."""
    if tp in reported.get(leader, {}):
        return reported[leader][tp]
    sizes = [r[tp] for r in reported.values() if tp in r]
    return max(sizes) if sizes else None


def _sample_record_bytes(
    bootstrap: Sequence[str], ends: Mapping[TopicPartition, OffsetAndTimestamp | None]
) -> dict[str, int]:
    """Per topic, the mean size of the last ``SAMPLE_RECORDS`` records of its partition
    in ``ends`` (0 if unreadable); one reader for all of them."""
    from headwater.client.consumer.range_reader import RangeReader

    out: dict[str, int] = {}
    if not ends:
        return out
    with RangeReader(list(bootstrap), default_api_timeout_ms=10000) as reader:
        for tp, end in ends.items():
            total = count = 0
            if end is not None and end.offset > 0:
                try:
                    for chunk in reader.read_range(
                        tp,
                        max(0, end.offset - SAMPLE_RECORDS),
                        end.offset,
                        timeout_ms=5000,
                        on_missing=lambda _m: None,
                    ):
                        for r in chunk.all_records():
                            total += len(r.key or b"") + len(r.value or b"")
                            total += sum(len(h[0]) + len(h[1] or b"") for h in r.headers)
                            total += RECORD_OVERHEAD_BYTES
                            count += 1
                except errors.HeadwaterError:
                    count = 0
            out[tp.topic] = total // count if count else 0
    return out
