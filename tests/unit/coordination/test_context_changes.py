"""ControllerContext changes: each view update applied, recorded partition states, copies
that do not share state, and reset at the end of a term."""

from __future__ import annotations

import pytest
from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import LeaderAndIsr
from headwater.values import TopicPartition

from .helpers import EPOCH, ORDERS, lai, reg, view


def test_set_live_brokers_replaces_the_set() -> None:
    ctx = view(brokers=(1, 2))
    ctx.apply(r.SetLiveBrokers((reg(3), reg(2, epoch=7))))
    assert ctx.live_brokers == {3: reg(3), 2: reg(2, epoch=7)}


def test_set_shutting_down_replaces_the_set() -> None:
    ctx = view(shutting_down=(1,))
    ctx.apply(r.SetShuttingDown(frozenset({2, 3})))
    assert ctx.shutting_down == {2, 3}


def test_add_partitions_creates_or_extends_a_topic() -> None:
    ctx = view()
    ctx.apply(r.AddPartitions("t", {0: (1, 2)}))
    ctx.apply(r.AddPartitions("t", {1: (2, 3)}))
    assert ctx.assignments == {"t": {0: (1, 2), 1: (2, 3)}}


def test_load_states_replaces_cached_states() -> None:
    ctx = view(topics=ORDERS)
    fresh = lai(2, (2, 3), leader_epoch=4, zk_version=9)
    ctx.apply(r.LoadStates({("orders", 0): fresh}))
    assert ctx.states[("orders", 0)] == fresh
    assert ctx.states[("orders", 1)] == lai(2, (2, 3, 1))


def test_mark_deleting_then_forget_topic() -> None:
    ctx = view(topics={**ORDERS, "keep": {0: (1,)}})
    ctx.apply(r.MarkTopicDeleting("orders"))
    assert ctx.topics_to_delete == {"orders"}
    ctx.apply(r.ForgetTopic("orders"))
    assert list(ctx.assignments) == ["keep"]
    assert list(ctx.states) == [("keep", 0)]
    assert ctx.topics_to_delete == set()


def test_forgetting_an_unknown_topic_is_harmless() -> None:
    ctx = view(topics=ORDERS)
    ctx.apply(r.ForgetTopic("nope"))
    assert len(ctx.states) == 3


def test_apply_refuses_effects_that_are_not_view_updates() -> None:
    with pytest.raises(TypeError):
        view().apply(r.RemoveBroker(1))  # type: ignore[arg-type]


def test_record_state() -> None:
    ctx = view(topics=ORDERS)
    ctx.record_state(("orders", 0), lai(3, (3,), zk_version=4))
    assert ctx.states[("orders", 0)].zk_version == 4


def test_copy_shares_nothing_mutable() -> None:
    ctx = view(topics=ORDERS, shutting_down=(1,), deleting=("orders",))
    twin = ctx.copy()
    assert twin == ctx
    twin.apply(r.AddPartitions("orders", {3: (1, 2, 3)}))
    twin.apply(r.SetShuttingDown(frozenset()))
    twin.apply(r.ForgetTopic("orders"))
    twin.record_state(("x", 0), lai(1, (1,)))
    del twin.live_brokers[1]
    assert ctx == view(topics=ORDERS, shutting_down=(1,), deleting=("orders",))


def test_reset_forgets_the_term() -> None:
    ctx = view(topics=ORDERS, shutting_down=(1,), deleting=("orders",))
    ctx.cluster_id = "c"
    ctx.reset()
    assert ctx == ControllerContext()
    assert ctx.epoch is None and ctx.controller_epoch == -1


def test_views_built_by_helpers_are_active() -> None:
    assert view().epoch == EPOCH


def test_a_topics_id_is_kept_with_its_assignment_and_forgotten_with_it() -> None:
    ctx = ControllerContext()
    ctx.apply(r.AddPartitions("t", {0: (1, 2)}, "AAAAAAAAAAAAAAAAAAAAAg"))
    ctx.apply(r.AddPartitions("t", {1: (2, 3)}))  # added partitions: the id stays
    ctx.apply(r.LoadStates({TopicPartition("t", 1): LeaderAndIsr(2, 0, (2, 3), 0)}))
    assert ctx.topic_ids == {"t": "AAAAAAAAAAAAAAAAAAAAAg"}
    state = ctx.partition_state(TopicPartition("t", 1))
    assert state is not None and state.topic_id == "AAAAAAAAAAAAAAAAAAAAAg"
    assert ctx.copy().topic_ids == ctx.topic_ids
    ctx.apply(r.ForgetTopic("t"))
    assert ctx.topic_ids == {}
