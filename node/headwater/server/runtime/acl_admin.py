"""Kafka's CreateAcls, DescribeAcls and DeleteAcls over ZooKeeper: what both front doors
(the gRPC AclService and the Kafka listener) call.

Any broker answers.  Without an authorizer every call answers SECURITY_DISABLED (as
Kafka does).  Creating and deleting need ALTER on the CLUSTER, describing DESCRIBE; a
refusal is CLUSTER_AUTHORIZATION_FAILED and changes nothing.  Each creation is validated
on its own (a :class:`str` in place of a binding is the reason it is invalid, answered
INVALID_REQUEST, and that one is not written); each filter too.  Writes go to ZooKeeper
(:mod:`headwater.coordination.acls`, conditional on znode versions), then this broker's
own copy is refreshed at once, so a client can use an ACL it just created on the broker
it created it on; other brokers follow within their watch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from headwater import errors
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
from headwater.server.convert import Context
from headwater.server.runtime.offload import run_blocking

Refresh = Callable[[Iterable[ResourcePattern]], None]
"""Re-read these resources into this broker's authorizer now (blocking)."""

Outcome = tuple[ErrorCode, str]
"""An error code and its message ("" with NONE)."""


class AclAdmin:
    """The ACLs of one broker's cluster (event-loop only; ZooKeeper in worker threads)."""

    def __init__(
        self,
        *,
        store: Callable[[], AclZkStore | None],
        authz: RequestAuthorizer,
        refresh: Refresh,
    ) -> None:
        self._store = store
        self._authz = authz
        self._refresh = refresh

    def refusal(self, context: Context, op: AclOperation) -> Outcome | None:
        """Why the caller may not ``op`` (ALTER: create or delete, DESCRIBE) ACLs, or None."""
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

    async def create(self, creations: Sequence[AclBinding | str]) -> list[Outcome]:
        """Write each valid binding; an outcome per creation, in order."""
        valid: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in creations:
            if isinstance(b, AclBinding):
                valid.setdefault(b.pattern, set()).add(b.entry)
        failed: dict[ResourcePattern, errors.HeadwaterError] = {}
        for pattern, entries in valid.items():
            try:
                await run_blocking(self._zk().update, pattern, lambda es, n=entries: es | n)
            except errors.HeadwaterError as exc:
                failed[pattern] = exc
        if valid:
            await run_blocking(self._refresh, list(valid))
        out: list[Outcome] = []
        for b in creations:
            if not isinstance(b, AclBinding):
                out.append((ErrorCode.INVALID_REQUEST, b))
            elif b.pattern in failed:
                out.append((failed[b.pattern].code, errors.message_of(failed[b.pattern])))
            else:
                out.append((ErrorCode.NONE, ""))
        return out

    async def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Every stored binding ``flt`` matches, sorted."""
        acls = await run_blocking(self._zk().load_all)
        return sorted(
            AclBinding(p, e) for p, es in acls.items() for e in es if flt.matches(AclBinding(p, e))
        )

    async def delete(
        self, filters: Sequence[AclBindingFilter | str]
    ) -> list[tuple[ErrorCode, str, list[AclBinding]]]:
        """Delete every binding any valid filter matches; per filter, in order, its outcome
        and the bindings it matched that this call deleted."""
        valid = [f for f in filters if isinstance(f, AclBindingFilter)]
        store = self._zk() if valid else None
        acls = await run_blocking(store.load_all) if store is not None else {}
        deleted: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern, entries in acls.items():
            gone = frozenset(
                e for e in entries if any(f.matches(AclBinding(pattern, e)) for f in valid)
            )
            if gone and store is not None:
                before, after = await run_blocking(store.update, pattern, lambda es, g=gone: es - g)
                deleted[pattern] = before - after
        if deleted:
            await run_blocking(self._refresh, list(deleted))
        out: list[tuple[ErrorCode, str, list[AclBinding]]] = []
        for flt in filters:
            if isinstance(flt, str):
                out.append((ErrorCode.INVALID_REQUEST, flt, []))
                continue
            matched = sorted(
                AclBinding(p, e)
                for p, es in deleted.items()
                for e in es
                if flt.matches(AclBinding(p, e))
            )
            out.append((ErrorCode.NONE, "", matched))
        return out
