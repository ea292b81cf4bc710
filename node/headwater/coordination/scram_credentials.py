"""SCRAM credentials in ZooKeeper, as Kafka stores them in ZooKeeper mode.

Layout (under the cluster's chroot)::

    /config/users/<sanitized user>
        {"version":1,"config":{"SCRAM-SHA-512":
            "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}
    /config/changes/config_change_NNNNNNNNNN   (sequential)
        {"version":2,"entity_path":"users/<sanitized user>"}

The user name is sanitized as Kafka's ``Sanitizer`` does (URL-encoding, so a
``/`` cannot escape the entity path).  Other keys of a user's config (Kafka
keeps quotas there) are preserved by every write.  Writes are conditional on
the znode version and retried a bounded number of times, so two concurrent
alterations of one user never lose each other's mechanisms.

Each write adds a change notification; every broker's :class:`ScramCredentialCache`
watches ``/config/changes`` and re-reads the users named by notifications it has
not seen, as Kafka's ``ZkConfigManager`` does.  The writer deletes notifications
older than 15 minutes (Kafka's ``changeExpirationMs``).

What is stored is never the password: only the salt, the iteration count and the
two derived keys (:class:`~headwater.security.scram.ScramCredential`).  Nothing
here logs a credential.

Threads: the functions are synchronous kazoo calls for any thread but kazoo's
callback thread.  The cache's watch callback only wakes its own worker thread,
which does the reads.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from headwater import errors
from headwater.coordination import model
from headwater.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
"""Kafka's ``ZkConfigManager`` change-notification expiry."""
WRITE_ATTEMPTS = 10

UserCredentials = dict[ScramMechanism, ScramCredential]


def sanitize(user: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode, and ``*`` as ``%2A``."""
    return urllib.parse.quote(user, safe="").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def user_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize(user)}"


def decode_user_credentials(config: Mapping[str, str], *, user: str) -> UserCredentials:
    """The SCRAM entries of a user's config; a malformed entry is skipped with a warning."""
    out: UserCredentials = {}
    for mechanism in ScramMechanism:
        text = config.get(mechanism.value)
        if text is None:
            continue
        try:
            out[mechanism] = ScramCredential.from_config(text)
        except ValueError as exc:  # the message never holds the keys
            log.warning("ignoring %s credential of user %r: %s", mechanism.value, user, exc)
    return out


def encode_change_notification(user: str) -> bytes:
    return json.dumps(
        {"version": 2, "entity_path": f"users/{sanitize(user)}"}, separators=(",", ":")
    ).encode()


def decode_change_notification(data: bytes) -> str | None:
    """The user a notification names, or None if it is about another entity type (a
    client id, or a user's client id: ``users/<user>/clients/<client-id>``)."""
    try:
        entity = str(json.loads(data)["entity_path"])
    except (ValueError, KeyError, TypeError):
        return None
    kind, _, name = entity.partition("/")
    return desanitize(name) if kind == "users" and name and "/" not in name else None


# -- reads and writes (any thread but kazoo's) -------------------------------------------------


def ensure_paths(client: KazooClient) -> None:
    client.ensure_path(CONFIG_USERS)
    client.ensure_path(CONFIG_CHANGES)


def list_users(client: KazooClient) -> list[str]:
    try:
        return sorted(desanitize(name) for name in client.get_children(CONFIG_USERS))
    except NoNodeError:
        return []


def read_user_config(client: KazooClient, user: str) -> dict[str, str]:
    try:
        data, _ = client.get(user_path(user))
    except NoNodeError:
        return {}
    return model.decode_config(data)


def read_user_credentials(client: KazooClient, user: str) -> UserCredentials:
    return decode_user_credentials(read_user_config(client, user), user=user)


def alter_user_credentials(
    client: KazooClient,
    user: str,
    *,
    upsertions: Mapping[ScramMechanism, ScramCredential] = {},
    deletions: Iterable[ScramMechanism] = (),
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> None:
    """Set and delete ``user``'s credentials in one conditional write, then notify brokers.

    Deleting a mechanism the user has no credential for raises
    :class:`~headwater.errors.ResourceNotFoundError` and writes nothing (Kafka's
    answer).  Other keys of the user's config are kept.
    """
    deletions = frozenset(deletions)
    path = user_path(user)
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = client.get(path)
            config, version = model.decode_config(data), stat.version
        except NoNodeError:
            config, version = {}, -1
        for mechanism in deletions:
            if mechanism.value not in config:
                raise errors.ResourceNotFoundError(
                    f"attempt to delete a user credential that does not exist: user {user!r} "
                    f"has no {mechanism.value} credential"
                )
            del config[mechanism.value]
        for mechanism, credential in upsertions.items():
            config[mechanism.value] = credential.to_config()
        encoded = model.encode_config(config)
        try:
            if version < 0:
                client.create(path, encoded, makepath=True)
            else:
                client.set(path, encoded, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # another writer got there first: read again
        break
    else:
        raise errors.RequestTimedOutError(
            f"user {user!r}'s credentials kept changing under {WRITE_ATTEMPTS} attempts to alter"
        )
    notify_change(client, user, now_ms=now_ms())


def notify_change(client: KazooClient, user: str, *, now_ms: int) -> None:
    """Add a change notification for ``user`` and purge expired ones."""
    notify_entity_change(client, encode_change_notification(user), now_ms=now_ms)


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


def _sequence(name: str) -> int:
    try:
        return int(name[len(CHANGE_PREFIX) :])
    except ValueError:
        return -1


# -- the brokers' cache ------------------------------------------------------------------------


class ScramCredentialCache:
    """Every user's SCRAM credentials, kept fresh by the change notifications.

    Invariants: :meth:`get` never calls ZooKeeper (the SASL exchange reads it on
    the event loop); after a notification for a user has been processed, the
    cache holds exactly that user's stored credentials.  ``on_removed(user,
    mechanism)`` runs on the cache's worker thread when a credential goes away,
    so sessions authenticated with it can be revoked.

    Threads: ``start``/``stop`` from the owner; ``get`` from any thread; one
    worker thread does all the reads; the watch callback only wakes it.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        on_removed: Callable[[str, ScramMechanism], None] | None = None,
    ) -> None:
        self._client = client
        self._on_removed = on_removed
        self._credentials: dict[str, UserCredentials] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._last_seen = -1
        self._session_lost = False
        self._reload_all_next = False
        self._worker: threading.Thread | None = None

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._lock:
            return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> dict[str, UserCredentials]:
        with self._lock:
            return {user: dict(creds) for user, creds in self._credentials.items()}

    def start(self) -> None:
        """Load every user (synchronously), then follow the notifications."""
        ensure_paths(self._client)
        names = self._client.get_children(CONFIG_CHANGES)
        self._last_seen = max((_sequence(n) for n in names), default=-1)
        self.reload_all()
        self._client.add_listener(self._on_state)
        ChildrenWatch(self._client, CONFIG_CHANGES, self._on_children)
        self._worker = threading.Thread(target=self._run, name="scram-credentials", daemon=True)
        self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopped.set()
        self._wake.set()
        self._client.remove_listener(self._on_state)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout_s)

    def _on_children(self, _children: list[str]) -> bool | None:
        """Kazoo's thread: only wake the worker (False stops the watch)."""
        if self._stopped.is_set():
            return False
        self._wake.set()
        return None

    def _on_state(self, state: str) -> None:
        """Kazoo's thread: after a new session, read every user again (notifications
        may have been purged while this broker was away)."""
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
                    self.reload_all()
                self.process_notifications()
            except Exception as exc:  # a lost connection: the next wake-up reads again
                log.warning("reading SCRAM credential changes failed: %r", exc)

    def process_notifications(self) -> None:
        """Re-read the users named by the notifications not processed yet (worker thread)."""
        names = sorted(
            (n for n in self._client.get_children(CONFIG_CHANGES) if n.startswith(CHANGE_PREFIX)),
            key=_sequence,
        )
        for name in names:
            seq = _sequence(name)
            if seq <= self._last_seen:
                continue
            try:
                data, _ = self._client.get(f"{CONFIG_CHANGES}/{name}")
            except NoNodeError:
                data = b""
            user = decode_change_notification(data) if data else None
            if user is not None:
                self._reload(user)
            self._last_seen = seq

    def reload_all(self) -> None:
        """Read every user with a config, and drop cached users that no longer have one."""
        with self._lock:
            cached = set(self._credentials)
        for user in sorted(cached | set(list_users(self._client))):
            self._reload(user)

    def _reload(self, user: str) -> None:
        fresh = read_user_credentials(self._client, user)
        with self._lock:
            old = self._credentials.get(user, {})
            if fresh:
                self._credentials[user] = fresh
            else:
                self._credentials.pop(user, None)
        removed = [m for m in old if m not in fresh]
        if old != fresh:
            log.info(
                "SCRAM credentials of user %r now: %s",
                user,
                ", ".join(f"{m.value} ({c.iterations} iterations)" for m, c in fresh.items())
                or "none",
            )
        if self._on_removed is not None:
            for mechanism in removed:
                self._on_removed(user, mechanism)


class ScramCredentialStore:
    """The credential reads and writes of one ZooKeeper client, for the admin RPCs and the
    CLI's ``--zookeeper`` bootstrap path.  Methods are blocking kazoo calls (not kazoo's
    callback thread)."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    def list_users(self) -> list[str]:
        return list_users(self.client)

    def read(self, user: str) -> UserCredentials:
        return read_user_credentials(self.client, user)

    def alter(
        self,
        user: str,
        *,
        upsertions: Mapping[ScramMechanism, ScramCredential] = {},
        deletions: Iterable[ScramMechanism] = (),
    ) -> None:
        alter_user_credentials(self.client, user, upsertions=upsertions, deletions=deletions)
