"""ZooKeeper sessions: ``zookeeper.connect`` parsing, connecting, and expiring a session for real.

``zookeeper.connect`` is Kafka's ``host:port[,host:port...][/chroot]``.  The
chroot is created (with an unchrooted client) before the client is switched
to it, because kazoo refuses a chroot that does not exist yet.

:func:`expire_session` expires a client's session the way ZooKeeper really
does it rather than faking the state change: it opens a second connection
with the same session id and password and closes it, which ends the session
on the server; the original client then sees ``SESSION_EXPIRED`` (kazoo state
``LOST``) and starts a new session.  Tests and the cluster harness use it.
"""

from __future__ import annotations

import dataclasses
import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from headwater.coordination import zk_security
from headwater.coordination.zk_security import ZkAuth

DEFAULT_CHROOT = "/headwater"


@dataclasses.dataclass(frozen=True)
class ZkConnectString:
    hosts: str
    chroot: str

    @classmethod
    def parse(cls, connect: str, *, default_chroot: str = DEFAULT_CHROOT) -> ZkConnectString:
        """Split ``host:port,.../chroot``; an absent chroot means ``default_chroot``."""
        connect = connect.strip()
        if not connect:
            raise ValueError("zookeeper.connect is empty")
        slash = connect.find("/")
        if slash < 0:
            hosts, chroot = connect, default_chroot
        else:
            hosts, chroot = connect[:slash], connect[slash:].rstrip("/")
        if not hosts:
            raise ValueError(f"zookeeper.connect has no hosts: {connect!r}")
        if chroot and not chroot.startswith("/"):
            chroot = "/" + chroot
        return cls(hosts=hosts, chroot=chroot)

    def __str__(self) -> str:
        return f"{self.hosts}{self.chroot}"


def connect(
    connect_string: str,
    *,
    session_timeout_ms: int = 18000,
    connection_timeout_ms: int = 15000,
    default_chroot: str = DEFAULT_CHROOT,
    auth: ZkAuth | None = None,
) -> KazooClient:
    """Start a KazooClient on ``zookeeper.connect``'s chroot (created if missing).

    Kazoo retries lost connections forever on its own (``connection_retry``);
    the caller watches states with ``client.add_listener``.  ``auth`` adds the
    digest identity and, with ``set_acl``, Kafka's znode ACLs
    (:mod:`headwater.coordination.zk_security`).
    """
    parsed = ZkConnectString.parse(connect_string, default_chroot=default_chroot)
    client = zk_security.client_class(auth)(
        hosts=parsed.hosts,
        **zk_security.client_kwargs(auth),
        timeout=session_timeout_ms / 1000.0,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
    )
    try:
        client.start(timeout=connection_timeout_ms / 1000.0)
        if parsed.chroot:
            client.ensure_path(parsed.chroot)
            client.chroot = parsed.chroot
    except BaseException:
        client.stop()
        client.close()
        raise
    return client


def close(client: KazooClient) -> None:
    """Stop and close a client; its ephemeral znodes go away at once. Idempotent."""
    try:
        client.stop()
    finally:
        client.close()


def expire_session(client: KazooClient, *, timeout_s: float = 15.0) -> None:
    """Expire ``client``'s ZooKeeper session for real, and wait until it has a new one.

    Raises ``TimeoutError`` if the client did not see the expiry and reconnect
    within ``timeout_s``.
    """
    lost = threading.Event()
    reconnected = threading.Event()

    def listener(state: str) -> bool:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()
            return True  # remove the listener
        return False

    session_id, password = client.client_id
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    client.add_listener(listener)
    try:
        twin = KazooClient(
            hosts=hosts, client_id=(session_id, password), timeout=client._session_timeout / 1000.0
        )
        try:
            twin.start(timeout=timeout_s)
        finally:
            close(twin)
        if not lost.wait(timeout_s) or not reconnected.wait(timeout_s):
            raise TimeoutError(f"session 0x{session_id:x} did not expire and reconnect")
    finally:
        client.remove_listener(listener)
