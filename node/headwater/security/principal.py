"""Kafka's principal: a type and a name, written ``User:alice``.

Kafka's authorizer and ACLs name principals as ``<type>:<name>``; the only type Kafka
itself produces is ``User``.  A connection that authenticated nothing (a PLAINTEXT
listener, or ``ssl.client.auth=none`` on SSL) is ``User:ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

import dataclasses

USER_TYPE = "User"


@dataclasses.dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """An authenticated identity.  Invariant: ``principal_type`` and ``name`` are non-empty."""

    principal_type: str
    name: str

    def __post_init__(self) -> None:
        if not self.principal_type or not self.name:
            raise ValueError(f"a principal needs a type and a name, got {self!s}")

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError names the bad text."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"a principal is written <type>:<name>, like User:alice; got {text!r}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


@dataclasses.dataclass(frozen=True, slots=True)
class RequestIdentity:
    """Who sent a request and from where: what the authorizer checks an ACL against.

    ``host`` is the client's IP address as the broker saw it (ACLs' ``host`` field);
    ``listener`` the name of the listener the request came in on.
    """

    principal: KafkaPrincipal
    host: str
    listener: str = "PLAINTEXT"


def identity_of_peer(
    peer: str, *, principal: KafkaPrincipal = ANONYMOUS, listener: str = "PLAINTEXT"
) -> RequestIdentity:
    """The identity for a gRPC peer string (``ipv4:127.0.0.1:5555``, ``ipv6:[::1]:5555``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        host = rest.rpartition(":")[0]
    elif kind == "ipv6":
        host = rest.rpartition(":")[0].strip("[]")
    else:
        host = rest or peer
    return RequestIdentity(principal=principal, host=host, listener=listener)
