"""Example Spark job: copy a Headwater topic into another, upper-casing each value, as a
streaming query that processes what exists now (Trigger.AvailableNow) and commits its
progress to a consumer group, so `headwater groups describe` shows the job's lag.

    spark-submit copy_topic.py --bootstrap hw-headwater-bootstrap:9092 --topic orders \\
        --output orders-upper --group spark-copy

Runs as-is in the headwater-spark image (spark/Dockerfile), from deploy/spark/spark-submit.sh.
"""

from __future__ import annotations

import argparse
import tempfile

import headwater_spark
from pyspark.sql import SparkSession


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True, help="the topic to read")
    parser.add_argument("--output", required=True, help="the topic to write")
    parser.add_argument("--group", required=True, help="the group to commit progress to")
    parser.add_argument("--min-partitions", default="0")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a source/sink option, e.g. kafka.security.protocol=SSL (repeatable)",
    )
    parser.add_argument("--checkpoint", help="checkpoint location (default: a fresh temp dir)")
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)

    spark = SparkSession.builder.appName("headwater-copy-topic").getOrCreate()
    headwater_spark.register(spark)
    reader = (
        spark.readStream.format("headwater")
        .options(**options)
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("groupId", args.group)
    )
    if int(args.min_partitions) > 0:
        reader = reader.option("minPartitions", args.min_partitions)
    query = (
        reader.load()
        .selectExpr("key", "CAST(upper(CAST(value AS STRING)) AS BINARY) AS value")
        .writeStream.format("headwater")
        .options(**options)
        .option("bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint or tempfile.mkdtemp(prefix="copy-topic-"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"copied {rows} records from {args.topic} to {args.output}")
    spark.stop()


if __name__ == "__main__":
    main()
