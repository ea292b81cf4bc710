"""Following ZooKeeper's config change notifications, as Kafka's
``ZkNodeChangeNotificationListener`` does for its ``ZkConfigManager``.

A writer of an entity's config (a user's SCRAM credentials, a quota) adds a sequential
znode ``/config/changes/config_change_NNNNNNNNNN`` naming the entity, and purges the
notifications older than 15 minutes.  Each broker's :class:`ConfigChangeListener` hands
every notification it has not seen yet, in sequence order, to its owner's
``on_changes``; after a new ZooKeeper session (notifications may have been purged while
the broker was away) the owner's ``reload_all`` reads everything again.

Invariants: a notification is handed over until ``on_changes`` returns for it, then
never again, and never before a lower-numbered one; ``reload_all`` runs before the
first notification is handed over.

Threads: ``start``/``stop`` from the owner; the watch and session callbacks (kazoo's
thread) only wake the listener's worker thread, which makes every ZooKeeper read and
calls ``reload_all`` and ``on_changes``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

log = logging.getLogger(__name__)

CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
"""Kafka's ``ZkConfigManager`` change-notification expiry."""


def sequence(name: str) -> int:
    """The sequence number of a notification znode's name (-1 when it has none)."""
    try:
        return int(name[len(CHANGE_PREFIX) :])
    except ValueError:
        return -1


def notify_entity_change(client: KazooClient, notification: bytes, *, now_ms: int) -> None:
    """Add a change notification (``{"version":2,"entity_path":...}``) and purge
    expired ones."""
    client.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", notification, sequence=True, makepath=True)
    try:
        names = client.get_children(CONFIG_CHANGES)
    except NoNodeError:
        return
    for name in names:
        if not name.startswith(CHANGE_PREFIX):
            continue
        try:
            stat = client.exists(f"{CONFIG_CHANGES}/{name}")
            if stat is not None and now_ms - stat.ctime > NOTIFICATION_EXPIRY_MS:
                client.delete(f"{CONFIG_CHANGES}/{name}")
        except NoNodeError:
            pass  # another writer purged it


class ConfigChangeListener:
    """Hands new change notifications to ``on_changes`` (their bodies, oldest first;
    ``b""`` for one purged before it was read) on a worker thread named ``name``."""

    def __init__(
        self,
        client: KazooClient,
        *,
        name: str,
        reload_all: Callable[[], None],
        on_changes: Callable[[list[bytes]], None],
    ) -> None:
        self._client = client
        self._name = name
        self._reload_all = reload_all
        self._on_changes = on_changes
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._last_seen = -1
        self._session_lost = False
        self._reload_all_next = False
        self._worker: threading.Thread | None = None

    def start(self) -> None:
        """Skip the notifications that exist now, ``reload_all`` (synchronously), then
        follow new ones."""
        self._client.ensure_path(CONFIG_CHANGES)
        names = self._client.get_children(CONFIG_CHANGES)
        self._last_seen = max((sequence(n) for n in names), default=-1)
        self._reload_all()
        self._client.add_listener(self._on_state)
        ChildrenWatch(self._client, CONFIG_CHANGES, self._on_children)
        self._worker = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopped.set()
        self._wake.set()
        self._client.remove_listener(self._on_state)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout_s)

    def process_notifications(self) -> None:
        """Hand over the notifications not seen yet (worker thread)."""
        names = sorted(
            (n for n in self._client.get_children(CONFIG_CHANGES) if n.startswith(CHANGE_PREFIX)),
            key=sequence,
        )
        bodies: list[bytes] = []
        last = self._last_seen
        for name in names:
            seq = sequence(name)
            if seq <= self._last_seen:
                continue
            try:
                data, _ = self._client.get(f"{CONFIG_CHANGES}/{name}")
            except NoNodeError:
                data = b""
            bodies.append(data)
            last = seq
        if bodies:
            self._on_changes(bodies)  # if it raises, the next wake-up hands them over again
            self._last_seen = last

    def _on_children(self, _children: list[str]) -> bool | None:
        """Kazoo's thread: only wake the worker (False stops the watch)."""
        if self._stopped.is_set():
            return False
        self._wake.set()
        return None

    def _on_state(self, state: str) -> None:
        """Kazoo's thread: after a new session, have everything read again."""
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._reload_all_next = True
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                if self._reload_all_next:
                    self._reload_all_next = False
                    self._reload_all()
                self.process_notifications()
            except Exception as exc:  # a lost connection: the next wake-up reads again
                log.warning("%s: reading config changes failed: %r", self._name, exc)
