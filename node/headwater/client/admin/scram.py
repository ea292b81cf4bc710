"""SCRAM credential administration of :class:`~headwater.client.admin.client.Admin` (KIP-554).

``describe_user_scram_credentials`` and ``alter_user_scram_credentials`` as Kafka's
``Admin`` has them.  As in Kafka, the password never leaves the client: an upsertion
is sent as a random salt, the iteration count and the salted password
``Hi(password, salt, iterations)``; the broker derives the stored and server keys
from it.  Describe shows mechanisms and iteration counts only.

Every request goes to any live broker (each writes ZooKeeper; every broker's cache
follows the change notification), retried on another after a lost connection.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from typing import Any

from headwater import errors
from headwater.client.admin.core import AdminCore
from headwater.client.admin.values import (
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
    UserScramCredentialsDescription,
)
from headwater.security import scram
from headwater.security.scram import ScramMechanism
from headwater.v1 import sasl_pb2, sasl_pb2_grpc

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32

_TO_PROTO = {
    "SCRAM-SHA-256": sasl_pb2.SCRAM_SHA_256,
    "SCRAM-SHA-512": sasl_pb2.SCRAM_SHA_512,
}
_FROM_PROTO = {int(v): k for k, v in _TO_PROTO.items()}


def upsertion_to_proto(
    upsertion: ScramUpsertion, *, salt: Callable[[int], bytes] = secrets.token_bytes
) -> sasl_pb2.ScramCredentialUpsertion:
    """Salt and hash the password here; only the salted password is sent.

    A mechanism or iteration count the broker will refuse is sent without hashing
    (hashing 10**9 iterations would hang the client); the broker answers with
    UNSUPPORTED_SASL_MECHANISM or UNACCEPTABLE_CREDENTIAL.
    """
    iterations = DEFAULT_ITERATIONS if upsertion.iterations == -1 else upsertion.iterations
    msg = sasl_pb2.ScramCredentialUpsertion(
        name=upsertion.user,
        mechanism=_TO_PROTO.get(upsertion.mechanism, sasl_pb2.SCRAM_UNKNOWN),
        iterations=iterations,
    )
    if upsertion.mechanism not in _TO_PROTO:
        return msg
    try:
        scram.check_iterations(iterations)
    except ValueError:
        return msg
    mechanism = ScramMechanism.from_name(upsertion.mechanism)
    msg.salt = salt(SALT_BYTES)
    msg.salted_password = mechanism.salted_password(upsertion.password, msg.salt, iterations)
    return msg


class ScramAdmin:
    """SCRAM credential calls of :class:`~headwater.client.admin.client.Admin`, over its core."""

    def __init__(self, core: AdminCore) -> None:
        self._core = core

    def _scram_call(self, rpc: str, request: Any) -> Any:
        """Send ``request`` to any broker's ScramAdmin service, retrying on another."""
        return self._core.call_any_broker(
            lambda address: sasl_pb2_grpc.ScramAdminStub(self._core.channels.channel(address)),
            rpc,
            request,
        )

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, raise_on_error: bool = True
    ) -> dict[str, UserScramCredentialsDescription | errors.HeadwaterError]:
        """Each user's mechanisms and iteration counts (``None``: every user with one).

        A named user without credentials is RESOURCE_NOT_FOUND: raised unless
        ``raise_on_error=False``, in which case it is that user's value.
        """
        response = self._scram_call(
            "DescribeUserScramCredentials",
            sasl_pb2.DescribeUserScramCredentialsRequest(users=list(users or ())),
        )
        if response.error:
            raise errors.for_code(response.error, response.error_message)
        out: dict[str, UserScramCredentialsDescription | errors.HeadwaterError] = {}
        for r in response.results:
            if r.error:
                error = errors.for_code(r.error, r.error_message)
                if raise_on_error:
                    raise error
                out[r.user] = error
                continue
            out[r.user] = UserScramCredentialsDescription(
                user=r.user,
                credential_infos=tuple(
                    ScramCredentialInfo(
                        _FROM_PROTO.get(c.mechanism, f"UNKNOWN({c.mechanism})"), c.iterations
                    )
                    for c in r.credential_infos
                ),
            )
        return out

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[ScramUpsertion] = (),
        deletions: Iterable[ScramDeletion] = (),
        *,
        raise_on_error: bool = True,
    ) -> dict[str, errors.HeadwaterError | None]:
        """Set and delete credentials; each user's error (None: done).

        Raises the first user's error unless ``raise_on_error=False``.  Kafka's
        refusals: UNACCEPTABLE_CREDENTIAL (empty user, fewer than 4096 or more than
        16384 iterations), UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE (a user's
        mechanism altered twice), RESOURCE_NOT_FOUND (deleting what does not exist).
        """
        request = sasl_pb2.AlterUserScramCredentialsRequest(
            upsertions=[upsertion_to_proto(u) for u in upsertions],
            deletions=[
                sasl_pb2.ScramCredentialDeletion(
                    name=d.user, mechanism=_TO_PROTO.get(d.mechanism, sasl_pb2.SCRAM_UNKNOWN)
                )
                for d in deletions
            ],
        )
        response = self._scram_call("AlterUserScramCredentials", request)
        out: dict[str, errors.HeadwaterError | None] = {
            r.user: errors.for_code(r.error, r.error_message) if r.error else None
            for r in response.results
        }
        if raise_on_error:
            for error in out.values():
                if error is not None:
                    raise error
        return out
