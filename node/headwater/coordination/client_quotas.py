"""Client quotas in ZooKeeper, as Kafka stores them in ZooKeeper mode.

Layout (under the cluster's chroot; names sanitized as Kafka's ``Sanitizer``, the
default entity written ``<default>``)::

    /config/users/<user>                     {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>
    /config/clients/<client-id>
    /config/changes/config_change_NNNNNNNNNN {"version":2,"entity_path":"users/<user>/clients/<c>"}

A user's znode also holds its SCRAM credentials
(:mod:`headwater.coordination.scram_credentials`); every write here keeps the keys it
does not alter, and a znode left with no keys and no children is deleted.  Writes
are conditional on the znode version and retried a bounded number of times.

Each write adds a change notification; every broker's :class:`ClientQuotaWatcher`
watches ``/config/changes`` and, on a notification about a user or client entity,
reads every quota again into its :class:`~headwater.quotas.manager.ClientQuotas`
(the quota znodes are few; reading them all keeps the rule simple: after a
notification, the broker holds exactly what is stored).

Threads: the functions are synchronous kazoo calls for any thread but kazoo's
callback thread; the watcher's callback only wakes its worker thread.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from headwater import errors
from headwater.coordination import model
from headwater.coordination.config_changes import ConfigChangeListener, notify_entity_change
from headwater.coordination.scram_credentials import CONFIG_USERS, desanitize, sanitize
from headwater.quotas.entities import (
    DEFAULT,
    QuotaEntity,
    QuotaKey,
    format_value,
    parse_stored,
)
from headwater.quotas.manager import ClientQuotas

log = logging.getLogger(__name__)

CONFIG_CLIENTS = "/config/clients"
WRITE_ATTEMPTS = 10

Quotas = dict[QuotaEntity, dict[QuotaKey, float]]


def _name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _unname(stored: str) -> str | None:
    return None if stored == DEFAULT else desanitize(stored)


def entity_path(entity: QuotaEntity) -> str:
    """The entity's path below ``/config`` (names sanitized)."""
    parts = []
    if entity.has_user:
        parts.append(f"users/{_name(entity.user)}")
    if entity.has_client_id:
        parts.append(f"clients/{_name(entity.client_id)}")
    return "/".join(parts)


def znode(entity: QuotaEntity) -> str:
    return f"/config/{entity_path(entity)}"


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def _read(client: KazooClient, path: str) -> dict[str, str]:
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return {}
    return model.decode_config(data)


def read_all(client: KazooClient) -> Quotas:
    """Every entity with at least one quota key."""
    found: Quotas = {}

    def add(entity: QuotaEntity, path: str) -> None:
        quotas = parse_stored(_read(client, path))
        if quotas:
            found[entity] = quotas

    for stored_user in _children(client, CONFIG_USERS):
        user = _unname(stored_user)
        add(QuotaEntity.of(user=user), f"{CONFIG_USERS}/{stored_user}")
        clients = f"{CONFIG_USERS}/{stored_user}/clients"
        for stored_client in _children(client, clients):
            add(
                QuotaEntity.of(user=user, client_id=_unname(stored_client)),
                f"{clients}/{stored_client}",
            )
    for stored_client in _children(client, CONFIG_CLIENTS):
        add(QuotaEntity.of(client_id=_unname(stored_client)), f"{CONFIG_CLIENTS}/{stored_client}")
    return found


def alter(
    client: KazooClient,
    entity: QuotaEntity,
    changes: Mapping[str, float | None],
    *,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> None:
    """Set (a value) and remove (None) quota keys of ``entity`` in one conditional write,
    then notify every broker.  ``changes`` must be validated
    (:func:`headwater.quotas.entities.validate_alteration`)."""
    path = znode(entity)
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = client.get(path)
            config, version = model.decode_config(data), stat.version
        except NoNodeError:
            config, version = {}, -1
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = format_value(key, value)
        try:
            if version < 0:
                if not config:
                    break  # removing keys of an entity that has none
                client.create(path, model.encode_config(config), makepath=True)
            elif not config and not _children(client, path):
                client.delete(path, version=version)
            else:
                client.set(path, model.encode_config(config), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            continue  # another writer got there first: read again
        break
    else:
        raise errors.RequestTimedOutError(
            f"the quotas of {entity.describe()} kept changing under {WRITE_ATTEMPTS} attempts"
        )
    _notify(client, entity_path(entity), now_ms())


def _notify(client: KazooClient, path: str, now_ms: int) -> None:
    notify_entity_change(
        client,
        json.dumps({"version": 2, "entity_path": path}, separators=(",", ":")).encode(),
        now_ms=now_ms,
    )


def is_quota_notification(data: bytes) -> bool:
    try:
        path = str(json.loads(data)["entity_path"])
    except (ValueError, KeyError, TypeError):
        return False
    return path.startswith(("users/", "clients/"))


class ClientQuotaStore:
    """The quota reads and writes of one ZooKeeper client, for the admin APIs (blocking
    kazoo calls, not on kazoo's callback thread)."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    def read_all(self) -> Quotas:
        return read_all(self.client)

    def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        alter(self.client, entity, changes)


class ClientQuotaWatcher:
    """Keeps a broker's :class:`ClientQuotas` equal to what ZooKeeper stores.

    Invariant: after a quota change notification has been processed, ``quotas`` holds
    every stored quota.  Threads as :class:`~headwater.coordination.scram_credentials.
    ScramCredentialCache`: one worker thread reads; the watch callback only wakes it.
    """

    def __init__(self, client: KazooClient, quotas: ClientQuotas) -> None:
        self._client = client
        self._quotas = quotas
        self._changes = ConfigChangeListener(
            client, name="client-quotas", reload_all=self.reload, on_changes=self._on_changes
        )

    def start(self) -> None:
        """Load every quota (synchronously), then follow the notifications."""
        self._changes.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._changes.stop(timeout_s)

    def process_notifications(self) -> None:
        self._changes.process_notifications()

    def reload(self) -> None:
        quotas = read_all(self._client)
        if quotas != dict(self._quotas.quotas):
            log.info(
                "client quotas now: %s",
                "; ".join(
                    f"{e.describe()}: "
                    + ", ".join(f"{k.value}={format_value(k, v)}" for k, v in sorted(q.items()))
                    for e, q in sorted(quotas.items())
                )
                or "none",
            )
        self._quotas.replace(quotas)

    def _on_changes(self, notifications: list[bytes]) -> None:
        if any(is_quota_notification(data) for data in notifications):
            self.reload()
