"""The console's input rules: every bad field is refused with a message naming it."""

from __future__ import annotations

import pytest
from headwater.console import inputs
from headwater.console.inputs import InvalidInput


def refused(fn: object, *args: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        fn(*args)  # type: ignore[operator]
    return info.value


@pytest.mark.parametrize("name", ["orders", "a.b_c-d", "X" * 249, "..a"])
def test_legal_topic_names(name: str) -> None:
    assert inputs.topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "required"),
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("x" * 250, "at most 249"),
        ("a b", "characters a topic name cannot have"),
        ("<script>", "characters a topic name cannot have"),
        ("t/../x", "characters a topic name cannot have"),
        ("tøpic", "characters a topic name cannot have"),
    ],
)
def test_odd_topic_names_are_refused(name: str, says: str) -> None:
    err = refused(inputs.topic_name, name)
    assert err.field == "topic"
    assert says in err.message


def test_a_huge_bad_input_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidInput) as info:
        inputs.integer("offset", "9" * 10_000, low=0, high=10)
    err = info.value
    assert len(str(err)) < 120


def test_group_ids() -> None:
    assert inputs.group_id("my group/1 <x>") == "my group/1 <x>"
    assert "required" in refused(inputs.group_id, "").message
    assert "control characters" in refused(inputs.group_id, "a\nb").message
    assert "at most" in refused(inputs.group_id, "g" * 1001).message


def test_browse_defaults() -> None:
    q = inputs.browse_query({}, partitions=3)
    assert q == inputs.BrowseQuery(0, "newest", None, None, inputs.DEFAULT_RECORDS, "text")


def test_browse_by_offset_and_by_time() -> None:
    q = inputs.browse_query(
        {"partition": "2", "start": "offset", "offset": "41", "limit": "7", "format": "hex"}, 3
    )
    assert (q.partition, q.start, q.offset, q.limit, q.format) == (2, "offset", 41, 7, "hex")
    q = inputs.browse_query({"start": "timestamp", "timestamp": "1970-01-01T00:00:01"}, 1)
    assert q.timestamp_ms == 1000
    q = inputs.browse_query({"start": "timestamp", "timestamp": "1700000000000"}, 1)
    assert q.timestamp_ms == 1_700_000_000_000
    q = inputs.browse_query({"start": "timestamp", "timestamp": "2026-01-01T01:00:00+01:00"}, 1)
    assert q.timestamp_ms == 1_767_225_600_000


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"limit": "501"}, "limit", "out of range; expected 1 to 500"),
        ({"limit": "100000000"}, "limit", "out of range"),
        ({"limit": "0"}, "limit", "out of range"),
        ({"limit": "ten"}, "limit", "not a whole number"),
        ({"partition": "3"}, "partition", "expected 0 to 2"),
        ({"partition": "-1"}, "partition", "out of range"),
        ({"start": "offset", "offset": "-5"}, "offset", "out of range"),
        ({"start": "offset", "offset": "12abc"}, "offset", "not a whole number"),
        ({"start": "offset", "offset": "1e3"}, "offset", "not a whole number"),
        ({"start": "offset"}, "offset", "not a whole number"),
        ({"start": "offset", "offset": "9" * 30}, "offset", "not a whole number"),
        ({"start": "timestamp", "timestamp": "yesterday"}, "timestamp", "not a time"),
        ({"start": "timestamp", "timestamp": "1969-12-31T00:00:00"}, "timestamp", "before 1970"),
        ({"start": "middle"}, "start", "not one of newest, oldest, offset, timestamp"),
        ({"format": "xml"}, "format", "not one of text, json, hex"),
    ],
)
def test_bad_browse_queries(params: dict[str, str], field: str, says: str) -> None:
    err = refused(inputs.browse_query, params, 3)
    assert err.field == field
    assert says in err.message


def test_new_topic_form() -> None:
    form = inputs.new_topic(
        {"name": "t1", "partitions": "6", "replication_factor": "", "configs": "a.b=1\n\nc=x=y"}
    )
    assert form == inputs.NewTopicForm("t1", 6, -1, {"a.b": "1", "c": "x=y"})


@pytest.mark.parametrize(
    ("form", "field", "says"),
    [
        ({"name": "a b"}, "name", "characters"),
        ({"name": "t", "partitions": "0"}, "partitions", "out of range"),
        ({"name": "t", "partitions": "100001"}, "partitions", "out of range"),
        ({"name": "t", "replication_factor": "x"}, "replication_factor", "not a whole number"),
        ({"name": "t", "configs": "retention.ms"}, "configs", "line 1: expected name=value"),
        ({"name": "t", "configs": "a=1\na=2"}, "configs", "line 2: a is given twice"),
        ({"name": "t", "configs": "=1"}, "configs", "expected name=value"),
    ],
)
def test_bad_new_topic_forms(form: dict[str, str], field: str, says: str) -> None:
    err = refused(inputs.new_topic, form)
    assert err.field == field
    assert says in err.message


def test_partitions_only_grow() -> None:
    assert inputs.new_partition_count({"partitions": "4"}, 3) == 4
    assert "must be more" in refused(inputs.new_partition_count, {"partitions": "3"}, 3).message


def test_produce_form() -> None:
    form = inputs.produce_form(
        {"partition": "", "key": "", "value": "v", "headers": "trace: 1\n\nsrc:web: x"}, 2
    )
    assert form == inputs.ProduceForm(None, None, b"v", (("trace", b"1"), ("src", b"web: x")))
    assert inputs.produce_form({"partition": "1", "key": "k"}, 2).partition == 1
    assert "line 1" in refused(inputs.produce_form, {"headers": "no colon"}, 1).message
    assert "expected 0 to 1" in refused(inputs.produce_form, {"partition": "2"}, 2).message
    big = {"value": "x" * (inputs.MAX_PRODUCE_BYTES + 1)}
    assert "at most" in refused(inputs.produce_form, big, 1).message


def test_reset_forms() -> None:
    now = 10 * 3_600_000
    base = {"topic": "t", "mode": "dry-run"}
    assert inputs.reset_form({**base, "spec": "to-earliest"}, now) == inputs.ResetForm(
        "t", "to-earliest", 0, False
    )
    assert inputs.reset_form({**base, "spec": "to-offset", "value": "5"}, now).amount == 5
    assert inputs.reset_form({**base, "spec": "shift-by", "value": "-3"}, now).amount == -3
    assert inputs.reset_form({**base, "spec": "by-duration", "value": "PT1H"}, now).amount == (
        9 * 3_600_000
    )
    assert inputs.reset_form({**base, "spec": "to-latest", "mode": "execute"}, now).execute
    for form, field in [
        ({**base, "spec": "to-offset", "value": "-1"}, "value"),
        ({**base, "spec": "by-duration", "value": "1h"}, "value"),
        ({**base, "spec": "to-datetime", "value": "noon"}, "value"),
        ({**base, "spec": "sideways"}, "spec"),
        ({**base}, "spec"),
        ({**base, "spec": "to-latest", "mode": "now"}, "mode"),
        ({"topic": "a b", "spec": "to-latest"}, "topic"),
    ]:
        assert refused(inputs.reset_form, form, now).field == field


def test_config_changes() -> None:
    got = inputs.config_change({"set": "retention.ms=5\n", "delete": "cleanup.policy\n\n"})
    assert got == inputs.ConfigChange({"retention.ms": "5"}, ["cleanup.policy"])
    assert "nothing to change" in refused(inputs.config_change, {}).message
    assert (
        "both set and deleted"
        in refused(inputs.config_change, {"set": "a=1", "delete": "a"}).message
    )
    assert "not a config name" in refused(inputs.config_change, {"delete": "A B"}).message


ACL_FORM = {
    "resource_type": "TOPIC",
    "resource_name": "orders",
    "pattern_type": "PREFIXED",
    "principal": "User:alice",
    "host": "*",
    "operation": "READ",
    "permission": "ALLOW",
}


def test_acl_binding_from_a_form() -> None:
    b = inputs.acl_binding(ACL_FORM)
    assert str(b) == "ALLOW User:alice from * READ on TOPIC:PREFIXED:orders"


def test_cluster_acl_names_the_cluster_when_left_empty() -> None:
    form = {**ACL_FORM, "resource_type": "CLUSTER", "resource_name": "", "pattern_type": ""}
    b = inputs.acl_binding({**form, "operation": "ALTER"})
    assert str(b.pattern) == "CLUSTER:LITERAL:kafka-cluster"


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"resource_type": "USER"}, "resource_type", "not one of TOPIC, GROUP"),
        ({"resource_name": ""}, "resource_name", "a resource name is required"),
        ({"pattern_type": "MATCH"}, "pattern_type", "not one of LITERAL, PREFIXED"),
        ({"principal": ""}, "principal", "a principal is required"),
        ({"principal": "alice"}, "principal", "alice"),
        ({"host": "example.com"}, "host", "IP address"),
        ({"operation": ""}, "operation", "is not one of"),
        ({"operation": "ANY"}, "operation", "is not one of"),
        ({"operation": "IDEMPOTENT_WRITE"}, "operation", "does not apply to TOPIC"),
        ({"permission": "MAYBE"}, "permission", "not one of ALLOW, DENY"),
        ({"resource_type": "CLUSTER", "resource_name": "x"}, "resource_name", "kafka-cluster"),
        ({"resource_name": "*"}, "resource_name", "PREFIXED pattern cannot be '*'"),
    ],
)
def test_bad_acl_fields_are_refused(change: dict[str, str], field: str, says: str) -> None:
    err = refused(inputs.acl_binding, {**ACL_FORM, **change})
    assert err.field == field
    assert says in err.message


def test_scram_form() -> None:
    form = {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": "8192", "password": "p" * 8}
    assert inputs.scram_form(form) == inputs.ScramForm("bob", "SCRAM-SHA-256", 8192, "p" * 8)
    assert inputs.scram_form({"user": "bob", "password": "p" * 8}).iterations == 4096


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"user": ""}, "user", "required"),
        ({"user": "a\nb"}, "user", "control characters"),
        ({"mechanism": "PLAIN"}, "mechanism", "not one of SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"iterations": "100"}, "iterations", "expected 4096 to 16384"),
        ({"password": "short"}, "password", "at least 8"),
    ],
)
def test_bad_scram_fields_are_refused(change: dict[str, str], field: str, says: str) -> None:
    form = {"user": "bob", "password": "long enough", **change}
    err = refused(inputs.scram_form, form)
    assert err.field == field
    assert says in err.message
