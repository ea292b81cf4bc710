"""How a client reaches brokers: kafka-python's security options, checked once.

``security_protocol`` is Kafka's: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.  With SSL
and SASL_SSL the client speaks TLS, trusting ``ssl_cafile`` (PEM CA certificates; the
system's roots when unset) and presenting ``ssl_certfile``/``ssl_keyfile`` (PEM) when
the listener wants a client certificate (mTLS).  With SASL_* it authenticates with
``sasl_mechanism`` (SCRAM-SHA-512 or SCRAM-SHA-256) as ``sasl_plain_username``; the
password only feeds the SCRAM proof (:mod:`headwater.client.transport.sasl`), it is never sent
and never shown by ``repr``.

gRPC always checks the broker's name against its certificate, so
``ssl_check_hostname=False`` is refused: give brokers certificates whose subject
alternative names hold their advertised host names.

:class:`ClientSecurity` is built by the Producer, Consumer and Admin constructors
(:func:`from_options`), by the CLI from ``--command-config`` (Kafka's Java property
names, :func:`from_java_properties`) and by the Spark connector from its ``kafka.*``
options; :class:`headwater.client.transport.connection.Channels` uses it for every channel.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import grpc

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


@dataclasses.dataclass(frozen=True)
class ClientSecurity:
    """Invariants: ``security_protocol`` in :data:`PROTOCOLS`; SASL protocols have a
    mechanism, a user name and a password; a client key comes with its certificate."""

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        if protocol not in PROTOCOLS:
            raise ValueError(
                f"security_protocol must be one of {', '.join(PROTOCOLS)}, "
                f"not {self.security_protocol!r}"
            )
        object.__setattr__(self, "security_protocol", protocol)
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ValueError("ssl_certfile and ssl_keyfile go together (PEM files)")
        if self.uses_sasl:
            mechanism = (self.sasl_mechanism or "").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)} with "
                    f"{protocol}, not {self.sasl_mechanism!r}"
                )
            object.__setattr__(self, "sasl_mechanism", mechanism)
            if not self.sasl_plain_username or self.sasl_plain_password is None:
                raise ValueError(f"{protocol} needs sasl_plain_username and sasl_plain_password")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials from the PEM files (read now), or None for plaintext."""
        if not self.uses_tls:
            return None
        key = _read(self.ssl_keyfile, "ssl_keyfile")
        chain = _read(self.ssl_certfile, "ssl_certfile")
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ssl_cafile, "ssl_cafile"),
            private_key=_pem_blocks(key, _KEY, "ssl_keyfile", one=True) if key else None,
            certificate_chain=_pem_blocks(chain, _CERT, "ssl_certfile") if chain else None,
        )


PLAINTEXT = ClientSecurity()

_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
_KEY = re.compile(rb"-----BEGIN ((?:RSA |EC )?PRIVATE KEY)-----.+?-----END \1-----", re.S)


def _pem_blocks(data: bytes, block: re.Pattern[bytes], what: str, *, one: bool = False) -> bytes:
    """The key (or certificates) out of a PEM file that may hold both (Kafka's PEM
    keystore); ValueError names the setting, never the contents."""
    found = [m.group(0) for m in block.finditer(data)]
    if not found or (one and len(found) != 1):
        kind = "one unencrypted PEM private key" if one else "a PEM certificate"
        raise ValueError(f"{what}: expected {kind}")
    return b"\n".join(found) + b"\n"


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"{what} {path}: {exc.strerror or exc}") from None


def from_options(
    *,
    security_protocol: str = "PLAINTEXT",
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_check_hostname: bool = True,
    sasl_mechanism: str | None = None,
    sasl_plain_username: str | None = None,
    sasl_plain_password: str | None = None,
) -> ClientSecurity:
    """kafka-python's option names to a checked :class:`ClientSecurity` (ValueError)."""
    if not ssl_check_hostname:
        raise ValueError(
            "ssl_check_hostname=False is not supported: gRPC always verifies the broker's "
            "certificate names its host (give brokers certificates with their advertised "
            "names as subject alternative names)"
        )
    return ClientSecurity(
        security_protocol=security_protocol,
        ssl_cafile=ssl_cafile,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        sasl_mechanism=sasl_mechanism,
        sasl_plain_username=sasl_plain_username,
        sasl_plain_password=sasl_plain_password,
    )


_JAAS = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s+(?P<options>.*?);?\s*$",
    re.S,
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|(\S+))')
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def parse_jaas_config(text: str) -> tuple[str, str]:
    """``sasl.jaas.config`` of Kafka's ScramLoginModule to ``(username, password)``.

    ValueError names what is wrong, never the password.
    """
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ValueError(
            "sasl.jaas.config: expected "
            f'{SCRAM_LOGIN_MODULE} required username="..." password="...";'
        )
    if match.group("module") != SCRAM_LOGIN_MODULE:
        raise ValueError(
            f"sasl.jaas.config: login module {match.group('module')} is not supported "
            f"(use {SCRAM_LOGIN_MODULE})"
        )
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPTION.finditer(match.group("options"))
    }
    if "username" not in options or "password" not in options:
        raise ValueError('sasl.jaas.config: needs username="..." and password="..."')
    return options["username"], options["password"]


JAVA_PROPERTIES = (
    "security.protocol",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
)
"""The client properties :func:`from_java_properties` understands (Kafka's names)."""


def from_java_properties(props: Mapping[str, str], *, prefix: str = "") -> ClientSecurity:
    """Kafka's client properties (a ``--command-config`` file, or the Spark connector's
    ``kafka.``-prefixed options with ``prefix="kafka."``) to :class:`ClientSecurity`.

    PEM only: ``ssl.truststore.location`` is a PEM CA file and ``ssl.keystore.location``
    a PEM file with the client's private key and certificate (Kafka's PEM keystore).
    Unknown ``ssl.*``/``sasl.*``/``security.*`` keys are refused, naming the key; other
    keys are left to the caller.
    """
    own = {k[len(prefix) :]: v.strip() for k, v in props.items() if k.startswith(prefix)}
    for key in own:
        if key.startswith(("ssl.", "sasl.", "security.")) and key not in JAVA_PROPERTIES:
            raise ValueError(
                f"{prefix}{key}: not supported (supported: {', '.join(JAVA_PROPERTIES)})"
            )
    for type_key in ("ssl.truststore.type", "ssl.keystore.type"):
        if own.get(type_key, "PEM").upper() != "PEM":
            raise ValueError(f"{prefix}{type_key}: only PEM is supported")
    if own.get("ssl.key.password"):
        raise ValueError(f"{prefix}ssl.key.password: encrypted PEM keys are not supported")
    if own.get("ssl.endpoint.identification.algorithm", "https").lower() not in ("https",):
        raise ValueError(
            f"{prefix}ssl.endpoint.identification.algorithm: gRPC always checks the host name"
        )
    protocol = own.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"{prefix}security.protocol: must be one of {', '.join(PROTOCOLS)}")
    if protocol.startswith("SASL_") and (own.get("sasl.mechanism") or "").upper() not in (
        SASL_MECHANISMS
    ):
        raise ValueError(f"{prefix}sasl.mechanism: must be one of {', '.join(SASL_MECHANISMS)}")
    if protocol.startswith("SASL_") and not own.get("sasl.jaas.config"):
        raise ValueError(f"{prefix}sasl.jaas.config: {protocol} needs the user's credentials")
    keystore = own.get("ssl.keystore.location") or None
    username = password = None
    if own.get("sasl.jaas.config"):
        username, password = parse_jaas_config(own["sasl.jaas.config"])
    return ClientSecurity(
        security_protocol=protocol,
        ssl_cafile=own.get("ssl.truststore.location") or None,
        ssl_certfile=keystore,
        ssl_keyfile=keystore,
        sasl_mechanism=own.get("sasl.mechanism") or None,
        sasl_plain_username=username,
        sasl_plain_password=password,
    )
