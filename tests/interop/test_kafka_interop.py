"""headwater.records against Apache Kafka's own RecordBatch code (issue 2).

Covers both directions for every codec (none, gzip, snappy, lz4, zstd) plus a
LogAppendTime batch:

* Kafka writes (``MemoryRecords.builder``, as its producer does) and
  ``headwater.records.read_batches`` decodes the same header fields (offsets,
  leader epoch, CRC, producer id/epoch/sequence, compression and timestamp
  type) and the same records (offsets, timestamps, keys, values, headers,
  nulls, a value spanning several lz4/snappy blocks);
* ``headwater.records.build_batch`` writes, the broker-side patches
  (``set_base_offset``, ``set_partition_leader_epoch``, ``set_log_append_time``)
  are applied, and Kafka's ``MemoryRecords.readableRecords`` accepts every
  batch (``ensureValid``: size and CRC-32C) and reads back the same records.

Kafka runs as ``tests/interop/KafkaBatches.java`` with the jars that
``scripts/fetch-kafka-clients.sh`` puts in ``.tools/kafka-jars``; the JVM
starts once per direction.  Without the jars (or Java) the tests skip, saying
why, unless ``CI`` is set: then the fetch script runs, and a failure fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import headwater.records as hr
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = Path(os.environ.get("KAFKA_JARS_DIR", ROOT / ".tools" / "kafka-jars"))
FETCH_SCRIPT = ROOT / "scripts" / "fetch-kafka-clients.sh"
PROGRAM = Path(__file__).with_name("KafkaBatches.java")
JVM_TIMEOUT_S = 120

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CASES = (*CODECS, "logappend")  # logappend: lz4 with LogAppendTime

# Must match KafkaBatches.java.
BASE_OFFSET = 42
PRODUCER_ID = 7001
PRODUCER_EPOCH = 3
BASE_SEQUENCE = 17
PARTITION_LEADER_EPOCH = 5
LOG_APPEND_TIME = 1_700_000_009_999
BIG_VALUE = bytes((i * 7 + (i >> 10)) % 251 for i in range(150_000))
EXPECTED_RECORDS = (
    hr.Record(b"key-0", b"value-0", (), 1_700_000_000_000),
    hr.Record(None, b"value with a null key", (("trace-id", b"abc123"),), 1_700_000_000_005),
    hr.Record(b"tombstone", None, (), 1_699_999_999_990),
    hr.Record(
        b"",
        b"",
        (
            ("h1", b"v1"),
            ("h-null", None),
            ("h-empty", b""),
            ("h1", b"repeated key"),
            ("grüße-ключ", "ünïcode".encode()),
        ),
        1_700_000_000_010,
    ),
    hr.Record(b"big", BIG_VALUE, (), 1_700_000_000_020),
)


# What scripts/fetch-kafka-clients.sh downloads: the client and the codecs it loads.
REQUIRED_JARS = ("kafka-clients-", "lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")


def _kafka_jars() -> list[Path]:
    return sorted(JARS_DIR.glob("*.jar"))


def _missing_jars() -> list[str]:
    names = [p.name for p in _kafka_jars()]
    return [want for want in REQUIRED_JARS if not any(n.startswith(want) for n in names)]


@pytest.fixture(scope="module")
def kafka_classpath() -> str:
    """The class path for KafkaBatches.java, fetching the jars first under CI."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but `java` is not on PATH (run scripts/install-system-deps.sh)")
        pytest.skip("java is not installed, so Kafka's RecordBatch code cannot run")
    if missing := _missing_jars():
        if not os.environ.get("CI"):
            pytest.skip(
                f"{', '.join(m + '*.jar' for m in missing)} not in {JARS_DIR}; "
                f"run `bash {FETCH_SCRIPT.relative_to(ROOT)}`"
            )
        done = subprocess.run(
            ["bash", str(FETCH_SCRIPT)], capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode != 0 or _missing_jars():
            pytest.fail(f"{FETCH_SCRIPT.name} failed:\n{done.stdout}\n{done.stderr}")
    return os.pathsep.join(str(p) for p in _kafka_jars())


def _run_kafka(classpath: str, *args: str) -> str:
    done = subprocess.run(
        ["java", "-cp", classpath, str(PROGRAM), *args],
        capture_output=True,
        text=True,
        timeout=JVM_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"KafkaBatches {args[0]} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def _create_time(record: hr.Record) -> int:
    assert record.timestamp_ms is not None  # every fixture record carries its timestamp
    return record.timestamp_ms


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _expected_json_records(base_offset: int, log_append_time: int | None) -> list[dict[str, Any]]:
    """EXPECTED_RECORDS as KafkaBatches.java prints them."""
    return [
        {
            "offset": base_offset + i,
            "timestamp": _create_time(r) if log_append_time is None else log_append_time,
            "key": _b64(r.key),
            "value": _b64(r.value),
            "headers": [[k, _b64(v)] for k, v in r.headers],
        }
        for i, r in enumerate(EXPECTED_RECORDS)
    ]


def _expected_consumed(base_offset: int, log_append_time: int | None) -> list[hr.ConsumedRecord]:
    return [
        hr.ConsumedRecord(
            offset=base_offset + i,
            timestamp_ms=_create_time(r) if log_append_time is None else log_append_time,
            key=r.key,
            value=r.value,
            headers=tuple(r.headers),
        )
        for i, r in enumerate(EXPECTED_RECORDS)
    ]


def _codec_of(case: str) -> str:
    return "lz4" if case == "logappend" else case


class KafkaWritten(NamedTuple):
    directory: Path
    """Holds ``<case>.bin``: one batch per case, written by Kafka."""
    views: dict[str, dict[str, Any]]
    """Kafka's own reading of each file, by case."""


@pytest.fixture(scope="module")
def kafka_written(kafka_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> KafkaWritten:
    out = tmp_path_factory.mktemp("kafka-written")
    lines = _run_kafka(kafka_classpath, "write", str(out), *CASES).splitlines()
    views = [json.loads(line) for line in lines]
    return KafkaWritten(out, {v["file"].removesuffix(".bin"): v for v in views})


@pytest.fixture(scope="module")
def headwater_written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``<case>.bin`` built by headwater.records, as a leader stores it."""
    out = tmp_path_factory.mktemp("headwater-written")
    for case in CASES:
        buf = bytearray(
            hr.build_batch(
                EXPECTED_RECORDS,
                base_offset=0,
                compression=_codec_of(case),
                producer_id=PRODUCER_ID,
                producer_epoch=PRODUCER_EPOCH,
                base_sequence=BASE_SEQUENCE,
            )
        )
        # What the leader does on append; both fields are outside the CRC.
        hr.set_base_offset(buf, 0, BASE_OFFSET)
        hr.set_partition_leader_epoch(buf, 0, PARTITION_LEADER_EPOCH)
        if case == "logappend":
            hr.set_log_append_time(buf, 0, LOG_APPEND_TIME)
        (out / f"{case}.bin").write_bytes(bytes(buf))
    # Several batches back to back, as a fetch response or a segment holds them.
    (out / "all.bin").write_bytes(b"".join((out / f"{c}.bin").read_bytes() for c in CASES))
    return out


@pytest.fixture(scope="module")
def kafka_read_of_headwater(kafka_classpath: str, headwater_written: Path) -> list[dict[str, Any]]:
    files = [str(headwater_written / f"{c}.bin") for c in (*CASES, "all")]
    return [json.loads(line) for line in _run_kafka(kafka_classpath, "read", *files).splitlines()]


def _one_batch(path: Path) -> hr.Batch:
    batches = list(hr.read_batches(path.read_bytes()))
    assert len(batches) == 1, f"{path.name}: {batches}"
    return batches[0]


@pytest.mark.parametrize("case", CASES)
def test_kafka_written_batch_decodes_in_headwater(case: str, kafka_written: KafkaWritten) -> None:
    batch = _one_batch(kafka_written.directory / f"{case}.bin")
    kafka_view = kafka_written.views[case]
    log_append = case == "logappend"

    assert batch.base_offset == BASE_OFFSET
    assert batch.last_offset == BASE_OFFSET + len(EXPECTED_RECORDS) - 1
    assert batch.partition_leader_epoch == PARTITION_LEADER_EPOCH
    assert batch.magic == 2
    assert batch.crc == kafka_view["crc"]
    assert batch.size_in_bytes == kafka_view["size_in_bytes"]
    assert batch.compression.name.lower() == _codec_of(case) == kafka_view["compression"]
    assert batch.timestamp_type is (
        hr.TimestampType.LOG_APPEND_TIME if log_append else hr.TimestampType.CREATE_TIME
    )
    assert batch.max_timestamp == kafka_view["max_timestamp"]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        PRODUCER_ID,
        PRODUCER_EPOCH,
        BASE_SEQUENCE,
    )
    assert not batch.is_transactional
    assert not batch.is_control
    expected = _expected_consumed(BASE_OFFSET, LOG_APPEND_TIME if log_append else None)
    assert batch.record_list() == expected
    # Kafka's own reading of its bytes agrees with the fixture (guards the fixture itself).
    assert kafka_view["records"] == _expected_json_records(
        BASE_OFFSET, LOG_APPEND_TIME if log_append else None
    )


@pytest.mark.parametrize("case", CASES)
def test_headwater_written_batch_reads_in_kafka(
    case: str, kafka_read_of_headwater: list[dict[str, Any]]
) -> None:
    views = [v for v in kafka_read_of_headwater if v["file"] == f"{case}.bin"]
    assert len(views) == 1  # KafkaBatches ran ensureValid() on it: size and CRC-32C good
    view = views[0]
    log_append = case == "logappend"
    assert view["magic"] == 2
    assert view["base_offset"] == BASE_OFFSET
    assert view["last_offset"] == BASE_OFFSET + len(EXPECTED_RECORDS) - 1
    assert view["partition_leader_epoch"] == PARTITION_LEADER_EPOCH
    assert view["compression"] == _codec_of(case)
    assert view["timestamp_type"] == ("LogAppendTime" if log_append else "CreateTime")
    assert view["max_timestamp"] == (
        LOG_APPEND_TIME if log_append else max(map(_create_time, EXPECTED_RECORDS))
    )
    assert (view["producer_id"], view["producer_epoch"], view["base_sequence"]) == (
        PRODUCER_ID,
        PRODUCER_EPOCH,
        BASE_SEQUENCE,
    )
    assert view["is_transactional"] is False
    assert view["is_control"] is False
    assert view["records"] == _expected_json_records(
        BASE_OFFSET, LOG_APPEND_TIME if log_append else None
    )


def test_kafka_reads_several_headwater_batches_back_to_back(
    kafka_read_of_headwater: list[dict[str, Any]],
) -> None:
    views = [v for v in kafka_read_of_headwater if v["file"] == "all.bin"]
    assert [v["compression"] for v in views] == [_codec_of(c) for c in CASES]
    singles = {v["file"]: v for v in kafka_read_of_headwater if v["file"] != "all.bin"}
    for case, view in zip(CASES, views, strict=True):
        assert view["crc"] == singles[f"{case}.bin"]["crc"]
        assert view["records"] == singles[f"{case}.bin"]["records"]


def test_uncompressed_batch_is_byte_identical_to_kafkas(kafka_written: KafkaWritten) -> None:
    """With no compression there is one correct encoding, so the bytes must match exactly."""
    buf = bytearray(
        hr.build_batch(
            EXPECTED_RECORDS,
            base_offset=BASE_OFFSET,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            base_sequence=BASE_SEQUENCE,
        )
    )
    hr.set_partition_leader_epoch(buf, 0, PARTITION_LEADER_EPOCH)
    assert bytes(buf) == (kafka_written.directory / "none.bin").read_bytes()
