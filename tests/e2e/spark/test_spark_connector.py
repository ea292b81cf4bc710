"""The headwater data source end to end: real local Spark (local[2]), real broker.

One SparkSession and one cluster serve the module (each Spark start costs
seconds), so the tests are few and each checks several things:

- batch reads: content equal to what was produced across partitions, with
  keys, headers, timestamps and compressed batches; JSON offset bounds that
  straddle stored batches; ``startingTimestamp``; ``minPartitions`` splitting;
- streaming: a checkpointed query stopped mid-stream and restarted sinks
  exactly the produced records; ``maxOffsetsPerTrigger`` bounds every batch;
- data loss after retention fails by default and is skipped with
  ``failOnDataLoss=false``;
- batch and streaming writes read back;
- ``groupId`` commits visible through the group API;
- option errors at planning time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import headwater
import pytest
from headwater.client.types import TopicPartition

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

Row = tuple[int, int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: int,
    compression: str = "none",
    first: int = 0,
    ts0: int = 1_700_000_000_000,
    batch_size: int = 16384,
) -> list[Row]:
    """Records ``first .. first+count-1`` spread round-robin; returns what landed where."""
    with headwater.Producer(
        bootstrap, compression_type=compression, linger_ms=20, batch_size=batch_size
    ) as p:
        sent = []
        for i in range(first, first + count):
            key = f"k{i}".encode() if i % 5 else None
            value = f"value-{i}".encode() * (1 + i % 3)
            headers = (("i", str(i).encode()), ("empty", None)) if i % 2 else ()
            fut = p.send(
                topic,
                value,
                key=key,
                headers=headers,
                partition=i % partitions,
                timestamp_ms=ts0 + i,
            )
            sent.append((fut, key, value, ts0 + i, headers))
        p.flush()
        return [
            (f.result().partition, f.result().offset, key, value, ts, headers)
            for f, key, value, ts, headers in sent
        ]


def reader(spark: Any, cluster: Any, topic: str, **options: str) -> Any:
    r = spark.read.format("headwater").option("bootstrap.servers", cluster.bootstrap)
    r = r.option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows_of(df: Any) -> list[Row]:
    out = df.selectExpr(
        "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers"
    ).collect()
    return sorted(
        (
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
            r["ts"],
            tuple(
                (h["key"], None if h["value"] is None else bytes(h["value"]))
                for h in (r["headers"] or [])
            ),
        )
        for r in out
    )


def test_batch_reads_what_was_produced(
    spark: Any, cluster: Any, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(3)
    produced = produce(cluster.bootstrap, topic, 150, partitions=3)
    produced += produce(cluster.bootstrap, topic, 150, partitions=3, compression="zstd", first=150)
    produced.sort()

    df = reader(spark, cluster, topic, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert rows_of(df) == produced
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {topic}
    assert {r["timestampType"] for r in df.select("timestampType").distinct().collect()} == {0}

    # Offset bounds in JSON (-2 earliest, -1 latest) that cut through stored batches.
    bounded = reader(
        spark,
        cluster,
        topic,
        includeHeaders="true",
        startingOffsets=f'{{"{topic}": {{"0": 5, "1": -2, "2": 17}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 40, "1": 3, "2": -1}}}}',
    )
    lows, highs = {0: 5, 1: 0, 2: 17}, {0: 40, 1: 3, 2: 100}
    assert rows_of(bounded) == [r for r in produced if lows[r[0]] <= r[1] < highs[r[0]]]

    # startingTimestamp: the first offset at or after the time, per partition.
    since = reader(
        spark, cluster, topic, includeHeaders="true", startingTimestamp=str(1_700_000_000_000 + 200)
    )
    assert rows_of(since) == [r for r in produced if r[4] >= 1_700_000_000_000 + 200]

    # minPartitions splits each partition's range; the rows stay the same.
    split = reader(spark, cluster, topic, minPartitions="9")
    assert split.rdd.getNumPartitions() == 9
    assert split.count() == 300


def test_a_schema_naming_some_columns_reads_only_those(
    spark: Any, cluster: Any, make_topic: Callable[..., str]
) -> None:
    """A user-specified schema naming some of the source's columns (in any order) is
    what the read yields; anything else fails the read with a message naming it."""
    topic = make_topic(2)
    produced = produce(cluster.bootstrap, topic, 60, partitions=2)

    def narrow(ddl: str, **options: str) -> Any:
        r = spark.read.format("headwater").schema(ddl)
        r = r.option("bootstrap.servers", cluster.bootstrap).option("subscribe", topic)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    df = narrow("offset long, value binary, partition int")
    assert df.columns == ["offset", "value", "partition"]
    got = sorted((r["partition"], r["offset"], bytes(r["value"])) for r in df.collect())
    assert got == sorted((p, o, v) for p, o, _k, v, _ts, _h in produced)
    headers = narrow("headers array<struct<key:string,value:binary>>", includeHeaders="true")
    assert headers.columns == ["headers"]
    got_headers = [
        tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
        for r in headers.collect()
    ]
    assert sorted(got_headers) == sorted(tuple(r[5]) for r in produced)
    with pytest.raises(Exception, match="does not have"):
        narrow("value binary, size int").count()
    with pytest.raises(Exception, match="is offset long, not int32"):
        narrow("offset int").count()
    with pytest.raises(Exception, match="set includeHeaders to true"):
        narrow("headers array<struct<key:string,value:binary>>").count()


def _sink_rows(spark: Any, sink: Path) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in spark.read.parquet(str(sink)).collect())


def test_stream_restarts_from_its_checkpoint_without_loss_or_duplicates(
    spark: Any, cluster: Any, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(2)
    produced = produce(cluster.bootstrap, topic, 100, partitions=2)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def start(trigger: dict[str, Any]) -> Any:
        stream = (
            spark.readStream.format("headwater")
            .option("bootstrap.servers", cluster.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "30")
            .load()
            .selectExpr("partition", "offset", "value")
        )
        return (
            stream.writeStream.format("parquet")
            .option("path", str(sink))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    q = start({"availableNow": True})
    q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress]
    assert sum(sizes) == 100
    assert max(sizes) <= 30 and len([s for s in sizes if s]) >= 4

    # More data, then a query stopped mid-stream (after one bounded micro-batch).
    produced += produce(cluster.bootstrap, topic, 80, partitions=2, first=100)
    q = start({"processingTime": "1 second"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(p["numInputRows"] > 0 for p in q.recentProgress):
        time.sleep(0.2)
    q.stop()
    assert sum(p["numInputRows"] for p in q.recentProgress) < 80

    produced += produce(cluster.bootstrap, topic, 20, partitions=2, first=180)
    q = start({"availableNow": True})
    q.awaitTermination(120)
    assert max(p["numInputRows"] for p in q.recentProgress) <= 30

    assert _sink_rows(spark, sink) == sorted((r[0], r[1]) for r in produced)


def test_data_loss_after_retention(
    spark: Any, cluster: Any, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(1, configs={"segment.bytes": "4096", "retention.ms": "100"})
    produce(cluster.bootstrap, topic, 200, partitions=1, batch_size=1024)
    tp = TopicPartition(topic, 0)
    earliest = 0
    with headwater.Admin(cluster.bootstrap) as admin:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and earliest == 0:
            time.sleep(0.5)
            found = admin.list_offsets({tp: "earliest"})[tp]
            earliest = found.offset if found is not None else 0
    assert earliest > 0, "retention never deleted a segment"
    start = f'{{"{topic}": {{"0": 0}}}}'

    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, cluster, topic, startingOffsets=start).count()

    rows = reader(spark, cluster, topic, startingOffsets=start, failOnDataLoss="false")
    offsets = sorted(r["offset"] for r in rows.select("offset").collect())
    assert offsets == list(range(offsets[0], 200))
    assert offsets[0] >= earliest


def test_writes_read_back(
    spark: Any, cluster: Any, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    a, b = make_topic(2), make_topic(1)
    rows = [
        ("k1", b"v1", a, 0, [("h", b"x")]),
        (None, b"v2", a, 1, []),
        ("k3", b"v3", b, None, [("h", None)]),
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    )
    df.write.format("headwater").option("bootstrap.servers", cluster.bootstrap).option(
        "compression.type", "gzip"
    ).mode("append").save()

    back = reader(spark, cluster, f"{a},{b}", includeHeaders="true")
    got = sorted(
        (
            r["topic"],
            r["partition"],
            None if r["key"] is None else bytes(r["key"]).decode(),
            bytes(r["value"]),
            [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]],
        )
        for r in back.collect()
    )
    assert got == sorted(
        [
            (a, 0, "k1", b"v1", [("h", b"x")]),
            (a, 1, None, b"v2", []),
            (b, 0, "k3", b"v3", [("h", None)]),
        ]
    )

    # A streaming write: topic a -> topic c, with the topic option instead of a column.
    c = make_topic(1)
    q = (
        spark.readStream.format("headwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("subscribe", a)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("headwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("topic", c)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    copied = reader(spark, cluster, c).collect()
    assert sorted(bytes(r["value"]) for r in copied) == [b"v1", b"v2"]


def test_group_id_commits_after_each_micro_batch(
    spark: Any, cluster: Any, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(2)
    produce(cluster.bootstrap, topic, 40, partitions=2)
    group = f"spark-{topic}"

    def committed() -> dict[int, int]:
        with headwater.Admin(cluster.bootstrap) as admin:
            offsets = admin.list_consumer_group_offsets(group)
        return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}

    q = (
        spark.readStream.format("headwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .option("groupId", group)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert committed() == {0: 20, 1: 20}


def test_option_errors_fail_at_planning(spark: Any, cluster: Any) -> None:
    def base() -> Any:  # a DataFrameReader is a mutable builder: a fresh one per case
        return spark.read.format("headwater").option("bootstrap.servers", cluster.bootstrap)

    with pytest.raises(Exception, match=r"(?i)unknown option 'startingoffset'"):
        base().option("subscribe", "x").option("startingOffset", "earliest").load().count()
    with pytest.raises(Exception, match="exactly one of the options 'subscribe'"):
        base().option("subscribe", "x").option("assign", '{"x":[0]}').load().count()
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.range(1).write.format("headwater").option(
            "bootstrap.servers", cluster.bootstrap
        ).option("topic", "x").mode("append").save()
    with pytest.raises(Exception, match="save mode 'overwrite' is not allowed for a topic"):
        spark.range(1).selectExpr("CAST(id AS STRING) AS value").write.format("headwater").option(
            "bootstrap.servers", cluster.bootstrap
        ).option("topic", "x").mode("overwrite").save()
