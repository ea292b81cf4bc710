"""ssl.principal.mapping.rules: Kafka's RULE:pattern/replacement/[LU] and DEFAULT, parsed
and applied to certificate subjects; bad rules are refused naming the rule."""

from __future__ import annotations

import pytest
from headwater.security.ssl_principal import NoMatchingRuleError, parse_rules


@pytest.mark.parametrize(
    ("rules", "subject", "name"),
    [
        ("DEFAULT", "CN=alice,OU=eng,O=acme", "CN=alice,OU=eng,O=acme"),
        ("", "CN=alice,O=acme", "CN=alice,O=acme"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/", "CN=alice,OU=eng,O=acme", "alice@eng"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/U", "CN=alice,OU=eng,O=acme", "ALICE@ENG"),
        ("RULE:^CN=(.*?),O=(.*)$/$1/L", "CN=Bob,O=acme", "bob"),
        # Kafka's documented example: the first rule that matches wins, DEFAULT as fallback.
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT",
            "CN=kafka-broker,OU=ServiceUsers,O=acme",
            "kafka-broker",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT",
            "CN=Adam,OU=Eng,O=acme",
            "adam@eng",
        ),
        ("RULE:^CN=(.*?),O=x$/$1/,DEFAULT", "CN=a,O=y", "CN=a,O=y"),
        ("RULE:^CN=(.*?),O=(.*)$/$1/\nDEFAULT", "CN=carol,O=acme", "carol"),
        (r"RULE:^CN=([^\/]*)\/x,O=(.*)$/$1/", "CN=dave/x,O=acme", "dave"),
        (r"RULE:^CN=(.*)$/user-\$-$1/", "CN=eve", "user-$-eve"),
    ],
)
def test_rules_map_subjects_like_kafka(rules: str, subject: str, name: str) -> None:
    assert parse_rules(rules).name_for(subject) == name


def test_no_matching_rule_is_refused() -> None:
    mapper = parse_rules("RULE:^CN=(.*?),O=acme$/$1/")
    with pytest.raises(NoMatchingRuleError, match="no rule"):
        mapper.name_for("CN=mallory,O=evil")


@pytest.mark.parametrize(
    "rules",
    [
        "RULE:^CN=(.*)$/$1",  # no closing slash
        "RULES:^CN=(.*)$/$1/",
        "RULE:^CN=(.*$/$1/",  # bad regex
        "RULE:^CN=(.*)$/$2/",  # no such group
        "RULE:^CN=(.*)$/$1/X",
        "DEFAULT,garbage",
    ],
)
def test_bad_rules_are_refused_naming_the_rule(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        parse_rules(rules)
