"""KIP-554 AlterUserScramCredentials decided without ZooKeeper: Kafka's refusals per user,
and the stored credential derived from the client's salted password."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.security.scram_alterations import Deletion, Upsertion, UserAlteration, apply, plan

SHA512 = ScramMechanism.SCRAM_SHA_512
SALTED = SHA512.salted_password("pw", b"salt", 4096)


def up(user: str = "alice", mechanism: str = "SCRAM-SHA-512", **kw: object) -> Upsertion:
    fields: dict[str, object] = {"iterations": 4096, "salt": b"salt", "salted_password": SALTED}
    fields.update(kw)
    return Upsertion(user=user, mechanism=mechanism, **fields)  # type: ignore[arg-type]


def test_an_upsertion_stores_the_keys_not_the_salted_password() -> None:
    out = plan(upsertions=[up()], deletions=[Deletion("bob", "SCRAM-SHA-256")])
    alice = out["alice"]
    assert isinstance(alice, UserAlteration)
    assert alice.upsertions[SHA512] == ScramCredential.from_password(
        SHA512, "pw", salt=b"salt", iterations=4096
    )
    bob = out["bob"]
    assert isinstance(bob, UserAlteration)
    assert bob.deletions == frozenset({ScramMechanism.SCRAM_SHA_256})
    assert repr(SALTED) not in repr(up())


@pytest.mark.parametrize(
    ("upsertions", "deletions", "error", "match"),
    [
        ([up(user="")], [], errors.UnacceptableCredentialError, "empty"),
        ([up(mechanism="PLAIN")], [], errors.UnsupportedSaslMechanismError, "PLAIN"),
        ([], [Deletion("alice", "UNKNOWN(0)")], errors.UnsupportedSaslMechanismError, "UNKNOWN"),
        ([up(iterations=4095)], [], errors.UnacceptableCredentialError, "too few"),
        ([up(iterations=16385)], [], errors.UnacceptableCredentialError, "too many"),
        ([up(salt=b"")], [], errors.UnacceptableCredentialError, "salt"),
        ([up(salted_password=b"short")], [], errors.UnacceptableCredentialError, "64 bytes"),
        ([up(), up()], [], errors.DuplicateResourceError, "twice"),
        ([up()], [Deletion("alice", "SCRAM-SHA-512")], errors.DuplicateResourceError, "twice"),
    ],
)
def test_kafkas_refusals_fail_the_whole_user_only(
    upsertions: list[Upsertion],
    deletions: list[Deletion],
    error: type[errors.HeadwaterError],
    match: str,
) -> None:
    out = plan(upsertions=[*upsertions, up(user="carol")], deletions=deletions)
    user = (upsertions or deletions)[0].user
    assert isinstance(out[user], error)
    assert match in str(out[user])
    assert isinstance(out["carol"], UserAlteration)


def test_two_mechanisms_for_one_user_are_one_alteration() -> None:
    salted256 = ScramMechanism.SCRAM_SHA_256.salted_password("pw", b"salt", 4096)
    out = plan(
        upsertions=[up(), up(mechanism="SCRAM-SHA-256", salted_password=salted256)],
        deletions=[],
    )
    alice = out["alice"]
    assert isinstance(alice, UserAlteration)
    assert set(alice.upsertions) == set(ScramMechanism)


def test_apply_writes_each_planned_user_and_answers_each_outcome() -> None:
    plans = plan(
        upsertions=[up(user="alice"), up(user="bob"), up(user="", iterations=1)],
        deletions=[Deletion("carol", "SCRAM-SHA-512")],
    )
    written: list[str] = []

    def write(alteration: UserAlteration) -> None:
        if alteration.user == "carol":
            raise errors.ResourceNotFoundError("no SCRAM-SHA-512 credential of carol")
        written.append(alteration.user)

    out = apply(plans, write, source="test")
    assert written == ["alice", "bob"]
    assert out["alice"] is None and out["bob"] is None
    assert isinstance(out[""], errors.UnacceptableCredentialError)  # refused plan: not written
    assert isinstance(out["carol"], errors.ResourceNotFoundError)  # failed write: the others go on
    assert list(out) == ["alice", "bob", "", "carol"]


def test_apply_denied_writes_nothing_and_answers_every_user_with_the_refusal() -> None:
    plans = plan(upsertions=[up(user="alice")], deletions=[Deletion("bob", "SCRAM-SHA-256")])
    denied = errors.ClusterAuthorizationFailedError("no ALTER on the cluster")
    written: list[UserAlteration] = []
    out = apply(plans, written.append, source="test", denied=denied)
    assert written == []
    assert out == {"alice": denied, "bob": denied}
