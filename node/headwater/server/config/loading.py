"""Loading a broker config: a properties file, ``HEADWATER_*`` environment variables and
``--override`` flags, later winning, turned into a checked
:class:`~headwater.server.config.settings.BrokerConfig`.

1. a Java-properties file (``--config``);
2. ``HEADWATER_*`` environment variables: ``HEADWATER_BROKER_ID`` sets
   ``broker.id`` (upper-case, dots as underscores), as container images do.
   Two kinds of ``HEADWATER_*`` names are not broker settings and are passed
   over: those of the other commands (``HEADWATER_BOOTSTRAP`` of the clients,
   ``HEADWATER_OPERATOR_*``...; see :data:`NOT_BROKER_ENV`) and the variables
   Kubernetes injects for every Service of the namespace (a release named
   ``headwater`` has a Service ``headwater-bootstrap``, hence
   ``HEADWATER_BOOTSTRAP_SERVICE_HOST``; the chart also turns these off with
   ``enableServiceLinks: false``).  Any other unknown name is a typo and is
   refused, naming the variable;
3. ``--override key=value`` flags.

``${NAME}`` in any value is replaced by the environment variable ``NAME`` (the
Helm chart sets ``advertised.listeners=PLAINTEXT://${HOSTNAME}.<svc>:9092``).
Unknown keys, bad values and undefined variables raise one
:class:`~headwater.server.config.settings.ConfigError` naming the key, so a typo
never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from headwater import interpreter
from headwater.records import native
from headwater.server import listeners as named_listeners
from headwater.server.config.settings import BrokerConfig, ConfigError
from headwater.server.config.validation import validate_config

ENV_PREFIX = "HEADWATER_"
NOT_BROKER_ENV = frozenset(
    {
        "HEADWATER_BOOTSTRAP",
        "HEADWATER_BROKER_STATEFULSET",
        "HEADWATER_RESYNC_INTERVAL_S",
        "HEADWATER_OPERATION_TIMEOUT_S",
        "HEADWATER_ROLL_CHECK_INTERVAL_S",
        interpreter.KEEP_ENV,
        native.PURE_PYTHON_ENV,
    }
)
"""``HEADWATER_*`` variables of the clients, the operator and the process itself (the
switch interval, the record codec), never broker settings."""
_NOT_BROKER_PREFIXES = ("HEADWATER_OPERATOR_",)
# Kubernetes service links: <SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT[_<NAME>], <SVC>_PORT,
# <SVC>_PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR].
_SERVICE_LINK = re.compile(
    r"[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?"
    r"|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)"
)


def config_from_properties(props: Mapping[str, str]) -> BrokerConfig:
    """Build from string properties; raises ConfigError naming the first bad key."""
    fields = {f.metadata["key"]: f for f in dataclasses.fields(BrokerConfig)}
    values: dict[str, Any] = {}
    per_listener: dict[str, str] = {}
    for key, raw in props.items():
        if key.startswith("listener.name."):
            try:
                named_listeners.check_per_listener_key(key)
            except named_listeners.ListenerConfigError as exc:
                raise ConfigError(str(exc)) from None
            per_listener[key] = raw.strip()
            continue
        field = fields.get(key)
        if field is None:
            raise ConfigError(f"unknown broker config {key!r}")
        values[field.name] = _parse_value(key, raw.strip(), field.type)
    values["listener_name_settings"] = tuple(sorted(per_listener.items()))
    config = BrokerConfig(**values)
    validate_config(config)
    return config


def load_config(
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
    broker_id_from_hostname: bool = False,
) -> BrokerConfig:
    """File, then ``HEADWATER_*`` env, then ``key=value`` overrides; ``${ENV}`` expanded."""
    env = dict(os.environ if environ is None else environ)
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
        props.update(parse_properties(text))
    props.update(properties_from_env(env))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        props[key.strip()] = value
    if broker_id_from_hostname:
        props["broker.id"] = str(broker_id_from(env.get("HOSTNAME", "")))
    expanded = {k: expand_env(k, v, env) for k, v in props.items()}
    return config_from_properties(expanded)


def _parse_value(key: str, raw: str, type_name: Any) -> Any:
    kind = str(type_name)
    parse: Callable[[str], Any]
    if kind.startswith("int"):
        if raw == "" and "None" in kind:
            return None
        parse = int
    elif kind == "bool":
        parse = _bool
    else:
        return raw
    try:
        return parse(raw)
    except ValueError:
        expected = "true or false" if kind == "bool" else "an integer"
        raise ConfigError(f"{key}: invalid value {raw!r}, expected {expected}") from None


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(raw)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments.

    Lines ending in an odd number of backslashes continue on the next line.
    """
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            logical += stripped[:-1]
            continue
        logical += stripped
        match = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", logical)
        if match is not None:
            props[match.group(1).replace("\\", "")] = match.group(2).rstrip()
        elif logical.strip():
            props[logical.strip()] = ""
        logical = ""
    return props


def properties_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``HEADWATER_LOG_DIRS=/data`` -> ``{"log.dirs": "/data"}``.

    Names of known broker keys are mapped; those of other commands and Kubernetes service
    links are passed over (module docstring); any other ``HEADWATER_*`` name is refused.
    """
    known = {f.metadata["key"] for f in dataclasses.fields(BrokerConfig)}
    props: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or len(name) == len(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower().replace("_", ".")
        if key in known or key.startswith("listener.name."):
            props[key] = value
        elif not (
            name in NOT_BROKER_ENV
            or name.startswith(_NOT_BROKER_PREFIXES)
            or _SERVICE_LINK.fullmatch(name)
        ):
            raise ConfigError(
                f"environment variable {name}: unknown broker config {key!r} "
                f"({ENV_PREFIX}<KEY> sets a broker config; fix or unset it)"
            )
    return props


def expand_env(key: str, value: str, environ: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{key}: environment variable ${{{name}}} is not set")
        return environ[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", replace, value)


def broker_id_from(hostname: str) -> int:
    """The StatefulSet ordinal: ``hw-broker-2`` -> 2."""
    match = re.search(r"(\d+)$", hostname)
    if match is None:
        raise ConfigError(
            f"--broker-id-from-hostname: HOSTNAME {hostname!r} does not end in an integer"
        )
    return int(match.group(1))
