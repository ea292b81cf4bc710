"""Transport failures as the Kafka errors a Kafka client would see.

Retry decisions are made in one vocabulary: ``UNAVAILABLE`` (connection refused
or lost) is ``NetworkError`` and a missed deadline is ``RequestTimedOutError``,
both retriable; anything else is a malformed request or a broker bug and is not
retried.  Every call path of the transport (:mod:`.connection`, :mod:`.streams`,
:mod:`.sasl`) translates here, so none of them imports another for it.
"""

from __future__ import annotations

import grpc

from headwater import errors

__all__ = ["as_error", "translate_rpc_error"]


def translate_rpc_error(exc: grpc.RpcError, address: str) -> errors.HeadwaterError:
    """The Kafka error a failed gRPC call amounts to."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    where = f"broker {address}: {details or code}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, None):
        reason = (details or "unavailable").rsplit(": ", 1)[-1]  # grpc's last, specific cause
        return errors.NetworkError(f"cannot reach broker {address}: {reason}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.RequestTimedOutError(f"no answer in time from {where}")
    if code == grpc.StatusCode.UNAUTHENTICATED:  # a listener refused the caller
        return errors.SaslAuthenticationFailedError(
            f"broker {address} refused the caller: {details}"
        )
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return errors.UnsupportedVersionError(where)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return errors.InvalidRequestError(where)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        # An authorizer refusal of an RPC whose response has no error field, e.g.
        # "CLUSTER_AUTHORIZATION_FAILED: not authorized to DESCRIBE the cluster".
        name, _, message = (details or "").partition(": ")
        if name in errors.ErrorCode.__members__:
            return errors.for_code(errors.ErrorCode[name], message)
        return errors.ClusterAuthorizationFailedError(where)
    return errors.UnknownServerError(where)


def as_error(exc: BaseException, address: str) -> errors.HeadwaterError:
    """Any exception of a call to ``address`` as the Kafka error a client acts on."""
    if isinstance(exc, errors.HeadwaterError):
        return exc
    if isinstance(exc, grpc.RpcError):
        return translate_rpc_error(exc, address)
    return errors.UnknownServerError(f"{type(exc).__name__}: {exc}")
