"""``--verify``'s answers per partition: complete, in progress, failed."""

from __future__ import annotations

from headwater.client.reassignment import PartitionStatus, VerifyResult, classify
from headwater.values import TopicPartition

TP = TopicPartition("a", 0)


def test_complete_in_progress_and_failed() -> None:
    done = classify(TP, target=(1, 2), current=(1, 2), reassigning=False)
    moving = classify(TP, target=(1, 2), current=(0, 1, 2), reassigning=True)
    failed = classify(TP, target=(1, 2), current=(0, 1), reassigning=False)
    reordered = classify(TP, target=(2, 1), current=(1, 2), reassigning=False)
    assert done.status is PartitionStatus.COMPLETE
    assert moving.status is PartitionStatus.IN_PROGRESS
    assert failed.status is PartitionStatus.FAILED
    assert reordered.status is PartitionStatus.FAILED  # Kafka compares the ordered list
    assert done.message == "Reassignment of partition a-0 is completed."
    assert moving.message == "Reassignment of partition a-0 is still in progress."
    assert "replica set is 0,1 rather than 1,2" in failed.message
    result = VerifyResult((done, moving, failed))
    assert not result.complete
    assert result.failed == (failed,) and result.in_progress == (moving,)
    assert VerifyResult((done,)).complete
