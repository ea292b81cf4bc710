"""Client quota entities, keys and their precedence, as Kafka's (KIP-55, KIP-546).

A quota entity is a user, a client id, or a (user, client id) pair; either name
may be Kafka's default entity (``<default>`` in ZooKeeper, a null name on the
wire), which applies to every user or client id with no quota of its own.  An
entity's config maps quota keys to values:

* ``producer_byte_rate``, ``consumer_byte_rate``: bytes per second a client may
  produce or fetch (KIP-13);
* ``request_percentage``: the share of one request handler thread's time, in
  percent, a client's requests may take (KIP-124);
* ``controller_mutation_rate`` (KIP-599) is refused: Headwater's controller does
  not throttle topic mutations, and a stored quota nobody enforces would mislead.

A client's quota of one key is the value of the first entity in Kafka's
precedence order (``DefaultQuotaCallback``) that sets that key:

1. ``/config/users/<user>/clients/<client-id>``
2. ``/config/users/<user>/clients/<default>``
3. ``/config/users/<user>``
4. ``/config/users/<default>/clients/<client-id>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<client-id>``
8. ``/config/clients/<default>``

The quota is shared by every connection that resolves to the same entity: a
``/config/users/alice`` quota is one budget for all of alice's client ids, a
``/config/users/<default>`` quota one budget per user.  :func:`resolve` answers
the value and the key of that shared budget (:class:`QuotaBudget`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping

DEFAULT = "<default>"
"""Kafka's default entity name in ZooKeeper (``ConfigEntityName.Default``)."""


class QuotaKey(enum.StrEnum):
    PRODUCER_BYTE_RATE = "producer_byte_rate"
    CONSUMER_BYTE_RATE = "consumer_byte_rate"
    REQUEST_PERCENTAGE = "request_percentage"


UNSUPPORTED_KEYS = frozenset({"controller_mutation_rate"})
BYTE_RATE_KEYS = frozenset({QuotaKey.PRODUCER_BYTE_RATE, QuotaKey.CONSUMER_BYTE_RATE})


class Absent(enum.Enum):
    """An entity type a quota entity does not have (distinct from None, the default)."""

    ABSENT = enum.auto()


class EntityType(enum.StrEnum):
    USER = "user"
    CLIENT_ID = "client-id"


@dataclasses.dataclass(frozen=True, order=True)
class QuotaEntity:
    """A user, a client id or both; a name of None is the default entity, and a type the
    entity does not have is ``has_user``/``has_client_id`` False (its name None).

    Invariant: at least one of the two types is present.
    """

    has_user: bool
    user: str | None
    has_client_id: bool
    client_id: str | None

    def __post_init__(self) -> None:
        if not (self.has_user or self.has_client_id):
            raise ValueError("a quota entity names a user, a client id or both")

    @classmethod
    def of(
        cls,
        *,
        user: str | Absent | None = Absent.ABSENT,
        client_id: str | Absent | None = Absent.ABSENT,
    ) -> QuotaEntity:
        """``user=None`` is the default user; an omitted argument is an absent type."""
        return cls(
            has_user=not isinstance(user, Absent),
            user=None if isinstance(user, Absent) else user,
            has_client_id=not isinstance(client_id, Absent),
            client_id=None if isinstance(client_id, Absent) else client_id,
        )

    def path(self) -> str:
        """The entity path below ``/config`` (names sanitized by the caller's store)."""
        parts = []
        if self.has_user:
            parts.append(f"users/{self.user if self.user is not None else DEFAULT}")
        if self.has_client_id:
            parts.append(f"clients/{self.client_id if self.client_id is not None else DEFAULT}")
        return "/".join(parts)

    def describe(self) -> str:
        """Kafka's way of naming the entity in messages: ``user 'alice', client-id <default>``."""
        out = []
        if self.has_user:
            out.append(f"user {self.user!r}" if self.user is not None else "user <default>")
        if self.has_client_id:
            out.append(
                f"client-id {self.client_id!r}"
                if self.client_id is not None
                else "client-id <default>"
            )
        return ", ".join(out)


class InvalidQuota(ValueError):
    """A quota alteration Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def entity_from_components(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An AlterClientQuotas entity (``(entity_type, name)`` pairs; None is the default),
    validated as Kafka's ``ZkAdminManager``: only ``user`` and ``client-id`` (``ip``
    quotas are connection-rate quotas, which Headwater does not have), each at most once,
    at least one, and names not empty."""
    user: str | Absent | None = Absent.ABSENT
    client_id: str | Absent | None = Absent.ABSENT
    seen: set[str] = set()
    for entity_type, name in components:
        if entity_type in seen:
            raise InvalidQuota(f"Duplicate {entity_type} entity type in the quota entity")
        seen.add(entity_type)
        if entity_type == "ip":
            raise InvalidQuota("IP (connection rate) quotas are not supported by Headwater")
        if entity_type not in (EntityType.USER, EntityType.CLIENT_ID):
            raise InvalidQuota(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise InvalidQuota(f"Empty {entity_type} not supported")
        if entity_type == EntityType.USER:
            user = name
        else:
            client_id = name
    if not seen:
        raise InvalidQuota("Invalid empty client quota entity")
    return QuotaEntity.of(user=user, client_id=client_id)


def validate_value(key: str, value: float) -> float:
    """A quota value as Kafka's ``DynamicConfig.Client`` validates it: a known key, a
    finite positive number (byte rates whole numbers of bytes per second)."""
    if key in UNSUPPORTED_KEYS:
        raise InvalidQuota(
            f"Quota {key} is not supported: Headwater's controller does not throttle "
            "topic mutations"
        )
    if key not in set(QuotaKey):
        raise InvalidQuota(f"Unknown quota key: {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuota(f"Invalid value {value} for configuration {key}: must be > 0")
    if key in BYTE_RATE_KEYS:
        if value != int(value):
            raise InvalidQuota(
                f"Invalid value {value} for configuration {key}: must be a whole number "
                "of bytes per second"
            )
        return float(int(value))
    return float(value)


def validate_alteration(ops: Iterable[tuple[str, float | None]]) -> dict[str, float | None]:
    """One entity's AlterClientQuotas ops (``(key, value)``; None removes the key),
    each key at most once.  Answers key to new value (None: remove)."""
    out: dict[str, float | None] = {}
    for key, value in ops:
        if key in out:
            raise InvalidQuota(f"Duplicate quota key {key} in the alteration")
        out[key] = None if value is None else validate_value(key, value)
        # a removal still names a key Kafka knows
        if value is None and key not in set(QuotaKey) and key not in UNSUPPORTED_KEYS:
            raise InvalidQuota(f"Unknown quota key: {key}")
    return out


def parse_stored(config: Mapping[str, str]) -> dict[QuotaKey, float]:
    """The quota keys of a stored entity config (a user's config also holds SCRAM
    credentials); values that do not parse are left out."""
    out: dict[QuotaKey, float] = {}
    for key in QuotaKey:
        text = config.get(key.value)
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value) and value > 0:
            out[key] = value
    return out


def format_value(key: str, value: float) -> str:
    """As Kafka writes it: byte rates as integers, percentages as doubles."""
    return str(int(value)) if key in BYTE_RATE_KEYS else repr(float(value))


@dataclasses.dataclass(frozen=True)
class QuotaBudget:
    """The quota a connection is held to for one key: ``bound`` (bytes/s or percent)
    and ``sensor``, the ``(user, client_id)`` tags of the shared budget ("" for a tag
    the matched entity does not split by), as Kafka's ``ClientQuotaManager`` metric
    tags."""

    bound: float
    sensor: tuple[str, str]


def resolve(
    quotas: Mapping[QuotaEntity, Mapping[QuotaKey, float]],
    key: QuotaKey,
    *,
    user: str,
    client_id: str,
) -> QuotaBudget | None:
    """The quota of ``key`` for a connection of ``user`` (the principal's name) and
    ``client_id``, by the precedence in the module docstring; None: unlimited."""
    E = QuotaEntity.of
    order = (
        (E(user=user, client_id=client_id), (user, client_id)),
        (E(user=user, client_id=None), (user, client_id)),
        (E(user=user), (user, "")),
        (E(user=None, client_id=client_id), (user, client_id)),
        (E(user=None, client_id=None), (user, client_id)),
        (E(user=None), (user, "")),
        (E(client_id=client_id), ("", client_id)),
        (E(client_id=None), ("", client_id)),
    )
    for entity, sensor in order:
        found = quotas.get(entity)
        if found is not None and key in found:
            return QuotaBudget(found[key], sensor)
    return None


def matches(
    entity: QuotaEntity,
    components: Iterable[tuple[str, int, str | None]],
    *,
    strict: bool,
) -> bool:
    """Whether ``entity`` fits a DescribeClientQuotas filter (``(entity_type,
    match_type, match)``, match types 0 exact, 1 default, 2 any), as Kafka's
    ``ZkAdminManager.describeClientQuotas``: each component must fit; ``strict``
    also wants the entity to have no type the filter does not name."""
    named: set[str] = set()
    for entity_type, match_type, match in components:
        named.add(entity_type)
        if entity_type == EntityType.USER:
            present, name = entity.has_user, entity.user
        elif entity_type == EntityType.CLIENT_ID:
            present, name = entity.has_client_id, entity.client_id
        else:
            return False
        if not present:
            return False
        if match_type == 0 and name != match:
            return False
        if match_type == 1 and name is not None:
            return False
    if strict:
        if entity.has_user and EntityType.USER not in named:
            return False
        if entity.has_client_id and EntityType.CLIENT_ID not in named:
            return False
    return True


QUOTA_ENTITY_TYPES = frozenset({"user", "client-id", "ip"})
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def invalid_filter(components: list[tuple[str, int, str | None]]) -> str | None:
    """Why a DescribeClientQuotas filter (``(entity_type, match_type, match)``) is
    malformed, as Kafka's ``ClientQuotaFilterComponent`` rules, or None."""
    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if entity_type not in QUOTA_ENTITY_TYPES:
            return f"Custom entity type '{entity_type}' not supported"
        if entity_type in seen:
            return f"Duplicate {entity_type} filter component entity type"
        seen.add(entity_type)
        if match_type == MATCH_EXACT and match is None:
            return f"Request specified exact match type with no match for {entity_type}"
        if match_type in (MATCH_DEFAULT, MATCH_ANY) and match is not None:
            return f"Request specified match type {match_type} with a match for {entity_type}"
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unexpected match type {match_type}"
    return None
