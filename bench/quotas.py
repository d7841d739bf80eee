"""Client quotas on one kcompat broker: the rate a greedy producer is held to, and what it does to
another client's latency.

    python3 bench/quotas.py [--seconds 20] [--quota-mb 1] [--window-num 11] [--probe-rate 200]

Starts ``python -m kcompat serve`` (``quota.window.num`` = ``--window-num``, windows of 1 s; Kafka's
default is 11) and runs two phases of ``--seconds`` each:

1. baseline: a probe producer (client id ``probe``, no quota, acks=all, linger.ms 0) sends
   ``--probe-rate`` records of 1 KiB per second; the latency of each record is the time from
   ``produce()`` to its delivery report (after one unmeasured record that connects);
2. the same probe while a greedy producer (client id ``greedy``, ``producer_byte_rate`` =
   ``--quota-mb`` MiB/s set by AlterClientQuotas) sends 64 KB records as fast as it is let.

It prints the probe's p50/p99/max latency in both phases, the greedy producer's held rate (bytes
appended per second over the phase, and over its second half, past the first burst that
``quota.window.num - 1`` windows allow), the throttle times its statistics reported, and a
one-line JSON summary last. It asserts nothing. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.quotas.support import MB, VALUE, FlatOutProducer, set_quota  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

PROBE_VALUE = b"p" * 1024


def probe(bootstrap: str, topic: str, rate: float, seconds: float) -> list[float]:
    """Latencies (ms) of records sent at ``rate`` per second for ``seconds``."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "probe", "linger.ms": 0, "acks": "all"})
    p.produce(topic, PROBE_VALUE)   # connected, metadata known: not part of the latencies
    p.flush(30)
    latencies: list[float] = []
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n / rate
        now = time.monotonic()
        if now < due:
            p.poll(due - now)
            continue
        sent = time.monotonic()
        p.produce(topic, PROBE_VALUE, on_delivery=lambda err, _m, t=sent: err is None and latencies.append(
            (time.monotonic() - t) * 1000))
        n += 1
        p.poll(0)
    p.flush(30)
    return latencies


def run_greedy(bootstrap: str, seconds: float, results) -> None:
    """A producer with client id ``greedy`` sending 64 KB records flat out for ``seconds``; puts
    the throttle averages its statistics reported on ``results``."""
    greedy = FlatOutProducer(bootstrap, "greedy", "greedy", request_bytes=65536)
    greedy.start()
    time.sleep(seconds)
    greedy.stop()
    results.put(greedy.throttles.avgs)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--quota-mb", type=float, default=1.0)
    ap.add_argument("--window-num", type=int, default=11)
    ap.add_argument("--probe-rate", type=float, default=200.0)
    args = ap.parse_args()
    quota = args.quota_mb * MB
    with tempfile.TemporaryDirectory() as tmp, \
            BrokerProcess(Path(tmp) / "data", {"quota.window.num": str(args.window_num),
                                               "quota.window.size.seconds": "1"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("probe", "greedy")]).values():
            f.result(30)
        set_quota(broker.bootstrap, [("client-id", "greedy")], producer_byte_rate=quota)
        base = probe(broker.bootstrap, "probe", args.probe_rate, args.seconds)

        # the greedy producer runs in a process of its own: its thread would take this one's GIL
        # from the probe, whose latencies would then measure Python, not the broker
        results = multiprocessing.Queue()
        greedy = multiprocessing.Process(target=run_greedy, args=(broker.bootstrap, args.seconds + 1, results))
        watcher = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-watcher"})
        ends: list[tuple[float, int]] = []
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                ends.append((time.monotonic(), watcher.get_watermark_offsets(TopicPartition("greedy", 0),
                                                                             cached=False)[1]))
                time.sleep(0.5)
        greedy.start()
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        loaded = probe(broker.bootstrap, "probe", args.probe_rate, args.seconds)
        stop.set()
        w.join(5)
        throttle_avgs = results.get(timeout=120)
        greedy.join(30)
        watcher.close()
    (t0, e0), (t1, e1) = ends[0], ends[-1]
    tm, em = min(ends, key=lambda x: abs(x[0] - (t0 + t1) / 2))
    held = (e1 - e0) * len(VALUE) / (t1 - t0)
    held_late = (e1 - em) * len(VALUE) / (t1 - tm)
    summary = {
        "quota_mib_s": args.quota_mb, "window_num": args.window_num, "seconds": args.seconds,
        "held_mib_s": round(held / MB, 3), "held_second_half_mib_s": round(held_late / MB, 3),
        "greedy_throttle_avg_ms": round(sum(throttle_avgs) / max(1, len(throttle_avgs)), 1),
        "probe_p50_ms": round(pct(base, 0.5), 2), "probe_p99_ms": round(pct(base, 0.99), 2),
        "probe_max_ms": round(max(base), 2),
        "probe_loaded_p50_ms": round(pct(loaded, 0.5), 2), "probe_loaded_p99_ms": round(pct(loaded, 0.99), 2),
        "probe_loaded_max_ms": round(max(loaded), 2), "probe_records": [len(base), len(loaded)],
    }
    print(f"greedy producer (quota {args.quota_mb} MiB/s, quota.window.num {args.window_num}): "
          f"{summary['held_mib_s']} MiB/s over the phase, {summary['held_second_half_mib_s']} MiB/s over its "
          f"second half, throttle avg {summary['greedy_throttle_avg_ms']} ms")
    print(f"probe alone:        p50 {summary['probe_p50_ms']} ms  p99 {summary['probe_p99_ms']} ms  "
          f"max {summary['probe_max_ms']} ms")
    print(f"probe beside greedy: p50 {summary['probe_loaded_p50_ms']} ms  p99 {summary['probe_loaded_p99_ms']} ms  "
          f"max {summary['probe_loaded_max_ms']} ms")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
