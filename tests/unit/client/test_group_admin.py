"""``Admin``'s consumer-group calls against the broker's real group coordinator.

The in-process GroupService and coordinator runtime of ``group_coordinator.py`` answer a
real :class:`headwater.Admin` (bootstrapped at the coordinator only, since the fake broker
does not serve the Group service).  Covers what ``client/group/admin.py`` promises, as
Kafka's Admin does it: an unknown group is described as ``Dead`` and cannot be deleted
(GROUP_ID_NOT_FOUND); offsets altered on a group without members read back with their
metadata and leader epoch, all or only the asked partitions, and go with the group when
it is deleted; a group with an active member refuses offset alteration (UNKNOWN_MEMBER_ID)
and deletion (NON_EMPTY_GROUP), is listed and described as Stable with the member's
assignment, and accepts both once the member has left.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import headwater
import pytest
from headwater import errors
from headwater.client.group.listener import OffsetAndMetadata

from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.group_coordinator import InProcessCoordinator

TP = headwater.TopicPartition


@pytest.fixture
def coordinator() -> Iterator[InProcessCoordinator]:
    c = InProcessCoordinator()
    c.create_topic("t", 2)
    yield c
    c.stop()


@pytest.fixture
def admin(coordinator: InProcessCoordinator) -> Iterator[headwater.Admin]:
    with headwater.Admin(
        coordinator.address,
        request_timeout_ms=3000,
        default_api_timeout_ms=3000,
        retry_backoff_ms=20,
    ) as a:
        yield a


def joined_consumer(broker: FakeBroker, coordinator: InProcessCoordinator) -> headwater.Consumer:
    """A classic-protocol member of group ``g`` that owns both partitions of ``t``."""
    broker.create("t", 2)
    settings: dict[str, Any] = {
        "session_timeout_ms": 3000,
        "heartbeat_interval_ms": 200,
        "request_timeout_ms": 5000,
        "retry_backoff_ms": 50,
        "enable_auto_commit": False,  # so that close() commits nothing behind the test
    }
    c = headwater.Consumer(
        bootstrap_servers=(broker.bootstrap, coordinator.address), group_id="g", **settings
    )
    c.subscribe(["t"])
    for _ in range(100):
        c.poll(100)
        if c.assignment() == {TP("t", 0), TP("t", 1)}:
            return c
    c.close()
    raise AssertionError("the consumer never got its assignment")


def test_an_unknown_group_is_dead_has_no_offsets_and_cannot_be_deleted(
    admin: headwater.Admin, coordinator: InProcessCoordinator
) -> None:
    d = admin.describe_groups(["nope"])["nope"]
    assert (d.state, d.members, d.generation_id) == ("Dead", (), -1)
    assert d.coordinator == coordinator.address
    assert admin.list_consumer_group_offsets("nope") == {}
    assert admin.list_groups() == []
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.delete_groups(["nope"])
    result = admin.delete_groups(["nope"], raise_on_error=False)
    assert isinstance(result["nope"], errors.GroupIdNotFoundError)


def test_altered_offsets_read_back_and_go_with_the_deleted_group(
    admin: headwater.Admin,
) -> None:
    admin.alter_consumer_group_offsets(
        "g", {TP("t", 0): 5, TP("t", 1): OffsetAndMetadata(7, "from-backup", 3)}
    )
    assert admin.list_consumer_group_offsets("g") == {
        TP("t", 0): OffsetAndMetadata(5, "", -1),
        TP("t", 1): OffsetAndMetadata(7, "from-backup", 3),
    }
    # Only the asked partitions; one never committed is left out, not reported as -1.
    assert admin.list_consumer_group_offsets("g", [TP("t", 1), TP("t", 9)]) == {
        TP("t", 1): OffsetAndMetadata(7, "from-backup", 3)
    }
    # Altering again overwrites.
    admin.alter_consumer_group_offsets("g", {TP("t", 0): 2})
    assert admin.list_consumer_group_offsets("g")[TP("t", 0)].offset == 2

    d = admin.describe_groups(["g"])["g"]
    assert (d.state, d.members, d.group_type) == ("Empty", (), "classic")
    assert [g.group_id for g in admin.list_groups(["Empty"])] == ["g"]
    assert admin.list_groups(["Stable"]) == []

    assert admin.delete_groups(["g"]) == {"g": None}
    assert admin.list_consumer_group_offsets("g") == {}
    assert admin.list_groups() == []
    assert admin.describe_groups(["g"])["g"].state == "Dead"


def test_a_group_with_a_member_refuses_alteration_and_deletion_until_it_leaves(
    admin: headwater.Admin, broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    c = joined_consumer(broker, coordinator)
    try:
        c.commit({TP("t", 0): 4})
        with pytest.raises(errors.UnknownMemberIdError, match="has active members"):
            admin.alter_consumer_group_offsets("g", {TP("t", 0): 0})
        assert admin.list_consumer_group_offsets("g") == {TP("t", 0): OffsetAndMetadata(4)}
        with pytest.raises(errors.NonEmptyGroupError):
            admin.delete_groups(["g"])

        d = admin.describe_groups(["g"])["g"]
        assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
        assert d.generation_id >= 1
        (m,) = d.members
        assert m.assignment == (TP("t", 0), TP("t", 1))
        assert (m.group_instance_id, m.member_epoch) == (None, -1)
        assert [(g.group_id, g.state) for g in admin.list_groups(["Stable"])] == [("g", "Stable")]
    finally:
        c.close()  # leaves the group

    admin.alter_consumer_group_offsets("g", {TP("t", 0): 0})
    assert admin.list_consumer_group_offsets("g") == {TP("t", 0): OffsetAndMetadata(0)}
    assert admin.describe_groups(["g"])["g"].state == "Empty"
    assert admin.delete_groups(["g"]) == {"g": None}


def test_several_groups_are_described_and_deleted_one_by_one(admin: headwater.Admin) -> None:
    for gid in ("a", "b"):
        admin.alter_consumer_group_offsets(gid, {TP("t", 0): 1})
    assert [g.group_id for g in admin.list_groups()] == ["a", "b"]
    described = admin.describe_groups(["b", "a", "zz"])
    assert {k: v.state for k, v in described.items()} == {"a": "Empty", "b": "Empty", "zz": "Dead"}
    result = admin.delete_groups(["a", "zz", "b"], raise_on_error=False)
    assert result["a"] is None and result["b"] is None
    assert isinstance(result["zz"], errors.GroupIdNotFoundError)
    assert admin.list_groups() == []
