"""Partition assignors (range, roundrobin, sticky, cooperative-sticky): fixed examples and
hypothesis properties -- every partition exactly once to a subscribed member, balance
within one for equal subscriptions, stickiness, cooperative rounds never revoke a
partition that does not move -- the rebalance protocol a list of assignors gives, plus
the ConsumerProtocol codec."""

from __future__ import annotations

import pytest
from headwater.client.group.classic import protocol
from headwater.client.group.classic.assignors import (
    ASSIGNORS,
    SUPPORTED_PROTOCOLS,
    RebalanceProtocol,
    Subscription,
    assign,
    cooperative_sticky_assign,
    owners,
    range_assign,
    rebalance_protocol,
    roundrobin_assign,
    sticky_assign,
)
from headwater.client.types import TopicPartition as TP
from hypothesis import given, settings
from hypothesis import strategies as st

EAGER = ["range", "roundrobin", "sticky"]


# -- the rebalance protocol: the highest one every configured assignor supports --------


def test_every_assignor_names_its_rebalance_protocols() -> None:
    assert set(SUPPORTED_PROTOCOLS) == set(ASSIGNORS)
    assert all(RebalanceProtocol.EAGER in p for p in SUPPORTED_PROTOCOLS.values())


@pytest.mark.parametrize("name", EAGER)
def test_an_eager_assignor_rebalances_eagerly(name: str) -> None:
    assert rebalance_protocol([name]) is RebalanceProtocol.EAGER


def test_cooperative_sticky_alone_rebalances_cooperatively() -> None:
    assert rebalance_protocol(["cooperative-sticky"]) is RebalanceProtocol.COOPERATIVE


@pytest.mark.parametrize(
    "names", [["range", "cooperative-sticky"], ["cooperative-sticky", "range"]]
)
def test_any_eager_assignor_in_the_list_makes_it_eager_whatever_its_place(
    names: list[str],
) -> None:
    # Kafka's ConsumerCoordinator keeps the protocols every assignor supports: the first
    # step of the upgrade to cooperative (["cooperative-sticky", "range"]) is still eager.
    assert rebalance_protocol(names) is RebalanceProtocol.EAGER


@pytest.mark.parametrize(("names", "word"), [([], "empty"), (["range", "fair"], "fair")])
def test_an_unknown_or_empty_assignor_list_is_refused(names: list[str], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        rebalance_protocol(names)


def _subs(members: list[str], topics: tuple[str, ...]) -> dict[str, Subscription]:
    return {m: Subscription(topics) for m in members}


def test_range_example() -> None:
    out = range_assign({"t": 7}, _subs(["a", "b", "c"], ("t",)))
    assert out == {
        "a": [TP("t", 0), TP("t", 1), TP("t", 2)],
        "b": [TP("t", 3), TP("t", 4)],
        "c": [TP("t", 5), TP("t", 6)],
    }


def test_roundrobin_example() -> None:
    out = roundrobin_assign({"t": 2, "u": 2}, _subs(["a", "b", "c"], ("t", "u")))
    assert out == {"a": [TP("t", 0), TP("u", 1)], "b": [TP("t", 1)], "c": [TP("u", 0)]}


def test_three_consumers_six_partitions_get_two_each() -> None:
    for name in ASSIGNORS:
        out = assign(name, {"t": 6}, _subs(["a", "b", "c"], ("t",)))
        assert sorted(len(v) for v in out.values()) == [2, 2, 2], name


def test_unknown_assignor() -> None:
    with pytest.raises(ValueError, match="unknown partition assignor"):
        assign("bogus", {}, {})


def test_sticky_keeps_survivors_partitions_when_one_leaves() -> None:
    first = sticky_assign({"t": 9}, _subs(["a", "b", "c"], ("t",)))
    subs = {m: Subscription(("t",), tuple(first[m]), 1) for m in ("a", "b")}
    second = sticky_assign({"t": 9}, subs)
    for m in ("a", "b"):
        assert set(first[m]) <= set(second[m])


def test_cooperative_first_round_withholds_moving_partitions() -> None:
    subs = {
        "a": Subscription(("t",), tuple(TP("t", p) for p in range(6)), 1),
        "b": Subscription(("t",), (), -1),
    }
    out = cooperative_sticky_assign({"t": 6}, subs)
    assert len(out["a"]) == 3 and out["b"] == []  # a revokes 3, nobody gets them yet
    subs2 = {"a": Subscription(("t",), tuple(out["a"]), 2), "b": Subscription(("t",), (), 2)}
    out2 = cooperative_sticky_assign({"t": 6}, subs2)
    assert out2["a"] == out["a"] and len(out2["b"]) == 3


def test_protocol_roundtrip() -> None:
    sub = protocol.ConsumerSubscription(("t", "u"), (TP("t", 1), TP("u", 0)), 5, b"x")
    assert protocol.decode_subscription(protocol.encode_subscription(sub)) == sub
    asg = protocol.ConsumerAssignment((TP("t", 0), TP("t", 2)), None)
    assert protocol.decode_assignment(protocol.encode_assignment(asg)) == asg
    assert protocol.decode_assignment(b"") == protocol.ConsumerAssignment(())
    with pytest.raises(ValueError):
        protocol.decode_subscription(b"\x00\x01\x00\x00\x00\x05")


# -- properties -----------------------------------------------------------------------

topics_st = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(min_value=0, max_value=12), min_size=1
)


@st.composite
def groups(draw: st.DrawFn, *, equal: bool) -> tuple[dict[str, int], dict[str, Subscription]]:
    topics = draw(topics_st)
    names = sorted(topics)
    members = draw(
        st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=7, unique=True)
    )
    subs: dict[str, Subscription] = {}
    for m in members:
        chosen = (
            tuple(names)
            if equal
            else tuple(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        )
        subs[m] = Subscription(chosen)
    return topics, subs


def _check_exactly_once(
    topics: dict[str, int], subs: dict[str, Subscription], out: dict[str, list[TP]]
) -> None:
    assert set(out) == set(subs)
    wanted = {t for s in subs.values() for t in s.topics}
    expected = {TP(t, p) for t, n in topics.items() if t in wanted for p in range(n)}
    found = owners(out)
    assert set(found) == expected
    for tp, who in found.items():
        assert len(who) == 1, f"{tp} assigned to {who}"
        assert tp.topic in subs[who[0]].topics


@pytest.mark.parametrize("name", EAGER)
@settings(max_examples=60, deadline=None)
@given(case=groups(equal=False))
def test_every_partition_exactly_once_to_a_subscriber(
    name: str, case: tuple[dict[str, int], dict[str, Subscription]]
) -> None:
    topics, subs = case
    _check_exactly_once(topics, subs, assign(name, topics, subs))


@pytest.mark.parametrize("name", ["roundrobin", "sticky"])
@settings(max_examples=60, deadline=None)
@given(case=groups(equal=True))
def test_balanced_within_one_for_equal_subscriptions(
    name: str, case: tuple[dict[str, int], dict[str, Subscription]]
) -> None:
    topics, subs = case
    counts = [len(v) for v in assign(name, topics, subs).values()]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=60, deadline=None)
@given(case=groups(equal=True))
def test_range_balanced_within_one_per_topic(
    case: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    topics, subs = case
    out = range_assign(topics, subs)
    for t in topics:
        counts = [sum(1 for tp in v if tp.topic == t) for v in out.values()]
        assert max(counts) - min(counts) <= 1


@st.composite
def membership_changes(
    draw: st.DrawFn,
) -> tuple[dict[str, int], list[str], list[str]]:
    topics = draw(topics_st)
    pool = ["m0", "m1", "m2", "m3", "m4", "m5", "m6"]
    before = draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    after = draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    return topics, before, after


@settings(max_examples=80, deadline=None)
@given(change=membership_changes())
def test_sticky_keeps_what_balance_allows(
    change: tuple[dict[str, int], list[str], list[str]],
) -> None:
    topics, before, after = change
    names = tuple(sorted(topics))
    first = sticky_assign(topics, _subs(before, names))
    subs = {m: Subscription(names, tuple(first.get(m, [])), 1) for m in after}
    second = sticky_assign(topics, subs)
    _check_exactly_once(topics, subs, second)
    floor_q = sum(topics.values()) // len(after)
    for m in after:
        kept = set(first.get(m, [])) & set(second[m])
        assert len(kept) >= min(len(first.get(m, [])), floor_q)


@settings(max_examples=80, deadline=None)
@given(change=membership_changes())
def test_cooperative_never_revokes_unmoved_and_converges(
    change: tuple[dict[str, int], list[str], list[str]],
) -> None:
    topics, before, after = change
    names = tuple(sorted(topics))
    owned = sticky_assign(topics, _subs(before, names))
    generation = 1
    for _round in range(3):
        subs = {m: Subscription(names, tuple(owned.get(m, [])), generation) for m in after}
        out = cooperative_sticky_assign(topics, subs)
        found = owners(out)
        assert all(len(w) == 1 for w in found.values())
        for m in after:
            # a partition a member owns is either kept or revoked -- never given to
            # someone else in the same round
            for tp in owned.get(m, []):
                assert found.get(tp, [m]) == [m]
        target = sticky_assign(topics, subs)
        for m in after:
            unmoved = set(owned.get(m, [])) & set(target[m])
            assert unmoved <= set(out[m])  # partitions that do not move are never revoked
        owned = {m: out[m] for m in after}
        generation += 1
    # after the follow-up round everything is assigned
    _check_exactly_once(topics, subs, out)
