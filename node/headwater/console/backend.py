"""The console's calls to the cluster, through the public client (Admin, Consumer, Producer).

:class:`ClusterView` holds one :class:`~headwater.client.Admin` and, once something is
produced, one :class:`~headwater.client.Producer`, both made with the identity the console
was started with (TLS, SASL), so the brokers' ACLs decide what it may see and change:
a listing shows only what that principal may describe, and a refused change raises the
broker's authorization error, which the web layer shows as it is.  Each method returns
plain values for the templates; none of them keeps state between requests except the
two clients.

The message browser reads through one long-lived
:class:`~headwater.client.consumer.range_reader.RangeReader` (its connections and
metadata kept between requests, no group, no background fetching): a page is the offset
range ``[start, start + limit)`` of one partition, fetched with bounded fetch sizes and
stopped as soon as the page is full, so a browse costs about one Fetch whatever the size
of the partition and never loads a whole topic.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, NamedTuple

from headwater import errors
from headwater.client import (
    Admin,
    ConfigEntry,
    MissingOffsets,
    PartitionMetadata,
    Producer,
    RangeReader,
    ScramDeletion,
    ScramUpsertion,
    TopicPartition,
)
from headwater.console import charts, inputs, offsets
from headwater.records import ConsumedRecord
from headwater.security.acls import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePatternFilter,
)

BROWSE_WAIT_S = 3.0
"""How long a browse waits for records it knows are there before showing what it has."""

BROWSE_FETCH_BYTES = 1024 * 1024
"""The most bytes one Fetch of the browser asks for (a page of small records is one
Fetch; a page of large ones takes several)."""

LAG_SAMPLES = 200
"""How many samples of a group's lag the console keeps (one every few seconds while the
group's page is open)."""

LAG_SAMPLE_EVERY_MS = 1000


class ClientOptions(NamedTuple):
    """What the console's clients are made with: the brokers, how long a call may take
    (a page waits at most that for the cluster), and the identity: the client's
    ``ClientSecurity`` (TLS, SASL) as the CLI's ``--command-config`` builds it, or None
    for PLAINTEXT."""

    bootstrap: str
    request_timeout_ms: int = 10000
    security: Any = None


class BrokerRow(NamedTuple):
    broker_id: int
    address: str
    rack: str | None
    version: str
    protocol_version: str
    controller: bool


class TopicRow(NamedTuple):
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int


class MoveRow(NamedTuple):
    """A partition being reassigned; ``caught_up`` of its ``adding`` replicas are in sync.

    ``copied_bytes`` is what the adding replicas that are not in sync yet hold, and
    ``leader_bytes`` the leader's log size (None when the log dirs could not be
    described, e.g. without DESCRIBE on the cluster): a replica has copied about
    its size over the leader's.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    caught_up: int
    copied_bytes: int = 0
    leader_bytes: int | None = None

    @property
    def progress(self) -> int:
        """Percent of the move done: each caught-up new replica counts whole, each other
        one by the share of the leader's bytes it holds (nothing when sizes are unknown);
        below 100 until all are in sync."""
        if not self.adding:
            return 100
        done = float(self.caught_up)
        if self.leader_bytes:
            behind = len(self.adding) - self.caught_up
            done += min(float(behind), self.copied_bytes / self.leader_bytes)
        # 100 only once every new replica is in sync (a copy can be whole a moment before)
        top = 100 if self.caught_up == len(self.adding) else 99
        return min(top, int(100 * done / len(self.adding)))


class ClusterPage(NamedTuple):
    cluster_id: str
    controller_id: int
    brokers: list[BrokerRow]
    racks: list[str]
    topics: int
    partitions: int
    under_replicated: list[PartitionMetadata]
    offline: list[PartitionMetadata]
    moves: list[MoveRow] = []
    moves_error: str = ""


class AclRow(NamedTuple):
    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class UserRow(NamedTuple):
    user: str
    mechanisms: str
    """The user's credentials as shown (or the error describing them)."""
    mechanism_names: tuple[str, ...] = ()


class SecurityPage(NamedTuple):
    acls: list[AclRow]
    acls_error: str
    users: list[UserRow]
    users_error: str


class PartitionRow(NamedTuple):
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    earliest: int | None
    latest: int | None
    size: int | None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


class ConfigRow(NamedTuple):
    name: str
    value: str
    source: str
    sensitive: bool


class TopicPage(NamedTuple):
    name: str
    internal: bool
    partitions: list[PartitionRow]
    configs: list[ConfigRow]
    sizes_error: str
    configs_error: str = ""


class RecordRow(NamedTuple):
    offset: int
    timestamp_ms: int
    key: Any  # formats.Shown
    value: Any
    headers: list[tuple[str, Any]]


class Browse(NamedTuple):
    query: inputs.BrowseQuery
    start_offset: int
    earliest: int
    latest: int
    records: list[ConsumedRecord]


class GroupRow(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    group_type: str
    members: int


class MemberRow(NamedTuple):
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: list[TopicPartition]


class GroupPage(NamedTuple):
    group_id: str
    state: str
    group_type: str
    protocol: str
    generation: int
    coordinator: str
    members: list[MemberRow]
    lag: list[offsets.LagRow]
    history: list[charts.LagSample] = []
    """Samples of the lag (total and per partition), oldest first."""

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.lag)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.lag})


class ClusterView:
    """The console's window on one cluster; thread-safe (the web layer calls it from a
    thread pool)."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self.admin = Admin(
            options.bootstrap,
            request_timeout_ms=options.request_timeout_ms,
            default_api_timeout_ms=options.request_timeout_ms,
            security=options.security,
        )
        self._producer: Producer | None = None
        self._reader = RangeReader(
            options.bootstrap,
            fetch_max_wait_ms=100,
            max_partition_fetch_bytes=BROWSE_FETCH_BYTES,
            fetch_max_bytes=BROWSE_FETCH_BYTES,
            request_timeout_ms=options.request_timeout_ms,
            default_api_timeout_ms=options.request_timeout_ms,
            **({} if options.security is None else {"security": options.security}),
        )
        self._lock = threading.Lock()
        self._lag: dict[str, collections.deque[charts.LagSample]] = {}

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.close(timeout=5)
                self._producer = None
        self._reader.close()
        self.admin.close()

    # -- reading ---------------------------------------------------------------------

    def cluster(self) -> ClusterPage:
        desc = self.admin.describe_cluster()
        topics = self.admin.describe_topics()
        parts = [p for t in topics.values() for p in t.partitions]
        brokers = [
            BrokerRow(
                b.broker_id,
                b.address,
                b.rack,
                b.version,
                b.protocol_version,
                b.broker_id == desc.controller_id,
            )
            for b in sorted(desc.brokers)
        ]
        moves: list[MoveRow] = []
        moves_error = ""
        try:
            moves = self._moves(parts)
        except errors.HeadwaterError as exc:
            moves_error = str(exc)
        return ClusterPage(
            cluster_id=desc.cluster_id,
            controller_id=desc.controller_id,
            brokers=brokers,
            racks=sorted({b.rack for b in desc.brokers if b.rack}),
            topics=len(topics),
            partitions=len(parts),
            under_replicated=[p for p in parts if p.leader >= 0 and len(p.isr) < len(p.replicas)],
            offline=[p for p in parts if p.leader < 0],
            moves=moves,
            moves_error=moves_error,
        )

    def _moves(self, parts: list[PartitionMetadata]) -> list[MoveRow]:
        """The ongoing reassignments, with how far their new replicas have got."""
        moving = self.admin.list_partition_reassignments()
        if not moving:
            return []
        meta = {TopicPartition(p.topic, p.partition): p for p in parts}
        sizes: dict[tuple[int, TopicPartition], int] = {}
        try:
            described = self.admin.describe_log_dirs(topics={tp.topic for tp in moving})
            for broker, dirs in described.items():
                for d in dirs.values():
                    for tp, info in d.replica_infos.items():
                        if not info.is_future:
                            sizes[broker, tp] = max(sizes.get((broker, tp), 0), info.size)
        except errors.HeadwaterError:
            sizes = {}  # progress then counts caught-up replicas only
        rows = []
        for tp, move in sorted(moving.items()):
            p = meta.get(tp)
            in_sync = p.isr if p is not None else ()
            behind = [b for b in move.adding_replicas if b not in in_sync]
            leader_bytes = sizes.get((p.leader, tp)) if p is not None and sizes else None
            rows.append(
                MoveRow(
                    tp.topic,
                    tp.partition,
                    move.replicas,
                    move.adding_replicas,
                    move.removing_replicas,
                    len(move.adding_replicas) - len(behind),
                    sum(sizes.get((b, tp), 0) for b in behind),
                    leader_bytes,
                )
            )
        return rows

    def topics(self) -> list[TopicRow]:
        rows = []
        for t in self.admin.describe_topics().values():
            rows.append(
                TopicRow(
                    t.name,
                    t.internal,
                    len(t.partitions),
                    t.replication_factor,
                    sum(1 for p in t.partitions if p.leader >= 0 and len(p.isr) < len(p.replicas)),
                    sum(1 for p in t.partitions if p.leader < 0),
                )
            )
        return rows

    def partition_count(self, name: str) -> int:
        return len(self.admin.describe_topics([name])[name].partitions)

    def topic(self, name: str) -> TopicPage:
        desc = self.admin.describe_topics([name])[name]
        tps = [TopicPartition(name, p.partition) for p in desc.partitions]
        earliest = self._offsets(tps, "earliest")
        latest = self._offsets(tps, "latest")
        # Sizes and configs need more than DESCRIBE on the topic (DESCRIBE on the cluster,
        # DESCRIBE_CONFIGS): a principal without them still sees the partitions.
        sizes: dict[TopicPartition, int] = {}
        sizes_error = ""
        try:
            for dirs in self.admin.describe_log_dirs(topics=[name]).values():
                for d in dirs.values():
                    for tp, info in d.replica_infos.items():
                        if not info.is_future:
                            sizes[tp] = max(sizes.get(tp, 0), info.size)
        except errors.HeadwaterError as exc:
            sizes_error = str(exc)
        configs: dict[str, ConfigEntry] = {}
        configs_error = ""
        try:
            configs = self.admin.describe_configs([name]).get(name, {})
        except errors.HeadwaterError as exc:
            configs_error = str(exc)
        return TopicPage(
            name=name,
            internal=desc.internal,
            partitions=[
                PartitionRow(
                    p.partition,
                    p.leader,
                    p.replicas,
                    p.isr,
                    earliest.get(tp),
                    latest.get(tp),
                    sizes.get(tp),
                )
                for p, tp in zip(desc.partitions, tps, strict=True)
            ],
            configs=[
                ConfigRow(c.name, c.value, c.source, c.is_sensitive)
                for c in sorted(configs.values())
            ],
            sizes_error=sizes_error,
            configs_error=configs_error,
        )

    def _offsets(self, tps: list[TopicPartition], spec: str | int) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        found = self.admin.list_offsets(dict.fromkeys(tps, spec))
        return {tp: o.offset for tp, o in found.items() if o is not None and o.offset >= 0}

    def browse(self, name: str, query: inputs.BrowseQuery) -> Browse:
        """At most ``query.limit`` records of one partition, from the query's start."""
        tp = TopicPartition(name, query.partition)
        low = self._offsets([tp], "earliest").get(tp, 0)
        high = self._offsets([tp], "latest").get(tp, 0)
        if query.start == "oldest":
            start = low
        elif query.start == "newest":
            start = max(low, high - query.limit)
        elif query.start == "offset":
            start = min(max(query.offset or 0, low), high)
        else:
            assert query.timestamp_ms is not None
            start = self._offsets([tp], query.timestamp_ms).get(tp, high)
        want = min(query.limit, high - start)
        records: list[ConsumedRecord] = []
        if want > 0:
            records = self._read(tp, start, want, high)
        return Browse(query, start, low, high, records)

    def _read(self, tp: TopicPartition, start: int, count: int, high: int) -> list[ConsumedRecord]:
        """Up to ``count`` records of ``tp`` from ``start``, below the high watermark
        ``high``: the range ``[start, start + count)``, then further ranges while offsets
        were absent (compacted away, transaction markers).  Offsets the broker no longer
        has (deleted by retention meanwhile, the log cut) or that do not come in time end
        the page early.  Waits at most :data:`BROWSE_WAIT_S` in all."""
        out: list[ConsumedRecord] = []
        position = start
        deadline = time.monotonic() + BROWSE_WAIT_S
        gone: list[MissingOffsets] = []
        while len(out) < count and position < high and not gone:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                break
            end = min(high, position + count - len(out))
            for chunk in self._reader.read_range(
                tp, position, end, timeout_ms=left_ms, on_missing=gone.append
            ):
                out += chunk.all_records()
                del chunk
            position = end
        return out[:count]

    def groups(self) -> list[GroupRow]:
        listing = self.admin.list_groups()
        described = self.admin.describe_groups([g.group_id for g in listing]) if listing else {}
        rows = []
        for g in sorted(listing):
            d = described.get(g.group_id)
            rows.append(
                GroupRow(
                    g.group_id,
                    d.state if d else g.state,
                    g.protocol_type,
                    d.group_type if d else "",
                    len(d.members) if d else 0,
                )
            )
        return rows

    def group(self, gid: str) -> GroupPage:
        g = self.admin.describe_groups([gid])[gid]
        committed = {
            tp: om.offset for tp, om in self.admin.list_consumer_group_offsets(gid).items()
        }
        log_end = self._offsets(list(committed), "latest")
        owner = {tp: m.member_id for m in g.members for tp in m.assignment}
        lag = offsets.lag_rows(committed, log_end, owner)
        history = self._sample_lag(gid, lag)
        return GroupPage(
            group_id=gid,
            state=g.state,
            group_type=g.group_type,
            protocol=g.protocol,
            generation=g.generation_id,
            coordinator=g.coordinator,
            members=[
                MemberRow(m.member_id, m.client_id, m.host, m.group_instance_id, list(m.assignment))
                for m in g.members
            ],
            lag=lag,
            history=history,
        )

    def _sample_lag(self, gid: str, rows: list[offsets.LagRow]) -> list[charts.LagSample]:
        """Record ``gid``'s lag now, total and per partition (at most one sample a
        second); its samples."""
        now = int(time.time() * 1000)
        by = {f"{r.topic}-{r.partition}": r.lag for r in rows if r.lag is not None}
        by[charts.TOTAL] = sum(by.values())
        with self._lock:
            samples = self._lag.get(gid)
            if samples is None:
                if len(self._lag) >= 1000:  # forget the group seen longest ago
                    self._lag.pop(next(iter(self._lag)))
                samples = self._lag[gid] = collections.deque(maxlen=LAG_SAMPLES)
            if not samples or now - samples[-1][0] >= LAG_SAMPLE_EVERY_MS:
                samples.append((now, by))
            return list(samples)

    def security(self) -> SecurityPage:
        """The ACLs and SCRAM users this principal may describe (DESCRIBE on the cluster)."""
        acls: list[AclRow] = []
        acls_error = users_error = ""
        try:
            for b in sorted(self.admin.describe_acls(AclBindingFilter.any()), key=str):
                p, e = b.pattern, b.entry
                acls.append(
                    AclRow(
                        p.resource_type.name,
                        p.name,
                        p.pattern_type.name,
                        e.principal,
                        e.host,
                        e.operation.name,
                        e.permission_type.name,
                    )
                )
        except errors.HeadwaterError as exc:
            acls_error = str(exc)
        users: list[UserRow] = []
        try:
            described = self.admin.describe_user_scram_credentials(raise_on_error=False)
            for user, d in sorted(described.items()):
                if isinstance(d, errors.HeadwaterError):
                    users.append(UserRow(user, str(d)))
                else:
                    mechs = ", ".join(
                        f"{c.mechanism} ({c.iterations} iterations)" for c in d.credential_infos
                    )
                    names = tuple(c.mechanism for c in d.credential_infos)
                    users.append(UserRow(user, mechs, names))
        except errors.HeadwaterError as exc:
            users_error = str(exc)
        return SecurityPage(acls, acls_error, users, users_error)

    # -- changing ----------------------------------------------------------------------

    def create_topic(self, form: inputs.NewTopicForm) -> None:
        self.admin.create_topic(form.name, form.partitions, form.replication_factor, form.configs)

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topics([name])

    def alter_configs(self, name: str, change: inputs.ConfigChange) -> None:
        self.admin.alter_topic_configs(name, set_configs=change.set, delete_configs=change.delete)

    def delete_group(self, gid: str) -> None:
        self.admin.delete_groups([gid])

    def add_partitions(self, name: str, total: int) -> None:
        self.admin.create_partitions({name: total})

    def produce(self, name: str, form: inputs.ProduceForm) -> tuple[int, int]:
        """Send one record and wait for it: (partition, offset)."""
        with self._lock:
            if self._producer is None:
                # Not idempotent: records sent one by one by hand need no sequence numbers,
                # and a principal allowed to write only some topics may not be allowed an
                # idempotent producer id (IDEMPOTENT_WRITE), which would stall every send.
                self._producer = Producer(
                    self.options.bootstrap,
                    enable_idempotence=False,
                    linger_ms=0,
                    max_block_ms=self.options.request_timeout_ms,
                    request_timeout_ms=self.options.request_timeout_ms,
                    security=self.options.security,
                )
            producer = self._producer
        future = producer.send(
            name, form.value, key=form.key, headers=form.headers or None, partition=form.partition
        )
        wait_s = self.options.request_timeout_ms / 1000
        try:
            meta = future.result(timeout=wait_s)
        except TimeoutError:
            raise errors.RequestTimedOutError(
                f"the record was not acknowledged within {wait_s:g} s (it may still be written)"
            ) from None
        return meta.partition, meta.offset

    def create_acl(self, binding: AclBinding) -> None:
        """Create one ACL (ALTER on the cluster); the broker's refusal is raised."""
        (error,) = self.admin.create_acls([binding])
        if error is not None:
            raise error

    def delete_acl(self, binding: AclBinding) -> int:
        """Delete exactly this ACL (ALTER on the cluster): how many were deleted (0 or 1)."""
        p, e = binding.pattern, binding.entry
        exact = AclBindingFilter(
            ResourcePatternFilter(p.resource_type, p.name, p.pattern_type),
            AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type),
        )
        (deleted,) = self.admin.delete_acls([exact])
        return len(deleted)

    def set_scram_user(self, form: inputs.ScramForm) -> None:
        """Create or replace ``form.user``'s credential for ``form.mechanism``."""
        self.admin.alter_user_scram_credentials(
            upsertions=[ScramUpsertion(form.user, form.mechanism, form.iterations, form.password)]
        )

    def delete_scram_user(self, user: str, mechanism: str) -> None:
        """Delete ``user``'s credential for ``mechanism`` (RESOURCE_NOT_FOUND if none)."""
        self.admin.alter_user_scram_credentials(deletions=[ScramDeletion(user, mechanism)])

    def reset_offsets(self, gid: str, form: inputs.ResetForm) -> list[offsets.ResetRow]:
        """Plan a reset of ``gid``'s offsets on ``form.topic``, and commit it when
        ``form.execute``; refused while the group has members, whose next commit would
        overwrite it."""
        g = self.admin.describe_groups([gid])[gid]
        if g.state not in ("Empty", "Dead"):
            raise errors.for_code(
                errors.ErrorCode.NON_EMPTY_GROUP,
                f"group {gid!r} has active members ({g.state}); stop them before resetting "
                "its offsets",
            )
        desc = self.admin.describe_topics([form.topic])[form.topic]
        tps = [TopicPartition(form.topic, p.partition) for p in desc.partitions]
        committed = {
            tp: om.offset
            for tp, om in self.admin.list_consumer_group_offsets(gid, tps).items()
            if om.offset >= 0
        }
        by_time = (
            self._offsets(tps, form.amount) if form.spec in ("to-datetime", "by-duration") else {}
        )
        earliest = self._offsets(tps, "earliest")
        latest = self._offsets(tps, "latest")
        unknown = [tp.partition for tp in tps if tp not in earliest or tp not in latest]
        if unknown:
            raise errors.LeaderNotAvailableError(
                f"partitions {unknown} of {form.topic!r} have no leader to ask for their "
                "offsets; try again"
            )
        plan = offsets.plan_reset(
            form, tps, earliest=earliest, latest=latest, committed=committed, by_time=by_time
        )
        if form.execute:
            self.admin.alter_consumer_group_offsets(
                gid, {TopicPartition(form.topic, r.partition): r.new for r in plan}
            )
        return plan
