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

from headwater import errors
from headwater.coordination import model
from headwater.coordination.config_changes import (
    CONFIG_CHANGES,
    ConfigChangeListener,
    notify_entity_change,
)
from headwater.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
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
        self._changes = ConfigChangeListener(
            client,
            name="scram-credentials",
            reload_all=self.reload_all,
            on_changes=self._on_changes,
        )

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._lock:
            return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> dict[str, UserCredentials]:
        with self._lock:
            return {user: dict(creds) for user, creds in self._credentials.items()}

    def start(self) -> None:
        """Load every user (synchronously), then follow the notifications."""
        ensure_paths(self._client)
        self._changes.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._changes.stop(timeout_s)

    def process_notifications(self) -> None:
        """Re-read the users named by the notifications not processed yet (worker thread)."""
        self._changes.process_notifications()

    def _on_changes(self, notifications: list[bytes]) -> None:
        for data in notifications:
            user = decode_change_notification(data) if data else None
            if user is not None:
                self._reload(user)

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
