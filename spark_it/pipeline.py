"""The page-view pipeline: Kafka topic -> parse JSON -> windowed counts with a watermark -> Kafka topic.

Input records carry JSON page views (see :mod:`spark_it.events`). For every page and every event-time
window the job emits one record to the output topic, once the watermark has passed the window's end
(output mode ``append``), so each aggregate is written once per successful micro-batch:

    key   = b"/docs|2024-05-01T12:00:10.000Z"
    value = b'{"window_start":"2024-05-01T12:00:10.000Z","window_end":"2024-05-01T12:00:20.000Z",
              "page":"/docs","views":12,"users":9}'

Progress (input offsets, aggregation state) lives in the checkpoint directory; a query restarted
from it continues where the previous run stopped.
"""

from __future__ import annotations

EVENT_SCHEMA = "user STRING, page STRING, ts TIMESTAMP"
_TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def read_events(spark, bootstrap: str, topic: str, options: dict[str, str] | None = None):
    """A streaming DataFrame of the raw Kafka records of ``topic`` (Spark's Kafka source schema).

    ``options`` are passed to the source as given (``startingOffsets``, ``maxOffsetsPerTrigger``,
    ``kafka.isolation.level``, ...); the default starts at the earliest offset.
    """
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def parse(raw):
    """Parse the JSON values into ``user``, ``page``, ``ts`` columns; malformed records are dropped."""
    from pyspark.sql import functions as F

    parsed = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA,
                                    {"timestampFormat": _TS_FORMAT}).alias("e"))
    return parsed.select("e.*").where(F.col("ts").isNotNull() & F.col("page").isNotNull())


def aggregate(events, window: str = "10 seconds", watermark: str = "5 seconds"):
    """Views and distinct users per page in tumbling event-time windows, late data bounded by the watermark."""
    from pyspark.sql import functions as F

    return (events.withWatermark("ts", watermark)
            .groupBy(F.window("ts", window), F.col("page"))
            .agg(F.count(F.lit(1)).alias("views"), F.size(F.collect_set("user")).alias("users")))


def to_kafka_records(aggregates):
    """The aggregates as ``key``/``value`` string columns, ready for the Kafka sink."""
    from pyspark.sql import functions as F

    start = F.date_format(F.col("window.start"), _TS_FORMAT)
    end = F.date_format(F.col("window.end"), _TS_FORMAT)
    value = F.to_json(F.struct(start.alias("window_start"), end.alias("window_end"), F.col("page"),
                               F.col("views"), F.col("users")))
    return aggregates.select(F.concat_ws("|", F.col("page"), start).alias("key"), value.alias("value"))


def start(spark, bootstrap: str, in_topic: str, out_topic: str, checkpoint: str, *,
          window: str = "10 seconds", watermark: str = "5 seconds", trigger: dict | None = None,
          source_options: dict[str, str] | None = None, sink_options: dict[str, str] | None = None,
          query_name: str | None = None):
    """Start the pipeline and return its ``StreamingQuery``.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (default ``{"processingTime": "5 seconds"}``;
    ``{"availableNow": True}`` processes what is there and stops). ``sink_options`` are extra Kafka
    sink options, e.g. ``{"kafka.linger.ms": "5"}``.
    """
    records = to_kafka_records(aggregate(parse(read_events(spark, bootstrap, in_topic, source_options)),
                                         window, watermark))
    writer = (records.writeStream.format("kafka").outputMode("append")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
              .option("checkpointLocation", checkpoint)
              .trigger(**(trigger or {"processingTime": "5 seconds"})))
    for key, value in (sink_options or {}).items():
        writer = writer.option(key, value)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()
