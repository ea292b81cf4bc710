"""What a user may type into the console, parsed into values or refused with a clear message.

Every form field and query parameter goes through one of these functions before the
console calls the cluster, so bad input (a bad offset, a huge page size, a topic name
with odd characters) is an :class:`InvalidInput` naming the field, and changes nothing.
No I/O here: the rules are Kafka's where Kafka has one (topic names, config pairs,
``kafka-consumer-groups --reset-offsets`` specs) and the console's own caps otherwise.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import NamedTuple

from headwater.security import acls, scram

MAX_RECORDS = 500
"""The most records the message browser returns for one request (its hard cap)."""

DEFAULT_RECORDS = 50

MAX_TOPIC_NAME = 249
"""Kafka's limit on a topic name's length."""

MAX_GROUP_ID = 1000
MAX_PARTITIONS = 10_000
"""The most partitions a topic may be created with or grown to from the console."""

MAX_REPLICATION_FACTOR = 32
MAX_PRODUCE_BYTES = 1024 * 1024
"""The largest key + value + headers the produce form sends."""

MAX_HEADERS = 64
MAX_CONFIGS = 200

FORMATS = ("text", "json", "hex")
START_MODES = ("newest", "oldest", "offset", "timestamp")
RESET_SPECS = (
    "to-earliest",
    "to-latest",
    "to-offset",
    "to-datetime",
    "shift-by",
    "by-duration",
)

_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_CONFIG_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_DURATION = re.compile(r"^(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
_INT = re.compile(r"^[+-]?\d{1,19}$")


class InvalidInput(ValueError):
    """A field the user got wrong: ``field`` names it, the message says what is expected."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut short so a huge input is not echoed whole."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def integer(field: str, text: str | None, *, low: int, high: int) -> int:
    """A decimal integer in ``[low, high]``."""
    raw = (text or "").strip()
    if not _INT.match(raw):
        raise InvalidInput(field, f"{_shown(raw)} is not a whole number")
    value = int(raw)
    if not low <= value <= high:
        raise InvalidInput(field, f"{value} is out of range; expected {low} to {high}")
    return value


def topic_name(text: str | None, field: str = "topic") -> str:
    """A legal Kafka topic name: 1 to 249 of ``[a-zA-Z0-9._-]``, neither ``.`` nor ``..``."""
    name = text or ""
    if not name:
        raise InvalidInput(field, "a topic name is required")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidInput(field, f"a topic name has at most {MAX_TOPIC_NAME} characters")
    if name in (".", ".."):
        raise InvalidInput(field, "a topic name cannot be '.' or '..'")
    if not _TOPIC.match(name):
        raise InvalidInput(
            field,
            f"{_shown(name)} has characters a topic name cannot have "
            "(letters, digits, '.', '_' and '-' only)",
        )
    return name


def group_id(text: str | None) -> str:
    """A consumer group id: any non-empty text without control characters."""
    gid = text or ""
    if not gid:
        raise InvalidInput("group", "a group id is required")
    if len(gid) > MAX_GROUP_ID:
        raise InvalidInput("group", f"a group id has at most {MAX_GROUP_ID} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in gid):
        raise InvalidInput("group", "a group id cannot contain control characters")
    return gid


def choice(field: str, text: str | None, allowed: tuple[str, ...], default: str) -> str:
    value = text or default
    if value not in allowed:
        raise InvalidInput(field, f"{_shown(value)} is not one of {', '.join(allowed)}")
    return value


def timestamp_ms(text: str | None, field: str = "timestamp") -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it names a zone)."""
    raw = (text or "").strip()
    if not raw:
        raise InvalidInput(field, "a time is required (ISO-8601, or milliseconds since 1970)")
    if _INT.match(raw):
        return integer(field, raw, low=0, high=2**63 - 1)
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(
            field, f"{_shown(raw)} is not a time; expected e.g. 2026-11-27T12:00:00"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise InvalidInput(field, "a time before 1970 cannot be looked up")
    return ms


def duration_ms(text: str | None, field: str = "duration") -> int:
    """ISO-8601 ``PnDTnHnMnS`` (Kafka's ``--by-duration``) in milliseconds."""
    raw = (text or "").strip()
    m = _DURATION.match(raw)
    if not m or raw in ("P", "-P") or raw.endswith("T"):
        raise InvalidInput(field, f"{_shown(raw)} is not a duration; expected e.g. P1DT2H or PT30M")
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups()[1:])
    ms = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000
    return -ms if m.group(1) else ms


# -- the message browser --------------------------------------------------------------


class BrowseQuery(NamedTuple):
    """Where to read and how many: ``start`` is newest, oldest, offset or timestamp."""

    partition: int
    start: str
    offset: int | None
    timestamp_ms: int | None
    limit: int
    format: str


def browse_query(params: Mapping[str, str], partitions: int) -> BrowseQuery:
    """The message browser's query string, for a topic of ``partitions`` partitions."""
    if partitions <= 0:
        raise InvalidInput("topic", "the topic has no partitions to read")
    partition = integer("partition", params.get("partition") or "0", low=0, high=partitions - 1)
    start = choice("start", params.get("start"), START_MODES, "newest")
    offset = None
    when = None
    if start == "offset":
        offset = integer("offset", params.get("offset"), low=0, high=2**63 - 1)
    elif start == "timestamp":
        when = timestamp_ms(params.get("timestamp"))
    limit = integer("limit", params.get("limit") or str(DEFAULT_RECORDS), low=1, high=MAX_RECORDS)
    fmt = choice("format", params.get("format"), FORMATS, "text")
    return BrowseQuery(partition, start, offset, when, limit, fmt)


# -- changes ---------------------------------------------------------------------------


class NewTopicForm(NamedTuple):
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def config_pairs(text: str | None, field: str = "configs") -> dict[str, str]:
    """``name=value`` lines (blank lines skipped), as ``kafka-topics --config`` takes them."""
    out: dict[str, str] = {}
    for n, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not _CONFIG_NAME.match(name):
            raise InvalidInput(field, f"line {n}: expected name=value, e.g. retention.ms=86400000")
        if name in out:
            raise InvalidInput(field, f"line {n}: {name} is given twice")
        out[name] = value.strip()
        if len(out) > MAX_CONFIGS:
            raise InvalidInput(field, f"at most {MAX_CONFIGS} configs")
    return out


def new_topic(form: Mapping[str, str]) -> NewTopicForm:
    """The create-topic form: blank partitions or replication factor mean the broker's default."""
    name = topic_name(form.get("name"), field="name")
    raw_parts = (form.get("partitions") or "").strip()
    raw_rf = (form.get("replication_factor") or "").strip()
    parts = -1 if not raw_parts else integer("partitions", raw_parts, low=1, high=MAX_PARTITIONS)
    rf = (
        -1
        if not raw_rf
        else integer("replication_factor", raw_rf, low=1, high=MAX_REPLICATION_FACTOR)
    )
    return NewTopicForm(name, parts, rf, config_pairs(form.get("configs")))


class ConfigChange(NamedTuple):
    """Topic configs to set and to delete (back to the broker's default)."""

    set: dict[str, str]
    delete: list[str]


def config_change(form: Mapping[str, str]) -> ConfigChange:
    """The alter-configs form: ``name=value`` lines to set, names (one a line) to delete."""
    to_set = config_pairs(form.get("set"), field="set")
    to_delete = []
    for n, line in enumerate((form.get("delete") or "").splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if not _CONFIG_NAME.match(name):
            raise InvalidInput("delete", f"line {n}: {_shown(name)} is not a config name")
        if name in to_set:
            raise InvalidInput("delete", f"line {n}: {name} is both set and deleted")
        to_delete.append(name)
    if not to_set and not to_delete:
        raise InvalidInput("set", "nothing to change: give configs to set or to delete")
    return ConfigChange(to_set, to_delete)


def new_partition_count(form: Mapping[str, str], current: int) -> int:
    """The add-partitions form: a new total, larger than the topic's ``current`` count."""
    total = integer("partitions", form.get("partitions"), low=1, high=MAX_PARTITIONS)
    if total <= current:
        raise InvalidInput(
            "partitions", f"the topic has {current} partitions; the new total must be more"
        )
    return total


class ProduceForm(NamedTuple):
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def produce_form(form: Mapping[str, str], partitions: int) -> ProduceForm:
    """The produce form: text key and value (a blank key is no key), ``name: value`` headers."""
    raw_partition = (form.get("partition") or "").strip()
    partition = (
        None
        if not raw_partition
        else integer("partition", raw_partition, low=0, high=max(0, partitions - 1))
    )
    key_text = form.get("key") or ""
    key = key_text.encode() if key_text else None
    value = (form.get("value") or "").encode()
    headers: list[tuple[str, bytes]] = []
    for n, line in enumerate((form.get("headers") or "").splitlines(), 1):
        if not line.strip():
            continue
        name, sep, hvalue = line.partition(":")
        if not sep or not name.strip():
            raise InvalidInput("headers", f"line {n}: expected name: value")
        headers.append((name.strip(), hvalue.strip().encode()))
    if len(headers) > MAX_HEADERS:
        raise InvalidInput("headers", f"at most {MAX_HEADERS} headers")
    size = len(key or b"") + len(value) + sum(len(k) + len(v) for k, v in headers)
    if size > MAX_PRODUCE_BYTES:
        raise InvalidInput("value", f"the record is {size} bytes; at most {MAX_PRODUCE_BYTES}")
    return ProduceForm(partition, key, value, tuple(headers))


class ResetForm(NamedTuple):
    """A ``--reset-offsets`` request: ``spec`` with its ``amount`` (offset, shift or time)."""

    topic: str
    spec: str
    amount: int
    execute: bool


def reset_form(form: Mapping[str, str], now_ms: int) -> ResetForm:
    """The reset-offsets form; ``by-duration`` and ``to-datetime`` become a timestamp."""
    topic = topic_name(form.get("topic"))
    spec = choice("spec", form.get("spec"), RESET_SPECS, "")
    raw = form.get("value")
    amount = 0
    if spec == "to-offset":
        amount = integer("value", raw, low=0, high=2**63 - 1)
    elif spec == "shift-by":
        amount = integer("value", raw, low=-(2**62), high=2**62)
    elif spec == "to-datetime":
        amount = timestamp_ms(raw, field="value")
    elif spec == "by-duration":
        amount = max(0, now_ms - duration_ms(raw, field="value"))
    mode = choice("mode", form.get("mode"), ("dry-run", "execute"), "dry-run")
    return ResetForm(topic, spec, amount, mode == "execute")


ACL_RESOURCE_TYPES = tuple(t.name for t in acls.ResourceType if t.value > acls.ResourceType.ANY)
ACL_PATTERN_TYPES = ("LITERAL", "PREFIXED")
ACL_OPERATIONS = tuple(o.name for o in acls.AclOperation if o.value > acls.AclOperation.ANY)
ACL_PERMISSIONS = ("ALLOW", "DENY")
SCRAM_MECHANISMS = tuple(m.value for m in scram.ScramMechanism)
MAX_PRINCIPAL = 1000
MAX_PASSWORD = 1000


def acl_binding(form: Mapping[str, str]) -> acls.AclBinding:
    """One ACL from a form: resource type, name, pattern type, principal, host, operation,
    permission; Kafka's rules (a concrete type, an operation the resource supports, a
    ``User:name`` principal, ``*`` or an IP address as the host)."""
    rtype = choice("resource_type", form.get("resource_type"), ACL_RESOURCE_TYPES, "TOPIC")
    name = (form.get("resource_name") or "").strip()
    if rtype == "CLUSTER" and not name:
        name = acls.CLUSTER_NAME
    if not name:
        raise InvalidInput("resource_name", "a resource name is required ('*' for every one)")
    if len(name) > MAX_TOPIC_NAME and rtype == "TOPIC":
        raise InvalidInput("resource_name", f"a topic name has at most {MAX_TOPIC_NAME} characters")
    pattern = choice("pattern_type", form.get("pattern_type"), ACL_PATTERN_TYPES, "LITERAL")
    principal = (form.get("principal") or "").strip()
    if not principal:
        raise InvalidInput("principal", "a principal is required, e.g. User:alice")
    if len(principal) > MAX_PRINCIPAL:
        raise InvalidInput("principal", f"a principal has at most {MAX_PRINCIPAL} characters")
    host = (form.get("host") or "").strip() or acls.WILDCARD_HOST
    operation = choice("operation", form.get("operation"), ACL_OPERATIONS, "")
    permission = choice("permission", form.get("permission"), ACL_PERMISSIONS, "ALLOW")
    try:
        pattern_obj = acls.ResourcePattern(
            acls.ResourceType[rtype], name, acls.PatternType[pattern]
        )
    except ValueError as exc:
        raise InvalidInput("resource_name", str(exc)) from None
    try:
        entry = acls.AccessControlEntry(
            principal, host, acls.AclOperation[operation], acls.AclPermissionType[permission]
        )
    except ValueError as exc:
        field = "host" if "host" in str(exc) else "principal"
        raise InvalidInput(field, str(exc)) from None
    try:
        return acls.AclBinding(pattern_obj, entry)
    except ValueError as exc:
        raise InvalidInput("operation", str(exc)) from None


def scram_user(text: str | None) -> str:
    """A SCRAM user name: non-empty, without control characters."""
    user = (text or "").strip()
    if not user:
        raise InvalidInput("user", "a user name is required")
    if len(user) > MAX_PRINCIPAL:
        raise InvalidInput("user", f"a user name has at most {MAX_PRINCIPAL} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in user):
        raise InvalidInput("user", "a user name cannot contain control characters")
    return user


class ScramForm(NamedTuple):
    user: str
    mechanism: str
    iterations: int
    password: str


def scram_form(form: Mapping[str, str]) -> ScramForm:
    """A SCRAM credential to set: user, mechanism, iterations (Kafka's 4096 to 16384) and a
    password of at least 8 characters."""
    user = scram_user(form.get("user"))
    mechanism = choice("mechanism", form.get("mechanism"), SCRAM_MECHANISMS, "SCRAM-SHA-512")
    iterations = integer(
        "iterations",
        form.get("iterations") or str(scram.MIN_ITERATIONS),
        low=scram.MIN_ITERATIONS,
        high=scram.MAX_ITERATIONS,
    )
    password = form.get("password") or ""
    if len(password) < 8:
        raise InvalidInput("password", "a password has at least 8 characters")
    if len(password) > MAX_PASSWORD:
        raise InvalidInput("password", f"a password has at most {MAX_PASSWORD} characters")
    return ScramForm(user, mechanism, iterations, password)
