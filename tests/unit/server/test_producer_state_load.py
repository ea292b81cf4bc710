"""A new leader's producer state: from the producer snapshot and the ``.txnindex`` files
plus the log's tail after the snapshot, or from the whole log when a file is damaged --
the same state either way (server.runtime.txn_log.load_producer_state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import Record, build_batch, parse_header
from headwater.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_control_batch,
    set_batch_flags,
)
from headwater.replication import producer_snapshot
from headwater.replication.producer_state import ProducerBatch, ProducerStateManager
from headwater.server.runtime import txn_log
from headwater.storage import Log, LogConfig
from headwater.storage.transactions import AbortedTxn, PartitionTransactions

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


@dataclass
class Leader:
    """A log and the two states, fed as the ReplicaManager feeds them on produce."""

    log: Log
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    txns: PartitionTransactions = field(default_factory=PartitionTransactions)
    seqs: dict[int, int] = field(default_factory=dict)

    def data(self, pid: int, epoch: int, *, txn: bool = True, count: int = 3) -> int:
        seq = self.seqs.get(pid, 0)
        self.seqs[pid] = seq + count
        raw = build_batch(
            [Record(None, b"x" * 40) for _ in range(count)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        raw = set_batch_flags(raw, transactional=txn)
        base = int(self.log.append_as_leader(raw, leader_epoch=0, now_ms=0).first_offset)
        header = parse_header(raw, 0)
        self.producers.update(
            ProducerBatch(pid, epoch, seq, header.last_offset_delta), base_offset=base
        )
        if txn:
            txn_log.appended(self.txns, self.log, header, base, None)
        return base

    def marker(self, pid: int, kind: ControlRecordType, epoch: int) -> int:
        raw = build_control_batch(
            kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp_ms=1
        )
        base = int(self.log.append_as_leader(raw, leader_epoch=0, now_ms=0).first_offset)
        marker = EndTransactionMarker(kind, pid, epoch, 0)
        txn_log.appended(self.txns, self.log, parse_header(raw, 0), base, marker)
        return base

    def state(self) -> tuple[object, ...]:
        return (
            [(pid, e.producer_epoch, list(e.batches)) for pid, e in self.producers.entries()],
            dict(self.txns.open),
            dict(self.txns.epochs),
            dict(self.txns.ended),
            self.log.collect_aborted(0, self.log.log_end_offset),
        )

    def reload(self) -> txn_log.LoadedState:
        self.producers, self.txns = ProducerStateManager(), PartitionTransactions()
        return txn_log.load_producer_state(self.producers, self.txns, self.log)


def open_log(root: Path) -> Log:
    return Log.open(root / "t-0", LogConfig(segment_bytes=600), now_ms=0)


def workload(leader: Leader) -> None:
    """Aborts and commits across segments, one transaction left open, a snapshot between."""
    leader.data(1, 0)
    leader.data(2, 0)
    leader.marker(1, ABORT, 1)
    leader.data(9, 0, txn=False)  # an idempotent producer
    leader.marker(2, COMMIT, 1)
    txn_log.take_snapshot(leader.producers, leader.txns, leader.log)
    leader.data(1, 1)
    leader.data(3, 0)
    leader.data(9, 0, txn=False)
    leader.marker(1, ABORT, 2)  # in a later segment than its data
    leader.data(3, 0)  # producer 3 stays open


def test_a_snapshot_and_the_indexes_give_the_state_of_a_full_replay(tmp_path: Path) -> None:
    leader = Leader(open_log(tmp_path))
    workload(leader)
    assert len(leader.log.segments) >= 3
    expected = leader.state()
    assert len(expected[4]) == 2  # two aborts indexed  # type: ignore[arg-type]
    loaded = leader.reload()
    assert loaded.snapshot_offset is not None
    assert loaded.replayed == 5  # the tail only
    assert leader.state() == expected
    # Without the snapshot: the whole log, the same state.
    for offset in leader.log.producer_snapshots():
        leader.log.delete_producer_snapshot(offset)
    full = leader.reload()
    assert full.snapshot_offset is None and full.replayed == 10
    assert leader.state() == expected


def test_a_damaged_txnindex_is_rebuilt_from_the_whole_log(tmp_path: Path) -> None:
    leader = Leader(open_log(tmp_path))
    workload(leader)
    expected = leader.state()
    files = {p: p.read_bytes() for p in leader.log.dir.glob("*.txnindex")}
    assert files
    leader.log.close()
    damaged = sorted(files)[0]
    damaged.write_bytes(files[damaged][:-7])  # a torn last entry
    leader.log = open_log(tmp_path)
    loaded = leader.reload()
    assert loaded.snapshot_offset is None  # the snapshot alone cannot restore the indexes
    assert leader.state() == expected
    assert {p: p.read_bytes() for p in leader.log.dir.glob("*.txnindex")} == files
    leader.log.close()


def test_a_damaged_snapshot_falls_back_to_the_previous_one_or_the_log(tmp_path: Path) -> None:
    leader = Leader(open_log(tmp_path))
    workload(leader)
    expected = leader.state()
    [offset] = leader.log.producer_snapshots()
    path = leader.log.dir / f"{offset:020d}.snapshot"
    path.write_bytes(path.read_bytes()[:-1] + b"\xff")
    loaded = leader.reload()
    assert loaded.snapshot_offset is None
    assert leader.state() == expected
    assert not path.exists()  # the damaged snapshot is gone
    leader.log.close()


def test_snapshot_bytes_round_trip_and_refuse_damage() -> None:
    producers, txns = ProducerStateManager(), PartitionTransactions()
    producers.update(ProducerBatch(4, 2, 0, 4), base_offset=10)
    producers.update(ProducerBatch(4, 2, 5, 1), base_offset=15)
    txns.epochs.update({4: 2, 6: 7})
    txns.open.update({6: 30, 4: 40})
    txns.ended[6] = (6, False, 20)
    data = producer_snapshot.encode(producers, txns)
    restored_p, restored_t = ProducerStateManager(), PartitionTransactions()
    producer_snapshot.decode(data).restore(restored_p, restored_t)
    assert [(p, list(e.batches)) for p, e in restored_p.entries()] == [
        (p, list(e.batches)) for p, e in producers.entries()
    ]
    assert list(restored_t.open.items()) == [(6, 30), (4, 40)]  # first-offset order
    assert (restored_t.epochs, restored_t.ended) == (txns.epochs, txns.ended)
    for bad in (data[:5], data[:-1], b"\x00\x02" + data[2:], data + b"\x00"):
        with pytest.raises(CorruptRecordError):
            producer_snapshot.decode(bad)


def test_an_abort_marker_outside_the_log_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(ValueError, match="not in"):
        log.append_aborted(AbortedTxn(1, 0, 5, 6))
    log.close()
