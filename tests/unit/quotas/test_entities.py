"""Quota entities: Kafka's precedence, validation and DescribeClientQuotas matching."""

from __future__ import annotations

import pytest
from headwater.quotas.entities import (
    InvalidQuota,
    QuotaEntity,
    QuotaKey,
    entity_from_components,
    format_value,
    matches,
    parse_stored,
    resolve,
    validate_alteration,
    validate_value,
)

E = QuotaEntity.of
P = QuotaKey.PRODUCER_BYTE_RATE

# Kafka's eight levels, highest first, each with the budget it shares.
LEVELS = [
    (E(user="alice", client_id="app"), ("alice", "app")),
    (E(user="alice", client_id=None), ("alice", "app")),
    (E(user="alice"), ("alice", "")),
    (E(user=None, client_id="app"), ("alice", "app")),
    (E(user=None, client_id=None), ("alice", "app")),
    (E(user=None), ("alice", "")),
    (E(client_id="app"), ("", "app")),
    (E(client_id=None), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_each_level_wins_over_every_lower_one(level: int) -> None:
    quotas = {entity: {P: 1000.0 + i} for i, (entity, _) in enumerate(LEVELS[level:], level)}
    budget = resolve(quotas, P, user="alice", client_id="app")
    assert budget is not None
    assert budget.bound == 1000.0 + level
    assert budget.sensor == LEVELS[level][1]


def test_precedence_is_per_key() -> None:
    quotas = {
        E(user="alice"): {QuotaKey.CONSUMER_BYTE_RATE: 5.0},
        E(client_id="app"): {P: 7.0},
    }
    assert resolve(quotas, P, user="alice", client_id="app").bound == 7.0  # type: ignore[union-attr]
    found = resolve(quotas, QuotaKey.CONSUMER_BYTE_RATE, user="alice", client_id="app")
    assert found is not None and found.bound == 5.0


def test_no_quota_is_unlimited_and_other_names_do_not_match() -> None:
    quotas = {E(user="bob"): {P: 1.0}, E(client_id="other"): {P: 1.0}}
    assert resolve(quotas, P, user="alice", client_id="app") is None


def test_default_user_quota_is_one_budget_per_user() -> None:
    quotas = {E(user=None): {P: 10.0}}
    a = resolve(quotas, P, user="alice", client_id="x")
    b = resolve(quotas, P, user="bob", client_id="x")
    assert a is not None and b is not None and a.sensor != b.sensor


def test_entity_paths_are_kafkas() -> None:
    assert E(user="alice").path() == "users/alice"
    assert E(user=None, client_id="c").path() == "users/<default>/clients/c"
    assert E(client_id=None).path() == "clients/<default>"


def test_entity_needs_a_type() -> None:
    with pytest.raises(ValueError, match="a user, a client id or both"):
        E()


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("user", "a"), ("user", "b")], "Duplicate user"),
        ([("ip", "1.2.3.4")], "IP"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([("user", "")], "Empty user not supported"),
    ],
)
def test_bad_entities_are_refused(components: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(InvalidQuota, match=message):
        entity_from_components(components)


def test_entity_from_components() -> None:
    assert entity_from_components([("client-id", None), ("user", "u")]) == E(
        user="u", client_id=None
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("no_such_key", 1.0, "Unknown quota key: no_such_key"),
        ("producer_byte_rate", -1.0, "must be > 0"),
        ("producer_byte_rate", 0.0, "must be > 0"),
        ("request_percentage", float("nan"), "must be > 0"),
        ("consumer_byte_rate", 1.5, "whole number"),
        ("controller_mutation_rate", 10.0, "not supported"),
    ],
)
def test_bad_values_are_refused(key: str, value: float, message: str) -> None:
    with pytest.raises(InvalidQuota, match=message):
        validate_value(key, value)


def test_alteration_validation() -> None:
    assert validate_alteration([("producer_byte_rate", 1024.0), ("request_percentage", None)]) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": None,
    }
    with pytest.raises(InvalidQuota, match="Duplicate quota key"):
        validate_alteration([("producer_byte_rate", 1.0), ("producer_byte_rate", None)])
    with pytest.raises(InvalidQuota, match="Unknown quota key: x"):
        validate_alteration([("x", None)])


def test_stored_config_keeps_only_quota_keys() -> None:
    stored = {"SCRAM-SHA-512": "salt=...", "producer_byte_rate": "1024", "request_percentage": "x"}
    assert parse_stored(stored) == {P: 1024.0}
    assert format_value("producer_byte_rate", 1024.0) == "1024"
    assert format_value("request_percentage", 50.0) == "50.0"


def test_describe_filter_matching() -> None:
    alice_app = E(user="alice", client_id="app")
    assert matches(alice_app, [("user", 0, "alice")], strict=False)
    assert not matches(alice_app, [("user", 0, "alice")], strict=True)
    assert matches(alice_app, [("user", 0, "alice"), ("client-id", 2, None)], strict=True)
    assert not matches(alice_app, [("user", 1, None)], strict=False)
    assert matches(E(user=None), [("user", 1, None)], strict=True)
    assert not matches(E(client_id="app"), [("user", 2, None)], strict=False)
    assert matches(E(client_id="app"), [], strict=False)
    assert not matches(E(client_id="app"), [], strict=True)
