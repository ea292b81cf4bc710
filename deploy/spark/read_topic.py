"""Example Spark job: load a Headwater topic in bulk and print per-partition counts.

    spark-submit read_topic.py --bootstrap hw-headwater-bootstrap:9092 --topic orders

Runs as-is in the headwater-spark image (spark/Dockerfile), from spark-submit or
the kubeflow SparkApplication in this folder.
"""

from __future__ import annotations

import argparse

import headwater_spark
from pyspark.sql import SparkSession


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--min-partitions", default="0")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a source/sink option, e.g. kafka.security.protocol=SSL (repeatable)",
    )
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)

    spark = SparkSession.builder.appName("headwater-read-topic").getOrCreate()
    headwater_spark.register(spark)
    reader = (
        spark.read.format("headwater")
        .options(**options)
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
    )
    if int(args.min_partitions) > 0:
        reader = reader.option("minPartitions", args.min_partitions)
    df = reader.load()
    df.groupBy("partition").count().orderBy("partition").show()
    spark.stop()


if __name__ == "__main__":
    main()
