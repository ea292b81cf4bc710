"""A streaming query with the exactly-once sink, run as its own driver process by
``test_spark_transactions.py`` (which kill -9s it and restarts it from its checkpoint).

    python eos_stream_app.py BOOTSTRAP SOURCE SINK CHECKPOINT PREFIX

It reads SOURCE from the earliest offset, 40 records per micro-batch, and writes each
value prefixed with ``out-`` to SINK with ``exactly.once=true``; it runs until killed.
"""

from __future__ import annotations

import os
import sys

import headwater_spark
from pyspark.sql import SparkSession


def main(bootstrap: str, source: str, sink: str, checkpoint: str, prefix: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-eos-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        # Python workers start slowly on a loaded machine (default 15 s to connect back).
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    headwater_spark.register(spark)
    query = (
        spark.readStream.format("headwater")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .selectExpr("key", "concat('out-', CAST(value AS STRING)) AS value")
        .writeStream.format("headwater")
        .option("bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("exactly.once", "true")
        .option("transactional.id.prefix", prefix)
        .option("transaction.timeout.ms", "20000")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
