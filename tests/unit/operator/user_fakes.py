"""In-memory brokers (ACLs, SCRAM credentials) and Secrets for the User handlers' tests,
and a real CA (``cryptography``) for the clients CA."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from headwater import errors
from headwater_operator.user_reconciler import KubernetesError, UserResource
from headwater_operator.users import AclRule


class FakeUserAdmin:
    """:class:`UserAdmin` in memory; ``down=True`` makes every call a network error."""

    def __init__(self) -> None:
        self.acls: dict[str, set[AclRule]] = {}
        self.scram: dict[str, tuple[str, int]] = {}
        self.quotas: dict[str, dict[str, float]] = {}
        self.down = False
        self.calls: list[str] = []

    def _check(self, call: str) -> None:
        self.calls.append(call)
        if self.down:
            raise errors.NetworkError("broker unreachable (test)")

    def acls_of(self, principal: str) -> frozenset[AclRule]:
        self._check("acls_of")
        return frozenset(self.acls.get(principal, set()))

    def create_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None:
        self._check("create_acls")
        self.acls.setdefault(principal, set()).update(rules)

    def delete_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None:
        self._check("delete_acls")
        self.acls.setdefault(principal, set()).difference_update(rules)

    def has_scram(self, user: str) -> bool:
        self._check("has_scram")
        return user in self.scram

    def upsert_scram(self, user: str, password: str, iterations: int) -> None:
        self._check("upsert_scram")
        self.scram[user] = (password, iterations)

    def delete_scram(self, user: str) -> None:
        self._check("delete_scram")
        self.scram.pop(user, None)

    def quotas_of(self, user: str) -> tuple[tuple[str, float], ...]:
        self._check("quotas_of")
        return tuple(sorted(self.quotas.get(user, {}).items()))

    def alter_quotas(
        self, user: str, values: tuple[tuple[str, float], ...], removed: tuple[str, ...]
    ) -> None:
        self._check("alter_quotas")
        held = self.quotas.setdefault(user, {})
        held.update(values)
        for key in removed:
            held.pop(key, None)


class FakeSecrets:
    """:class:`SecretStore` in memory: name -> (labels, data, owner uid)."""

    def __init__(self) -> None:
        self.secrets: dict[str, tuple[dict[str, str], dict[str, str], str]] = {}
        self.down = False

    def read(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None:
        if self.down:
            raise KubernetesError("API server unreachable (test)")
        found = self.secrets.get(name)
        return (dict(found[0]), dict(found[1])) if found else None

    def write(self, name: str, data: Mapping[str, str], *, owner: UserResource) -> None:
        if self.down:
            raise KubernetesError("API server unreachable (test)")
        self.secrets[name] = ({"headwater.io/user": owner.name}, dict(data), owner.uid)

    def delete(self, name: str) -> bool:
        if self.down:
            raise KubernetesError("API server unreachable (test)")
        return self.secrets.pop(name, None) is not None


def make_ca(directory: Path, name: str = "test-clients-ca") -> x509.Certificate:
    """A self-signed CA written as ``directory``/tls.crt and tls.key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert
