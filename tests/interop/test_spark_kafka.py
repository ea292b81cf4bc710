"""Spark's own Kafka source and sink (spark-sql-kafka-0-10) against Headwater's Kafka listener.

Spark users read and write Kafka with ``format("kafka")``; pointed at a Headwater
cluster's Kafka listener it must work unchanged.  The connector's jars come from Maven
Central (``scripts/fetch-interop-slow.sh spark`` puts them in ``.tools/spark-kafka``, for
the PySpark in ``.venv``; ``spark-version`` there names the jars' version when Maven
Central lacks PySpark's own).  Against a two-broker cluster:

* a batch read of a two-partition topic that Headwater's gRPC client wrote returns
  every record with the key, value, partition, offset, timestamp and headers the
  producer's acknowledgements and arguments say;
* a batch write (keys, values, headers, a partition column) is read back with
  Headwater's gRPC client, every record where Spark put it;
* a structured-streaming query (trigger availableNow, a parquet sink, a checkpoint)
  reads what is there, and run again on the same checkpoint after more records are
  produced reads only the new ones: each offset exactly once in the sink.

Slow (a Spark JVM): ``make interop-slow``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater.client import Consumer, Producer, TopicPartition
from headwater.testing import Cluster

from .slow_tools import fetched, spark_kafka_dir
from .test_kafka_listener import cluster, kafka_bootstrap, new_topic  # noqa: F401 (fixture)

# A Spark JVM and its first queries take minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(600)]

# The connector's own jars; Spark, Scala and the compression codecs come with PySpark.
CONNECTOR_JARS = (
    "spark-sql-kafka-",
    "spark-token-provider-kafka-",
    "kafka-clients-",
    "commons-pool2-",
)
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pyspark = pytest.importorskip("pyspark")
    directory = fetched("spark", spark_kafka_dir(pyspark.__version__))
    jars = sorted(str(p) for p in directory.glob("*.jar") if p.name.startswith(CONNECTOR_JARS))
    assert len(jars) == len(CONNECTOR_JARS), f"connector jars missing in {directory}: {jars}"
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    # spark.jars reaches the driver's class path only when the JVM is launched, so a JVM
    # that an earlier module started without them is shut down for a new one.
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:  # the JVM ends when its stdin closes
            proc.stdin.close()
            proc.wait(60)
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-spark-kafka")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def produce_over_grpc(
    cluster: Cluster,  # noqa: F811
    topic: str,
    records: list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]], int]],
) -> list[tuple[int, int, bytes | None, bytes, int, list[tuple[str, bytes]]]]:
    """Produce ``(partition, key, value, headers, timestamp)`` records; returns
    ``(partition, offset, key, value, timestamp, headers)`` as acknowledged."""
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [
            producer.send(topic, v, key=k, headers=h, partition=p, timestamp_ms=ts)
            for p, k, v, h, ts in records
        ]
        producer.flush()
        metas = [f.result(30) for f in futures]
    return [
        (m.partition, m.offset, k, v, ts, h)
        for m, (_, k, v, h, ts) in zip(metas, records, strict=True)
    ]


def spark_rows(df: Any) -> list[tuple[int, int, bytes | None, bytes, int, list[tuple[str, bytes]]]]:
    rows = df.selectExpr(
        "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers"
    ).collect()
    return sorted(
        (
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            bytes(r["value"]),
            r["ts"],
            [(h["key"], bytes(h["value"])) for h in (r["headers"] or [])],
        )
        for r in rows
    )


def test_batch_read_returns_what_headwater_wrote(
    spark: Any,
    cluster: Cluster,  # noqa: F811
) -> None:
    topic = new_topic(cluster, partitions=2)
    records = [
        (
            i % 2,
            None if i == 4 else f"key-{i}".encode(),
            f"value-{i}".encode() * (i + 1),
            [("trace", f"t{i}".encode())] if i % 3 else [],
            BASE_TS + i * 1000,
        )
        for i in range(20)
    ]
    acknowledged = produce_over_grpc(cluster, topic, records)
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap(cluster))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert spark_rows(df) == sorted(acknowledged)
    assert {r["topic"] for r in df.select("topic").collect()} == {topic}
    # timestampType 0: CreateTime, as the producer set it.
    assert {r[0] for r in df.select("timestampType").distinct().collect()} == {0}


def test_batch_write_is_read_back_over_grpc(
    spark: Any,
    cluster: Cluster,  # noqa: F811
) -> None:
    topic = new_topic(cluster, partitions=2)
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("partition", IntegerType()),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            ),
        ]
    )
    rows = [
        (f"k{i}", f"spark-{i}", i % 2, [("from", b"spark"), ("n", str(i).encode())])
        for i in range(30)
    ]
    (
        spark.createDataFrame(rows, schema)
        .repartition(1)  # one task: within a partition the records keep the rows' order
        .write.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap(cluster))
        .option("topic", topic)
        .save()
    )
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: list[Any] = []
        for _ in range(30):
            got += consumer.poll(1000)
            if len(got) >= len(rows):
                break
    finally:
        consumer.close()
    for p in (0, 1):
        in_partition = [r for r in got if r.partition == p]
        assert [r.offset for r in in_partition] == list(range(15))
        assert [(r.key, r.value, list(r.headers)) for r in in_partition] == [
            (k.encode(), v.encode(), h) for k, v, part, h in rows if part == p
        ]


def test_streaming_read_resumes_from_its_checkpoint(
    spark: Any,
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic = new_topic(cluster, partitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once() -> None:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap(cluster))
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        assert not query.isActive, "the availableNow query did not finish in 180 s"

    def sink() -> list[tuple[int, int, str]]:
        return sorted(
            (r["partition"], r["offset"], r["value"])
            for r in spark.read.parquet(str(out)).collect()
        )

    first = [(i % 2, None, f"s{i}".encode(), [], BASE_TS + i) for i in range(10)]
    acknowledged = produce_over_grpc(cluster, topic, first)
    run_once()
    assert sink() == sorted((p, o, v.decode()) for p, o, _, v, _, _ in acknowledged)

    more = [(i % 2, None, f"s{i}".encode(), [], BASE_TS + i) for i in range(10, 16)]
    acknowledged += produce_over_grpc(cluster, topic, more)
    run_once()
    assert sink() == sorted((p, o, v.decode()) for p, o, _, v, _, _ in acknowledged)
