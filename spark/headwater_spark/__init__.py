"""PySpark data source "headwater": read and write Headwater topics from Spark.

    import headwater_spark
    headwater_spark.register(spark)      # or spark.dataSource.register(HeadwaterDataSource)
    df = (spark.read.format("headwater")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

Options, schema and semantics are those of Spark's Kafka source (see
docs/spark.md); only this package imports pyspark, and it reaches the cluster
through ``headwater.client``.  The pyspark classes are imported lazily, so the
pure planning modules can be used (and unit-tested) without starting Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headwater_spark.source import HeadwaterDataSource

__all__ = ["HeadwaterDataSource", "register"]


def register(spark: Any) -> None:
    """Register the ``headwater`` format with a SparkSession."""
    from headwater_spark.source import HeadwaterDataSource

    spark.dataSource.register(HeadwaterDataSource)


def __getattr__(name: str) -> Any:
    if name == "HeadwaterDataSource":
        from headwater_spark.source import HeadwaterDataSource

        return HeadwaterDataSource
    raise AttributeError(name)
