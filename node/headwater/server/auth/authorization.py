"""The servicers' view of the authorizer: ``may this request do OP on RESOURCE?``

Every servicer gets one :class:`RequestAuthorizer` and asks it with the request's
gRPC context; it reads the request's identity (:func:`current_identity`) and asks the
broker's :class:`~headwater.security.authorizer.AclAuthorizer`, which caches decisions
per (principal, host, operation, resource) until the ACLs change.  Without an
authorizer (``authorizer.class.name`` empty, the default) every question is answered
``True`` before the identity is even read: no cost on the hot path.

The mapping of RPCs to operations is Kafka's (docs/security.md) and is written in the
servicers next to each RPC, one line each; the helpers here only spare them loops:
:meth:`RequestAuthorizer.topics` answers for the distinct topics of a request once, and
:meth:`RequestAuthorizer.allowed_topics` for a whole listing, remembered per principal
until the ACLs or the listing change (ConsumerGroupHeartbeat asks it every heartbeat).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from headwater.errors import ErrorCode
from headwater.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from headwater.security.authorizer import AclAuthorizer, AclSnapshot
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context

Op = AclOperation

DENIED_CODE = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
"""Kafka's error for a refused operation on each resource type."""


@dataclasses.dataclass(frozen=True, slots=True)
class Denied:
    """A refusal to put in a response: Kafka's code and a message naming what was missing."""

    code: ErrorCode
    message: str


def denial(operation: AclOperation, resource_type: ResourceType, name: str) -> Denied:
    what = "the cluster" if resource_type is ResourceType.CLUSTER else f"{name!r}"
    return Denied(
        DENIED_CODE[resource_type],
        f"not authorized to {operation.name} {resource_type.name} {what}",
    )


REMEMBERED_LISTINGS_MAX = 1024
"""Answers of :meth:`RequestAuthorizer.allowed_topics` kept (all dropped beyond)."""

_ListingKey = tuple[str, str, AclOperation]


@dataclasses.dataclass(frozen=True, slots=True)
class _Listing:
    """One remembered answer of :meth:`RequestAuthorizer.allowed_topics`."""

    snapshot: AclSnapshot
    version: int
    names: frozenset[str]
    allowed: frozenset[str]


class RequestAuthorizer:
    """Answers the servicers' authorization questions; see the module docstring.

    Event-loop only.  ``authorizer`` None means authorization is off.
    """

    __slots__ = ("_listings", "authorizer")

    def __init__(self, authorizer: AclAuthorizer | None = None) -> None:
        self.authorizer = authorizer
        self._listings: dict[_ListingKey, _Listing] = {}

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(
        self, context: Context, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        identity = current_identity(context)
        return authorizer.authorize(
            principal=str(identity.principal),
            host=identity.host,
            operation=operation,
            resource_type=resource_type,
            name=name,
        )

    def cluster(self, context: Context, operation: AclOperation) -> bool:
        return self.allowed(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def topic(self, context: Context, operation: AclOperation, name: str) -> bool:
        return self.allowed(context, operation, ResourceType.TOPIC, name)

    def group(self, context: Context, operation: AclOperation, group_id: str) -> bool:
        return self.allowed(context, operation, ResourceType.GROUP, group_id)

    def topics(
        self, context: Context, operation: AclOperation, names: Iterable[str]
    ) -> frozenset[str] | None:
        """The topics among ``names`` the request may NOT do ``operation`` on, or None
        when every one is allowed (always None with authorization off)."""
        if self.authorizer is None:
            return None
        refused = frozenset(n for n in set(names) if not self.topic(context, operation, n))
        return refused or None

    def allowed_topics(
        self,
        context: Context,
        operation: AclOperation,
        names: Collection[str],
        *,
        version: int,
    ) -> frozenset[str] | None:
        """The topics among ``names`` the request may do ``operation`` on (None with
        authorization off).  ``version`` identifies ``names`` (the metadata cache's
        version): the answer is remembered per principal, host and operation, whole
        while neither the ACLs nor ``version`` change (one lookup per request), and for
        the names it had already decided when only ``version`` changes (only new names
        are decided)."""
        authorizer = self.authorizer
        if authorizer is None:
            return None
        identity = current_identity(context)
        principal = str(identity.principal)
        key = (principal, identity.host, operation)
        snapshot = authorizer.snapshot
        found = self._listings.get(key)
        if found is not None and found.snapshot is snapshot and found.version == version:
            return found.allowed
        current = frozenset(names)
        if found is not None and found.snapshot is snapshot:
            kept, new = found.allowed & current, current - found.names
        else:
            kept, new = frozenset(), current
        allowed = kept | frozenset(
            n
            for n in new
            if authorizer.authorize(
                principal=principal,
                host=identity.host,
                operation=operation,
                resource_type=ResourceType.TOPIC,
                name=n,
            )
        )
        if len(self._listings) >= REMEMBERED_LISTINGS_MAX:
            self._listings.clear()
        self._listings[key] = _Listing(snapshot, version, current, allowed)
        return allowed

    def by_resource_type(
        self, context: Context, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType`` (an ALLOW on some resource of the type)."""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        identity = current_identity(context)
        return authorizer.authorize_by_resource_type(
            principal=str(identity.principal),
            host=identity.host,
            operation=operation,
            resource_type=resource_type,
        )

    def check(
        self, context: Context, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> Denied | None:
        """None if allowed, else the :class:`Denied` to answer with."""
        if self.allowed(context, operation, resource_type, name):
            return None
        return denial(operation, resource_type, name)

    def check_cluster(self, context: Context, operation: AclOperation) -> Denied | None:
        return self.check(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


ALLOW_ALL = RequestAuthorizer(None)
"""The helper of a broker without an authorizer (and of tests of the servicers)."""
