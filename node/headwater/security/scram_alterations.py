"""KIP-554's AlterUserScramCredentials, decided apart from ZooKeeper: what to write per user.

Kafka's rules (``ZkAdminManager.alterUserScramCredentials``), each failing the whole
user (nothing of it is written) while other users of the request go on:

* an empty user name: UNACCEPTABLE_CREDENTIAL;
* an unknown mechanism: UNSUPPORTED_SASL_MECHANISM;
* one (user, mechanism) altered twice, by two upsertions or an upsertion and a
  deletion: DUPLICATE_RESOURCE;
* fewer than 4096 or more than 16384 iterations, an empty salt, or a salted
  password of the wrong length for the hash: UNACCEPTABLE_CREDENTIAL.

Deleting a credential that does not exist is RESOURCE_NOT_FOUND, found when writing.
An upsertion carries the salted password (``Hi(password, salt, i)``) the client
computed; the broker derives the stored and server keys from it and drops it.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping

from headwater import errors
from headwater.security import scram
from headwater.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: str


@dataclasses.dataclass(frozen=True, slots=True)
class UserAlteration:
    """What to write for one user: credentials to set, mechanisms to delete."""

    user: str
    upsertions: dict[ScramMechanism, ScramCredential]
    deletions: frozenset[ScramMechanism]


def apply(
    plans: Mapping[str, UserAlteration | errors.HeadwaterError],
    write: Callable[[UserAlteration], None],
    *,
    source: str,
    denied: errors.HeadwaterError | None = None,
) -> dict[str, errors.HeadwaterError | None]:
    """Write each user's alteration with ``write`` (blocking: one ZooKeeper write per user).

    Per user, in ``plans``' order: ``denied`` (the caller may not ALTER the cluster)
    answers every user with that error and writes nothing; a refused plan keeps its
    error; a write that fails answers its error and the other users go on; None means
    written, and is logged with ``source`` (who asked, from where).
    """
    out: dict[str, errors.HeadwaterError | None] = {}
    for user, outcome in plans.items():
        if denied is not None:
            out[user] = denied
        elif isinstance(outcome, errors.HeadwaterError):
            out[user] = outcome
        else:
            try:
                write(outcome)
            except errors.HeadwaterError as exc:
                out[user] = exc
            else:
                out[user] = None
                log.info(
                    "SCRAM credentials of user %r altered from %s (set %s, deleted %s)",
                    user,
                    source,
                    ", ".join(m.value for m in outcome.upsertions) or "none",
                    ", ".join(m.value for m in outcome.deletions) or "none",
                )
    return out


def plan(
    *, upsertions: Iterable[Upsertion], deletions: Iterable[Deletion]
) -> dict[str, UserAlteration | errors.HeadwaterError]:
    """Per user, in the order first named: the alteration to write, or why it is refused."""
    ups = list(upsertions)
    dels = list(deletions)
    order: list[str] = []
    for name in [u.user for u in ups] + [d.user for d in dels]:
        if name not in order:
            order.append(name)
    seen: collections.Counter[tuple[str, str]] = collections.Counter(
        [(u.user, u.mechanism) for u in ups] + [(d.user, d.mechanism) for d in dels]
    )
    out: dict[str, UserAlteration | errors.HeadwaterError] = {}
    for user in order:
        try:
            out[user] = _plan_user(
                user,
                [u for u in ups if u.user == user],
                [d for d in dels if d.user == user],
                seen,
            )
        except errors.HeadwaterError as exc:
            out[user] = exc
    return out


def _plan_user(
    user: str,
    ups: list[Upsertion],
    dels: list[Deletion],
    seen: collections.Counter[tuple[str, str]],
) -> UserAlteration:
    if not user:
        raise errors.UnacceptableCredentialError("Username must not be empty")
    for name in sorted({u.mechanism for u in ups} | {d.mechanism for d in dels}):
        ScramMechanism.from_name(name)
        if seen[(user, name)] > 1:
            raise errors.DuplicateResourceError(
                f"a user credential cannot be altered twice in the same request: "
                f"user {user!r}, {name}"
            )
    credentials: dict[ScramMechanism, ScramCredential] = {}
    for u in ups:
        mechanism = ScramMechanism.from_name(u.mechanism)
        try:
            scram.check_iterations(u.iterations)
        except ValueError as exc:
            raise errors.UnacceptableCredentialError(f"{exc} (user {user!r})") from None
        if not u.salt:
            raise errors.UnacceptableCredentialError(f"empty salt (user {user!r})")
        size = hashlib.new(mechanism.hash_name).digest_size
        if len(u.salted_password) != size:
            raise errors.UnacceptableCredentialError(
                f"the salted password of a {mechanism.value} credential is {size} bytes, "
                f"got {len(u.salted_password)} (user {user!r})"
            )
        credentials[mechanism] = ScramCredential.from_salted_password(
            mechanism, salted_password=u.salted_password, salt=u.salt, iterations=u.iterations
        )
    return UserAlteration(
        user=user,
        upsertions=credentials,
        deletions=frozenset(ScramMechanism.from_name(d.mechanism) for d in dels),
    )
