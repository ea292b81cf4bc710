"""User resources: from a User's spec and what the cluster has, to what to do.

A ``User`` (``users.headwater.io``) is Strimzi's ``KafkaUser`` for Headwater: a principal
``User:<name>`` that authenticates with a SCRAM-SHA-512 password or a client certificate,
and the ACLs it holds.  This module is pure: no Kubernetes, no Admin client, no clock,
no randomness.  A reconcile is *desired* (:class:`UserSpec`, parsed from the resource)
against *actual* (:class:`ActualUser`: the user's ACLs and SCRAM credential read through
the Admin API, and the state of its Secret read from Kubernetes) giving a list of
actions, or a :class:`Refusal` naming why nothing may be done.  Refusals are decided
before any action runs, so a refused spec changes nothing.

Invariants the plan keeps:

* the Secret is written before the broker learns a new password, so a password the
  broker accepts is always one the user can read;
* ACLs are added before stale ones are removed: in between the user holds both sets and
  DENY wins, so a change never opens a moment with more access than before or after it
  (an ALLOW turned into a DENY denies as soon as the DENY exists);
* a user whose name is a super user's (``super.users``: the brokers and the operator)
  is refused: a User must never mint credentials for them;
* switching authentication type removes the old credential.

Spelling: the spec uses Strimzi's (``topic``, ``prefix``, ``Read``, ``allow``); the plan's
values use Kafka's (``TOPIC``, ``PREFIXED``, ``READ``, ``ALLOW``), which is what the
Admin API and ``headwater acls`` take.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

CLUSTER_NAME = "kafka-cluster"
"""The only name of the CLUSTER resource (Kafka's)."""
SCRAM_ITERATIONS = 4096
"""Iterations of the SCRAM-SHA-512 credentials the operator creates (Kafka's default)."""


class Reason(enum.StrEnum):
    """``reason`` of the User's Ready condition."""

    RECONCILED = "Reconciled"
    INVALID_SPEC = "InvalidSpec"
    RESERVED_NAME = "ReservedName"
    NO_CLIENTS_CA = "NoClientsCa"
    SECRET_CONFLICT = "SecretConflict"
    BROKER_ERROR = "BrokerError"
    KUBERNETES_ERROR = "KubernetesError"


class Authentication(enum.StrEnum):
    """``spec.authentication.type``."""

    SCRAM_SHA_512 = "scram-sha-512"
    TLS = "tls"


RESOURCE_TYPES = {
    "topic": "TOPIC",
    "group": "GROUP",
    "cluster": "CLUSTER",
    "transactionalId": "TRANSACTIONAL_ID",
}
"""Spec resource types to Kafka's ``ResourceType`` names."""
PATTERN_TYPES = {"literal": "LITERAL", "prefix": "PREFIXED"}
PERMISSIONS = {"allow": "ALLOW", "deny": "DENY"}
OPERATIONS = {
    "All": "ALL",
    "Read": "READ",
    "Write": "WRITE",
    "Create": "CREATE",
    "Delete": "DELETE",
    "Alter": "ALTER",
    "Describe": "DESCRIBE",
    "ClusterAction": "CLUSTER_ACTION",
    "DescribeConfigs": "DESCRIBE_CONFIGS",
    "AlterConfigs": "ALTER_CONFIGS",
    "IdempotentWrite": "IDEMPOTENT_WRITE",
}
"""Spec operations (Strimzi's spelling) to Kafka's ``AclOperation`` names."""

SUPPORTED_OPERATIONS: Mapping[str, frozenset[str]] = {
    "TOPIC": frozenset(
        {"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE"}
        | {"DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    ),
    "GROUP": frozenset({"ALL", "READ", "DESCRIBE", "DELETE"}),
    "CLUSTER": frozenset(
        {"ALL", "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
        | {"IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
    ),
    "TRANSACTIONAL_ID": frozenset({"ALL", "DESCRIBE", "WRITE"}),
}
"""Kafka's ``AclEntry.supportedOperations``: the broker refuses any other ACL."""

_USER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,62}[a-z0-9])?$")


class AclRule(NamedTuple):
    """One ACL of the user, in Kafka's names (the principal is the user's own)."""

    resource_type: str
    """TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID."""
    resource_name: str
    pattern_type: str
    """LITERAL or PREFIXED."""
    operation: str
    """READ, WRITE, ... (Kafka's AclOperation names)."""
    permission: str
    """ALLOW or DENY."""
    host: str = "*"

    def describe(self) -> str:
        return (
            f"{self.permission} {self.operation} on {self.resource_type}:"
            f"{self.pattern_type}:{self.resource_name} from {self.host}"
        )


class UserSpec(NamedTuple):
    """The desired user."""

    name: str
    """The user name: the principal is ``User:<name>``."""
    authentication: Authentication | None
    """None: the user has no credential (e.g. ACLs for a principal authenticated elsewhere)."""
    acls: frozenset[AclRule]
    quotas: tuple[tuple[str, float], ...] = ()
    """``spec.quotas`` in Kafka's keys (``producer_byte_rate`` ...), sorted; empty: none."""

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


class CertificateState(enum.Enum):
    """What the user's Secret holds for TLS authentication (decided by the I/O layer)."""

    MISSING = "missing"
    VALID = "valid"
    RENEW = "renew"
    """Expiring soon, issued by another CA, or for another subject: issue a new one."""


class ActualUser(NamedTuple):
    """The user as the cluster and Kubernetes have it."""

    acls: frozenset[AclRule]
    """Every ACL whose principal is the user's."""
    has_scram: bool
    """The brokers hold a SCRAM-SHA-512 credential for the user."""
    secret_password: str | None
    """The password in the user's Secret (None: no Secret, or not a SCRAM Secret)."""
    certificate: CertificateState = CertificateState.MISSING
    quotas: tuple[tuple[str, float], ...] = ()
    """The quotas of the user's entity (``/config/users/<name>``), sorted."""


class Refusal(NamedTuple):
    reason: Reason
    message: str


class WriteScramSecret(NamedTuple):
    """Write the Secret ``<user>`` with ``password`` and ``sasl.jaas.config``."""

    user: str
    password: str

    def describe(self) -> str:
        return f"wrote the password of {self.user} to its Secret"


class UpsertScram(NamedTuple):
    user: str
    password: str
    iterations: int = SCRAM_ITERATIONS

    def describe(self) -> str:
        return f"set the SCRAM-SHA-512 credential of {self.user}"


class DeleteScram(NamedTuple):
    user: str

    def describe(self) -> str:
        return f"removed the SCRAM-SHA-512 credential of {self.user}"


class IssueCertificate(NamedTuple):
    """Sign a client certificate (subject ``CN=<user>``) and write it to the user's Secret."""

    user: str

    def describe(self) -> str:
        return f"issued a client certificate for {self.user}"


class DeleteSecret(NamedTuple):
    user: str

    def describe(self) -> str:
        return f"deleted the Secret of {self.user}"


class CreateAcls(NamedTuple):
    user: str
    rules: tuple[AclRule, ...]

    def describe(self) -> str:
        return f"added {len(self.rules)} ACL(s) of {self.user}: " + "; ".join(
            r.describe() for r in self.rules
        )


class DeleteAcls(NamedTuple):
    user: str
    rules: tuple[AclRule, ...]

    def describe(self) -> str:
        return f"removed {len(self.rules)} ACL(s) of {self.user}: " + "; ".join(
            r.describe() for r in self.rules
        )


class AlterQuotas(NamedTuple):
    """Set the user's quotas to ``values`` and remove the keys in ``removed``."""

    user: str
    values: tuple[tuple[str, float], ...]
    removed: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{k}={v:g}" for k, v in self.values] + [f"-{k}" for k in self.removed]
        return f"set the quotas of {self.user}: {', '.join(parts)}"


Action = (
    WriteScramSecret
    | UpsertScram
    | DeleteScram
    | IssueCertificate
    | DeleteSecret
    | CreateAcls
    | DeleteAcls
    | AlterQuotas
)

QUOTA_KEYS = {
    "producerByteRate": "producer_byte_rate",
    "consumerByteRate": "consumer_byte_rate",
    "requestPercentage": "request_percentage",
}
"""Strimzi's ``spec.quotas`` keys to Kafka's quota keys."""
_BYTE_RATES = frozenset({"producerByteRate", "consumerByteRate"})


def parse_quotas(raw: Any) -> tuple[tuple[str, float], ...] | Refusal:
    """``spec.quotas`` as Kafka's keys and values, or a Refusal: byte rates whole
    numbers above zero, ``requestPercentage`` a number above zero;
    ``controllerMutationRate`` is refused (Headwater does not throttle topic mutations)."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        return Refusal(Reason.INVALID_SPEC, "spec.quotas must be an object")
    out: list[tuple[str, float]] = []
    for key, value in raw.items():
        if key == "controllerMutationRate":
            return Refusal(
                Reason.INVALID_SPEC,
                "spec.quotas.controllerMutationRate is not supported: Headwater's controller "
                "does not throttle topic mutations",
            )
        kafka_key = QUOTA_KEYS.get(str(key))
        if kafka_key is None:
            return Refusal(
                Reason.INVALID_SPEC,
                f"spec.quotas.{key} is unknown (one of {', '.join(QUOTA_KEYS)})",
            )
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return Refusal(Reason.INVALID_SPEC, f"spec.quotas.{key} must be a number")
        if key in _BYTE_RATES and value != int(value):
            return Refusal(
                Reason.INVALID_SPEC, f"spec.quotas.{key} must be a whole number of bytes/s"
            )
        if not value > 0 or value != value or value == float("inf"):
            return Refusal(Reason.INVALID_SPEC, f"spec.quotas.{key} must be > 0, not {value}")
        out.append((kafka_key, float(value)))
    return tuple(sorted(out))


def _host(value: Any, where: str) -> str | Refusal:
    host = "*" if value is None else value
    if host == "*":
        return "*"
    if not isinstance(host, str):
        return Refusal(Reason.INVALID_SPEC, f"{where}.host must be '*' or an IP address")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return Refusal(Reason.INVALID_SPEC, f"{where}.host must be '*' or an IP address: {host!r}")


def parse_acl(index: int, raw: Any) -> list[AclRule] | Refusal:
    """``spec.authorization.acls[index]`` as rules (one per operation), or a Refusal."""
    where = f"spec.authorization.acls[{index}]"
    if not isinstance(raw, Mapping):
        return Refusal(Reason.INVALID_SPEC, f"{where} must be an object")
    resource = raw.get("resource")
    if not isinstance(resource, Mapping):
        return Refusal(Reason.INVALID_SPEC, f"{where}.resource is required")
    rtype = RESOURCE_TYPES.get(str(resource.get("type")))
    if rtype is None:
        return Refusal(
            Reason.INVALID_SPEC,
            f"{where}.resource.type must be one of {', '.join(RESOURCE_TYPES)}, "
            f"not {resource.get('type')!r}",
        )
    pattern = PATTERN_TYPES.get(str(resource.get("patternType") or "literal"))
    if pattern is None:
        return Refusal(
            Reason.INVALID_SPEC, f"{where}.resource.patternType must be literal or prefix"
        )
    name = resource.get("name")
    if rtype == "CLUSTER":
        name = CLUSTER_NAME if name in (None, "") else name
        if name != CLUSTER_NAME or pattern != "LITERAL":
            return Refusal(
                Reason.INVALID_SPEC,
                f"{where}: the cluster resource is the literal {CLUSTER_NAME!r} (or no name)",
            )
    if not isinstance(name, str) or not name:
        return Refusal(Reason.INVALID_SPEC, f"{where}.resource.name is required")
    if pattern == "PREFIXED" and name == "*":
        return Refusal(Reason.INVALID_SPEC, f"{where}: a prefix pattern cannot be '*'")
    permission = PERMISSIONS.get(str(raw.get("type") or "allow"))
    if permission is None:
        return Refusal(Reason.INVALID_SPEC, f"{where}.type must be allow or deny")
    host = _host(raw.get("host"), where)
    if isinstance(host, Refusal):
        return host
    operations = raw.get("operations")
    if not isinstance(operations, list) or not operations:
        return Refusal(Reason.INVALID_SPEC, f"{where}.operations must list at least one operation")
    rules: list[AclRule] = []
    for op in operations:
        kafka_op = OPERATIONS.get(str(op))
        if kafka_op is None:
            return Refusal(
                Reason.INVALID_SPEC,
                f"{where}: unknown operation {op!r} (one of {', '.join(OPERATIONS)})",
            )
        if kafka_op not in SUPPORTED_OPERATIONS[rtype]:
            return Refusal(
                Reason.INVALID_SPEC,
                f"{where}: operation {op} does not apply to a {resource.get('type')} resource",
            )
        rules.append(AclRule(rtype, name, pattern, kafka_op, permission, host))
    return rules


def parse_spec(
    name: str, spec: Mapping[str, Any], *, reserved: Iterable[str] = ()
) -> UserSpec | Refusal:
    """The desired user of a User named ``name``; ``reserved``: super users' principals."""
    if not _USER_NAME.match(name):
        return Refusal(
            Reason.INVALID_SPEC,
            f"user name {name!r} must be lower-case letters, digits, '-' and '.' (at most 64)",
        )
    if f"User:{name}" in set(reserved):
        return Refusal(
            Reason.RESERVED_NAME,
            f"User:{name} is a super user of the cluster (super.users); "
            "a User resource cannot create credentials for it",
        )
    auth_raw = spec.get("authentication")
    authentication: Authentication | None = None
    if auth_raw is not None:
        kind = auth_raw.get("type") if isinstance(auth_raw, Mapping) else None
        try:
            authentication = Authentication(str(kind))
        except ValueError:
            return Refusal(
                Reason.INVALID_SPEC,
                f"spec.authentication.type must be scram-sha-512 or tls, not {kind!r}",
            )
    authz = spec.get("authorization")
    rules: set[AclRule] = set()
    if authz is not None:
        if not isinstance(authz, Mapping) or authz.get("type") != "simple":
            return Refusal(Reason.INVALID_SPEC, "spec.authorization.type must be simple")
        acls = authz.get("acls")
        acls = [] if acls is None else acls
        if not isinstance(acls, list):
            return Refusal(Reason.INVALID_SPEC, "spec.authorization.acls must be a list")
        for i, raw in enumerate(acls):
            parsed = parse_acl(i, raw)
            if isinstance(parsed, Refusal):
                return parsed
            rules.update(parsed)
    quotas = parse_quotas(spec.get("quotas"))
    if isinstance(quotas, Refusal):
        return quotas
    return UserSpec(name, authentication, frozenset(rules), quotas)


def _sorted(rules: Iterable[AclRule]) -> tuple[AclRule, ...]:
    return tuple(sorted(rules))


def plan(desired: UserSpec, actual: ActualUser, *, new_password: str) -> list[Action]:
    """What brings ``actual`` to ``desired``; ``new_password`` is used only if one is needed.

    Credentials first (so a user switching type is never left with both), then the
    ACLs to add, then the stale ones to remove (see the module's invariants).
    """
    user = desired.name
    actions: list[Action] = []
    auth = desired.authentication
    if auth is Authentication.SCRAM_SHA_512:
        password = actual.secret_password
        if password is None:
            password = new_password
            actions.append(WriteScramSecret(user, password))
            actions.append(UpsertScram(user, password))
        elif not actual.has_scram:
            actions.append(UpsertScram(user, password))
    else:
        if actual.has_scram:
            actions.append(DeleteScram(user))
        if auth is Authentication.TLS:
            if actual.certificate is not CertificateState.VALID:
                actions.append(IssueCertificate(user))
        elif actual.secret_password is not None or actual.certificate is not (
            CertificateState.MISSING
        ):
            actions.append(DeleteSecret(user))
    stale = actual.acls - desired.acls
    missing = desired.acls - actual.acls
    if missing:
        actions.append(CreateAcls(user, _sorted(missing)))
    if stale:
        actions.append(DeleteAcls(user, _sorted(stale)))
    if desired.quotas != actual.quotas:
        wanted = dict(desired.quotas)
        actions.append(
            AlterQuotas(
                user,
                desired.quotas,
                tuple(sorted(k for k, _ in actual.quotas if k not in wanted)),
            )
        )
    return actions


def plan_delete(name: str, actual: ActualUser) -> list[Action]:
    """The User is being deleted: its ACLs, its SCRAM credential and its Secret go."""
    actions: list[Action] = []
    if actual.acls:
        actions.append(DeleteAcls(name, _sorted(actual.acls)))
    if actual.has_scram:
        actions.append(DeleteScram(name))
    if actual.secret_password is not None or actual.certificate is not CertificateState.MISSING:
        actions.append(DeleteSecret(name))
    if actual.quotas:
        actions.append(AlterQuotas(name, (), tuple(k for k, _ in actual.quotas)))
    return actions


def jaas_config(user: str, password: str) -> str:
    """Kafka's ``sasl.jaas.config`` for the user (what Strimzi puts in the Secret)."""
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{escaped}";'
    )


def describe_all(actions: Sequence[Action]) -> list[str]:
    return [a.describe() for a in actions]
