"""The SaslService and ScramAdmin gRPC services: conversion only.

SaslService drives :class:`~headwater.server.auth.sasl.SaslExchanges`; failures are
answered in the response (Kafka's error code and a message holding no secret) and
logged at INFO with the peer, the mechanism and the claimed user name, never with
the exchanged bytes.  ScramAdmin validates with
:mod:`headwater.security.scram_alterations` and writes ZooKeeper through
:class:`~headwater.coordination.scram_credentials.ScramCredentialStore` in a worker
thread; describe answers mechanisms and iterations only, never salts or keys.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from headwater import errors
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.errors import ErrorCode
from headwater.security import scram_alterations
from headwater.security.acls import AclOperation
from headwater.security.scram import ScramMechanism
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.auth.identity import current_identity
from headwater.server.auth.sasl import SaslExchanges
from headwater.server.convert import Context, pb_error
from headwater.server.runtime.offload import run_blocking
from headwater.v1 import sasl_pb2, sasl_pb2_grpc

log = logging.getLogger(__name__)

MECHANISM_TO_PROTO = {
    ScramMechanism.SCRAM_SHA_256: sasl_pb2.SCRAM_SHA_256,
    ScramMechanism.SCRAM_SHA_512: sasl_pb2.SCRAM_SHA_512,
}
_MECHANISM_NAMES = {int(v): k.value for k, v in MECHANISM_TO_PROTO.items()}


def mechanism_name(value: int) -> str:
    """The proto enum as Kafka's name; an unknown number stays visibly unknown."""
    return _MECHANISM_NAMES.get(value, f"UNKNOWN({value})")


class SaslService(sasl_pb2_grpc.SaslServiceServicer):
    def __init__(
        self,
        *,
        exchanges: SaslExchanges,
        mechanisms_for: Callable[[str], tuple[str, ...]] | None = None,
    ) -> None:
        self._exchanges = exchanges
        self._mechanisms_for = mechanisms_for

    async def SaslHandshake(
        self, request: sasl_pb2.SaslHandshakeRequest, context: Context
    ) -> sasl_pb2.SaslHandshakeResponse:
        enabled = list(self._exchanges.enabled_mechanisms)
        if self._mechanisms_for is not None:  # the listener the handshake came in on
            enabled = list(self._mechanisms_for(current_identity(context).listener))
        try:
            exchange_id = self._exchanges.handshake(request.mechanism, allowed=enabled)
        except errors.HeadwaterError as exc:
            return sasl_pb2.SaslHandshakeResponse(
                error=pb_error(exc.code), error_message=errors.message_of(exc), mechanisms=enabled
            )
        return sasl_pb2.SaslHandshakeResponse(mechanisms=enabled, session_id=exchange_id)

    async def SaslAuthenticate(
        self, request: sasl_pb2.SaslAuthenticateRequest, context: Context
    ) -> sasl_pb2.SaslAuthenticateResponse:
        user = self._exchanges.attempted_user(request.session_id)
        try:
            result = self._exchanges.authenticate(request.session_id, request.auth_bytes)
        except errors.HeadwaterError as exc:
            user = user or self._exchanges.attempted_user(request.session_id)
            log.info("SASL authentication from %s failed (user %r): %s", context.peer(), user, exc)
            return sasl_pb2.SaslAuthenticateResponse(
                error=pb_error(exc.code), error_message=errors.message_of(exc)
            )
        if result.principal is not None:
            log.info("SASL authentication from %s succeeded: %s", context.peer(), result.principal)
        return sasl_pb2.SaslAuthenticateResponse(
            auth_bytes=result.auth_bytes,
            session_token=result.session_token,
            session_lifetime_ms=result.session_lifetime_ms,
        )


class ScramAdminService(sasl_pb2_grpc.ScramAdminServicer):
    def __init__(
        self,
        *,
        store: Callable[[], ScramCredentialStore | None],
        authz: RequestAuthorizer = ALLOW_ALL,
    ) -> None:
        self._store = store
        self._authz = authz

    def _zk(self) -> ScramCredentialStore:
        store = self._store()
        if store is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return store

    async def DescribeUserScramCredentials(
        self, request: sasl_pb2.DescribeUserScramCredentialsRequest, context: Context
    ) -> sasl_pb2.DescribeUserScramCredentialsResponse:
        denied = self._authz.check_cluster(context, AclOperation.DESCRIBE)  # Kafka's mapping
        if denied is not None:
            return sasl_pb2.DescribeUserScramCredentialsResponse(
                error=pb_error(denied.code), error_message=denied.message
            )
        try:
            store = self._zk()
        except errors.HeadwaterError as exc:
            return sasl_pb2.DescribeUserScramCredentialsResponse(
                error=pb_error(exc.code), error_message=errors.message_of(exc)
            )
        names = list(request.users)
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            return sasl_pb2.DescribeUserScramCredentialsResponse(
                error=pb_error(ErrorCode.DUPLICATE_RESOURCE),
                error_message=f"cannot describe SCRAM credentials for the same user twice in "
                f"a single request: {', '.join(dupes)}",
            )
        users = names or await run_blocking(store.list_users)
        results = []
        for user in users:
            credentials = await run_blocking(store.read, user)
            if not credentials:
                if names:  # listing every user skips users with other configs only
                    results.append(
                        sasl_pb2.DescribeUserScramCredentialsResult(
                            user=user,
                            error=pb_error(ErrorCode.RESOURCE_NOT_FOUND),
                            error_message=f"attempt to describe a user credential that does "
                            f"not exist: {user!r}",
                        )
                    )
                continue
            results.append(
                sasl_pb2.DescribeUserScramCredentialsResult(
                    user=user,
                    credential_infos=[
                        sasl_pb2.CredentialInfo(
                            mechanism=MECHANISM_TO_PROTO[m], iterations=c.iterations
                        )
                        for m, c in sorted(credentials.items(), key=lambda kv: kv[0].value)
                    ],
                )
            )
        return sasl_pb2.DescribeUserScramCredentialsResponse(results=results)

    async def AlterUserScramCredentials(
        self, request: sasl_pb2.AlterUserScramCredentialsRequest, context: Context
    ) -> sasl_pb2.AlterUserScramCredentialsResponse:
        plans = scram_alterations.plan(
            upsertions=[
                scram_alterations.Upsertion(
                    user=u.name,
                    mechanism=mechanism_name(u.mechanism),
                    iterations=u.iterations,
                    salt=u.salt,
                    salted_password=u.salted_password,
                )
                for u in request.upsertions
            ],
            deletions=[
                scram_alterations.Deletion(user=d.name, mechanism=mechanism_name(d.mechanism))
                for d in request.deletions
            ],
        )
        refusal = self._authz.check_cluster(context, AclOperation.ALTER)  # Kafka's mapping
        store = self._zk()
        outcomes = await run_blocking(
            scram_alterations.apply,
            plans,
            lambda a: store.alter(a.user, upsertions=a.upsertions, deletions=a.deletions),
            source=context.peer(),
            denied=None if refusal is None else errors.for_code(refusal.code, refusal.message),
        )
        results = [
            sasl_pb2.AlterUserScramCredentialsResult(
                user=user,
                error=pb_error(error.code if error is not None else ErrorCode.NONE),
                error_message=error.message if error is not None else "",
            )
            for user, error in outcomes.items()
        ]
        return sasl_pb2.AlterUserScramCredentialsResponse(results=results)
