"""How the operator authenticates to the brokers, and what it needs to manage Users.

The chart runs the operator as a super user on the brokers' INTERNAL listener (mTLS with
its own certificate; README.md of the chart, "Security"), so every Admin the operator
builds takes the same security options, kafka-python's names as the Headwater client
has them (``security_protocol``, ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``,
``sasl_mechanism``, ``sasl_plain_username``, ``sasl_plain_password``).  They come from
the environment:

===================================  ===============================================
``HEADWATER_SECURITY_PROTOCOL``      PLAINTEXT (default), SSL, SASL_SSL, SASL_PLAINTEXT
``HEADWATER_SSL_CAFILE``             PEM file of the CA(s) the brokers' certificates chain to
``HEADWATER_SSL_CERTFILE``           the operator's client certificate (PEM)
``HEADWATER_SSL_KEYFILE``            its private key (PEM)
``HEADWATER_SASL_MECHANISM``         SCRAM-SHA-512 (SASL listeners)
``HEADWATER_SASL_USERNAME``          the operator's SCRAM user
``HEADWATER_SASL_PASSWORD_FILE``     a file holding its password (or HEADWATER_SASL_PASSWORD)
``HEADWATER_SUPER_USERS``            ``super.users`` of the brokers: Users may not take these names
``HEADWATER_CLIENTS_CA_DIR``         tls.crt and tls.key of the CA signing Users' certificates
``HEADWATER_USER_CERT_VALIDITY_DAYS``  lifetime of Users' certificates (default 365)
===================================  ===============================================

Nothing here opens a file except :meth:`ClientSecurity.from_env` reading the password
file; the values are checked when read, so a bad setting stops the operator at start
with a message naming the variable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")


@dataclasses.dataclass(frozen=True)
class ClientSecurity:
    """The operator's client security settings; immutable."""

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    sasl_mechanism: str = ""
    sasl_plain_username: str = ""
    sasl_plain_password: str = dataclasses.field(default="", repr=False)
    super_users: tuple[str, ...] = ()
    """Principals (``User:name``) no User resource may be."""
    clients_ca_dir: str = ""
    """Directory with tls.crt and tls.key of the CA that signs Users' certificates."""
    user_cert_validity_days: int = 365

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientSecurity:
        protocol = env.get("HEADWATER_SECURITY_PROTOCOL", "").strip().upper() or "PLAINTEXT"
        if protocol not in PROTOCOLS:
            raise ValueError(
                f"HEADWATER_SECURITY_PROTOCOL must be one of {', '.join(PROTOCOLS)}, "
                f"not {protocol!r}"
            )
        password = env.get("HEADWATER_SASL_PASSWORD", "")
        password_file = env.get("HEADWATER_SASL_PASSWORD_FILE", "").strip()
        if password_file:
            with open(password_file, encoding="utf-8") as f:
                password = f.read().strip()
        cert, key = env.get("HEADWATER_SSL_CERTFILE", ""), env.get("HEADWATER_SSL_KEYFILE", "")
        if bool(cert) != bool(key):
            raise ValueError("HEADWATER_SSL_CERTFILE and HEADWATER_SSL_KEYFILE go together")
        raw_days = env.get("HEADWATER_USER_CERT_VALIDITY_DAYS", "").strip() or "365"
        if not raw_days.isdigit() or int(raw_days) < 1:
            raise ValueError(
                "HEADWATER_USER_CERT_VALIDITY_DAYS must be a whole number of days, "
                f"not {raw_days!r}"
            )
        supers = env.get("HEADWATER_SUPER_USERS", "")
        return cls(
            security_protocol=protocol,
            ssl_cafile=env.get("HEADWATER_SSL_CAFILE", ""),
            ssl_certfile=cert,
            ssl_keyfile=key,
            sasl_mechanism=env.get("HEADWATER_SASL_MECHANISM", "").strip().upper(),
            sasl_plain_username=env.get("HEADWATER_SASL_USERNAME", ""),
            sasl_plain_password=password,
            super_users=tuple(s.strip() for s in supers.split(";") if s.strip()),
            clients_ca_dir=env.get("HEADWATER_CLIENTS_CA_DIR", ""),
            user_cert_validity_days=int(raw_days),
        )

    def admin_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`headwater.Admin`: none on PLAINTEXT."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_mechanism"):
            if getattr(self, key):
                options[key] = getattr(self, key)
        if self.sasl_plain_username:
            options["sasl_plain_username"] = self.sasl_plain_username
            options["sasl_plain_password"] = self.sasl_plain_password
        return options
