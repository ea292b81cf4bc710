"""ACLs in ZooKeeper, in Kafka's layout, and the watch that keeps every broker's copy fresh.

Layout under the cluster's chroot (Kafka's ZooKeeper mode)::

    /kafka-acl/<ResourceType>/<name>                       LITERAL ACLs of one resource
    /kafka-acl-extended/prefixed/<ResourceType>/<name>     PREFIXED ACLs of one prefix
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_NNNNNNNNNN              "Topic:orders" (literal change)
    /kafka-acl-extended-changes/acl_changes_NNNNNNNNNN     {"version":1,"resourceType":"Topic",
                                                            "name":"ord","patternType":"PREFIXED"}

Writes are read-modify-write on one resource znode, committed in a ZooKeeper
transaction conditional on the znode version read (or on its absence), together
with the change notification; a concurrent writer makes the transaction fail and
the update is retried on fresh data (bounded), so no update is lost.  A resource
left without entries is deleted, as Kafka does.

:class:`AclWatcher` loads every ACL once, then follows the change notifications
(a ChildrenWatch per notification root; kazoo's thread only enqueues) on its own
worker thread, re-reading just the resources named, and hands each new complete
mapping to ``on_change``.  After a lost session it reloads everything.  Notifications
older than :data:`CHANGE_EXPIRATION_MS` are deleted by writers (Kafka keeps 15 min).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from headwater import errors
from headwater.security.acls import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_from_zk,
    permission_from_zk,
    resource_type_from_zk,
)

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
MAX_WRITE_ATTEMPTS = 20
"""Conditional-write retries of one update before giving up (contention is rare)."""

ACL_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)

AclMap = dict[ResourcePattern, frozenset[AccessControlEntry]]

AccessDenied = NoAuthError
"""What ZooKeeper raises to a client without the brokers' identity on a
``zookeeper.set.acl`` cluster (so callers outside coordination need not import kazoo)."""


# -- the codec (pure) ---------------------------------------------------------------------


def resource_root(pattern_type: PatternType) -> str:
    return LITERAL_ROOT if pattern_type is PatternType.LITERAL else PREFIXED_ROOT


def changes_root(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_CHANGES


def acl_path(pattern: ResourcePattern) -> str:
    return f"{resource_root(pattern.pattern_type)}/{pattern.resource_type.zk_name}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.zk_name,
            "operation": e.operation.zk_name,
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """Kafka's ACL JSON -> entries; an empty znode is no ACL.  ValueError if malformed."""
    if not data:
        return frozenset()
    doc = json.loads(data)
    return frozenset(
        AccessControlEntry(
            principal=a["principal"],
            host=a["host"],
            operation=operation_from_zk(a["operation"]),
            permission_type=permission_from_zk(a["permissionType"]),
        )
        for a in doc.get("acls", [])
    )


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.zk_name}:{pattern.name}".encode()
    return json.dumps(
        {
            "version": 1,
            "resourceType": pattern.resource_type.zk_name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        },
        separators=(",", ":"),
    ).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if root == LITERAL_CHANGES:
        kind, _, name = text.partition(":")
        return ResourcePattern(resource_type_from_zk(kind), name, PatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(
        resource_type_from_zk(doc["resourceType"]), doc["name"], PatternType[doc["patternType"]]
    )


def change_sequence(child: str) -> int:
    return int(child[len(CHANGE_PREFIX) :]) if child.startswith(CHANGE_PREFIX) else -1


# -- the store ------------------------------------------------------------------------------


class AclZkStore:
    """Reads and conditional writes of ACL znodes over one (chrooted) KazooClient.

    Synchronous kazoo calls: call from any thread but kazoo's callback thread.
    """

    def __init__(self, client: KazooClient, *, wall_s: Callable[[], float] = time.time) -> None:
        self.client = client
        self._now_s = wall_s

    def ensure_paths(self) -> None:
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for rtype in ACL_TYPES:
                self.client.ensure_path(f"{resource_root(pattern_type)}/{rtype.zk_name}")
            self.client.ensure_path(changes_root(pattern_type))

    def get(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The entries of one resource and the znode version (-1: no znode)."""
        try:
            data, stat = self.client.get(acl_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return _decode_or_empty(pattern, data), stat.version

    def load_all(self) -> AclMap:
        out: AclMap = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for rtype in ACL_TYPES:
                try:
                    names = self.client.get_children(
                        f"{resource_root(pattern_type)}/{rtype.zk_name}"
                    )
                except NoNodeError:
                    continue
                for name in names:
                    try:
                        pattern = ResourcePattern(rtype, name, pattern_type)
                    except ValueError:
                        log.warning("ignoring ACL znode with a bad name %r", name)
                        continue
                    entries, _ = self.get(pattern)
                    if entries:
                        out[pattern] = entries
        return out

    def update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Apply ``change`` to one resource's entries atomically; returns (before, after).

        Retried on a concurrent write; nothing is written when ``change`` changes nothing.
        """
        if "/" in pattern.name or pattern.name in (".", ".."):
            raise errors.InvalidRequestError(
                f"an ACL resource name cannot contain '/' or be '.' or '..': {pattern.name!r}"
            )
        path = acl_path(pattern)
        for _ in range(MAX_WRITE_ATTEMPTS):
            before, version = self.get(pattern)
            after = change(before)
            if after == before:
                return before, after
            tx = self.client.transaction()
            if version < 0:
                tx.create(path, encode_acls(after))
            elif after:
                tx.set_data(path, encode_acls(after), version)
            else:
                tx.delete(path, version)
            tx.create(
                f"{changes_root(pattern.pattern_type)}/{CHANGE_PREFIX}",
                encode_change(pattern),
                sequence=True,
            )
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                self._purge_old_changes(pattern.pattern_type)
                return before, after
            log.debug("ACL update of %s raced another writer (%r); retrying", pattern, results)
        raise errors.UnknownServerError(
            f"the ACLs of {pattern} kept changing under {MAX_WRITE_ATTEMPTS} attempts; retry"
        )

    def _purge_old_changes(self, pattern_type: PatternType) -> None:
        root = changes_root(pattern_type)
        cutoff_ms = self._now_s() * 1000.0 - CHANGE_EXPIRATION_MS
        try:
            children = sorted(self.client.get_children(root), key=change_sequence)
        except NoNodeError:
            return
        for child in children[:-1]:  # the newest stays, so sequence numbers keep rising
            try:
                stat = self.client.exists(f"{root}/{child}")
                if stat is None:
                    continue
                if stat.ctime >= cutoff_ms:
                    return
                self.client.delete(f"{root}/{child}")
            except (NoNodeError, NotEmptyError):
                continue


def _decode_or_empty(pattern: ResourcePattern, data: bytes) -> frozenset[AccessControlEntry]:
    try:
        return decode_acls(data)
    except (ValueError, KeyError, TypeError) as exc:
        log.error("ignoring the unreadable ACLs of %s: %r", pattern, exc)
        return frozenset()


# -- the watch ------------------------------------------------------------------------------


class AclWatcher:
    """Every ACL of the cluster, kept fresh by change notifications (module docstring).

    ``on_change(acls)`` is called on the watcher's worker thread with the whole new
    mapping (never mutated afterwards) after the initial load and after every change.
    """

    _FULL = "full"

    def __init__(self, store: AclZkStore, on_change: Callable[[Mapping[Any, Any]], None]) -> None:
        self._store = store
        self._on_change = on_change
        self._events: queue.Queue[str | None] = queue.Queue()
        self._acls: AclMap = {}
        self._seen: dict[str, int] = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._thread: threading.Thread | None = None
        self._lost = False
        self._lock = threading.Lock()  # one reader of ZooKeeper at a time updates _acls
        self.loaded = threading.Event()

    def start(self) -> None:
        """Load everything synchronously, then follow changes on a daemon thread."""
        self._store.ensure_paths()
        with self._lock:
            self._full_reload()
        self._thread = threading.Thread(target=self._run, name="acl-watcher", daemon=True)
        self._thread.start()
        client = self._store.client
        client.add_listener(self._state_listener)
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            ChildrenWatch(client, root, self._children_watch(root))

    def stop(self) -> None:
        self._store.client.remove_listener(self._state_listener)
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    @property
    def acls(self) -> AclMap:
        return self._acls

    def _children_watch(self, root: str) -> Callable[[list[str]], bool | None]:
        def on_children(_children: list[str]) -> bool | None:
            if self._thread is None or not self._thread.is_alive():
                return False
            self._events.put(root)
            return None

        return on_children

    def _state_listener(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            self._events.put(self._FULL)

    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event is None:
                return
            try:
                with self._lock:
                    if event == self._FULL:
                        self._full_reload()
                    else:
                        self._process(event)
            except Exception:  # keep following; the next notification or reload catches up
                log.exception("processing ACL change notifications (%s)", event)

    def _latest(self, root: str) -> tuple[list[str], int]:
        children = self._store.client.get_children(root)
        return children, max((change_sequence(c) for c in children), default=-1)

    def refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        """Re-read these resources now (the writer's own broker need not wait for the watch)."""
        with self._lock:
            self._reload(patterns)

    def _reload(self, patterns: Iterable[ResourcePattern]) -> None:
        acls = dict(self._acls)
        for pattern in patterns:
            entries, _ = self._store.get(pattern)
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
        self._acls = acls
        self._on_change(acls)

    def _full_reload(self) -> None:
        for root in self._seen:
            _, self._seen[root] = self._latest(root)
        self._acls = self._store.load_all()
        self.loaded.set()
        self._on_change(self._acls)

    def _process(self, root: str) -> None:
        children, _ = self._latest(root)
        fresh = sorted(
            (c for c in children if change_sequence(c) > self._seen[root]), key=change_sequence
        )
        if not fresh:
            return
        changed: set[ResourcePattern] = set()
        for child in fresh:
            try:
                data, _ = self._store.client.get(f"{root}/{child}")
                changed.add(decode_change(root, data))
            except NoNodeError:
                continue
            except (ValueError, KeyError) as exc:
                log.warning("ignoring an unreadable ACL change notification %s: %r", child, exc)
        self._seen[root] = change_sequence(fresh[-1])
        self._reload(changed)
