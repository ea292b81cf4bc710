"""``headwater.Admin``'s ACL calls: Kafka's ``createAcls``, ``describeAcls``, ``deleteAcls``.

Any broker answers (they read and write ZooKeeper); the call goes to any live broker,
retrying on another after a lost connection, as the other admin calls do.

* :meth:`AclAdmin.create_acls` returns one error-or-None per binding, in order
  (an invalid binding is INVALID_REQUEST and is not written; the others are).
* :meth:`AclAdmin.describe_acls` returns the ACLs a filter matches, sorted.
* :meth:`AclAdmin.delete_acls` returns, per filter, the ACLs it deleted.

The whole-request refusals raise: ``SecurityDisabledError`` (no authorizer on the
brokers), ``ClusterAuthorizationFailedError`` (no ALTER / DESCRIBE on the cluster),
``InvalidRequestError`` (a malformed filter).

The Admin delegates to it.  Thread-safe as the Admin is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater import errors
from headwater.client.acl_proto import binding_from_pb, binding_to_pb, filter_to_pb
from headwater.client.admin.core import AdminCore
from headwater.security.acls import AclBinding, AclBindingFilter
from headwater.v1 import acls_pb2, acls_pb2_grpc


class AclAdmin:
    """The ACL calls of :class:`~headwater.client.admin.client.Admin`, over its core."""

    def __init__(self, core: AdminCore) -> None:
        self._core = core

    def _acl_call(self, rpc: str, request: Any) -> Any:
        """Send ``request`` to any broker's AclService, retrying on another."""
        return self._core.call_any_broker(
            lambda address: acls_pb2_grpc.AclServiceStub(self._core.channels.channel(address)),
            rpc,
            request,
        )

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[errors.HeadwaterError | None]:
        """Create each ACL; one error (or None) per binding, in order."""
        wanted = list(bindings)
        if not wanted:
            return []
        response = self._acl_call(
            "CreateAcls",
            acls_pb2.CreateAclsRequest(creations=[binding_to_pb(b) for b in wanted]),
        )
        out = [
            errors.for_code(r.error, r.error_message) if r.error else None for r in response.results
        ]
        _raise_whole_refusal(out)
        return out

    def describe_acls(self, filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``filter`` matches (``AclBindingFilter.any()``: all of them)."""
        response = self._acl_call(
            "DescribeAcls", acls_pb2.DescribeAclsRequest(filter=filter_to_pb(filter))
        )
        if response.error:
            raise errors.for_code(response.error, response.error_message)
        return [binding_from_pb(b) for b in response.acls]

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL each filter matches; per filter, the ACLs it deleted.

        Raises the first filter's error (an invalid filter deletes nothing; the
        valid filters of the same request were applied).
        """
        wanted = list(filters)
        if not wanted:
            return []
        response = self._acl_call(
            "DeleteAcls", acls_pb2.DeleteAclsRequest(filters=[filter_to_pb(f) for f in wanted])
        )
        for r in response.filter_results:
            if r.error:
                raise errors.for_code(r.error, r.error_message)
        return [[binding_from_pb(b) for b in r.matching_acls] for r in response.filter_results]


def _raise_whole_refusal(results: list[errors.HeadwaterError | None]) -> None:
    """SECURITY_DISABLED and CLUSTER_AUTHORIZATION_FAILED refuse the whole request: raise."""
    for error in results:
        if isinstance(error, errors.SecurityDisabledError | errors.ClusterAuthorizationFailedError):
            raise error
