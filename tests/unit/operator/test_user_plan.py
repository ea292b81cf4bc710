"""User specs against the cluster's state (pure): parsing, refusals, and every plan path.

Parsing: Strimzi's spelling becomes Kafka's (one rule per operation), defaults (literal,
allow, host '*', the cluster's name), and every bad field is refused naming it, as is a
super user's name.  Plans: SCRAM (new password written before the broker learns it, an
existing password reused, a lost credential restored), TLS (issued when missing or due),
no authentication, switching type both ways, ACLs added before stale ones are removed,
nothing to do when in line, and deletion removing everything the user had.
"""

from __future__ import annotations

from typing import Any

import pytest
from headwater_operator import users
from headwater_operator.users import (
    AclRule,
    ActualUser,
    Authentication,
    CertificateState,
    CreateAcls,
    DeleteAcls,
    DeleteScram,
    DeleteSecret,
    IssueCertificate,
    Reason,
    Refusal,
    UpsertScram,
    UserSpec,
    WriteScramSecret,
)

READ_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "READ", "ALLOW")
WRITE_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "WRITE", "ALLOW")
DENY_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "WRITE", "DENY")
GROUP = AclRule("GROUP", "app-", "PREFIXED", "READ", "ALLOW")


def acl(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]}
    out.update(kw)
    return out


def spec(*acls: Any, auth: str | None = "scram-sha-512") -> dict[str, Any]:
    out: dict[str, Any] = {"authorization": {"type": "simple", "acls": list(acls)}}
    if auth is not None:
        out["authentication"] = {"type": auth}
    return out


def nothing(**kw: Any) -> ActualUser:
    base: dict[str, Any] = {"acls": frozenset(), "has_scram": False, "secret_password": None}
    base.update(kw)
    return ActualUser(**base)


# -- parsing ---------------------------------------------------------------------------------


def test_spec_translates_to_kafka_names_one_rule_per_operation() -> None:
    parsed = users.parse_spec(
        "alice",
        spec(
            acl(operations=["Read", "Describe"]),
            acl(resource={"type": "group", "name": "app-", "patternType": "prefix"}),
            acl(resource={"type": "cluster"}, operations=["IdempotentWrite"], type="deny"),
            acl(
                resource={"type": "transactionalId", "name": "tx"},
                operations=["Write"],
                host="10.0.0.1",
            ),
        ),
    )
    assert isinstance(parsed, UserSpec)
    assert parsed.principal == "User:alice"
    assert parsed.authentication is Authentication.SCRAM_SHA_512
    assert parsed.acls == {
        READ_ORDERS,
        AclRule("TOPIC", "orders", "LITERAL", "DESCRIBE", "ALLOW"),
        GROUP,
        AclRule("CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE", "DENY"),
        AclRule("TRANSACTIONAL_ID", "tx", "LITERAL", "WRITE", "ALLOW", "10.0.0.1"),
    }


def test_spec_without_authentication_or_authorization() -> None:
    parsed = users.parse_spec("bob", {})
    assert parsed == UserSpec("bob", None, frozenset())
    tls = users.parse_spec("bob", {"authentication": {"type": "tls"}})
    assert isinstance(tls, UserSpec) and tls.authentication is Authentication.TLS


def test_duplicate_rules_collapse() -> None:
    parsed = users.parse_spec("alice", spec(acl(), acl(operations=["Read", "Read"])))
    assert isinstance(parsed, UserSpec) and parsed.acls == {READ_ORDERS}


@pytest.mark.parametrize(
    ("name", "body", "named"),
    [
        ("alice", {"authentication": {"type": "plain"}}, "spec.authentication.type"),
        ("alice", {"authentication": "scram"}, "spec.authentication.type"),
        ("alice", {"authorization": {"type": "opa"}}, "spec.authorization.type"),
        ("alice", {"authorization": {"type": "simple", "acls": {}}}, "acls must be a list"),
        ("alice", spec("x"), "acls[0] must be an object"),
        ("alice", spec({"operations": ["Read"]}), "acls[0].resource is required"),
        ("alice", spec(acl(resource={"type": "user", "name": "x"})), "resource.type"),
        ("alice", spec(acl(resource={"type": "topic"})), "resource.name is required"),
        ("alice", spec(acl(resource={"type": "topic", "name": ""})), "resource.name"),
        ("alice", spec(acl(resource={"type": "topic", "name": "a", "patternType": "glob"})),
         "patternType"),
        ("alice", spec(acl(resource={"type": "topic", "name": "*", "patternType": "prefix"})),
         "prefix pattern cannot be '*'"),
        ("alice", spec(acl(resource={"type": "cluster", "name": "other"})), "kafka-cluster"),
        ("alice", spec(acl(resource={"type": "cluster", "patternType": "prefix"})),
         "kafka-cluster"),
        ("alice", spec(acl(operations=[])), "at least one operation"),
        ("alice", spec(acl(operations="Read")), "at least one operation"),
        ("alice", spec(acl(operations=["Fly"])), "unknown operation 'Fly'"),
        ("alice", spec(acl(operations=["IdempotentWrite"])), "does not apply to a topic"),
        ("alice", spec(acl(resource={"type": "group", "name": "g"}, operations=["Write"])),
         "does not apply to a group"),
        ("alice", spec(acl(type="maybe")), "acls[0].type must be allow or deny"),
        ("alice", spec(acl(host="example.com")), "host must be '*' or an IP address"),
        ("alice", spec(acl(host=5)), "host must be '*' or an IP address"),
        ("Alice", {}, "user name 'Alice'"),
        ("a" * 65, {}, "at most 64"),
    ],
)  # fmt: skip
def test_invalid_specs_are_refused_naming_the_field(
    name: str, body: dict[str, Any], named: str
) -> None:
    refusal = users.parse_spec(name, body)
    assert isinstance(refusal, Refusal), refusal
    assert refusal.reason == Reason.INVALID_SPEC
    assert named in refusal.message


def test_super_users_are_reserved() -> None:
    reserved = ["User:hw-headwater-broker", "User:hw-headwater-operator"]
    refusal = users.parse_spec("hw-headwater-operator", {}, reserved=reserved)
    assert isinstance(refusal, Refusal) and refusal.reason == Reason.RESERVED_NAME
    assert "super user" in refusal.message
    assert isinstance(users.parse_spec("app", {}, reserved=reserved), UserSpec)


# -- plans -------------------------------------------------------------------------------------


def desired(auth: Authentication | None, *rules: AclRule) -> UserSpec:
    return UserSpec("alice", auth, frozenset(rules))


def test_new_scram_user_writes_the_secret_before_the_broker_credential() -> None:
    actions = users.plan(
        desired(Authentication.SCRAM_SHA_512, READ_ORDERS), nothing(), new_password="pw1"
    )
    assert actions == [
        WriteScramSecret("alice", "pw1"),
        UpsertScram("alice", "pw1", 4096),
        CreateAcls("alice", (READ_ORDERS,)),
    ]


def test_existing_scram_password_is_reused_and_a_lost_credential_restored() -> None:
    want = desired(Authentication.SCRAM_SHA_512)
    in_line = nothing(has_scram=True, secret_password="kept")
    assert users.plan(want, in_line, new_password="unused") == []
    lost = nothing(has_scram=False, secret_password="kept")
    assert users.plan(want, lost, new_password="unused") == [UpsertScram("alice", "kept")]


def test_lost_secret_gets_a_new_password_set_on_the_broker() -> None:
    want = desired(Authentication.SCRAM_SHA_512)
    actions = users.plan(want, nothing(has_scram=True), new_password="pw2")
    assert actions == [WriteScramSecret("alice", "pw2"), UpsertScram("alice", "pw2")]


@pytest.mark.parametrize("state", [CertificateState.MISSING, CertificateState.RENEW])
def test_tls_user_is_issued_a_certificate_when_missing_or_due(state: CertificateState) -> None:
    actions = users.plan(desired(Authentication.TLS), nothing(certificate=state), new_password="x")
    assert actions == [IssueCertificate("alice")]


def test_valid_tls_user_needs_nothing() -> None:
    actual = nothing(certificate=CertificateState.VALID)
    assert users.plan(desired(Authentication.TLS), actual, new_password="x") == []


def test_switching_scram_to_tls_removes_the_scram_credential() -> None:
    actual = nothing(has_scram=True, secret_password="old")
    actions = users.plan(desired(Authentication.TLS), actual, new_password="x")
    assert actions == [DeleteScram("alice"), IssueCertificate("alice")]


def test_switching_tls_to_scram_replaces_the_secret() -> None:
    actual = nothing(certificate=CertificateState.VALID)
    actions = users.plan(desired(Authentication.SCRAM_SHA_512), actual, new_password="pw")
    assert actions == [WriteScramSecret("alice", "pw"), UpsertScram("alice", "pw")]


def test_dropping_authentication_removes_credential_and_secret() -> None:
    scram = nothing(has_scram=True, secret_password="old")
    assert users.plan(desired(None), scram, new_password="x") == [
        DeleteScram("alice"),
        DeleteSecret("alice"),
    ]
    tls = nothing(certificate=CertificateState.VALID)
    assert users.plan(desired(None), tls, new_password="x") == [DeleteSecret("alice")]
    assert users.plan(desired(None), nothing(), new_password="x") == []


def test_acls_are_added_before_stale_ones_are_removed() -> None:
    actual = nothing(
        acls=frozenset({READ_ORDERS, WRITE_ORDERS}), has_scram=True, secret_password="p"
    )
    want = desired(Authentication.SCRAM_SHA_512, READ_ORDERS, DENY_ORDERS, GROUP)
    actions = users.plan(want, actual, new_password="x")
    assert actions == [
        CreateAcls("alice", (GROUP, DENY_ORDERS)),
        DeleteAcls("alice", (WRITE_ORDERS,)),
    ]
    assert "DENY WRITE on TOPIC:LITERAL:orders from *" in actions[0].describe()


def test_removing_every_acl() -> None:
    actual = nothing(acls=frozenset({READ_ORDERS}))
    assert users.plan(desired(None), actual, new_password="x") == [
        DeleteAcls("alice", (READ_ORDERS,))
    ]


def test_delete_removes_acls_credential_and_secret() -> None:
    actual = nothing(acls=frozenset({READ_ORDERS, GROUP}), has_scram=True, secret_password="p")
    assert users.plan_delete("alice", actual) == [
        DeleteAcls("alice", (GROUP, READ_ORDERS)),
        DeleteScram("alice"),
        DeleteSecret("alice"),
    ]
    tls = nothing(certificate=CertificateState.RENEW)
    assert users.plan_delete("alice", tls) == [DeleteSecret("alice")]
    assert users.plan_delete("alice", nothing()) == []


def test_jaas_config_escapes_the_password() -> None:
    text = users.jaas_config("alice", 'p"w\\')
    assert text == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p\\"w\\\\";'
    )


# -- quotas ----------------------------------------------------------------------------------


def test_quotas_translate_to_kafka_keys() -> None:
    parsed = users.parse_spec(
        "alice",
        {
            "quotas": {
                "producerByteRate": 1048576,
                "consumerByteRate": 2097152,
                "requestPercentage": 55,
            }
        },
    )
    assert isinstance(parsed, UserSpec)
    assert parsed.quotas == (
        ("consumer_byte_rate", 2097152.0),
        ("producer_byte_rate", 1048576.0),
        ("request_percentage", 55.0),
    )


@pytest.mark.parametrize(
    ("quotas", "named"),
    [
        ({"producerByteRate": -1}, "spec.quotas.producerByteRate must be > 0"),
        ({"producerByteRate": 0}, "must be > 0"),
        ({"consumerByteRate": 1.5}, "whole number"),
        ({"requestPercentage": "fast"}, "spec.quotas.requestPercentage must be a number"),
        ({"requestPercentage": True}, "must be a number"),
        ({"controllerMutationRate": 10}, "controllerMutationRate is not supported"),
        ({"byteRate": 10}, "spec.quotas.byteRate is unknown"),
        ([], "spec.quotas must be an object"),
    ],
)
def test_invalid_quotas_are_refused_naming_the_field(quotas: Any, named: str) -> None:
    refusal = users.parse_spec("alice", {"quotas": quotas})
    assert isinstance(refusal, Refusal), refusal
    assert refusal.reason == Reason.INVALID_SPEC
    assert named in refusal.message


def test_quotas_are_set_changed_and_removed() -> None:
    want = UserSpec("alice", None, frozenset(), (("producer_byte_rate", 100.0),))
    assert users.plan(want, nothing(), new_password="pw") == [
        users.AlterQuotas("alice", (("producer_byte_rate", 100.0),), ())
    ]
    held = nothing(quotas=(("producer_byte_rate", 100.0),))
    assert users.plan(want, held, new_password="pw") == []
    was = nothing(quotas=(("consumer_byte_rate", 5.0), ("producer_byte_rate", 50.0)))
    assert users.plan(want, was, new_password="pw") == [
        users.AlterQuotas("alice", (("producer_byte_rate", 100.0),), ("consumer_byte_rate",))
    ]
    assert users.plan_delete("alice", held) == [
        users.AlterQuotas("alice", (), ("producer_byte_rate",))
    ]
