"""The AclService: Kafka's CreateAcls, DescribeAcls and DeleteAcls over ZooKeeper.

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

from collections.abc import Callable, Iterable

from headwater import errors
from headwater.client.acl_proto import binding_from_pb, binding_to_pb, filter_from_pb
from headwater.coordination.acls import AclZkStore
from headwater.errors import ErrorCode
from headwater.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourcePattern,
)
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context, pb_error
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime.offload import run_blocking
from headwater.v1 import acls_pb2, acls_pb2_grpc

Refresh = Callable[[Iterable[ResourcePattern]], None]
"""Re-read these resources into this broker's authorizer now (blocking)."""


class AclService(acls_pb2_grpc.AclServiceServicer):
    def __init__(
        self,
        *,
        store: Callable[[], AclZkStore | None],
        authz: RequestAuthorizer,
        refresh: Refresh,
        metrics: BrokerMetrics,
    ) -> None:
        self._store = store
        self._authz = authz
        self._refresh = refresh
        self._metrics = metrics

    def _refusal(self, context: Context, op: AclOperation) -> tuple[ErrorCode, str] | None:
        if not self._authz.enabled:
            return ErrorCode.SECURITY_DISABLED, "no authorizer is configured on this broker"
        if not self._authz.cluster(context, op):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"not authorized to {op.name} ACLs"
        return None

    def _zk(self) -> AclZkStore:
        store = self._store()
        if store is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return store

    async def CreateAcls(
        self, request: acls_pb2.CreateAclsRequest, context: Context
    ) -> acls_pb2.CreateAclsResponse:
        timer = Timer(self._metrics, "CreateAcls")
        refusal = self._refusal(context, AclOperation.ALTER)
        if refusal is not None:
            timer.done("refused")
            code, message = refusal
            return acls_pb2.CreateAclsResponse(
                results=[
                    acls_pb2.AclCreationResult(error=pb_error(code), error_message=message)
                    for _ in request.creations
                ]
            )
        results: list[tuple[ErrorCode, str]] = []
        valid: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for creation in request.creations:
            try:
                b = binding_from_pb(creation)
            except ValueError as exc:
                results.append((ErrorCode.INVALID_REQUEST, f"invalid ACL: {exc}"))
                continue
            valid.setdefault(b.pattern, set()).add(b.entry)
            results.append((ErrorCode.NONE, str(b)))
        failed: dict[ResourcePattern, errors.HeadwaterError] = {}
        for pattern, entries in valid.items():
            try:
                await run_blocking(self._zk().update, pattern, lambda es, n=entries: es | n)
            except errors.HeadwaterError as exc:
                failed[pattern] = exc
        if valid:
            await run_blocking(self._refresh, list(valid))
        out = []
        for creation, (code, message) in zip(request.creations, results, strict=True):
            if code is ErrorCode.NONE:
                pattern = binding_from_pb(creation).pattern
                if pattern in failed:
                    code, message = failed[pattern].code, errors.message_of(failed[pattern])
                else:
                    message = ""
            out.append(acls_pb2.AclCreationResult(error=pb_error(code), error_message=message))
        timer.done()
        return acls_pb2.CreateAclsResponse(results=out)

    async def DescribeAcls(
        self, request: acls_pb2.DescribeAclsRequest, context: Context
    ) -> acls_pb2.DescribeAclsResponse:
        timer = Timer(self._metrics, "DescribeAcls")
        refusal = self._refusal(context, AclOperation.DESCRIBE)
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
        acls = await run_blocking(self._zk().load_all)
        found = sorted(
            AclBinding(p, e) for p, es in acls.items() for e in es if flt.matches(AclBinding(p, e))
        )
        timer.done()
        return acls_pb2.DescribeAclsResponse(
            error=pb_error(ErrorCode.NONE), acls=[binding_to_pb(b) for b in found]
        )

    async def DeleteAcls(
        self, request: acls_pb2.DeleteAclsRequest, context: Context
    ) -> acls_pb2.DeleteAclsResponse:
        timer = Timer(self._metrics, "DeleteAcls")
        refusal = self._refusal(context, AclOperation.ALTER)
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
        valid = [f for f in filters if isinstance(f, AclBindingFilter)]
        store = self._zk()
        acls = await run_blocking(store.load_all) if valid else {}
        deleted: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern, entries in acls.items():
            gone = frozenset(
                e for e in entries if any(f.matches(AclBinding(pattern, e)) for f in valid)
            )
            if gone:
                before, after = await run_blocking(store.update, pattern, lambda es, g=gone: es - g)
                deleted[pattern] = before - after
        if deleted:
            await run_blocking(self._refresh, list(deleted))
        out = []
        for flt in filters:
            if isinstance(flt, str):
                out.append(
                    acls_pb2.DeleteAclsFilterResult(
                        error=pb_error(ErrorCode.INVALID_REQUEST), error_message=flt
                    )
                )
                continue
            matched = sorted(
                AclBinding(p, e)
                for p, es in deleted.items()
                for e in es
                if flt.matches(AclBinding(p, e))
            )
            out.append(
                acls_pb2.DeleteAclsFilterResult(
                    error=pb_error(ErrorCode.NONE),
                    matching_acls=[binding_to_pb(b) for b in matched],
                )
            )
        timer.done()
        return acls_pb2.DeleteAclsResponse(filter_results=out)
