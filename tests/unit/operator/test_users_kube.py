"""The User reconciler's I/O adapters without a cluster: ACL conversions and the clients CA.

Plan rules become Kafka's ACL bindings and back unchanged for every resource, pattern,
operation and permission; a delete filter matches exactly its rule (not a wildcard or a
prefix that would widen it).  The clients CA issues ``CN=<user>`` client certificates
and says RENEW for one from another CA, for another user, without its key, unreadable,
or in the last third of its lifetime (time passed in).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from headwater.security import acls
from headwater_operator import users
from headwater_operator.users import AclRule, CertificateState
from headwater_operator.users_kube import PemClientsCa, exact_filter, to_binding, to_rule

from tests.unit.operator.user_fakes import make_ca

RULES = [
    AclRule(rtype, name, pattern, op, perm, host)
    for rtype, ops in users.SUPPORTED_OPERATIONS.items()
    for op in sorted(ops)
    for perm in ("ALLOW", "DENY")
    for host in ("*", "10.1.2.3")
    for name, pattern in (
        [("kafka-cluster", "LITERAL")]
        if rtype == "CLUSTER"
        else [("orders", "LITERAL"), ("app-", "PREFIXED"), ("*", "LITERAL")]
    )
]


def test_every_rule_round_trips_through_a_binding() -> None:
    for rule in RULES:
        binding = to_binding("User:alice", rule)
        assert binding.entry.principal == "User:alice"
        assert to_rule(binding) == rule


def test_delete_filter_matches_exactly_its_rule() -> None:
    rule = AclRule("TOPIC", "app-", "PREFIXED", "READ", "ALLOW")
    f = exact_filter("User:alice", rule)
    assert f.matches(to_binding("User:alice", rule))
    for other in (
        rule._replace(pattern_type="LITERAL"),
        rule._replace(resource_name="app-x"),
        rule._replace(operation="WRITE"),
        rule._replace(permission="DENY"),
        rule._replace(host="10.0.0.1"),
    ):
        assert not f.matches(to_binding("User:alice", other)), other
    assert not f.matches(to_binding("User:bob", rule))
    assert f.pattern.pattern_type is acls.PatternType.PREFIXED


NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)


def ca_at(path: Path, when: list[datetime.datetime]) -> PemClientsCa:
    return PemClientsCa(str(path), trust_pem="", validity_days=30, clock=lambda: when[0])


def test_issued_certificate_is_a_client_certificate_of_the_user(tmp_path: Path) -> None:
    ca_cert = make_ca(tmp_path / "ca")
    clock = [NOW]
    ca = ca_at(tmp_path / "ca", clock)
    data = ca.issue("alice")
    cert = x509.load_pem_x509_certificate(data["user.crt"].encode())
    cert.verify_directly_issued_by(ca_cert)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.subject.rfc4514_string() == "CN=alice"
    assert "BEGIN CERTIFICATE" in data["ca.crt"]  # no trust given: the CA's own
    assert data["user-keystore.pem"] == data["user.key"] + data["user.crt"]
    assert ca.state("alice", data) is CertificateState.VALID
    clock[0] = NOW + datetime.timedelta(days=19)
    assert ca.state("alice", data) is CertificateState.VALID
    clock[0] = NOW + datetime.timedelta(days=21)
    assert ca.state("alice", data) is CertificateState.RENEW


@pytest.mark.parametrize("case", ["other-user", "no-key", "garbage", "other-ca"])
def test_certificates_to_renew(tmp_path: Path, case: str) -> None:
    make_ca(tmp_path / "ca")
    make_ca(tmp_path / "other", name="other-ca")
    ca = ca_at(tmp_path / "ca", [NOW])
    data = ca.issue("alice")
    if case == "other-user":
        data = ca.issue("bob")
    elif case == "no-key":
        del data["user.key"]
    elif case == "garbage":
        data["user.crt"] = "not a certificate"
    else:
        data = ca_at(tmp_path / "other", [NOW]).issue("alice")
    assert ca.state("alice", data) is CertificateState.RENEW
