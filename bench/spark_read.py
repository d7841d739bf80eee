"""Spark against a real kcompat broker: batch read throughput and the streaming pipeline's rate.

    python3 bench/spark_read.py [--records 5000000] [--size 100] [--partitions 6]
                                [--events 1000000] [--max-offsets 250000] [--master local[2]]

Starts ``python -m kcompat serve`` on a free port with a temporary ``log.dirs`` and a local
SparkSession with Spark's Kafka connector (``spark_it.session``), then:

1. loads ``--records`` records of ``--size`` bytes into a topic of ``--partitions`` partitions
   (confluent-kafka, acks=1, large batches; the load rate is printed too);
2. **batch read**: ``spark.read.format("kafka")`` of the whole topic, computing
   ``count(*)`` and ``sum(length(value))`` (every record is fetched and its value touched),
   ``--repeat`` times (the first run includes the JVM warming up); records/s and MB/s
   (10^6 bytes of values) from the wall time of the action;
3. **streaming pipeline**: loads ``--events`` JSON page views (``spark_it.events``) into a
   topic of ``--partitions`` partitions and runs the ``spark_it.pipeline`` job over that backlog
   with ``trigger(availableNow=True)`` and ``maxOffsetsPerTrigger=--max-offsets``: the sustained
   input rate is events / wall time from start to the end of the query; the median of Spark's
   per-batch ``processedRowsPerSecond`` is printed too.

Broker CPU seconds per phase are printed (broker and Spark share the machine's cores). Nothing is
asserted; the last line of output is a one-line JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: spark_it, tests.support.broker_process

MB = 1_000_000

PRODUCER_CONFIG = {"acks": 1, "enable.idempotence": False, "linger.ms": 20, "batch.size": 1_000_000,
                   "batch.num.messages": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                   "queue.buffering.max.kbytes": 1_048_576, "delivery.report.only.error": True}


def _cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def load_records(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> dict:
    """Produce ``count`` records of ``size`` bytes round-robin over the partitions."""
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG,
                  "error_cb": lambda e: errors.append(e)})
    payload = os.urandom(size)
    t0 = time.time()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=payload, partition=i % partitions,
                          on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
        if i % 50_000 == 0:
            p.poll(0)
    left = p.flush(300)
    seconds = time.time() - t0
    if left or errors:
        raise RuntimeError(f"load failed: {left} undelivered, errors {errors[:3]}")
    return {"records": count, "seconds": seconds, "records_per_s": count / seconds}


def batch_read(spark, bootstrap: str, topic: str, broker_pid: int, expected: int, size: int) -> dict:
    """One full batch read of the topic; returns the wall time and rates."""
    cpu0, t0 = _cpu_seconds(broker_pid), time.time()
    row = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .load().selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0])
    seconds = time.time() - t0
    if row.n != expected or row.bytes != expected * size:
        raise RuntimeError(f"read {row.n} records / {row.bytes} bytes, expected {expected} / {expected * size}")
    return {"records": row.n, "seconds": seconds, "records_per_s": row.n / seconds,
            "mb_per_s": row.bytes / MB / seconds, "broker_cpu_s": _cpu_seconds(broker_pid) - cpu0}


def streaming_pipeline(spark, bootstrap: str, events_n: int, partitions: int, max_offsets: int,
                       broker_pid: int, work: Path) -> dict:
    """Run the example pipeline over a backlog of ``events_n`` page views; returns its input rate."""
    from spark_it import events, pipeline

    in_topic, out_topic = "bench-page-views", "bench-page-view-counts"
    _create_topic(bootstrap, in_topic, partitions, {"retention.ms": "-1"})
    _create_topic(bootstrap, out_topic, 1)
    start_ms = int(time.time() * 1000) - events_n  # 1 ms apart, ending now
    t0 = time.time()
    events.produce(bootstrap, in_topic, events.page_views(events_n, start_ms, step_ms=1, seed=1),
                   config={"linger.ms": 20, "batch.num.messages": 100_000, "queue.buffering.max.messages": 1_000_000})
    load_s = time.time() - t0
    cpu0, t0 = _cpu_seconds(broker_pid), time.time()
    q = pipeline.start(spark, bootstrap, in_topic, out_topic, str(work / "checkpoint"),
                       trigger={"availableNow": True}, source_options={"maxOffsetsPerTrigger": str(max_offsets)})
    q.awaitTermination()
    seconds = time.time() - t0
    progress = q.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    if rows != events_n:
        raise RuntimeError(f"the query read {rows} events, expected {events_n}")
    per_batch = [p["processedRowsPerSecond"] for p in progress if p["numInputRows"]]
    return {"events": events_n, "load_events_per_s": events_n / load_s, "seconds": seconds,
            "events_per_s": events_n / seconds, "batches": len(per_batch),
            "median_batch_rows_per_s": statistics.median(per_batch) if per_batch else 0.0,
            "broker_cpu_s": _cpu_seconds(broker_pid) - cpu0}


def main(argv=None) -> int:
    """Run the benchmark; always exits 0 unless something fails."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2, help="batch reads (default 2: cold and warm JVM)")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--max-offsets", type=int, default=250_000, help="maxOffsetsPerTrigger of the pipeline")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-streaming", action="store_true")
    args = ap.parse_args(argv)

    from spark_it.session import build_session, connector_coordinates
    from tests.support.broker_process import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="kcompat-spark-bench-"))
    summary: dict = {"master": args.master, "connector": connector_coordinates(), "cpus": os.cpu_count()}
    print(f"connector {summary['connector']}, master {args.master}, {os.cpu_count()} CPUs, work dir {work}")
    try:
        with BrokerProcess(work / "data") as broker:
            pid = broker.proc.pid
            print(f"broker pid {pid} at {broker.bootstrap}", flush=True)
            spark = build_session("kcompat-bench", args.master)
            spark.sparkContext.setLogLevel("ERROR")
            if not args.skip_batch:
                _create_topic(broker.bootstrap, "bench-records", args.partitions)
                load = load_records(broker.bootstrap, "bench-records", args.records, args.size, args.partitions)
                print(f"load: {load['records']:,} x {args.size} B in {load['seconds']:.1f} s "
                      f"({load['records_per_s']:,.0f} records/s)", flush=True)
                runs = []
                for i in range(args.repeat):
                    r = batch_read(spark, broker.bootstrap, "bench-records", pid, args.records, args.size)
                    runs.append(r)
                    print(f"batch read {i + 1}: {r['records']:,} records in {r['seconds']:.1f} s: "
                          f"{r['records_per_s']:,.0f} records/s, {r['mb_per_s']:.1f} MB/s "
                          f"(broker CPU {r['broker_cpu_s']:.1f} s)", flush=True)
                summary["load"] = load
                summary["batch_read"] = runs
            if not args.skip_streaming:
                s = streaming_pipeline(spark, broker.bootstrap, args.events, args.partitions, args.max_offsets,
                                       pid, work)
                print(f"streaming pipeline: {s['events']:,} events in {s['seconds']:.1f} s: "
                      f"{s['events_per_s']:,.0f} events/s sustained over {s['batches']} batches "
                      f"(median batch {s['median_batch_rows_per_s']:,.0f} rows/s; broker CPU "
                      f"{s['broker_cpu_s']:.1f} s; load {s['load_events_per_s']:,.0f} events/s)", flush=True)
                summary["streaming"] = s
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
