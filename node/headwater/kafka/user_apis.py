"""The Kafka listener's user administration, what ``kafka-configs --entity-type users``
sends: DescribeUserScramCredentials (50) and AlterUserScramCredentials (51)
(``--add-config 'SCRAM-SHA-512=[password=...]'``).  Client quotas, which ``--describe``
asks first, are :mod:`headwater.kafka.quota_apis`' (whose filter check is
:func:`invalid_quota_filter`).

The rules are the gRPC ScramAdmin service's (:mod:`headwater.server.services.sasl`):
DESCRIBE (describe) or ALTER (alter) on the cluster; alterations validated per user by
:mod:`headwater.security.scram_alterations` and written to ZooKeeper through
:class:`~headwater.coordination.scram_credentials.ScramCredentialStore` in a worker
thread, whence every broker's credential cache learns them.  Describe answers
mechanisms and iterations, never salts or keys.  On the wire a mechanism is Kafka's
``ScramMechanism`` byte: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any, cast

from headwater import errors
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.quotas.entities import invalid_filter
from headwater.security import scram_alterations
from headwater.security.acls import AclOperation
from headwater.security.scram import ScramMechanism
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context
from headwater.server.runtime.offload import run_blocking

log = logging.getLogger(__name__)

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)

MECHANISM_BYTES = {ScramMechanism.SCRAM_SHA_256: 1, ScramMechanism.SCRAM_SHA_512: 2}
_NAMES = {b: m.value for m, b in MECHANISM_BYTES.items()}


def mechanism_name(value: int) -> str:
    """Kafka's mechanism byte as its name; an unknown byte stays visibly unknown (and is
    refused UNSUPPORTED_SASL_MECHANISM by the plan)."""
    return _NAMES.get(value, f"UNKNOWN({value})")


invalid_quota_filter = invalid_filter
"""Kafka's DescribeClientQuotas filter check (:func:`headwater.quotas.entities.invalid_filter`)."""


class KafkaUserApis:
    """User administration of one Kafka listener (event-loop only)."""

    def __init__(
        self, *, store: Callable[[], ScramCredentialStore | None], authz: RequestAuthorizer
    ) -> None:
        self._store = store
        self._authz = authz

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {50: self.describe, 51: self.alter}

    def _zk(self) -> ScramCredentialStore:
        store = self._store()
        if store is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return store

    async def describe(self, request: Request) -> Any:
        body, module = request.body, response_module(50, request.api_version)

        def answer(code: ErrorCode, message: str | None, results: tuple[Any, ...] = ()) -> Any:
            return build(
                module.DescribeUserScramCredentialsResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(code),
                error_message=message,
                results=results,
            )

        denied = self._authz.check_cluster(_NO_GRPC_CONTEXT, AclOperation.DESCRIBE)
        if denied is not None:
            return answer(denied.code, denied.message)
        try:
            store = self._zk()
        except errors.HeadwaterError as exc:
            return answer(exc.code, errors.message_of(exc))
        names = [u.name for u in body.users or ()]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            return answer(
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {', '.join(dupes)}",
            )
        results = []
        for user in names or await run_blocking(store.list_users):
            credentials = await run_blocking(store.read, user)
            if not credentials and not names:
                continue  # listing every user skips users with other configs only
            results.append(
                build(
                    module.DescribeUserScramCredentialsResult,
                    user=user,
                    error_code=error_code(
                        ErrorCode.NONE if credentials else ErrorCode.RESOURCE_NOT_FOUND
                    ),
                    error_message=None
                    if credentials
                    else f"Attempt to describe a user credential that does not exist: {user}",
                    credential_infos=tuple(
                        build(
                            module.CredentialInfo,
                            mechanism=MECHANISM_BYTES[m],
                            iterations=c.iterations,
                        )
                        for m, c in sorted(credentials.items(), key=lambda kv: kv[0].value)
                    ),
                )
            )
        return answer(ErrorCode.NONE, None, tuple(results))

    async def alter(self, request: Request) -> Any:
        body, module = request.body, response_module(51, request.api_version)
        plans = scram_alterations.plan(
            upsertions=[
                scram_alterations.Upsertion(
                    user=u.name,
                    mechanism=mechanism_name(u.mechanism),
                    iterations=u.iterations,
                    salt=bytes(u.salt),
                    salted_password=bytes(u.salted_password),
                )
                for u in body.upsertions
            ],
            deletions=[
                scram_alterations.Deletion(user=d.name, mechanism=mechanism_name(d.mechanism))
                for d in body.deletions
            ],
        )
        refusal = self._authz.check_cluster(_NO_GRPC_CONTEXT, AclOperation.ALTER)
        store = self._zk()
        outcomes = await run_blocking(
            scram_alterations.apply,
            plans,
            lambda a: store.alter(a.user, upsertions=a.upsertions, deletions=a.deletions),
            source=f"{current_identity(_NO_GRPC_CONTEXT).host} over Kafka",
            denied=None if refusal is None else errors.for_code(refusal.code, refusal.message),
        )
        results = [
            build(
                module.AlterUserScramCredentialsResult,
                user=user,
                error_code=error_code(error.code if error is not None else ErrorCode.NONE),
                error_message=error.message if error is not None else None,
            )
            for user, error in outcomes.items()
        ]
        return build(
            module.AlterUserScramCredentialsResponse,
            throttle_time=_NO_THROTTLE,
            results=tuple(results),
        )
