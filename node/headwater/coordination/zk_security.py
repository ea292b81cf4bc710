"""ZooKeeper's own access control for the brokers' znodes (Kafka's ``zookeeper.set.acl``).

Kafka authenticates to ZooKeeper with SASL (a JAAS file) and, with
``zookeeper.set.acl=true``, creates every znode with ``creator ALL + world READ``, and
the sensitive ones (credentials, ACLs) with ``creator ALL`` only.  Headwater uses
ZooKeeper's *digest* scheme for the identity (``zookeeper.digest.username`` /
``zookeeper.digest.password``, passed to kazoo as ``auth_data``), so a client without
that password can read the cluster's ordinary znodes but write none of them, and can
neither read nor write the sensitive ones.

The ACL of a new znode depends on its path, which kazoo's single ``default_acl``
cannot express, so :class:`PolicyKazooClient` asks :func:`acl_for_path` for every
create (plain, ``ensure_path`` and inside transactions) that does not name its ACL.
Znodes created before ``zookeeper.set.acl`` was turned on keep their old ACLs (as in
Kafka, where ``zookeeper-security-migration`` fixes them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE

SENSITIVE_ROOTS = (
    "/config/users",
    "/kafka-acl",
    "/kafka-acl-extended",
    "/kafka-acl-changes",
    "/kafka-acl-extended-changes",
)
"""Znodes under these paths are readable and writable by the brokers' identity alone."""

AccessDenied = NoAuthError
"""What ZooKeeper raises when a znode's ACL refuses the client (no identity, or not the
brokers'), so callers outside coordination need not import kazoo."""


@dataclasses.dataclass(frozen=True)
class ZkAuth:
    """The brokers' ZooKeeper identity.  ``repr`` never shows the password."""

    username: str
    password: str = dataclasses.field(repr=False)
    set_acl: bool = False

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [("digest", f"{self.username}:{self.password}")]


def is_sensitive(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def acl_for_path(path: str) -> list[ACL]:
    """Kafka's secure ACLs: creator ALL, plus world READ unless the path is sensitive."""
    if is_sensitive(path):
        return list(CREATOR_ALL_ACL)
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


class _PolicyTransaction(TransactionRequest):  # type: ignore[misc]
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        if acl is None:
            acl = acl_for_path(path)
        super().create(path, value, acl, ephemeral, sequence)


class PolicyKazooClient(KazooClient):  # type: ignore[misc]
    """A KazooClient whose creates default to :func:`acl_for_path` (``zookeeper.set.acl``)."""

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, **kw: Any) -> Any:
        if acl is None:
            acl = acl_for_path(path)
        return super().create_async(path, value, acl=acl, **kw)

    def transaction(self) -> TransactionRequest:
        return _PolicyTransaction(self)


def client_class(auth: ZkAuth | None) -> type[KazooClient]:
    return PolicyKazooClient if auth is not None and auth.set_acl else KazooClient


def client_kwargs(auth: ZkAuth | None) -> dict[str, Any]:
    """Extra ``KazooClient`` arguments: the digest credentials when configured."""
    return {"auth_data": auth.auth_data} if auth is not None else {}
