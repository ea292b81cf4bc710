"""Checkpoint files: Kafka's text format, atomic replacement, malformed files.

Covers: the ``version / count / entries`` layout of offset checkpoints,
reading back what was written, a missing file read as empty, no temp file left
behind, and malformed files refused with KafkaStorageError.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from headwater.errors import KafkaStorageError
from headwater.storage.checkpoints import OffsetCheckpointFile


def test_format_and_round_trip(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    f.write({("orders", 1): 20, ("orders", 0): 15, ("my-topic", 3): 7})
    assert f.path.read_text() == "0\n3\nmy-topic 3 7\norders 0 15\norders 1 20\n"
    assert f.read() == {("orders", 1): 20, ("orders", 0): 15, ("my-topic", 3): 7}
    assert [p.name for p in tmp_path.iterdir()] == ["recovery-point-offset-checkpoint"]


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


@pytest.mark.parametrize(
    "text", ["1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders 0\n", "0\n1\norders x 1\n", ""]
)
def test_malformed_files_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(path).read()
