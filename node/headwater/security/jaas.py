"""Kafka's ``sasl.jaas.config`` for SCRAM, parsed strictly: a broker's own login.

A broker that reaches other brokers over a SASL listener gives its credentials as
Kafka does::

    listener.name.internal.scram-sha-512.sasl.jaas.config=\\
        org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="broker" password="...";

The grammar is JAAS's, for one login module: ``<module> <flag> <option>=<value> ... ;``
where the flag is ``required``, ``requisite``, ``sufficient`` or ``optional``, and
each value is a double-quoted string (``\\"`` and ``\\\\`` escape) or a bare word.  The
module must be Kafka's ``ScramLoginModule``; the options are ``username`` and
``password`` (both needed, each once).  Anything else (a second module, an unknown
option, a missing ``;``, stray text) is refused with a :class:`JaasConfigError` whose
message names the key and the problem, never the password.

Pure: no I/O; :func:`parse_scram_login` is a function of its text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
OPTIONS = ("username", "password")

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>"(?:\\.|[^"\\])*")
      | (?P<eq>=)
      | (?P<semi>;)
      | (?P<word>[^\s=;"]+)
    )""",
    re.X | re.S,
)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` that cannot be used; the message holds no secret."""


class ScramLogin(NamedTuple):
    """A user name and password from a JAAS config; ``repr`` hides the password."""

    username: str
    password: str

    def __repr__(self) -> str:
        return f"ScramLogin({self.username!r}, password=<hidden>)"


def _tokens(text: str, *, key: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.lastgroup is None:
            raise JaasConfigError(f"{key}: unterminated quoted value")
        kind = match.lastgroup
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1], flags=re.S)


def parse_scram_login(text: str, *, key: str = "sasl.jaas.config") -> ScramLogin:
    """``<ScramLoginModule> required username="..." password="...";`` to a login.

    ``key`` is the setting's name, used in error messages.
    """
    expected = f'expected {SCRAM_LOGIN_MODULE} required username="..." password="...";'
    tokens = _tokens(text, key=key)
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasConfigError(f"{key}: {expected}")
    module, flag = tokens[0][1], tokens[1][1]
    if module != SCRAM_LOGIN_MODULE:
        raise JaasConfigError(
            f"{key}: login module {module!r} is not supported (use {SCRAM_LOGIN_MODULE})"
        )
    if flag not in FLAGS:
        raise JaasConfigError(f"{key}: {flag!r} is not a JAAS control flag ({', '.join(FLAGS)})")
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0][0] != "semi":
        if len(rest) < 2 or rest[0][0] != "word" or rest[1][0] != "eq":
            raise JaasConfigError(f'{key}: expected option="value" after the control flag')
        name = rest[0][1]
        if len(rest) < 3 or rest[2][0] not in ("quoted", "word"):
            raise JaasConfigError(f"{key}: option {name} has no value")
        kind, raw = rest[2]
        if name not in OPTIONS:
            raise JaasConfigError(
                f"{key}: unknown option {name!r} of {SCRAM_LOGIN_MODULE} "
                f"(it takes {', '.join(OPTIONS)})"
            )
        if name in options:
            raise JaasConfigError(f"{key}: option {name} is given twice")
        options[name] = _unquote(raw) if kind == "quoted" else raw
        rest = rest[3:]
    if not rest:
        raise JaasConfigError(f"{key}: the login module's options must end with ';'")
    if len(rest) > 1:
        raise JaasConfigError(f"{key}: one login module only; text follows the ';'")
    missing = [name for name in OPTIONS if not options.get(name)]
    if missing:
        raise JaasConfigError(f"{key}: {' and '.join(missing)} missing or empty; {expected}")
    return ScramLogin(options["username"], options["password"])
