"""Coordination settings, with Kafka's config names and the unit in each field's name."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from headwater.coordination.zk_security import ZkAuth


@dataclasses.dataclass(frozen=True)
class CoordinationSettings:
    zookeeper_connect: str = "127.0.0.1:2181/headwater"
    """``zookeeper.connect``: ``host:port[,...][/chroot]`` (chroot default ``/headwater``)."""
    zookeeper_session_timeout_ms: int = 18000
    """``zookeeper.session.timeout.ms``: ephemeral znodes vanish this long after a broker dies."""
    zookeeper_connection_timeout_ms: int = 18000
    """``zookeeper.connection.timeout.ms``: how long startup waits for a connection."""
    num_partitions: int = 1
    """``num.partitions``: used when a CreateTopics request says -1."""
    default_replication_factor: int = 1
    """``default.replication.factor``: used when a CreateTopics request says -1."""
    unclean_leader_election_enable: bool = False
    """``unclean.leader.election.enable``: let an out-of-sync replica lead (loses data)."""
    auto_leader_rebalance_enable: bool = True
    """``auto.leader.rebalance.enable``: periodically move leadership back to preferred replicas."""
    leader_imbalance_check_interval_s: float = 300.0
    """``leader.imbalance.check.interval.seconds``."""
    delete_topic_enable: bool = True
    """``delete.topic.enable``."""
    zookeeper_set_acl: bool = False
    """``zookeeper.set.acl``: create znodes with Kafka's ACLs (needs the digest identity)."""
    zookeeper_digest_username: str = ""
    """``zookeeper.digest.username``: the brokers' identity in ZooKeeper's digest scheme."""
    zookeeper_digest_password: str = dataclasses.field(default="", repr=False)
    """``zookeeper.digest.password`` (sensitive)."""

    @property
    def zk_auth(self) -> ZkAuth | None:
        """The digest identity, or None when no ``zookeeper.digest.username`` is set."""
        if not self.zookeeper_digest_username:
            return None
        return ZkAuth(
            self.zookeeper_digest_username,
            self.zookeeper_digest_password,
            set_acl=self.zookeeper_set_acl,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> CoordinationSettings:
        """Build from Kafka-named properties; unknown keys are ignored (they belong elsewhere)."""
        d = cls()

        def get(name: str, default: str) -> str:
            return str(props.get(name, default))

        def flag(name: str, default: bool) -> bool:
            return get(name, str(default)).strip().lower() == "true"

        return cls(
            zookeeper_connect=get("zookeeper.connect", d.zookeeper_connect),
            zookeeper_session_timeout_ms=int(
                get("zookeeper.session.timeout.ms", str(d.zookeeper_session_timeout_ms))
            ),
            zookeeper_connection_timeout_ms=int(
                get("zookeeper.connection.timeout.ms", str(d.zookeeper_connection_timeout_ms))
            ),
            num_partitions=int(get("num.partitions", str(d.num_partitions))),
            default_replication_factor=int(
                get("default.replication.factor", str(d.default_replication_factor))
            ),
            unclean_leader_election_enable=flag(
                "unclean.leader.election.enable", d.unclean_leader_election_enable
            ),
            auto_leader_rebalance_enable=flag(
                "auto.leader.rebalance.enable", d.auto_leader_rebalance_enable
            ),
            leader_imbalance_check_interval_s=float(
                get(
                    "leader.imbalance.check.interval.seconds",
                    str(d.leader_imbalance_check_interval_s),
                )
            ),
            delete_topic_enable=flag("delete.topic.enable", d.delete_topic_enable),
            zookeeper_set_acl=flag("zookeeper.set.acl", d.zookeeper_set_acl),
            zookeeper_digest_username=get("zookeeper.digest.username", ""),
            zookeeper_digest_password=get("zookeeper.digest.password", ""),
        )
