"""Build a local SparkSession that can read and write Kafka topics with Spark's own connector.

The connector (``spark-sql-kafka-0-10``) is resolved from Maven Central through
``spark.jars.packages``. Its coordinates are derived from the installed pyspark, so the jar and
the Python package can never disagree, and Ivy resolves into a cache directory that persists
between runs on the same machine (``$KCOMPAT_SPARK_IVY`` or ``~/.cache/kcompat-spark-ivy``):
only the first run downloads anything.
"""

from __future__ import annotations

import os
from pathlib import Path

SCALA_BINARY_VERSION = "2.13"  # pyspark 4.x is built for Scala 2.13 only


def connector_coordinates(spark_version: str | None = None) -> str:
    """Maven coordinates of Spark's Kafka connector for the installed (or given) Spark version."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{spark_version}"


def ivy_cache_dir() -> Path:
    """The Ivy directory used for ``spark.jars.ivy``; created if missing."""
    path = Path(os.environ.get("KCOMPAT_SPARK_IVY") or Path.home() / ".cache" / "kcompat-spark-ivy")
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_session(app_name: str = "kcompat-spark", master: str = "local[2]", *,
                  shuffle_partitions: int = 2, extra_conf: dict[str, str] | None = None):
    """A SparkSession with the Kafka connector on its classpath.

    ``shuffle_partitions`` defaults to 2 (Spark's 200 is meant for clusters and makes every
    small streaming batch slow on a laptop). ``extra_conf`` adds or overrides Spark settings.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: stay on the loopback interface
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.jars.packages", connector_coordinates())
               .config("spark.jars.ivy", str(ivy_cache_dir()))
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
