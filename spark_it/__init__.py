"""Spark Structured Streaming pipelines against kcompat, with Spark's own Kafka connector.

- :mod:`spark_it.session`: a local SparkSession with ``spark-sql-kafka-0-10`` resolved from Maven
  Central at the installed pyspark's version, into an Ivy cache that persists between runs.
- :mod:`spark_it.events`: a generator of JSON page-view events written to a topic.
- :mod:`spark_it.pipeline`: the streaming job: read with ``format("kafka")``, parse, count views
  per page in event-time windows with a watermark, write the aggregates to another topic with the
  Kafka sink and a checkpoint directory.
- ``python3 -m spark_it``: run the whole example against a running broker (see README.md here).
"""
