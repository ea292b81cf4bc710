"""Kafka's ``AclAuthorizer`` decision, without I/O: ACL snapshot + request -> allowed?

The rules are Kafka's:

* a super user (``super.users``) is always allowed;
* the ACLs that *apply* to a resource are those of the LITERAL name, of the LITERAL
  wildcard ``*`` and of every PREFIXED pattern the name starts with;
* no ACL applies at all -> ``allow.everyone.if.no.acl.found`` decides (default deny);
* an applying DENY for the principal (or ``User:*``), the host (or ``*``) and the
  operation (or ALL) refuses, whatever ALLOWs exist: DENY wins;
* otherwise an applying ALLOW for the operation, ALL, or an operation that implies
  it allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS.  Implication never widens a DENY.

:class:`AclAuthorizer` keeps the current immutable :class:`AclSnapshot` and a decision
cache keyed by (principal, host, operation, resource).  ``update()`` swaps in a new
snapshot together with an empty cache in one assignment, so a reader on another
thread sees either the old snapshot with its decisions or the new one with none;
never a stale decision for the new ACLs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from headwater.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from headwater.security.principal import KafkaPrincipal

AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "headwater.AclAuthorizer",
    }
)
"""``authorizer.class.name`` values that turn authorization on (empty: off)."""

IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
"""Operations whose ALLOW also allows the key operation (Kafka's implied operations)."""

MAX_CACHED_DECISIONS = 100_000
"""The decision cache is dropped (not evicted piecemeal) when it grows past this."""

_WILDCARD_PRINCIPAL = str(WILDCARD_PRINCIPAL)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: ``User:alice;User:bob`` (semicolons; blanks ignored); ValueError."""
    out = set()
    for item in text.split(";"):
        item = item.strip()
        if item:
            out.add(str(KafkaPrincipal.parse(item)))
    return frozenset(out)


@dataclasses.dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    """``super.users`` as ``Type:name`` strings."""
    allow_everyone_if_no_acl_found: bool = False
    """``allow.everyone.if.no.acl.found``."""


class AclSnapshot:
    """An immutable view of every ACL, indexed for the authorizer.  Never mutated."""

    __slots__ = ("_acls", "_index", "_prefixed_types")

    def __init__(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {
            p: frozenset(es) for p, es in acls.items() if es
        }
        self._index = {
            (p.resource_type, p.pattern_type, p.name): es for p, es in self._acls.items()
        }
        self._prefixed_types = frozenset(
            p.resource_type for p in self._acls if p.pattern_type is PatternType.PREFIXED
        )

    @classmethod
    def empty(cls) -> AclSnapshot:
        return cls({})

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> AclSnapshot:
        acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            acls.setdefault(b.pattern, set()).add(b.entry)
        return cls(acls)

    def __len__(self) -> int:
        return sum(len(es) for es in self._acls.values())

    def patterns(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._acls

    def bindings(self) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, es in self._acls.items() for e in es)

    def applying(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry whose pattern applies to the resource ``resource_type:name``."""
        get = self._index.get
        out: list[AccessControlEntry] = []
        out.extend(get((resource_type, PatternType.LITERAL, name), ()))
        if name != WILDCARD_RESOURCE:
            out.extend(get((resource_type, PatternType.LITERAL, WILDCARD_RESOURCE), ()))
        if resource_type in self._prefixed_types:
            for end in range(1, len(name) + 1):
                out.extend(get((resource_type, PatternType.PREFIXED, name[:end]), ()))
        return out

    def of_type(
        self, resource_type: ResourceType
    ) -> list[tuple[ResourcePattern, AccessControlEntry]]:
        return [
            (p, e) for p, es in self._acls.items() if p.resource_type is resource_type for e in es
        ]


def _applies_to(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return entry.principal in (principal, _WILDCARD_PRINCIPAL) and entry.host in (
        host,
        WILDCARD_HOST,
    )


def decide(
    snapshot: AclSnapshot,
    settings: AuthorizerSettings,
    *,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Kafka's decision for one action (module docstring)."""
    if principal in settings.super_users:
        return True
    entries = snapshot.applying(resource_type, name)
    if not entries:
        return settings.allow_everyone_if_no_acl_found
    mine = [e for e in entries if _applies_to(e, principal, host)]
    if any(
        e.permission_type is AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
        for e in mine
    ):
        return False
    allowing = IMPLIED_BY.get(operation, frozenset({operation}))
    return any(
        e.permission_type is AclPermissionType.ALLOW
        and (e.operation is AclOperation.ALL or e.operation in allowing)
        for e in mine
    )


def decide_by_resource_type(
    snapshot: AclSnapshot,
    settings: AuthorizerSettings,
    *,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on *some*
    resource of the type (an ALLOW not wholly covered by a DENY)?  Used for idempotent
    producers without IDEMPOTENT_WRITE (Kafka 3.x, KIP-679)."""
    if principal in settings.super_users:
        return True
    allow_lit: set[str] = set()
    allow_pre: set[str] = set()
    deny_lit: set[str] = set()
    deny_pre: set[str] = set()
    any_acl = False
    for pattern, entry in snapshot.of_type(resource_type):
        any_acl = True
        if not _applies_to(entry, principal, host) or entry.operation not in (
            operation,
            AclOperation.ALL,
        ):
            continue
        deny = entry.permission_type is AclPermissionType.DENY
        literal = pattern.pattern_type is PatternType.LITERAL
        if deny:
            (deny_lit if literal else deny_pre).add(pattern.name)
        else:
            (allow_lit if literal else allow_pre).add(pattern.name)
    if not any_acl:
        return settings.allow_everyone_if_no_acl_found
    if WILDCARD_RESOURCE in deny_lit:
        return False

    def denied(name: str) -> bool:
        return any(name.startswith(p) for p in deny_pre)

    if any(not denied(p) for p in allow_pre):
        return True
    return any(n not in deny_lit and not denied(n) for n in allow_lit)


CacheKey = tuple[str, str, AclOperation, ResourceType, str]


class _Generation:
    """One snapshot with the decisions made from it; replaced whole on every update."""

    __slots__ = ("decisions", "snapshot")

    def __init__(self, snapshot: AclSnapshot) -> None:
        self.snapshot = snapshot
        self.decisions: dict[CacheKey, bool] = {}


class AclAuthorizer:
    """The broker's authorizer: current ACLs + settings + a decision cache.

    Threads: ``update()`` may be called from any thread (the ACL watch's worker);
    ``authorize*`` from the event loop.  Both only swap or read one reference.
    """

    def __init__(self, settings: AuthorizerSettings, snapshot: AclSnapshot | None = None) -> None:
        self.settings = settings
        self._gen = _Generation(snapshot or AclSnapshot.empty())

    @property
    def snapshot(self) -> AclSnapshot:
        return self._gen.snapshot

    def update(self, snapshot: AclSnapshot) -> None:
        self._gen = _Generation(snapshot)

    def authorize(
        self,
        *,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        gen = self._gen
        key = (principal, host, operation, resource_type, name)
        cached = gen.decisions.get(key)
        if cached is not None:
            return cached
        allowed = decide(
            gen.snapshot,
            self.settings,
            principal=principal,
            host=host,
            operation=operation,
            resource_type=resource_type,
            name=name,
        )
        if len(gen.decisions) >= MAX_CACHED_DECISIONS:
            gen.decisions = {}
        gen.decisions[key] = allowed
        return allowed

    def authorize_by_resource_type(
        self, *, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return decide_by_resource_type(
            self._gen.snapshot,
            self.settings,
            principal=principal,
            host=host,
            operation=operation,
            resource_type=resource_type,
        )
