"""Admin's SCRAM upsertions are salted and hashed in the client: the request holds the
salt and Hi(password, salt, i), never the password; refusals are left to the broker."""

from __future__ import annotations

from headwater.client.admin.scram import upsertion_to_proto
from headwater.client.admin.values import ScramUpsertion
from headwater.security.scram import ScramMechanism
from headwater.v1 import sasl_pb2


def test_the_request_holds_the_salted_password_not_the_password() -> None:
    msg = upsertion_to_proto(
        ScramUpsertion("alice", "SCRAM-SHA-512", 4096, "hunter2-secret"),
        salt=lambda n: b"s" * n,
    )
    assert msg.mechanism == sasl_pb2.SCRAM_SHA_512
    assert msg.salt == b"s" * 32 and msg.iterations == 4096
    assert msg.salted_password == ScramMechanism.SCRAM_SHA_512.salted_password(
        "hunter2-secret", b"s" * 32, 4096
    )
    assert b"hunter2-secret" not in msg.SerializeToString()


def test_default_iterations_and_fresh_salts() -> None:
    a = upsertion_to_proto(ScramUpsertion("alice", "SCRAM-SHA-256", -1, "pw"))
    b = upsertion_to_proto(ScramUpsertion("alice", "SCRAM-SHA-256", -1, "pw"))
    assert a.iterations == 4096 and len(a.salted_password) == 32
    assert a.salt != b.salt


def test_what_the_broker_will_refuse_is_not_hashed() -> None:
    for upsertion in (
        ScramUpsertion("alice", "PLAIN", 4096, "pw"),
        ScramUpsertion("alice", "SCRAM-SHA-512", 10**9, "pw"),
        ScramUpsertion("alice", "SCRAM-SHA-512", 1, "pw"),
    ):
        msg = upsertion_to_proto(upsertion)
        assert msg.salted_password == b"" and msg.salt == b""


def test_repr_hides_the_password() -> None:
    assert "pw-123" not in repr(ScramUpsertion("alice", "SCRAM-SHA-512", 4096, "pw-123"))
