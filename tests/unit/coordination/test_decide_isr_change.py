"""The ISR-change decision: states re-read after leaders' ISR changes are cached and sent
to every broker in UpdateMetadata, and the notification znodes are deleted."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.topics import isr_refresh_targets, on_isr_change

from .helpers import ORDERS, lai, view


def test_refresh_targets_are_known_partitions_sorted() -> None:
    ctx = view(topics=ORDERS)
    notified = {("orders", 2), ("gone", 0), ("orders", 0)}
    assert isr_refresh_targets(ctx, notified) == [("orders", 0), ("orders", 2)]


def test_no_notifications_no_effects() -> None:
    assert on_isr_change(view(topics=ORDERS), [], {}) == r.EMPTY


def test_fresh_states_are_cached_sent_and_notes_deleted() -> None:
    fresh = {("orders", 0): lai(1, (1, 2), zk_version=3)}
    result = on_isr_change(view(topics=ORDERS), ["isr_change_0001"], fresh)
    assert result.effects == (
        r.LoadStates(fresh),
        r.SendUpdateMetadata((("orders", 0),)),
        r.DeleteIsrChangeNotifications(("isr_change_0001",)),
    )


def test_notes_about_unknown_partitions_still_send_metadata_and_are_deleted() -> None:
    result = on_isr_change(view(topics=ORDERS), ["a", "b"], {("gone", 0): lai(1, (1,))})
    assert result.effects == (
        r.SendUpdateMetadata(()),
        r.DeleteIsrChangeNotifications(("a", "b")),
    )
