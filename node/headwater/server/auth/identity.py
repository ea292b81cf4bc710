"""The seam between authentication and everything that asks who a request is from.

Whatever authenticated the request (nothing on PLAINTEXT, the certificate on mTLS, the
SASL session on SASL_*) records its :class:`RequestIdentity` in a context variable for
the handler's task before the handler runs; servicers and the authorizer call
:func:`current_identity`.  A request that no listener authenticated is
``User:ANONYMOUS`` from the peer's host, as in Kafka.
"""

from __future__ import annotations

import contextvars

from headwater.security.principal import RequestIdentity, identity_of_peer
from headwater.server.convert import Context

_IDENTITY: contextvars.ContextVar[RequestIdentity | None] = contextvars.ContextVar(
    "headwater_request_identity", default=None
)


def current_identity(context: Context) -> RequestIdentity:
    """The identity of the request being served in this task."""
    identity = _IDENTITY.get()
    if identity is not None:
        return identity
    return identity_of_peer(context.peer())


def set_identity(identity: RequestIdentity) -> contextvars.Token[RequestIdentity | None]:
    """Record the identity for the current task (called by the listener's interceptor)."""
    return _IDENTITY.set(identity)


def reset_identity(token: contextvars.Token[RequestIdentity | None]) -> None:
    _IDENTITY.reset(token)
