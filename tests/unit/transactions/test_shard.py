"""One __transaction_state partition's ids: loading, appends in flight, timers, views."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.transactions import decisions as d
from headwater.transactions import records as rec
from headwater.transactions.results import Refuse, Transition
from headwater.transactions.shard import TransactionShard
from headwater.transactions.state import IllegalStateError, TransactionResult, TransactionState
from headwater.transactions.views import (
    TransactionListing,
    describe,
    list_transactions,
)

from tests.unit.transactions.helpers import CONFIG, T0, T1, TID, ProducerIds, add, end

S = TransactionState


def ready_shard() -> TransactionShard:
    shard = TransactionShard(3, CONFIG)
    assert shard.loaded() == []
    return shard


def run(shard: TransactionShard, decision: object, *, ok: bool = True) -> None:
    assert isinstance(decision, Transition), decision
    shard.begin(decision)
    shard.appended(decision, ok=ok)


def init(
    shard: TransactionShard, tid: str = TID, now_ms: int = 0, ids: ProducerIds | None = None
) -> None:
    run(
        shard,
        d.init_producer_id(
            shard.get(tid),
            transactional_id=tid,
            transaction_timeout_ms=10_000,
            now_ms=now_ms,
            config=CONFIG,
            allocate_producer_id=ids or ProducerIds(),
        ),
    )


def test_requests_wait_for_the_load_and_the_load_names_the_markers_to_write() -> None:
    source = ready_shard()
    init(source)
    m = source.get(TID)
    assert m is not None
    run(source, add(m, T0))
    m = source.get(TID)
    assert m is not None
    prepare = end(m, TransactionResult.ABORT)
    assert isinstance(prepare, Transition)
    record = source.begin(prepare)
    source.appended(prepare, ok=True)

    shard = TransactionShard(3, CONFIG)
    refused = shard.check_ready()
    assert refused is not None and refused.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert shard.tick(now_ms=10**9, allocate_producer_id=ProducerIds()) == []
    shard.replay(*record)
    assert shard.loaded() == [(TID, TransactionResult.ABORT)]
    assert shard.check_ready() is None
    assert shard.get(TID) == source.get(TID)
    with pytest.raises(IllegalStateError, match="already loaded"):
        shard.replay(*record)


def test_an_append_in_flight_holds_the_pending_state_and_a_failure_restores_the_id() -> None:
    shard = ready_shard()
    init(shard)
    before = shard.get(TID)
    assert before is not None
    t = add(before, T0)
    assert isinstance(t, Transition)
    record = shard.begin(t)
    assert record == rec.record(t.after)
    pending = shard.get(TID)
    assert pending is not None and pending.pending_state is S.ONGOING
    concurrent = add(pending, T1)
    assert isinstance(concurrent, Refuse) and concurrent.error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert shard.appended(t, ok=False) == before
    assert shard.get(TID) == before


def test_a_transition_decided_from_stale_metadata_is_not_begun() -> None:
    shard = ready_shard()
    init(shard)
    m = shard.get(TID)
    assert m is not None
    first, second = add(m, T0), add(m, T1)
    assert isinstance(first, Transition) and isinstance(second, Transition)
    run(shard, first)
    with pytest.raises(IllegalStateError, match="changed since the decision"):
        shard.begin(second)


def test_tick_aborts_timed_out_transactions_and_expires_idle_ids() -> None:
    shard = ready_shard()
    init(shard, "idle", now_ms=0)
    init(shard, TID, now_ms=0)
    m = shard.get(TID)
    assert m is not None
    run(shard, add(m, T0, now_ms=CONFIG.transactional_id_expiration_ms))
    now = CONFIG.transactional_id_expiration_ms + 10_001
    begun = shard.tick(now_ms=now, allocate_producer_id=ProducerIds())
    assert [(t.before.transactional_id, t.after.state) for t in begun] == [
        (TID, S.PREPARE_ABORT),
        ("idle", S.DEAD),
    ]
    assert shard.tick(now_ms=now, allocate_producer_id=ProducerIds()) == []  # both pending
    for t in begun:
        shard.appended(t, ok=True)
    assert shard.get("idle") is None
    aborting = shard.get(TID)
    assert aborting is not None and aborting.state is S.PREPARE_ABORT


def test_describe_and_list_transactions() -> None:
    shard = ready_shard()
    ids = ProducerIds()
    init(shard, "a", ids=ids)
    init(shard, "b", ids=ids)
    a, b = shard.get("a"), shard.get("b")
    assert a is not None and b is not None
    opened = d.add_partitions(
        b,
        transactional_id="b",
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        partitions=frozenset({T1, T0}),
        now_ms=100,
    )
    run(shard, opened)
    desc = describe("b", shard.get("b"))
    assert (desc.error, desc.state, desc.partitions) == (ErrorCode.NONE, "Ongoing", (T0, T1))
    assert (desc.producer_id, desc.transaction_start_time_ms) == (b.producer_id, 100)
    assert describe("nope", None).error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed_a = TransactionListing("a", a.producer_id, "Empty")
    listed_b = TransactionListing("b", b.producer_id, "Ongoing")
    everything = list(shard.transactions.values())
    assert list_transactions(everything, now_ms=0) == ([listed_a, listed_b], [])
    assert list_transactions(everything, state_filters=["Ongoing", "Bogus"], now_ms=0) == (
        [listed_b],
        ["Bogus"],
    )
    assert list_transactions(everything, state_filters=["Bogus"], now_ms=0) == ([], ["Bogus"])
    by_producer = list_transactions(everything, producer_id_filters=[a.producer_id], now_ms=0)
    assert by_producer == ([listed_a], [])
    assert list_transactions(everything, duration_filter_ms=50, now_ms=150) == ([], [])
    assert list_transactions(everything, duration_filter_ms=50, now_ms=151) == ([listed_b], [])
