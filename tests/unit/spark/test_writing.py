"""The write path: column checks on the driver and rows to Producer.send on executors."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from headwater import errors
from headwater.client.producer.futures import RecordFuture
from headwater_spark.options import OptionError, parse_write_options
from headwater_spark.source import HeadwaterDataSource
from headwater_spark.writing import (
    already_written,
    check_columns,
    record_group,
    transactional_id,
    write_batches,
)
from pyspark.sql.types import StringType, StructField, StructType


class FakeProducer:
    instances: list[FakeProducer] = []

    def __init__(self, bootstrap: str, **settings: Any) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.sent: list[dict[str, Any]] = []
        self.flushed = self.closed = False
        self.fail = False
        FakeProducer.instances.append(self)

    def send(self, topic: str, value: bytes | None, **kw: Any) -> RecordFuture | None:
        self.sent.append({"topic": topic, "value": value, **kw})
        if self.fail:
            kw["callback"](None, errors.RecordListTooLargeError("too big"))
        return None

    def flush(self) -> None:
        self.flushed = True

    def close(self) -> None:
        self.closed = True


def test_rows_become_records_with_options_passed_to_the_producer() -> None:
    opts = parse_write_options({"bootstrap.servers": "h:1", "linger.ms": "7"})
    batch = pa.RecordBatch.from_pydict(
        {
            "key": ["a", None],
            "value": [b"1", b"2"],
            "topic": ["x", "y"],
            "partition": pa.array([0, None], pa.int32()),
            "headers": [[{"key": "h", "value": b"v"}], None],
            "ignored": [1, 2],
        }
    )
    FakeProducer.instances.clear()
    assert write_batches([batch], opts, producer_factory=FakeProducer) == 2
    (p,) = FakeProducer.instances
    assert p.settings == {"acks": "all", "linger_ms": 7}
    assert p.flushed and p.closed
    assert [(s["topic"], s["key"], s["value"], s["partition"]) for s in p.sent] == [
        ("x", b"a", b"1", 0),
        ("y", None, b"2", None),
    ]
    assert p.sent[0]["headers"] == [("h", b"v")] and p.sent[1]["headers"] is None


def test_the_topic_option_overrides_the_column() -> None:
    opts = parse_write_options({"bootstrap.servers": "h:1", "topic": "fixed"})
    batch = pa.RecordBatch.from_pydict({"value": ["s"], "topic": ["other"]})
    FakeProducer.instances.clear()
    write_batches([batch], opts, producer_factory=FakeProducer)
    assert FakeProducer.instances[0].sent[0]["topic"] == "fixed"
    assert FakeProducer.instances[0].sent[0]["value"] == b"s"


def test_a_delivery_error_fails_the_task() -> None:
    opts = parse_write_options({"bootstrap.servers": "h:1", "topic": "t"})

    class Failing(FakeProducer):
        def __init__(self, bootstrap: str, **settings: Any) -> None:
            super().__init__(bootstrap, **settings)
            self.fail = True

    with pytest.raises(errors.RecordListTooLargeError):
        write_batches(
            [pa.RecordBatch.from_pydict({"value": [b"x"]})], opts, producer_factory=Failing
        )


@pytest.mark.parametrize(
    ("columns", "topic", "named"),
    [
        ({"key": "string"}, "t", "'value'"),
        ({"value": "int"}, "t", "'value'"),
        ({"value": "binary"}, None, "'topic'"),
        ({"value": "binary", "topic": "int"}, None, "'topic'"),
        ({"value": "binary", "key": "double"}, "t", "'key'"),
        ({"value": "binary", "partition": "string"}, "t", "'partition'"),
        ({"value": "binary", "headers": "array<string>"}, "t", "'headers'"),
    ],
)
def test_bad_columns_are_refused_by_name(
    columns: dict[str, str], topic: str | None, named: str
) -> None:
    with pytest.raises(OptionError, match=named):
        check_columns(columns, topic_option=topic)


def test_good_columns_pass() -> None:
    columns = {
        "key": "string",
        "value": "binary",
        "topic": "string",
        "partition": "int",
        "headers": "array<struct<key:string,value:binary>>",
    }
    assert check_columns(columns, topic_option=None) is None


def test_a_batch_overwrite_is_refused_before_anything_is_written() -> None:
    source = HeadwaterDataSource({"bootstrap.servers": "h:1", "topic": "t"})
    schema = StructType([StructField("value", StringType())])
    with pytest.raises(OptionError, match=r"use \.mode\(\"append\"\)"):
        source.writer(schema, overwrite=True)
    assert source.writer(schema, overwrite=False).opts.topic == "t"


# -- exactly once --------------------------------------------------------------------

EOS = {"bootstrap.servers": "h:1", "topic": "t", "exactly.once": "true"}


def test_exactly_once_options_name_the_prefix_and_pass_the_transaction_timeout() -> None:
    opts = parse_write_options(
        {**EOS, "transactional.id.prefix": " q1 ", "transaction.timeout.ms": "30000"},
        streaming=True,
    )
    assert opts.exactly_once and opts.transactional_id_prefix == "q1"
    assert opts.producer == {"acks": "all", "transaction_timeout_ms": 30000}
    assert not parse_write_options({"bootstrap.servers": "h:1"}, streaming=True).exactly_once


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        (EOS, True, "transactional.id.prefix"),
        ({**EOS, "transactional.id.prefix": " "}, True, "transactional.id.prefix"),
        ({**EOS, "transactional.id.prefix": "q"}, False, "streaming writes"),
        ({**EOS, "transactional.id.prefix": "q", "acks": "1"}, True, "acks=all"),
        (
            {**EOS, "transactional.id.prefix": "q", "enable.idempotence": "false"},
            True,
            "enable.idempotence",
        ),
        ({**EOS, "exactly.once": "yes"}, True, "exactly.once"),
        ({"bootstrap.servers": "h:1", "transactional.id.prefix": "q"}, True, "exactly.once"),
        ({"bootstrap.servers": "h:1", "transaction.timeout.ms": "9"}, True, "exactly.once"),
    ],
)
def test_exactly_once_refusals_name_the_option(
    options: dict[str, str], streaming: bool, named: str
) -> None:
    with pytest.raises(OptionError, match=named):
        parse_write_options(options, streaming=streaming)


def test_a_partition_keeps_its_transactional_id_and_skips_batches_it_wrote() -> None:
    assert transactional_id("q1", 3) == "q1-3" == transactional_id("q1", 3)
    assert record_group("q1") == "q1"
    assert not already_written(None, 0)  # nothing recorded yet
    assert not already_written(5, 5)  # the record names the next batch to write
    assert already_written(6, 5)
    assert already_written(9, 5)  # a replay of an older batch
