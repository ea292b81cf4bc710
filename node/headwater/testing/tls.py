"""Certificates for tests: a CA, broker and client certificates, in Kafka's PEM forms.

Needs the ``cryptography`` package (in the ``test`` extras); nothing else in Headwater
imports this module.  Keys are ECDSA P-256 (fast to make, as TLS-ready as RSA).
:func:`write_keystore` writes Kafka's PEM keystore (private key, then the certificate
chain); :attr:`CertificateAuthority.pem` is a truststore.

    ca = CertificateAuthority.create()
    broker = ca.issue("broker", sans=("127.0.0.1", "localhost"))
    write_keystore(tmp / "broker.pem", broker)
    (tmp / "ca.pem").write_bytes(ca.pem)
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str, unit: str = "") -> x509.Name:
    """Encoded most significant first (O, OU, CN), as CAs do: its RFC 2253 form, what
    gRPC reports and ``ssl.principal.mapping.rules`` see, is ``CN=..,OU=..,O=..``."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)]
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


@dataclasses.dataclass(frozen=True)
class IssuedCertificate:
    """A private key and its certificate chain (leaf first), PEM."""

    key_pem: bytes = dataclasses.field(repr=False)
    cert_pem: bytes
    chain_pem: bytes

    @property
    def keystore_pem(self) -> bytes:
        """Kafka's PEM keystore: the key, then the chain."""
        return self.key_pem + self.chain_pem


@dataclasses.dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that issues leaf certificates."""

    key: ec.EllipticCurvePrivateKey = dataclasses.field(repr=False)
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str = "Headwater Test CA", *, days: int = 30) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name, "Headwater Tests")
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        *,
        organization: str = "Headwater Tests",
        unit: str = "",
        sans: Sequence[str] = ("127.0.0.1", "localhost"),
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> IssuedCertificate:
        """A leaf certificate for servers and clients; ``sans`` are IPs or DNS names."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        alt_names: list[x509.GeneralName] = []
        for san in sans:
            try:
                alt_names.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                alt_names.append(x509.DNSName(san))
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization, unit))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
            .not_valid_after(not_after or now + datetime.timedelta(days=10))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        return IssuedCertificate(_key_pem(key), cert_pem, cert_pem)

    def issue_expired(self, common_name: str) -> IssuedCertificate:
        """A certificate whose validity ended yesterday."""
        now = _now()
        return self.issue(
            common_name,
            not_before=now - datetime.timedelta(days=10),
            not_after=now - datetime.timedelta(days=1),
        )


def write_keystore(path: Path, issued: IssuedCertificate) -> Path:
    """Write Kafka's PEM keystore (key then chain), readable by the owner only.

    Written to a temporary name and renamed, as a certificate manager rotates files,
    so a broker reloading it never reads half a file.
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(issued.keystore_pem)
    tmp.chmod(0o600)
    tmp.replace(path)
    return path
