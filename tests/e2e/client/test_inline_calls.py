"""The producer's and the consumer's inline calls against real brokers (issue 16,
``headwater.client.transport.inline_calls``): one record at a time, the sender and the fetcher
make their calls themselves (the pool is used only for the first one), and every
record is acknowledged and polled back in order, exactly once; across a SIGKILL of the
leader the inline calls fail over without losing or duplicating a record;
``Consumer.close`` ends a long poll the fetcher thread is making itself, and
``Producer.close(timeout)`` a call to a paused leader the sender thread is making."""

from __future__ import annotations

import time
from typing import Any

import headwater
import pytest
from headwater.testing import Cluster

from tests.e2e.client.conftest import make_topic
from tests.e2e.client.raw import wait_leader

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def count_submits(pool: Any) -> list[int]:
    """Wrap ``pool.submit`` to count the calls that went through the pool."""
    submitted = [0]
    submit = pool.submit

    def counted(*args: Any, **kwargs: Any) -> None:
        submitted[0] += 1
        submit(*args, **kwargs)

    pool.submit = counted
    return submitted


def poll_one(consumer: headwater.Consumer) -> list[Any]:
    for _ in range(100):  # bounded: 100 polls of 300 ms
        got = consumer.poll(300)
        if got:
            return got
    return []


def round_trips(
    producer: headwater.Producer, consumer: headwater.Consumer, topic: str, numbers: range
) -> list[bytes | None]:
    got: list[bytes | None] = []
    for i in numbers:
        producer.send(topic, b"%05d" % i).result(60)
        got += [r.value for r in poll_one(consumer)]
    return got


def test_one_at_a_time_round_trips_are_made_inline_and_arrive_once_in_order(
    cluster: Cluster,
) -> None:
    topic = make_topic(cluster.bootstrap)
    with (
        headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c,
        headwater.Producer(cluster.bootstrap, acks="all", linger_ms=0) as p,
    ):
        c.assign([TP(topic, 0)])
        produced = count_submits(p._channels.pool)
        fetched = count_submits(c._channels.pool)
        got = round_trips(p, c, topic, range(200))
        got += [r.value for r in c.poll(300)]  # anything more would be a duplicate
    assert got == [b"%05d" % i for i in range(200)]
    assert produced[0] <= 2 and fetched[0] <= 2  # the first calls only: the rest inline


def test_inline_calls_fail_over_after_a_leader_sigkill(trio: Cluster) -> None:
    topic = make_topic(trio.bootstrap)
    trio.wait_for(lambda: len(trio.isr_for(topic, 0)) == 3, what="a full ISR")
    leader = wait_leader(trio, topic)
    with (
        headwater.Consumer(bootstrap_servers=trio.bootstrap, auto_offset_reset="earliest") as c,
        headwater.Producer(trio.bootstrap, acks="all", linger_ms=0, retry_backoff_ms=50) as p,
    ):
        c.assign([TP(topic, 0)])
        got = round_trips(p, c, topic, range(50))
        trio.kill(leader)  # the next calls, inline, find it gone
        got += round_trips(p, c, topic, range(50, 100))
        got += [r.value for r in c.poll(300)]
    assert wait_leader(trio, topic, not_=leader) != leader
    assert got == [b"%05d" % i for i in range(100)]


def test_close_ends_a_long_poll_the_fetcher_thread_makes_itself(cluster: Cluster) -> None:
    topic = make_topic(cluster.bootstrap)
    tp = TP(topic, 0)
    with headwater.Producer(cluster.bootstrap, acks="all") as p:
        p.send(topic, b"first").result(60)
    c = headwater.Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=60_000,  # longer than close's 5 s join of the fetcher thread
    )
    try:
        c.assign([tp])
        assert [r.value for r in poll_one(c)] == [b"first"]
        fetcher = c._fetcher
        for _ in range(100):  # the next fetch (inline: the broker answered) is out
            if fetcher._in_flight:
                break
            c.poll(50)
        assert fetcher._in_flight and fetcher._answered
        thread, alive_after_join = c._thread, []
        join = thread.join

        def observed_join(timeout: float | None = None) -> None:
            join(timeout)
            alive_after_join.append(thread.is_alive())

        thread.join = observed_join  # type: ignore[method-assign]
    finally:
        c.close()
    # close's join found the thread ended: closing the channels ended its long poll
    # (joined first, it would have waited out its 5 s with the poll still held).
    assert alive_after_join == [False]


def test_close_with_a_timeout_ends_an_inline_call_to_a_paused_leader(trio: Cluster) -> None:
    topic = make_topic(trio.bootstrap)
    leader = wait_leader(trio, topic)
    p = headwater.Producer(
        trio.bootstrap,
        acks=1,
        linger_ms=0,
        request_timeout_ms=60_000,  # longer than close's 5 s join after force_close
        delivery_timeout_ms=120_000,
    )
    try:
        for value in (b"first", b"second"):  # the leader answered: the next call inline
            p.send(topic, value).result(60)
        sender = p._sender
        trio.pause(leader)
        try:
            during = p.send(topic, b"during")
            for _ in range(200):  # bounded: the call is out, on the sender thread
                if sum(sender._in_flight.values()):
                    break
                time.sleep(0.05)
            assert sum(sender._in_flight.values()) == 1 and not during.done()
            thread, alive_after_join = p._thread, []
            join = thread.join

            def observed_join(timeout: float | None = None) -> None:
                join(timeout)
                alive_after_join.append(thread.is_alive())

            thread.join = observed_join  # type: ignore[method-assign]
            p.close(0.2)
        finally:
            trio.resume(leader)
    finally:
        p.close()
    # The first join timed out (the call was held); after force_close the second found
    # the thread ended: closing the channels ended its call.
    assert alive_after_join == [True, False]
    assert during.exception(0) is not None
