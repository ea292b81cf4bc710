"""ACL values to and from the AclService's protobuf messages (Kafka's numeric codes).

Shared by the Admin client and the broker's AclService servicer (which imports it
from here rather than keep a second copy: ``headwater.security`` may not import the
generated protocol, and the client never imports the server).  Decoding validates: a bad
code or value raises ``ValueError`` naming it (the servicer answers INVALID_REQUEST).
"""

from __future__ import annotations

from headwater.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from headwater.v1 import acls_pb2


def binding_from_pb(b: acls_pb2.AclBinding) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(b.resource_type), b.resource_name, PatternType(b.pattern_type)
        ),
        AccessControlEntry(
            b.principal, b.host, AclOperation(b.operation), AclPermissionType(b.permission_type)
        ),
    )


def binding_to_pb(b: AclBinding) -> acls_pb2.AclBinding:
    return acls_pb2.AclBinding(
        resource_type=b.pattern.resource_type,
        resource_name=b.pattern.name,
        pattern_type=b.pattern.pattern_type,
        principal=b.entry.principal,
        host=b.entry.host,
        operation=b.entry.operation,
        permission_type=b.entry.permission_type,
    )


def filter_from_pb(f: acls_pb2.AclBindingFilter) -> AclBindingFilter:
    def opt(field: str) -> str | None:
        return getattr(f, field) if f.HasField(field) else None  # type: ignore[arg-type]

    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType(f.resource_type), opt("resource_name"), PatternType(f.pattern_type)
        ),
        AccessControlEntryFilter(
            opt("principal"),
            opt("host"),
            AclOperation(f.operation),
            AclPermissionType(f.permission_type),
        ),
    )


def filter_to_pb(f: AclBindingFilter) -> acls_pb2.AclBindingFilter:
    out = acls_pb2.AclBindingFilter(
        resource_type=f.pattern.resource_type,
        pattern_type=f.pattern.pattern_type,
        operation=f.entry.operation,
        permission_type=f.entry.permission_type,
    )
    if f.pattern.name is not None:
        out.resource_name = f.pattern.name
    if f.entry.principal is not None:
        out.principal = f.entry.principal
    if f.entry.host is not None:
        out.host = f.entry.host
    return out
