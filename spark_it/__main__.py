"""Run the example pipeline against a running broker.

    python3 -m spark_it --bootstrap 127.0.0.1:9092 --seconds 60

Starts three things: a generator writing live page views to ``--in-topic`` at ``--rate`` events/s,
the Spark job (:mod:`spark_it.pipeline`) writing per-page counts of 10-second windows (5 s
watermark, a micro-batch every 5 s; see the options) to ``--out-topic``, and a reader printing
each aggregate as it arrives. Ctrl-C (or ``--seconds``) stops everything; running it again
resumes from ``--checkpoint``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from spark_it import events, pipeline
from spark_it.session import build_session


def _print_aggregates(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """Print the output topic's records as they arrive, until ``stop`` is set and nothing more comes."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-it-printer",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None and stop.is_set():
                break
            if msg is None or msg.error():
                continue
            agg = json.loads(msg.value())
            print(f"{agg['window_start']} .. {agg['window_end'][11:]}  {agg['page']:<9} "
                  f"views={agg['views']:<5} users={agg['users']}", flush=True)
    finally:
        consumer.close()


def _wait_caught_up(query, trigger_seconds: float, timeout: float = 120.0) -> None:
    """Wait until the query has processed everything written so far, including the batch that
    emits windows closed by the last watermark: idle for two trigger intervals in a row."""
    deadline = time.time() + timeout
    idle_since = None
    while time.time() < deadline and query.isActive:
        status = query.status
        idle = (query.lastProgress is not None and not status["isDataAvailable"]
                and not status["isTriggerActive"])
        if not idle:
            idle_since = None
        elif idle_since is None:
            idle_since = time.time()
        elif time.time() - idle_since >= 2 * trigger_seconds:
            return
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python3 -m spark_it", description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--in-topic", default="page-views")
    ap.add_argument("--out-topic", default="page-view-counts")
    ap.add_argument("--checkpoint", default="./spark-checkpoints/page-view-counts")
    ap.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    ap.add_argument("--window-seconds", type=int, default=10, help="event-time window (default 10)")
    ap.add_argument("--watermark-seconds", type=int, default=5, help="allowed lateness (default 5)")
    ap.add_argument("--trigger-seconds", type=int, default=5, help="micro-batch interval (default 5)")
    args = ap.parse_args(argv)

    spark = build_session("kcompat-page-views")
    spark.sparkContext.setLogLevel("WARN")
    query = pipeline.start(spark, args.bootstrap, args.in_topic, args.out_topic, args.checkpoint,
                           window=f"{args.window_seconds} seconds", watermark=f"{args.watermark_seconds} seconds",
                           trigger={"processingTime": f"{args.trigger_seconds} seconds"})
    stop = threading.Event()
    printer = threading.Thread(target=_print_aggregates, args=(args.bootstrap, args.out_topic, stop), daemon=True)
    printer.start()
    try:
        sent = events.produce(args.bootstrap, args.in_topic, events.live_page_views(args.rate, args.seconds))
        print(f"generator: wrote {sent} page views; waiting for the last closed windows", flush=True)
        _wait_caught_up(query, args.trigger_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        stop.set()
        printer.join(30)
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
