"""The Kafka listener's ACL administration: CreateAcls, DescribeAcls, DeleteAcls.

The rules are :mod:`headwater.server.runtime.acl_admin`'s, as for the gRPC AclService
(SECURITY_DISABLED without an authorizer, ALTER or DESCRIBE on the cluster, each
creation and filter validated on its own).  Here: Kafka's request fields to
:class:`~headwater.security.acls.AclBinding` and
:class:`~headwater.security.acls.AclBindingFilter` (a field that does not make one is
the reason, answered INVALID_REQUEST) and the bindings back.  Versions 0 have no
pattern type: their patterns are LITERAL, as Kafka's.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, cast

from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
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
from headwater.server.convert import Context
from headwater.server.runtime.acl_admin import AclAdmin

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)


def binding_of(c: Any) -> AclBinding | str:
    """A CreateAcls creation's binding, or why it is not one."""
    try:
        return AclBinding(
            ResourcePattern(
                ResourceType(c.resource_type),
                c.resource_name,
                PatternType(c.resource_pattern_type),
            ),
            AccessControlEntry(
                c.principal,
                c.host,
                AclOperation(c.operation),
                AclPermissionType(c.permission_type),
            ),
        )
    except ValueError as exc:
        return f"invalid ACL: {exc}"


def filter_of(f: Any) -> AclBindingFilter | str:
    """A DescribeAcls request's or DeleteAcls filter's filter, or why it is not one."""
    try:
        return AclBindingFilter(
            ResourcePatternFilter(
                ResourceType(f.resource_type_filter),
                f.resource_name_filter,
                PatternType(f.pattern_type_filter),
            ),
            AccessControlEntryFilter(
                f.principal_filter,
                f.host_filter,
                AclOperation(f.operation),
                AclPermissionType(f.permission_type),
            ),
        )
    except ValueError as exc:
        return f"invalid filter: {exc}"


class KafkaAclApis:
    """ACL administration of one Kafka listener (event-loop only)."""

    def __init__(self, *, acls: AclAdmin) -> None:
        self._acls = acls

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {29: self.describe_acls, 30: self.create_acls, 31: self.delete_acls}

    async def create_acls(self, request: Request) -> Any:
        body, module = request.body, response_module(30, request.api_version)
        refusal = self._acls.refusal(_NO_GRPC_CONTEXT, AclOperation.ALTER)
        if refusal is not None:
            outcomes = [refusal] * len(body.creations)
        else:
            outcomes = await self._acls.create([binding_of(c) for c in body.creations])
        return build(
            module.CreateAclsResponse,
            throttle_time=_NO_THROTTLE,
            results=tuple(
                build(
                    module.AclCreationResult,
                    error_code=error_code(code),
                    error_message=message or None,
                )
                for code, message in outcomes
            ),
        )

    async def describe_acls(self, request: Request) -> Any:
        body, module = request.body, response_module(29, request.api_version)
        code, message, found = ErrorCode.NONE, "", []
        refusal = self._acls.refusal(_NO_GRPC_CONTEXT, AclOperation.DESCRIBE)
        flt = filter_of(body)
        if refusal is not None:
            code, message = refusal
        elif isinstance(flt, str):
            code, message = ErrorCode.INVALID_REQUEST, flt
        else:
            found = await self._acls.describe(flt)
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for b in found:
            by_pattern.setdefault(b.pattern, []).append(b.entry)
        return build(
            module.DescribeAclsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            error_message=message or None,
            resources=tuple(
                build(
                    module.DescribeAclsResource,
                    resource_type=int(p.resource_type),
                    resource_name=p.name,
                    pattern_type=int(p.pattern_type),
                    acls=tuple(
                        build(
                            module.AclDescription,
                            principal=e.principal,
                            host=e.host,
                            operation=int(e.operation),
                            permission_type=int(e.permission_type),
                        )
                        for e in entries
                    ),
                )
                for p, entries in by_pattern.items()
            ),
        )

    async def delete_acls(self, request: Request) -> Any:
        body, module = request.body, response_module(31, request.api_version)
        refusal = self._acls.refusal(_NO_GRPC_CONTEXT, AclOperation.ALTER)
        if refusal is not None:
            outcomes: list[tuple[ErrorCode, str, list[AclBinding]]] = [
                (refusal[0], refusal[1], [])
            ] * len(body.filters)
        else:
            outcomes = await self._acls.delete([filter_of(f) for f in body.filters])
        return build(
            module.DeleteAclsResponse,
            throttle_time=_NO_THROTTLE,
            filter_results=tuple(
                build(
                    module.DeleteAclsFilterResult,
                    error_code=error_code(code),
                    error_message=message or None,
                    matching_acls=tuple(
                        build(
                            module.DeleteAclsMatchingAcl,
                            error_code=error_code(ErrorCode.NONE),
                            error_message=None,
                            resource_type=int(b.pattern.resource_type),
                            resource_name=b.pattern.name,
                            pattern_type=int(b.pattern.pattern_type),
                            principal=b.entry.principal,
                            host=b.entry.host,
                            operation=int(b.entry.operation),
                            permission_type=int(b.entry.permission_type),
                        )
                        for b in matched
                    ),
                )
                for code, message, matched in outcomes
            ),
        )
