"""TLS material of SSL and SASL_SSL listeners: PEM files to gRPC credentials, reloaded live.

Kafka's PEM keystore (``ssl.keystore.type=PEM``) is one file holding the private key
and the certificate chain, or the two inline (``ssl.keystore.key``,
``ssl.keystore.certificate.chain``); the truststore is a PEM file or inline list of CA
certificates.  :func:`split_pem_keystore` is the pure part.

Certificate reload without a restart (Kafka's dynamic listener SSL update): the
server credentials are gRPC's *dynamic* SSL credentials, whose fetch callback gRPC
calls before each new TLS handshake.  :class:`ReloadingServerCredentials` answers it by
comparing the files' modification times and sizes with the last load: unchanged files
cost two ``stat`` calls; changed ones are read again and, when they parse, become the
configuration of every *new* connection (established ones keep theirs, as in Kafka).
A file caught half-written, or a key that does not parse, keeps the previous
material and is logged, once per change, without its contents.

The broker's *client* side (its certificate towards other brokers) follows the same
files the same way: :class:`ReloadingChannelCredentials` gives each new channel the
current material, with a generation number telling channel owners theirs is stale.

The Kafka-protocol listeners (:mod:`headwater.kafka.server`) speak TLS through Python's
:mod:`ssl` over asyncio rather than gRPC: :class:`ReloadingSslContext` makes an
:class:`ssl.SSLContext` of the same files and settings, and picks up rewritten files
for new connections in the same way (checked when a client's TLS hello arrives).

Never logged or put in an exception message: key material, inline PEM values.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import ssl as std_ssl
import tempfile
import threading
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

import grpc

from headwater.server.listeners import SslConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
_KEY = re.compile(
    rb"-----BEGIN ((?:RSA |EC |ENCRYPTED )?PRIVATE KEY)-----.+?-----END \1-----", re.S
)


class TlsMaterialError(ValueError):
    """A keystore or truststore that cannot be used; the message names the file, never
    its contents."""


class PemKeystore(NamedTuple):
    private_key: bytes
    certificate_chain: bytes


def split_pem_keystore(data: bytes, *, where: str) -> PemKeystore:
    """One private key and at least one certificate out of a PEM keystore."""
    keys = [m.group(0) for m in _KEY.finditer(data)]
    certs = [m.group(0) for m in _CERT.finditer(data)]
    if len(keys) != 1:
        raise TlsMaterialError(f"{where}: expected one PEM private key, found {len(keys)}")
    if keys[0].startswith(b"-----BEGIN ENCRYPTED") or b"Proc-Type: 4,ENCRYPTED" in keys[0]:
        raise TlsMaterialError(f"{where}: the private key is encrypted; use an unencrypted key")
    if not certs:
        raise TlsMaterialError(f"{where}: no PEM certificate found")
    return PemKeystore(keys[0] + b"\n", b"\n".join(certs) + b"\n")


def _der_item(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER item at ``at``."""
    if at + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    if at + length > len(data):
        raise ValueError("truncated DER")
    return tag, at, at + length


def certificate_not_after(pem: bytes) -> float:
    """The end of validity (``notAfter``, seconds since the epoch) of the first certificate
    in ``pem`` (a keystore's leaf).  ValueError when there is none or it does not parse.

    Reads the DER structure X.509 fixes: Certificate = SEQUENCE { tbsCertificate =
    SEQUENCE { [0] version (optional), serialNumber, signature, issuer, validity =
    SEQUENCE { notBefore, notAfter }, ... }, ... }; a time is a UTCTime
    (YYMMDDHHMMSSZ, years 1950-2049) or a GeneralizedTime (YYYYMMDDHHMMSSZ).
    """
    found = _CERT.search(pem)
    if found is None:
        raise ValueError("no PEM certificate")
    der = std_ssl.PEM_cert_to_DER_cert(found.group(0).decode("ascii"))
    _, cert, _ = _der_item(der, 0)
    _, at, _ = _der_item(der, cert)  # tbsCertificate
    tag, _, end = _der_item(der, at)
    if tag == 0xA0:  # explicit version
        at = end
    for _ in range(3):  # serialNumber, signature, issuer
        _, _, at = _der_item(der, at)
    tag, validity, _ = _der_item(der, at)
    if tag != 0x30:
        raise ValueError("no validity in the certificate")
    _, _, after = _der_item(der, validity)  # past notBefore
    tag, start, end = _der_item(der, after)
    text = der[start:end].decode("ascii")
    if tag == 0x17:  # UTCTime
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18:  # GeneralizedTime
        raise ValueError(f"notAfter has an unknown time type {tag:#x}")
    when = dt.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=dt.UTC)
    return when.timestamp()


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsMaterialError(f"{what} {path}: {exc.strerror or exc}") from None


def load_keystore(ssl: SslConfig) -> PemKeystore:
    if ssl.keystore_location:
        return split_pem_keystore(
            _read(ssl.keystore_location, "ssl.keystore.location"),
            where=f"ssl.keystore.location {ssl.keystore_location}",
        )
    key = split_pem_keystore(
        ssl.keystore_key.encode() + b"\n" + ssl.keystore_certificate_chain.encode(),
        where="ssl.keystore.key / ssl.keystore.certificate.chain",
    )
    return key


def load_truststore(ssl: SslConfig) -> bytes | None:
    """The trusted CA certificates, or None (no truststore: the system's roots)."""
    if ssl.truststore_location:
        data = _read(ssl.truststore_location, "ssl.truststore.location")
        where = f"ssl.truststore.location {ssl.truststore_location}"
    elif ssl.truststore_certificates:
        data, where = ssl.truststore_certificates.encode(), "ssl.truststore.certificates"
    else:
        return None
    certs = _CERT.findall(data)
    if not certs:
        raise TlsMaterialError(f"{where}: no PEM certificate found")
    return b"\n".join(certs) + b"\n"


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class _ReloadingFiles(Generic[T]):
    """What ``load`` makes of a listener's PEM files, made again when they change.

    A change is a different ``(mtime, size)`` of the keystore or truststore file (two
    ``stat`` calls per check).  Invariants: :meth:`snapshot` answers what the last files
    that loaded made; files that failed to load are logged once (without contents) and
    not tried again until they change again; ``generation`` counts successful reloads.
    Thread-safe.
    """

    def __init__(self, ssl: SslConfig, *, load: Callable[[], T], what: str, listener: str) -> None:
        self._load = load
        self._what = what
        self._listener = listener
        self._lock = threading.Lock()
        self._files = tuple(p for p in (ssl.keystore_location, ssl.truststore_location) if p)
        self._stamps = self._current_stamps()
        self._failed_stamps: tuple[tuple[int, int] | None, ...] | None = None
        self._value = load()
        self.generation = 0

    def _current_stamps(self) -> tuple[tuple[int, int] | None, ...]:
        return tuple(_stamp(p) for p in self._files)

    def refresh(self) -> bool:
        """Load again if the files changed; True when that gave a new value."""
        if not self._files:
            return False
        stamps = self._current_stamps()
        with self._lock:
            if stamps == self._stamps or stamps == self._failed_stamps:
                return False
            try:
                value = self._load()
            except TlsMaterialError as exc:
                self._failed_stamps = stamps
                log.warning(
                    "listener %s: keeping the previous %s: %s", self._listener, self._what, exc
                )
                return False
            self._stamps, self._failed_stamps, self._value = stamps, None, value
            self.generation += 1
        log.info("listener %s: reloaded the %s", self._listener, self._what)
        return True

    def snapshot(self) -> tuple[int, T]:
        with self._lock:
            return self.generation, self._value


class ReloadingServerCredentials:
    """A listener's gRPC server credentials that pick up rewritten PEM files.

    ``fetch`` is called by gRPC's threads (before handshakes); ``reloads`` counts the
    successful reloads (for tests and metrics).  Thread-safe.
    """

    def __init__(self, ssl: SslConfig, *, listener: str) -> None:
        self._ssl = ssl
        self._files = _ReloadingFiles(
            ssl,
            load=lambda: _server_configuration(ssl),
            what="TLS keystore/truststore",
            listener=listener,
        )

    @property
    def reloads(self) -> int:
        return self._files.generation

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._files.snapshot()[1],
            self.fetch,  # type: ignore[arg-type]  # gRPC documents None as "unchanged"
            require_client_authentication=self._ssl.client_auth == "required",
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetch callback: a new configuration when the files changed, else None."""
        return self._files.snapshot()[1] if self._files.refresh() else None


def _server_configuration(ssl: SslConfig) -> grpc.ServerCertificateConfiguration:
    keystore = load_keystore(ssl)
    return grpc.ssl_server_certificate_configuration(
        [(keystore.private_key, keystore.certificate_chain)],
        root_certificates=load_truststore(ssl),
    )


def server_credentials(ssl: SslConfig, *, listener: str) -> grpc.ServerCredentials:
    """Credentials for a TLS listener; TlsMaterialError when the files are unusable."""
    return ReloadingServerCredentials(ssl, listener=listener).credentials()


def channel_credentials(ssl: SslConfig) -> grpc.ChannelCredentials:
    """A broker's client credentials towards another broker's TLS listener: its own
    keystore as the client certificate (mTLS), its truststore to check the peer."""
    keystore = load_keystore(ssl) if ssl.has_keystore else None
    return grpc.ssl_channel_credentials(
        root_certificates=load_truststore(ssl),
        private_key=keystore.private_key if keystore else None,
        certificate_chain=keystore.certificate_chain if keystore else None,
    )


class ReloadingChannelCredentials:
    """The broker's client credentials towards other brokers, rebuilt when its keystore
    or truststore file changes, by the change detection of the server side.

    gRPC's channel credentials are fixed when a channel is made, so a rotation reaches
    *new* channels: :meth:`current` answers the credentials for the next channel and a
    ``generation`` that grows with each successful reload, so that whoever keeps
    channels (the controller's, the replica fetchers') can replace one made at an older
    generation when it next fails or is next used.  Unchanged files cost two ``stat``
    calls; files that do not parse keep the previous credentials, logged once per
    change without their contents.  Thread-safe.
    """

    def __init__(self, ssl: SslConfig, *, listener: str) -> None:
        self._files = _ReloadingFiles(
            ssl,
            load=lambda: channel_credentials(ssl),
            what="client keystore/truststore for new channels to other brokers",
            listener=listener,
        )

    @property
    def generation(self) -> int:
        """Successful reloads so far."""
        return self._files.generation

    def current(self) -> tuple[int, grpc.ChannelCredentials]:
        """``(generation, credentials)`` for a new channel, reloading changed files first."""
        self._files.refresh()
        return self._files.snapshot()


def ssl_context(ssl: SslConfig) -> std_ssl.SSLContext:
    """A server-side :class:`ssl.SSLContext` of a listener's keystore and truststore, TLS
    1.2 or later; with ``ssl.client.auth=required`` the client must present a
    certificate the truststore verifies.  TlsMaterialError when the files are unusable."""
    keystore = load_keystore(ssl)
    trusted = load_truststore(ssl)
    context = std_ssl.SSLContext(std_ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = std_ssl.TLSVersion.TLSv1_2
    # The ssl module loads a key from a file only: a private file, removed at once.
    with tempfile.TemporaryDirectory(prefix="headwater-tls-") as private:
        path = os.path.join(private, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(keystore.private_key + keystore.certificate_chain)
        try:
            context.load_cert_chain(path)
        except std_ssl.SSLError as exc:
            raise TlsMaterialError(
                f"the keystore's key and certificate do not load: {exc.reason or exc}"
            ) from None
    if trusted is not None:
        context.load_verify_locations(cadata=trusted.decode("ascii", "replace"))
    context.verify_mode = (
        std_ssl.CERT_REQUIRED if ssl.client_auth == "required" else std_ssl.CERT_NONE
    )
    return context


class ReloadingSslContext:
    """A Kafka listener's :class:`ssl.SSLContext`, made again when its PEM files change.

    :attr:`context` is what the listener binds with; its SNI callback, which OpenSSL calls
    on every client hello, checks the files (two ``stat`` calls) and hands the handshake
    the newest context that loaded.  Established connections keep theirs.
    """

    def __init__(self, ssl: SslConfig, *, listener: str) -> None:
        self._files = _ReloadingFiles(
            ssl, load=lambda: ssl_context(ssl), what="TLS keystore/truststore", listener=listener
        )
        self.context = self._files.snapshot()[1]
        self.context.sni_callback = self._on_hello

    @property
    def reloads(self) -> int:
        return self._files.generation

    def _on_hello(
        self, connection: std_ssl.SSLObject | std_ssl.SSLSocket, _name: str | None, _: object
    ) -> None:
        self._files.refresh()
        generation, current = self._files.snapshot()
        if generation:
            connection.context = current


def certificate_subject(peer: dict[str, object] | None) -> str | None:
    """A verified peer certificate's subject (:meth:`ssl.SSLObject.getpeercert`) in RFC
    2253 form as gRPC reports it (``CN=alice,O=Example``: last RDN first), for
    ``ssl.principal.mapping.rules``; None without a certificate."""
    if not peer:
        return None
    subject = peer.get("subject")
    if not isinstance(subject, tuple):
        return None
    parts = []
    for rdn in reversed(subject):
        parts.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape_rdn(str(v))}" for k, v in rdn))
    return ",".join(parts)


_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_rdn(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
