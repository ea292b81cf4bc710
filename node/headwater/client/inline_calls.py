"""When a client's background thread makes a call itself instead of handing it to the pool.

The producer's sender and the consumer's fetcher normally hand each request to
a :class:`~headwater.client.connection.CallPool` worker, which makes the
blocking gRPC call and queues the answer back: the thread that owns the state
stays free for other brokers, other partitions, linger and decoding.  For a
one-record-at-a-time round trip those two hand-offs (there and back) are a
good part of the time (docs/performance.md, "Figures behind rules in the
code").  When the request
is the only work the thread has, the hand-offs buy nothing: the thread makes
the call itself and handles the answer at once, as it already does for a
metadata refresh or an ``InitProducerId``.

The cost is that the thread is busy for the call (a round trip; for a fetch,
up to ``fetch_max_wait_ms`` of long poll).  So these decisions say yes only
when nothing else could be waiting for the thread at the time: no request in
flight anywhere, one broker to call, nothing else ready or held back.  Work
that appears during the call (a record for another broker, a partition
assigned elsewhere) waits for it, bounded by the call's deadline; and a
broker whose last call failed in transport is called through the pool until
it answers again, so a broker that stopped answering holds no thread for a
whole deadline twice.

Pure functions of the state the threads keep: no I/O, no clock.
"""

from __future__ import annotations

INLINE_MAX_BYTES = 64 * 1024
"""The largest Produce request (its batches' estimated bytes) made inline.  A
larger one means records arrive faster than a trickle: the call takes longer
(the broker appends more), and a batch filling meanwhile should be pipelined
beside it, which only a free sender thread does."""


def may_produce_inline(
    *,
    acks: int,
    requests_in_flight: int,
    brokers_to_send: int,
    leaderless: bool,
    answered_before: bool,
    queued: bool,
    request_bytes: int,
) -> bool:
    """Whether the sender thread may make this Produce call itself.

    Only when it cannot delay anything else: ``acks`` != 0 (an acks=0 request
    is never waited for), no request in flight to any broker (nothing can
    overtake it, and no answer waits behind it: ordering and
    ``max_in_flight_requests_per_connection`` hold trivially), this round sends
    to one broker and every ready partition has a leader (no metadata refresh
    waits), no batch is ``queued`` in the accumulator besides the ones sent,
    the broker ``answered_before``, and the request is at most
    :data:`INLINE_MAX_BYTES`.
    """
    return (
        request_bytes <= INLINE_MAX_BYTES
        and acks != 0
        and requests_in_flight == 0
        and brokers_to_send == 1
        and not leaderless
        and answered_before
        and not queued
    )


def may_fetch_inline(
    *,
    requests_in_flight: int,
    leaders: int,
    held_back: bool,
    undecoded: bool,
    pipelined: bool,
    answered_before: bool,
) -> bool:
    """Whether the fetcher thread may make this Fetch call (a long poll) itself.

    Only when: no fetch in flight to any broker, every fetchable partition is
    led by this one broker (``leaders`` == 1: counting those whose answer waits
    for ``poll``, since ``poll`` taking it would otherwise want a fetch to
    another broker at once), none is ``held_back`` (backing off after an error,
    or without a leader: a metadata refresh waits on this thread), no answer is
    ``undecoded`` and none of the partitions is fetched ``pipelined``, past a
    large answer still waiting for ``poll`` (both are the throughput case: the
    next fetch goes out while the thread decodes), and the broker
    ``answered_before``.
    """
    return (
        requests_in_flight == 0
        and not pipelined
        and leaders == 1
        and not held_back
        and not undecoded
        and answered_before
    )


__all__ = ["may_fetch_inline", "may_produce_inline"]
