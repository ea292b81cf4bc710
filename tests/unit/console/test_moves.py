"""How far a reassignment has got, as the cluster page shows it."""

from __future__ import annotations

from headwater.console.backend import MoveRow


def move(caught_up: int, copied: int = 0, leader: int | None = None, adding: int = 2) -> MoveRow:
    new = tuple(range(10, 10 + adding))
    return MoveRow("t", 0, (1, *new), new, (1,), caught_up, copied, leader)


def test_caught_up_replicas_count_whole() -> None:
    assert move(0).progress == 0
    assert move(1).progress == 50
    assert move(2).progress == 100


def test_bytes_copied_count_by_the_leaders_size() -> None:
    assert move(0, copied=500, leader=1000).progress == 25  # half of one of two replicas
    assert move(1, copied=500, leader=1000).progress == 75


def test_a_whole_copy_is_not_done_until_in_sync() -> None:
    assert move(0, copied=2000, leader=1000).progress == 99
    assert move(0, copied=5000, leader=1000, adding=1).progress == 99


def test_unknown_sizes_count_nothing_and_no_new_replica_is_done() -> None:
    assert move(0, copied=500, leader=None).progress == 0
    assert move(0, copied=500, leader=0).progress == 0
    assert move(0, adding=0).progress == 100
