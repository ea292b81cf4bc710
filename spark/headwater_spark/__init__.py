"""PySpark data source "headwater"."""
