"""What incremental fetch sessions (KIP-227) save: a consumer of many partitions, with and without.

    python3 bench/fetch_sessions.py [--partitions 500] [--busy 5] [--seconds 20] [--rate 200]

One kcompat broker per mode, one after the other: ``max.incremental.fetch.session.cache.slots``
1000 (the default: sessions) and 0 (every fetch is a full one, as before sessions existed). A
topic of ``--partitions`` partitions; a kafka-python 3.0.12 consumer (which uses sessions when the
broker offers them, as the Java consumer does) assigned all of them polls for ``--seconds`` while
a producer writes ``--rate`` records/s of 100 B into the first ``--busy`` partitions.

Printed per mode, from the broker's request metrics (``/metrics``): Fetch requests per second,
request and response bytes per Fetch, the broker's CPU seconds, and the records consumed (which
must be every record produced in both modes). Numbers only; nothing is asserted but that count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kcompat.testing.ports import free_ports  # noqa: E402
from kcompat.testing.process import BrokerProcess  # noqa: E402


def fetch_metrics(url: str) -> dict[str, float]:
    """Fetch's request count and request/response bytes from the broker's ``/metrics``."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    got = {"requests": 0.0, "request_bytes": 0.0, "response_bytes": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("request") != "Fetch":
                continue
            if s.name == "kafka_network_requestmetrics_requests_total":
                got["requests"] += s.value
            elif s.name == "kafka_network_requestmetrics_requestbytes_total":
                got["request_bytes"] += s.value
            elif s.name == "kafka_network_requestmetrics_responsebytes_total":
                got["response_bytes"] += s.value
    return got


def run_mode(slots: int, args) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition
    from proc_stats import proc_run_seconds

    with tempfile.TemporaryDirectory(prefix="fetch-sessions-") as tmp:
        (http,) = free_ports(1)
        broker = BrokerProcess(Path(tmp), {"http.listeners": f"HTTP://127.0.0.1:{http}",
                                           "max.incremental.fetch.session.cache.slots": str(slots)}).start()
        url = f"http://127.0.0.1:{http}/metrics"
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("t", args.partitions, 1)])["t"].result(60)
            del admin   # its connection would outlive the broker and log refusals
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                     auto_offset_reset="earliest")
            consumer.assign([TopicPartition("t", p) for p in range(args.partitions)])
            consumer.poll(timeout_ms=2000)   # connected, positions known
            produced = {"n": 0}
            stop = threading.Event()

            def produce() -> None:
                p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
                i = 0
                while not stop.is_set():
                    p.produce("t", b"x" * 100, partition=i % args.busy)
                    i += 1
                    p.poll(0)
                    time.sleep(1 / args.rate)
                p.flush(30)
                produced["n"] = i

            consumed = 0
            before = fetch_metrics(url)
            cpu0 = proc_run_seconds(broker.proc.pid)
            t0 = time.monotonic()
            writer = threading.Thread(target=produce)
            writer.start()
            while time.monotonic() - t0 < args.seconds:
                consumed += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
            stop.set()
            writer.join()
            deadline = time.monotonic() + 30
            while consumed < produced["n"] and time.monotonic() < deadline:
                consumed += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
            elapsed = time.monotonic() - t0
            cpu = proc_run_seconds(broker.proc.pid) - cpu0
            after = fetch_metrics(url)
            consumer.close()
        finally:
            broker.stop()
    fetches = after["requests"] - before["requests"]
    return {"fetches/s": fetches / elapsed,
            "request B/fetch": (after["request_bytes"] - before["request_bytes"]) / fetches,
            "response B/fetch": (after["response_bytes"] - before["response_bytes"]) / fetches,
            "broker CPU s": cpu, "produced": produced["n"], "consumed": consumed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--busy", type=int, default=5, help="partitions that get records")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=200.0, help="records per second")
    args = ap.parse_args(argv)
    results = {name: run_mode(slots, args) for name, slots in (("sessions", 1000), ("no sessions", 0))}
    print(f"# {args.partitions} partitions, {args.busy} of them written at {args.rate:g} records/s for "
          f"{args.seconds:g} s; load average {os.getloadavg()[0]:.2f}")
    print(f"{'':18s} {'sessions':>12s} {'no sessions':>12s}")
    for key in results["sessions"]:
        print(f"{key:18s} {results['sessions'][key]:12.1f} {results['no sessions'][key]:12.1f}")
    ok = all(r["consumed"] == r["produced"] for r in results.values())
    print("every record consumed in both modes" if ok else "RECORDS MISSING")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
