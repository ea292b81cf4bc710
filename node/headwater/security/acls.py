"""Kafka's ACL model as pure values: resources, patterns, entries, bindings and filters.

The names and numeric codes are Kafka's (``org.apache.kafka.common.acl`` and
``...resource``), so an ACL written for Kafka reads the same here and the codes can
travel in protobuf unchanged.  Construction validates: an :class:`AclBinding` is
always a *concrete* ACL that may be stored (no ANY/MATCH/UNKNOWN, a valid principal
and host, an operation the resource type supports, ``kafka-cluster`` as the only
CLUSTER name), and a filter is always a well-formed question.  A bad value raises
``ValueError`` naming what is wrong; callers turn it into INVALID_REQUEST.

Filters follow Kafka's semantics exactly: ``None`` fields and the ANY codes match
everything; the MATCH pattern type matches every stored pattern that would apply to
the named resource (the literal name, the literal wildcard ``*`` and every prefix).
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress

from headwater.security.principal import KafkaPrincipal

WILDCARD_RESOURCE = "*"
"""A LITERAL resource name matching every resource of its type."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = KafkaPrincipal("User", "*")
"""``User:*``: an ACL for it applies to every principal."""
CLUSTER_NAME = "kafka-cluster"
"""The only name of the CLUSTER resource (Kafka's)."""


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes (DELEGATION_TOKEN and USER are not supported)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5

    @property
    def zk_name(self) -> str:
        """``Topic``, ``Group``, ``Cluster``, ``TransactionalId``: Kafka's znode names."""
        return _ZK_NAMES[self]


_ZK_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
}


def resource_type_from_zk(name: str) -> ResourceType:
    for rtype, zk in _ZK_NAMES.items():
        if zk == name:
            return rtype
    raise ValueError(f"unknown resource type {name!r}")


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType``: LITERAL and PREFIXED are stored; ANY and MATCH filter."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def zk_name(self) -> str:
        """``Read``, ``ClusterAction``, ``DescribeConfigs``...: Kafka's JSON spelling."""
        return "".join(part.capitalize() for part in self.name.split("_"))


def operation_from_zk(name: str) -> AclOperation:
    for op in AclOperation:
        if op.zk_name == name and op not in (AclOperation.UNKNOWN, AclOperation.ANY):
            return op
    raise ValueError(f"unknown operation {name!r}")


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def zk_name(self) -> str:
        return self.name.capitalize()


def permission_from_zk(name: str) -> AclPermissionType:
    for perm in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        if perm.zk_name == name:
            return perm
    raise ValueError(f"unknown permission type {name!r}")


SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.ALL,
        }
    ),
    ResourceType.GROUP: frozenset(
        {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALL}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.ALL,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.ALL}
    ),
}
"""Kafka's ``AclEntry.supportedOperations``: an ACL for another operation is refused."""


def validate_host(host: str) -> str:
    """``*`` or an IP address (what the broker sees of a client), else ValueError."""
    if host == WILDCARD_HOST:
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise ValueError(f"host must be '*' or an IP address, got {host!r}") from None


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A stored resource pattern: concrete type, LITERAL or PREFIXED, non-empty name."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(
                f"an ACL needs a concrete resource type, not {self.resource_type.name}"
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(
                f"an ACL's pattern type is LITERAL or PREFIXED, not {self.pattern_type.name}"
            )
        if not self.name:
            raise ValueError("an ACL's resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and (
            self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL
        ):
            raise ValueError(
                f"the only CLUSTER resource is the LITERAL {CLUSTER_NAME!r}, got "
                f"{self.pattern_type.name} {self.name!r}"
            )
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD_RESOURCE:
            raise ValueError("a PREFIXED pattern cannot be '*'; use a LITERAL '*'")

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        KafkaPrincipal.parse(self.principal)
        object.__setattr__(self, "host", validate_host(self.host))
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"an ACL needs a concrete operation, not {self.operation.name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(
                f"an ACL's permission type is ALLOW or DENY, not {self.permission_type.name}"
            )


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: an entry bound to a pattern.  Invariant: the operation suits the resource."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __post_init__(self) -> None:
        supported = SUPPORTED_OPERATIONS[self.pattern.resource_type]
        if self.entry.operation not in supported:
            raise ValueError(
                f"operation {self.entry.operation.name} does not apply to "
                f"{self.pattern.resource_type.name} (supported: "
                f"{', '.join(sorted(o.name for o in supported))})"
            )

    def __str__(self) -> str:
        e = self.entry
        return (
            f"{e.permission_type.name} {e.principal} from {e.host} {e.operation.name} "
            f"on {self.pattern}"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which patterns: ``None`` name = any name; ANY type = any type (Kafka's semantics)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.UNKNOWN:
            raise ValueError("a filter's resource type must not be UNKNOWN")
        if self.pattern_type is PatternType.UNKNOWN:
            raise ValueError("a filter's pattern type must not be UNKNOWN")

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every stored pattern that applies to the resource named.
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)


@dataclasses.dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Which entries: ``None`` principal/host and the ANY codes match everything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        if self.principal is not None:
            KafkaPrincipal.parse(self.principal)
        if self.host is not None:
            object.__setattr__(self, "host", validate_host(self.host))
        if self.operation is AclOperation.UNKNOWN:
            raise ValueError("a filter's operation must not be UNKNOWN")
        if self.permission_type is AclPermissionType.UNKNOWN:
            raise ValueError("a filter's permission type must not be UNKNOWN")

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A question over stored ACLs (DescribeAcls, DeleteAcls)."""

    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    @classmethod
    def any(cls) -> AclBindingFilter:
        """The filter matching every ACL."""
        return cls()


def binding(
    *,
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission_type: AclPermissionType = AclPermissionType.ALLOW,
    host: str = WILDCARD_HOST,
    pattern_type: PatternType = PatternType.LITERAL,
) -> AclBinding:
    """Shorthand for one validated :class:`AclBinding`."""
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission_type),
    )
