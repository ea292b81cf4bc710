"""The AclService: Kafka's CreateAcls, DescribeAcls and DeleteAcls over gRPC; the rules
are :mod:`headwater.server.runtime.acl_admin`'s, shared with the Kafka listener.

Any broker answers.  Without an authorizer every RPC answers SECURITY_DISABLED (as
Kafka does).  CreateAcls and DeleteAcls need ALTER on the CLUSTER, DescribeAcls
DESCRIBE; a refusal is CLUSTER_AUTHORIZATION_FAILED in every result and changes
nothing.  Each creation is validated on its own (INVALID_REQUEST naming the
problem, and that one is not written); each filter too.  Writes go to ZooKeeper
(:mod:`headwater.coordination.acls`, conditional on znode versions), then this
broker's own copy is refreshed at once, so a client can use an ACL it just created
on the broker it created it on; other brokers follow within their watch.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.client.acl_proto import binding_from_pb, binding_to_pb, filter_from_pb
from headwater.coordination.acls import AclZkStore
from headwater.errors import ErrorCode
from headwater.security.acls import AclBinding, AclBindingFilter, AclOperation
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context, pb_error
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime.acl_admin import AclAdmin, Refresh
from headwater.v1 import acls_pb2, acls_pb2_grpc

__all__ = ["AclService", "Refresh"]


class AclService(acls_pb2_grpc.AclServiceServicer):
    def __init__(
        self,
        *,
        store: Callable[[], AclZkStore | None],
        authz: RequestAuthorizer,
        refresh: Refresh,
        metrics: BrokerMetrics,
    ) -> None:
        self._acls = AclAdmin(store=store, authz=authz, refresh=refresh)
        self._metrics = metrics

    async def CreateAcls(
        self, request: acls_pb2.CreateAclsRequest, context: Context
    ) -> acls_pb2.CreateAclsResponse:
        timer = Timer(self._metrics, "CreateAcls")
        refusal = self._acls.refusal(context, AclOperation.ALTER)
        if refusal is not None:
            timer.done("refused")
            code, message = refusal
            return acls_pb2.CreateAclsResponse(
                results=[
                    acls_pb2.AclCreationResult(error=pb_error(code), error_message=message)
                    for _ in request.creations
                ]
            )
        creations: list[AclBinding | str] = []
        for creation in request.creations:
            try:
                creations.append(binding_from_pb(creation))
            except ValueError as exc:
                creations.append(f"invalid ACL: {exc}")
        outcomes = await self._acls.create(creations)
        timer.done()
        return acls_pb2.CreateAclsResponse(
            results=[
                acls_pb2.AclCreationResult(error=pb_error(code), error_message=message)
                for code, message in outcomes
            ]
        )

    async def DescribeAcls(
        self, request: acls_pb2.DescribeAclsRequest, context: Context
    ) -> acls_pb2.DescribeAclsResponse:
        timer = Timer(self._metrics, "DescribeAcls")
        refusal = self._acls.refusal(context, AclOperation.DESCRIBE)
        if refusal is not None:
            timer.done("refused")
            return acls_pb2.DescribeAclsResponse(
                error=pb_error(refusal[0]), error_message=refusal[1]
            )
        try:
            flt = filter_from_pb(request.filter)
        except ValueError as exc:
            timer.done("invalid")
            return acls_pb2.DescribeAclsResponse(
                error=pb_error(ErrorCode.INVALID_REQUEST), error_message=f"invalid filter: {exc}"
            )
        found = await self._acls.describe(flt)
        timer.done()
        return acls_pb2.DescribeAclsResponse(
            error=pb_error(ErrorCode.NONE), acls=[binding_to_pb(b) for b in found]
        )

    async def DeleteAcls(
        self, request: acls_pb2.DeleteAclsRequest, context: Context
    ) -> acls_pb2.DeleteAclsResponse:
        timer = Timer(self._metrics, "DeleteAcls")
        refusal = self._acls.refusal(context, AclOperation.ALTER)
        if refusal is not None:
            timer.done("refused")
            code, message = refusal
            return acls_pb2.DeleteAclsResponse(
                filter_results=[
                    acls_pb2.DeleteAclsFilterResult(error=pb_error(code), error_message=message)
                    for _ in request.filters
                ]
            )
        filters: list[AclBindingFilter | str] = []
        for f in request.filters:
            try:
                filters.append(filter_from_pb(f))
            except ValueError as exc:
                filters.append(f"invalid filter: {exc}")
        outcomes = await self._acls.delete(filters)
        timer.done()
        return acls_pb2.DeleteAclsResponse(
            filter_results=[
                acls_pb2.DeleteAclsFilterResult(
                    error=pb_error(code),
                    error_message=message,
                    matching_acls=[binding_to_pb(b) for b in matched],
                )
                for code, message, matched in outcomes
            ]
        )
