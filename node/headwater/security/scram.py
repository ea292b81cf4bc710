"""SCRAM (RFC 5802, RFC 7677): credentials, messages and both sides' state machines.

Pure: no I/O, no clock; randomness (nonces) is passed in, so tests replay the
published RFC 7677 exchange byte for byte.  Kafka supports SCRAM-SHA-256 and
SCRAM-SHA-512 (KIP-84); so does this module, with Kafka's minimum of 4096
iterations and maximum of 16384 (``ScramMechanism.minIterations``, and the
upper bound Kafka's AlterUserScramCredentials enforces).

What the server stores is never the password: the ``salt``, the iteration
count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``.  The client proves it knows
``ClientKey`` without sending it (``ClientProof = ClientKey XOR
HMAC(StoredKey, AuthMessage)``); the server proves it holds the credential
with ``ServerSignature``.

Failures: a message out of order is :class:`~headwater.errors.IllegalSaslStateError`;
a malformed message, a wrong proof or an unknown user are all
:class:`~headwater.errors.SaslAuthenticationFailedError`.  For an unknown user
the server does not fail at once: it answers with a salt derived from the user
name and a per-server secret (RFC 5802 section 5.1's advice) and fails at the
proof, with the same message as a wrong password, so a client cannot tell which
it was.  No error message carries a password, a key, a proof or a nonce.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

from headwater import errors

MIN_ITERATIONS = 4096
"""Kafka's ``ScramMechanism.minIterations()`` for both SHA-256 and SHA-512."""
MAX_ITERATIONS = 16384
"""The most iterations Kafka's AlterUserScramCredentials accepts."""
NONCE_BYTES = 24
SALT_BYTES = 32

Nonce = Callable[[], str]
"""Returns a fresh printable nonce without ``,`` (the injected random source)."""


def random_nonce() -> str:
    """A nonce of ``NONCE_BYTES`` random bytes, base64 (printable, never ``,``)."""
    return base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode("ascii")


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism by its SASL name; ``hash_name`` is its ``hashlib`` name."""

    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def mechanism_name(self) -> str:
        return self.value

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """``SCRAM-SHA-512`` -> the mechanism; anything else is UNSUPPORTED_SASL_MECHANISM."""
        for mechanism in cls:
            if mechanism.value == name:
                return mechanism
        supported = ", ".join(m.value for m in cls)
        raise errors.UnsupportedSaslMechanismError(
            f"unsupported SASL mechanism {name[:40]!r}; SCRAM mechanisms are {supported}"
        )

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802's ``Hi(Normalize(password), salt, i)``: PBKDF2 with this hash.

        Kafka normalizes a password to its UTF-8 bytes (no SASLprep); so do we,
        which keeps credentials interchangeable with Kafka's tools.
        """
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


def check_iterations(iterations: int) -> None:
    """Kafka's bounds: ValueError names the bound (Admin maps it to UNACCEPTABLE_CREDENTIAL)."""
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"too few iterations: {iterations} < {MIN_ITERATIONS}")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"too many iterations: {iterations} > {MAX_ITERATIONS}")


@dataclasses.dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker stores for one user and mechanism; never the password.

    ``repr`` shows the iterations only: the keys let anyone who has them
    impersonate the server, so they are kept out of logs.
    """

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, *, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt=salt,
            stored_key=mechanism.hash(client_key),
            server_key=mechanism.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        *,
        salt: bytes,
        iterations: int,
    ) -> ScramCredential:
        return cls.from_salted_password(
            mechanism,
            salted_password=mechanism.salted_password(password, salt, iterations),
            salt=salt,
            iterations=iterations,
        )

    def to_config(self) -> str:
        """Kafka's ZooKeeper form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        """Parse :meth:`to_config`'s form; ValueError (without the keys) if malformed."""
        fields = _attributes(text, "credential")
        missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
        if missing:
            raise ValueError(f"SCRAM credential lacks {', '.join(sorted(missing))}")
        try:
            iterations = int(fields["iterations"])
        except ValueError:
            raise ValueError("SCRAM credential has a non-numeric iteration count") from None
        return cls(
            salt=_unb64(fields["salt"], "salt"),
            stored_key=_unb64(fields["stored_key"], "stored_key"),
            server_key=_unb64(fields["server_key"], "server_key"),
            iterations=iterations,
        )


# -- messages (RFC 5802 section 7) ----------------------------------------------------------

GS2_HEADER = "n,,"
"""No channel binding, no authorization identity: what Kafka's clients send."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError(f"{what} is not valid base64") from None


def _attributes(text: str, what: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"}; duplicates and empty names are refused."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise ValueError(f"malformed {what}: an attribute lacks its name or '='")
        if name in out:
            raise ValueError(f"malformed {what}: attribute {name!r} given twice")
        out[name] = value
    return out


def escape_username(name: str) -> str:
    """RFC 5802 ``saslname``: ``=`` is ``=3D`` and ``,`` is ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(text: str) -> str:
    """The inverse of :func:`escape_username`; ValueError on any other ``=`` sequence."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1 : i + 3]
            if code == "3D":
                out.append("=")
            elif code == "2C":
                out.append(",")
            else:
                raise ValueError("malformed user name: '=' must be followed by 2C or 3D")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _check_nonce(nonce: str, what: str) -> None:
    if not nonce or any(c == "," or not (0x21 <= ord(c) <= 0x7E) for c in nonce):
        raise ValueError(f"malformed {what}: the nonce must be printable ASCII without ','")


@dataclasses.dataclass(frozen=True, slots=True)
class ClientFirstMessage:
    """``n,,n=<user>,r=<client nonce>[,<extension>...]``; Kafka's extensions are kept."""

    username: str
    nonce: str
    extensions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gs2_header: str = GS2_HEADER
    """As received (``n,,``, ``y,,`` or with ``a=<user>``); the client-final binds to it."""

    def bare(self) -> str:
        ext = "".join(f",{k}={v}" for k, v in self.extensions.items())
        return f"n={escape_username(self.username)},r={self.nonce}{ext}"

    def encode(self) -> bytes:
        return (self.gs2_header + self.bare()).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        what = "client-first message"
        text = _decode(data, what)
        cbind, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise ValueError(f"malformed {what}: no GS2 header")
        if cbind == "p" or cbind.startswith("p="):
            raise ValueError(f"malformed {what}: channel binding is not supported")
        if cbind not in ("n", "y"):
            raise ValueError(f"malformed {what}: the GS2 header must start with n or y")
        if bare.startswith("m="):
            raise ValueError(f"malformed {what}: mandatory extensions are not supported")
        parts = bare.split(",", 2)
        if len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
            raise ValueError(f"malformed {what}: expected n=<user>,r=<nonce>")
        username = unescape_username(parts[0][2:])
        if not username:
            raise ValueError(f"malformed {what}: empty user name")
        if authzid and authzid != f"a={escape_username(username)}":
            raise ValueError(f"malformed {what}: the authorization id must be the user")
        nonce = parts[1][2:]
        _check_nonce(nonce, what)
        extensions = _attributes(parts[2], what) if len(parts) == 3 else {}
        return cls(
            username=username,
            nonce=nonce,
            extensions=extensions,
            gs2_header=f"{cbind},{authzid},",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ServerFirstMessage:
    """``r=<client nonce><server nonce>,s=<salt b64>,i=<iterations>``."""

    nonce: str
    salt: bytes
    iterations: int

    def encode(self) -> bytes:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ServerFirstMessage:
        what = "server-first message"
        text = _decode(data, what)
        if text.startswith("m="):
            raise ValueError(f"malformed {what}: mandatory extensions are not supported")
        parts = text.split(",")
        if len(parts) < 3 or [p[:2] for p in parts[:3]] != ["r=", "s=", "i="]:
            raise ValueError(f"malformed {what}: expected r=<nonce>,s=<salt>,i=<iterations>")
        nonce = parts[0][2:]
        _check_nonce(nonce, what)
        try:
            iterations = int(parts[2][2:])
        except ValueError:
            raise ValueError(f"malformed {what}: the iteration count is not a number") from None
        return cls(nonce=nonce, salt=_unb64(parts[1][2:], "salt"), iterations=iterations)


@dataclasses.dataclass(frozen=True, slots=True)
class ClientFinalMessage:
    """``c=<b64 GS2 header>,r=<nonce>,p=<b64 proof>``; ``repr`` hides the proof."""

    channel_binding: bytes
    nonce: str
    proof: bytes = dataclasses.field(repr=False)

    def without_proof(self) -> str:
        return f"c={_b64(self.channel_binding)},r={self.nonce}"

    def encode(self) -> bytes:
        return f"{self.without_proof()},p={_b64(self.proof)}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        what = "client-final message"
        text = _decode(data, what)
        head, sep, proof = text.rpartition(",p=")
        parts = head.split(",")
        if not sep or len(parts) < 2 or parts[0][:2] != "c=" or parts[1][:2] != "r=":
            raise ValueError(f"malformed {what}: expected c=<binding>,r=<nonce>,...,p=<proof>")
        nonce = parts[1][2:]
        _check_nonce(nonce, what)
        return cls(
            channel_binding=_unb64(parts[0][2:], "channel binding"),
            nonce=nonce,
            proof=_unb64(proof, "proof"),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ServerFinalMessage:
    """``v=<b64 server signature>`` on success, ``e=<error>`` on failure."""

    verifier: bytes = b""
    error: str = ""

    def encode(self) -> bytes:
        return f"e={self.error}".encode() if self.error else f"v={_b64(self.verifier)}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ServerFinalMessage:
        what = "server-final message"
        text = _decode(data, what)
        first = text.split(",", 1)[0]
        if first.startswith("e="):
            return cls(error=first[2:])
        if first.startswith("v="):
            return cls(verifier=_unb64(first[2:], "server signature"))
        raise ValueError(f"malformed {what}: expected v=<signature> or e=<error>")


def _decode(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"malformed {what}: not UTF-8") from None
    if not text:
        raise ValueError(f"malformed {what}: empty")
    return text


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _auth_message(
    first: ClientFirstMessage, server_first: bytes, final_without_proof: str
) -> bytes:
    return b",".join(
        (first.bare().encode("utf-8"), server_first, final_without_proof.encode("utf-8"))
    )


def auth_failed(mechanism: ScramMechanism) -> errors.SaslAuthenticationFailedError:
    """The one failure both a wrong password and an unknown user get (Kafka's wording)."""
    return errors.SaslAuthenticationFailedError(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism.value}"
    )


def _malformed(exc: ValueError) -> errors.SaslAuthenticationFailedError:
    return errors.SaslAuthenticationFailedError(f"Authentication failed: {exc}")


# -- state machines -------------------------------------------------------------------------


class ServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST = "RECEIVE_CLIENT_FIRST"
    RECEIVE_CLIENT_FINAL = "RECEIVE_CLIENT_FINAL"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


SERVER_TRANSITIONS: Mapping[ServerState, frozenset[ServerState]] = {
    ServerState.RECEIVE_CLIENT_FIRST: frozenset(
        {ServerState.RECEIVE_CLIENT_FINAL, ServerState.FAILED}
    ),
    ServerState.RECEIVE_CLIENT_FINAL: frozenset({ServerState.COMPLETE, ServerState.FAILED}),
    ServerState.COMPLETE: frozenset(),
    ServerState.FAILED: frozenset(),
}
"""Each state's valid next states; COMPLETE and FAILED are final."""


class ClientState(enum.Enum):
    SEND_CLIENT_FIRST = "SEND_CLIENT_FIRST"
    RECEIVE_SERVER_FIRST = "RECEIVE_SERVER_FIRST"
    RECEIVE_SERVER_FINAL = "RECEIVE_SERVER_FINAL"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


CLIENT_TRANSITIONS: Mapping[ClientState, frozenset[ClientState]] = {
    ClientState.SEND_CLIENT_FIRST: frozenset({ClientState.RECEIVE_SERVER_FIRST}),
    ClientState.RECEIVE_SERVER_FIRST: frozenset(
        {ClientState.RECEIVE_SERVER_FINAL, ClientState.FAILED}
    ),
    ClientState.RECEIVE_SERVER_FINAL: frozenset({ClientState.COMPLETE, ClientState.FAILED}),
    ClientState.COMPLETE: frozenset(),
    ClientState.FAILED: frozenset(),
}


CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]
"""``(user, mechanism) -> credential`` or None if the user has none for that mechanism."""


class ScramServer:
    """The server side of one SCRAM exchange (Kafka's ``ScramSaslServer``).

    Invariants: ``state`` only moves along :data:`SERVER_TRANSITIONS`; once
    FAILED, every further message is ILLEGAL_SASL_STATE; ``authorized_id`` is
    set exactly when ``state`` is COMPLETE.  Not thread-safe: one exchange is
    driven by one request at a time (the session registry serializes them).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        *,
        credentials: CredentialLookup,
        nonce: Nonce = random_nonce,
        fake_salt_secret: bytes,
    ) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._nonce = nonce
        self._fake_salt_secret = fake_salt_secret
        self.state = ServerState.RECEIVE_CLIENT_FIRST
        self.authorized_id: str | None = None
        self._first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None

    @property
    def attempted_user(self) -> str | None:
        """The user name the client-first message claimed (for logs), once received."""
        return self._first.username if self._first is not None else None

    def _transition_to(self, target: ServerState) -> None:
        if target not in SERVER_TRANSITIONS[self.state]:
            raise errors.IllegalSaslStateError(
                f"SCRAM server cannot go from {self.state.value} to {target.value}"
            )
        self.state = target

    def evaluate_response(self, response: bytes) -> bytes:
        """Take the client's next message; return the challenge to send back.

        Raises IllegalSaslStateError out of order (the state does not change)
        and SaslAuthenticationFailedError on a failure (the state is FAILED).
        """
        if self.state is ServerState.RECEIVE_CLIENT_FIRST:
            return self._on_client_first(response)
        if self.state is ServerState.RECEIVE_CLIENT_FINAL:
            return self._on_client_final(response)
        raise errors.IllegalSaslStateError(
            f"SCRAM exchange already {self.state.value.lower()}: no further message is expected"
        )

    def _on_client_first(self, response: bytes) -> bytes:
        try:
            first = ClientFirstMessage.parse(response)
        except ValueError as exc:
            self._transition_to(ServerState.FAILED)
            raise _malformed(exc) from None
        credential = self._credentials(first.username, self.mechanism)
        # Unknown user: go on with a credential no password matches, fail at the proof.
        self._credential = credential or self._fake_credential(first.username)
        self._first = first
        self._server_first = ServerFirstMessage(
            nonce=first.nonce + self._nonce(),
            salt=self._credential.salt,
            iterations=self._credential.iterations,
        )
        self._transition_to(ServerState.RECEIVE_CLIENT_FINAL)
        return self._server_first.encode()

    def _fake_credential(self, username: str) -> ScramCredential:
        """A stable salt per user name (so probing sees no change), keys nobody can match."""
        salt = hmac.new(self._fake_salt_secret, username.encode("utf-8"), "sha256").digest()
        size = hashlib.new(self.mechanism.hash_name).digest_size
        return ScramCredential(
            salt=salt,
            stored_key=secrets.token_bytes(size),
            server_key=secrets.token_bytes(size),
            iterations=MIN_ITERATIONS,
        )

    def _on_client_final(self, response: bytes) -> bytes:
        first, server_first, credential = self._first, self._server_first, self._credential
        assert first is not None and server_first is not None and credential is not None
        try:
            final = ClientFinalMessage.parse(response)
        except ValueError as exc:
            self._transition_to(ServerState.FAILED)
            raise _malformed(exc) from None
        if final.nonce != server_first.nonce:
            self._transition_to(ServerState.FAILED)
            raise errors.SaslAuthenticationFailedError(
                "Authentication failed: the client-final nonce is not the server's"
            )
        if final.channel_binding != first.gs2_header.encode("utf-8"):
            self._transition_to(ServerState.FAILED)
            raise errors.SaslAuthenticationFailedError(
                "Authentication failed: the channel binding does not match the GS2 header"
            )
        auth = _auth_message(first, server_first.encode(), final.without_proof())
        signature = self.mechanism.hmac(credential.stored_key, auth)
        if len(final.proof) != len(signature):
            self._transition_to(ServerState.FAILED)
            raise auth_failed(self.mechanism)
        client_key = _xor(final.proof, signature)
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            self._transition_to(ServerState.FAILED)
            raise auth_failed(self.mechanism)
        self._transition_to(ServerState.COMPLETE)
        self.authorized_id = first.username
        verifier = self.mechanism.hmac(credential.server_key, auth)
        return ServerFinalMessage(verifier=verifier).encode()


class ScramClient:
    """The client side of one SCRAM exchange (Kafka's ``ScramSaslClient``).

    Call :meth:`first_message`, then :meth:`on_server_first` with the
    server's challenge (it returns the client-final message), then
    :meth:`on_server_final`.  Invariants: ``state`` only moves along
    :data:`CLIENT_TRANSITIONS`; COMPLETE means the server proved it holds the
    user's credential.  The password is kept only until the client-final
    message is computed.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        *,
        username: str,
        password: str,
        nonce: Nonce = random_nonce,
    ) -> None:
        if not username:
            raise ValueError("a SCRAM user name must not be empty")
        self.mechanism = mechanism
        self.username = username
        self._password: str | None = password
        self._nonce = nonce
        self.state = ClientState.SEND_CLIENT_FIRST
        self._first: ClientFirstMessage | None = None
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism.value}, user={self.username!r}, {self.state.value})"

    def _transition_to(self, target: ClientState) -> None:
        if target not in CLIENT_TRANSITIONS[self.state]:
            raise errors.IllegalSaslStateError(
                f"SCRAM client cannot go from {self.state.value} to {target.value}"
            )
        self.state = target

    def _fail(self, message: str) -> errors.SaslAuthenticationFailedError:
        self._transition_to(ClientState.FAILED)
        self._password = None
        return errors.SaslAuthenticationFailedError(message)

    def first_message(self) -> bytes:
        self._transition_to(ClientState.RECEIVE_SERVER_FIRST)
        self._first = ClientFirstMessage(username=self.username, nonce=self._nonce())
        return self._first.encode()

    def on_server_first(self, challenge: bytes) -> bytes:
        if self.state is not ClientState.RECEIVE_SERVER_FIRST:
            raise errors.IllegalSaslStateError(
                f"SCRAM client got a server-first message in state {self.state.value}"
            )
        first, password = self._first, self._password
        assert first is not None and password is not None
        try:
            server_first = ServerFirstMessage.parse(challenge)
        except ValueError as exc:
            raise self._fail(f"Authentication failed: {exc}") from None
        if not server_first.nonce.startswith(first.nonce) or server_first.nonce == first.nonce:
            raise self._fail("Authentication failed: the server nonce does not extend ours")
        if server_first.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Authentication failed: the server asked for {server_first.iterations} "
                f"iterations, fewer than {MIN_ITERATIONS}"
            )
        salted = self.mechanism.salted_password(
            password, server_first.salt, server_first.iterations
        )
        self._password = None
        client_key = self.mechanism.hmac(salted, b"Client Key")
        stored_key = self.mechanism.hash(client_key)
        final = ClientFinalMessage(
            channel_binding=GS2_HEADER.encode("ascii"), nonce=server_first.nonce, proof=b""
        )
        auth = _auth_message(first, challenge, final.without_proof())
        proof = _xor(client_key, self.mechanism.hmac(stored_key, auth))
        server_key = self.mechanism.hmac(salted, b"Server Key")
        self._server_signature = self.mechanism.hmac(server_key, auth)
        self._transition_to(ClientState.RECEIVE_SERVER_FINAL)
        return dataclasses.replace(final, proof=proof).encode()

    def on_server_final(self, challenge: bytes) -> None:
        if self.state is not ClientState.RECEIVE_SERVER_FINAL:
            raise errors.IllegalSaslStateError(
                f"SCRAM client got a server-final message in state {self.state.value}"
            )
        try:
            final = ServerFinalMessage.parse(challenge)
        except ValueError as exc:
            raise self._fail(f"Authentication failed: {exc}") from None
        if final.error:
            raise self._fail(f"Authentication failed: the server said {final.error[:64]!r}")
        if not hmac.compare_digest(final.verifier, self._server_signature):
            raise self._fail("Authentication failed: the server's signature is wrong")
        self._transition_to(ClientState.COMPLETE)
