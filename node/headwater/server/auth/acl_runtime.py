"""The broker's authorizer at run time: its settings, its ZooKeeper session and its watch.

Built from the broker config by the composition root (:mod:`headwater.server.app`).
With ``authorizer.class.name`` empty it is inert: :attr:`BrokerAuthorization.authz`
allows everything, nothing connects, and the AclService answers SECURITY_DISABLED.

Otherwise :meth:`BrokerAuthorization.start` opens the authorizer's own ZooKeeper
session (as Kafka's AclAuthorizer does, so the ACLs are loaded before the broker
registers and the controller's first LeaderAndIsr is checked against them), loads
every ACL, and keeps the :class:`~headwater.security.authorizer.AclAuthorizer`
fresh from the change notifications (:class:`~headwater.coordination.acls.AclWatcher`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from headwater.coordination import session
from headwater.coordination.acls import AclWatcher, AclZkStore
from headwater.coordination.settings import CoordinationSettings
from headwater.security.acls import ResourcePattern
from headwater.security.authorizer import (
    AclAuthorizer,
    AclSnapshot,
    AuthorizerSettings,
    parse_super_users,
)
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.config import BrokerConfig

log = logging.getLogger(__name__)


class BrokerAuthorization:
    """Owner of the authorizer's session and watch.  ``start``/``stop``/``refresh`` block
    (call them through ``run_blocking``); ``authz`` is read on the event loop."""

    def __init__(self, config: BrokerConfig) -> None:
        self.enabled = config.authorizer_enabled
        self.authorizer: AclAuthorizer | None = None
        if self.enabled:
            self.authorizer = AclAuthorizer(
                AuthorizerSettings(
                    super_users=parse_super_users(config.super_users),
                    allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
                )
            )
        self.authz = RequestAuthorizer(self.authorizer)
        self.store: AclZkStore | None = None
        self._watcher: AclWatcher | None = None

    def start(self, settings: CoordinationSettings) -> None:
        if self.authorizer is None:
            return
        client = session.connect(
            settings.zookeeper_connect,
            session_timeout_ms=settings.zookeeper_session_timeout_ms,
            connection_timeout_ms=settings.zookeeper_connection_timeout_ms,
            auth=settings.zk_auth,
        )
        store = AclZkStore(client)
        watcher = AclWatcher(store, self._on_change)
        try:
            watcher.start()
        except BaseException:
            session.close(client)
            raise
        self.store, self._watcher = store, watcher
        log.info(
            "authorizer on: %d ACLs loaded, super.users %s",
            len(self.authorizer.snapshot),
            ", ".join(sorted(self.authorizer.settings.super_users)) or "none",
        )

    def _on_change(self, acls: Mapping[Any, Any]) -> None:
        if self.authorizer is not None:
            self.authorizer.update(AclSnapshot(acls))

    def refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        """Re-read ``patterns`` now (after this broker wrote them)."""
        if self._watcher is not None:
            self._watcher.refresh(patterns)

    def stop(self) -> None:
        watcher, store = self._watcher, self.store
        self._watcher = self.store = None
        if watcher is not None:
            watcher.stop()
        if store is not None:
            session.close(store.client)
