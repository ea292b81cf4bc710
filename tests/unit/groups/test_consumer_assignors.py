"""Server-side assignors of the KIP-848 consumer protocol: ``uniform`` and ``range``.

Covers :mod:`headwater.groups.consumer.assignors`: every partition of a subscribed topic
goes to exactly one member subscribed to its topic (checked for both assignors on fixed
cases and on generated ones); range's contiguous ranges; uniform's balance (counts within
one among members of one subscription) and stickiness (a member joining moves only what
it takes).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from headwater.groups.consumer.assignors import ASSIGNORS, range_assign, uniform_assign
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

TP = TopicPartition


def check_valid(
    result: Mapping[str, frozenset[TopicPartition]],
    subs: Mapping[str, frozenset[str]],
    counts: Mapping[str, int],
) -> None:
    assert set(result) == set(subs)
    every = [tp for tps in result.values() for tp in tps]
    assert len(every) == len(set(every)), "a partition assigned twice"
    subscribed = {t for s in subs.values() for t in s}
    expected = {TP(t, p) for t, n in counts.items() if t in subscribed for p in range(n)}
    assert set(every) == expected
    for m, tps in result.items():
        assert all(tp.topic in subs[m] for tp in tps), f"{m} got a topic it does not want"


def test_range_gives_contiguous_ranges_first_members_one_more() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"}), "c": frozenset({"t"})}
    result = range_assign(subs, {"t": 7}, {})
    assert result == {
        "a": frozenset(TP("t", p) for p in (0, 1, 2)),
        "b": frozenset(TP("t", p) for p in (3, 4)),
        "c": frozenset(TP("t", p) for p in (5, 6)),
    }


def test_range_per_topic_over_its_subscribers() -> None:
    subs = {"a": frozenset({"t", "u"}), "b": frozenset({"u"})}
    result = range_assign(subs, {"t": 2, "u": 2, "v": 3}, {})
    assert result == {
        "a": frozenset({TP("t", 0), TP("t", 1), TP("u", 0)}),
        "b": frozenset({TP("u", 1)}),
    }


def test_uniform_balances_one_subscription() -> None:
    subs = {m: frozenset({"t"}) for m in "abc"}
    result = uniform_assign(subs, {"t": 8}, {})
    check_valid(result, subs, {"t": 8})
    assert sorted(len(v) for v in result.values()) == [2, 3, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    counts = {"t": 6}
    two = {m: frozenset({"t"}) for m in "ab"}
    before = uniform_assign(two, counts, {})
    three = {**two, "c": frozenset({"t"})}
    after = uniform_assign(three, counts, before)
    check_valid(after, three, counts)
    assert all(len(v) == 2 for v in after.values())
    for m in "ab":
        assert after[m] <= before[m], "a staying member was given someone else's partition"


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    counts = {"t": 6}
    three = {m: frozenset({"t"}) for m in "abc"}
    before = uniform_assign(three, counts, {})
    two = {m: three[m] for m in "ab"}
    after = uniform_assign(two, counts, before)
    check_valid(after, two, counts)
    for m in "ab":
        assert before[m] <= after[m], "a staying member lost a partition"


def test_no_members_no_assignment() -> None:
    for assignor in ASSIGNORS.values():
        assert assignor({}, {"t": 3}, {}) == {}


subs_st = st.dictionaries(
    st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
    st.frozensets(st.sampled_from(["t", "u", "v"]), min_size=1),
    min_size=1,
)
counts_st = st.fixed_dictionaries(
    {t: st.integers(min_value=0, max_value=9) for t in ("t", "u", "v")}
)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(max_examples=60, deadline=None)
@given(subs=subs_st, counts=counts_st, churn=subs_st)
def test_every_partition_to_exactly_one_subscriber(
    name: str,
    subs: dict[str, frozenset[str]],
    counts: dict[str, int],
    churn: dict[str, frozenset[str]],
) -> None:
    assignor = ASSIGNORS[name]
    first = assignor(subs, counts, {})
    check_valid(first, subs, counts)
    second = assignor(churn, counts, first)  # members come, go and resubscribe
    check_valid(second, churn, counts)
