"""The I/O behind the User reconciler: the brokers, Kubernetes Secrets and the clients CA.

* :class:`AdminUsers`: :class:`user_reconciler.UserAdmin` over :class:`headwater.Admin`
  (Kafka's ``createAcls``/``describeAcls``/``deleteAcls`` and KIP-554's SCRAM calls), the
  plan's :class:`users.AclRule` values turned into :mod:`headwater.security.acls` ones.
* :class:`KubeSecrets`: :class:`user_reconciler.SecretStore` over the ``kubernetes``
  client; Secrets carry the label ``headwater.io/user`` and an ownerReference to their
  User (so Kubernetes' garbage collector removes them even if the finalizer is bypassed).
* :class:`PemClientsCa`: signs Users' client certificates (subject ``CN=<user>``, client
  auth only) with the CA in ``HEADWATER_CLIENTS_CA_DIR`` and tells whether a stored one
  is still good (issued by this CA, for this user, not within a third of its lifetime of
  expiry).  ``cryptography`` is imported only here, only when a CA is configured.
* :func:`new_password`: 32 random URL-safe characters from :mod:`secrets`.
"""

from __future__ import annotations

import base64
import datetime
import secrets as random_secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from headwater import errors
from headwater.client import Admin
from headwater.client.admin.quotas import MATCH_EXACT, QuotaAlteration, QuotaFilterComponent
from headwater.client.admin.values import ScramDeletion, ScramUpsertion
from headwater.security import acls

from headwater_operator.user_reconciler import USER_LABEL, KubernetesError, UserResource
from headwater_operator.users import AclRule, CertificateState

MECHANISM = "SCRAM-SHA-512"


def new_password() -> str:
    return random_secrets.token_urlsafe(24)


def to_binding(principal: str, rule: AclRule) -> acls.AclBinding:
    return acls.AclBinding(
        acls.ResourcePattern(
            acls.ResourceType[rule.resource_type],
            rule.resource_name,
            acls.PatternType[rule.pattern_type],
        ),
        acls.AccessControlEntry(
            principal,
            rule.host,
            acls.AclOperation[rule.operation],
            acls.AclPermissionType[rule.permission],
        ),
    )


def to_rule(binding: acls.AclBinding) -> AclRule:
    return AclRule(
        binding.pattern.resource_type.name,
        binding.pattern.name,
        binding.pattern.pattern_type.name,
        binding.entry.operation.name,
        binding.entry.permission_type.name,
        binding.entry.host,
    )


def exact_filter(principal: str, rule: AclRule) -> acls.AclBindingFilter:
    """A filter matching exactly one stored ACL (no wildcard widening)."""
    b = to_binding(principal, rule)
    return acls.AclBindingFilter(
        acls.ResourcePatternFilter(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type),
        acls.AccessControlEntryFilter(
            b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission_type
        ),
    )


class AdminUsers:
    """:class:`user_reconciler.UserAdmin` over a :class:`headwater.Admin` (thread-safe)."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def acls_of(self, principal: str) -> frozenset[AclRule]:
        found = self.admin.describe_acls(
            acls.AclBindingFilter(entry=acls.AccessControlEntryFilter(principal=principal))
        )
        return frozenset(to_rule(b) for b in found)

    def create_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None:
        results = self.admin.create_acls([to_binding(principal, r) for r in rules])
        for error in results:
            if error is not None:
                raise error

    def delete_acls(self, principal: str, rules: tuple[AclRule, ...]) -> None:
        self.admin.delete_acls([exact_filter(principal, r) for r in rules])

    def has_scram(self, user: str) -> bool:
        found = self.admin.describe_user_scram_credentials([user], raise_on_error=False)
        description = found.get(user)
        if description is None or isinstance(description, errors.ResourceNotFoundError):
            return False
        if isinstance(description, errors.HeadwaterError):
            raise description
        return any(c.mechanism == MECHANISM for c in description.credential_infos)

    def upsert_scram(self, user: str, password: str, iterations: int) -> None:
        self.admin.alter_user_scram_credentials(
            upsertions=[ScramUpsertion(user, MECHANISM, iterations, password)]
        )

    def delete_scram(self, user: str) -> None:
        result = self.admin.alter_user_scram_credentials(
            deletions=[ScramDeletion(user, MECHANISM)], raise_on_error=False
        )
        error = result.get(user)
        if error is not None and not isinstance(error, errors.ResourceNotFoundError):
            raise error

    def quotas_of(self, user: str) -> tuple[tuple[str, float], ...]:
        found = self.admin.describe_client_quotas(
            [QuotaFilterComponent("user", MATCH_EXACT, user)], strict=True
        )
        return tuple(sorted(found.get((("user", user),), {}).items()))

    def alter_quotas(
        self, user: str, values: tuple[tuple[str, float], ...], removed: tuple[str, ...]
    ) -> None:
        ops: dict[str, float | None] = {k: v for k, v in values}
        ops.update((k, None) for k in removed)
        self.admin.alter_client_quotas([QuotaAlteration({"user": user}, ops)])


class KubeSecrets:
    """:class:`user_reconciler.SecretStore` over the official ``kubernetes`` client."""

    def __init__(self, namespace: str, api_client: Any = None) -> None:
        import kubernetes

        if api_client is None:
            try:
                kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
            api_client = kubernetes.client.ApiClient()
        self._core: Any = kubernetes.client.CoreV1Api(api_client)
        self._api_exception: type[Exception] = kubernetes.client.exceptions.ApiException
        self.namespace = namespace

    def _status(self, exc: Exception) -> int:
        return int(getattr(exc, "status", 0) or 0)

    def read(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None:
        try:
            secret = self._core.read_namespaced_secret(name, self.namespace)
        except self._api_exception as exc:
            if self._status(exc) == 404:
                return None
            raise KubernetesError(f"cannot read Secret {name}: {exc}") from None
        labels = dict(secret.metadata.labels or {})
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        return labels, data

    def write(self, name: str, data: Mapping[str, str], *, owner: UserResource) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {USER_LABEL: owner.name, "app.kubernetes.io/managed-by": "headwater"},
                "ownerReferences": [
                    {
                        "apiVersion": "headwater.io/v1",
                        "kind": "User",
                        "name": owner.name,
                        "uid": owner.uid,
                        "controller": True,
                        "blockOwnerDeletion": False,
                    }
                ],
            },
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        try:
            self._core.replace_namespaced_secret(name, self.namespace, body)
        except self._api_exception as exc:
            if self._status(exc) != 404:
                raise KubernetesError(f"cannot write Secret {name}: {exc}") from None
            try:
                self._core.create_namespaced_secret(self.namespace, body)
            except self._api_exception as exc2:
                raise KubernetesError(f"cannot create Secret {name}: {exc2}") from None

    def delete(self, name: str) -> bool:
        try:
            self._core.delete_namespaced_secret(name, self.namespace)
        except self._api_exception as exc:
            if self._status(exc) == 404:
                return False
            raise KubernetesError(f"cannot delete Secret {name}: {exc}") from None
        return True


class PemClientsCa:
    """Issues ``CN=<user>`` client certificates with a CA read from ``tls.crt``/``tls.key``.

    ``trust_pem`` is what the user's Secret gets as ``ca.crt``: the CA(s) the brokers'
    certificates chain to (the operator's own ``ssl_cafile``), so the user can check them.
    """

    def __init__(
        self,
        ca_dir: str,
        *,
        trust_pem: str,
        validity_days: int,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        directory = Path(ca_dir)
        self._cert = x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())
        key = serialization.load_pem_private_key(
            (directory / "tls.key").read_bytes(), password=None
        )
        self._key: Any = key
        self.trust_pem = trust_pem or self._cert.public_bytes(serialization.Encoding.PEM).decode()
        self.validity = datetime.timedelta(days=validity_days)
        self.clock = clock

    def issue(self, user: str) -> dict[str, str]:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = self.clock()
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self.validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        # user-keystore.pem: Kafka's PEM keystore (key, then certificate), what a client's
        # ssl.keystore.location (headwater --command-config, Spark's kafka.ssl.*) takes.
        return {
            "ca.crt": self.trust_pem,
            "user.crt": cert_pem,
            "user.key": key_pem,
            "user-keystore.pem": key_pem + cert_pem,
        }

    def state(self, user: str, data: Mapping[str, str]) -> CertificateState:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        try:
            cert = x509.load_pem_x509_certificate(data["user.crt"].encode())
            cert.verify_directly_issued_by(self._cert)
        except (KeyError, ValueError, TypeError):
            return CertificateState.RENEW
        except Exception:  # cryptography's InvalidSignature: another CA signed it
            return CertificateState.RENEW
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if [n.value for n in names] != [user] or "user.key" not in data:
            return CertificateState.RENEW
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        if self.clock() >= cert.not_valid_after_utc - lifetime / 3:
            return CertificateState.RENEW
        return CertificateState.VALID
