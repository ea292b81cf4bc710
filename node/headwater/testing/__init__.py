"""headwater.testing: run real Headwater clusters in tests.

``Cluster`` starts ZooKeeper and N broker processes on 127.0.0.1 and injects
real faults (SIGKILL, SIGSTOP, SIGTERM, ZooKeeper session expiry);
``ZooKeeperServer`` is the standalone ZooKeeper it uses.
"""

from headwater.testing.cluster import DEFAULT_OVERRIDES, BrokerProcess, Cluster, is_healthy
from headwater.testing.zookeeper import ZooKeeperServer, free_port

__all__ = [
    "DEFAULT_OVERRIDES",
    "BrokerProcess",
    "Cluster",
    "ZooKeeperServer",
    "free_port",
    "is_healthy",
]
