"""Tiered storage (KIP-405) on a real kcompat broker with the local filesystem backend, driven by
confluent-kafka (librdkafka).

    python3 bench/tiered.py [--quick] [--mb N] [--value-bytes N]

Starts ``python -m kcompat serve`` with ``remote.log.storage.system.enable=true`` (copier every
200 ms, retention checks every 200 ms) and two topics of 1 partition, 1 MiB segments:
``plain`` (not tiered) and ``tiered`` (``remote.storage.enable=true``, ``local.retention.bytes``
4 MiB). Then:

1. produce ``--mb`` (200) MB of ``--value-bytes`` (1024) values to ``plain`` at ``--rate-mb`` (20)
   MB/s, acks=1: per-record latency (``produce()`` to delivery report) p50/p99/max - the baseline;
2. the same to ``tiered`` while the copier uploads its closed segments and local retention
   deletes them: the same latencies;
3. wait until the copier has caught up (the local log is down to its tail);
4. consume ``tiered`` from offset 0 to its local log start offset (every byte served from remote
   segments) and the same number of records of ``plain`` (served from local segments): MB/s
   (after a warm-up read: a consumer's first request creates ``__consumer_offsets``).

MB = 10^6 bytes of record values. Nothing is asserted; the last line is a JSON summary, with the
machine load (``uptime``) before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: tests.support.broker_process

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker_process import BrokerProcess, wait_for  # noqa: E402

MB = 1_000_000
SEGMENT = 1024 * 1024


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def produce(bootstrap: str, topic: str, n: int, value: bytes, rate_mb: float) -> dict:
    """Produce ``n`` records at ``rate_mb`` MB/s (paced, so that the latency is the broker's and
    not the client queue's); per-record latency percentiles (ms) and the MB/s reached."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 200000})
    lat: list[float] = []

    def done(err, _msg, sent):
        if err is None:
            lat.append(time.perf_counter() - sent)
    t0 = time.perf_counter()
    per_record = len(value) / (rate_mb * MB)
    for i in range(n):
        ahead = t0 + i * per_record - time.perf_counter()
        if ahead > 0.001:
            p.poll(ahead)
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, value, on_delivery=lambda err, msg, sent=sent: done(err, msg, sent))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    lat.sort()

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2)
    return {"records": len(lat), "mb_s": round(n * len(value) / MB / elapsed, 1),
            "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": round(lat[-1] * 1000, 2)}


def consume(bootstrap: str, topic: str, start: int, end: int, value_bytes: int) -> dict:
    """Read offsets [start, end) of partition 0; MB/s from assign() to the last record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * 1024 * 1024})
    c.assign([TopicPartition(topic, 0, start)])
    t0 = time.perf_counter()
    seen = 0
    last = t0
    while start + seen < end:
        for m in c.consume(1000, timeout=0.2):
            if m.error() is None and m.offset() < end:
                seen += 1
                last = time.perf_counter()
    elapsed = last - t0
    c.close()
    return {"records": seen, "seconds": round(elapsed, 2), "mb_s": round(seen * value_bytes / MB / elapsed, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 MB instead of 200")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--rate-mb", type=float, default=20.0, help="produce rate (MB/s) of both produce phases")
    args = ap.parse_args()
    mb = 40 if args.quick else args.mb
    n = mb * MB // args.value_bytes
    value = b"v" * args.value_bytes
    before = uptime()
    with tempfile.TemporaryDirectory(prefix="kcompat-bench-tiered-") as tmp:
        remote = Path(tmp) / "remote"
        broker = BrokerProcess(Path(tmp) / "data", {
            "remote.log.storage.system.enable": "true", "rsm.config.dir": str(remote),
            "remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "200",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "5"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            base = {"segment.bytes": str(SEGMENT), "file.delete.delay.ms": "0"}
            for f in admin.create_topics([
                    NewTopic("plain", 1, 1, config=base),
                    NewTopic("tiered", 1, 1, config={**base, "remote.storage.enable": "true",
                                                     "local.retention.bytes": str(4 * SEGMENT)})]).values():
                f.result(30)
            produce(broker.bootstrap, "plain", 1000, value, args.rate_mb)   # warm-up: connections, metadata
            plain = produce(broker.bootstrap, "plain", n, value, args.rate_mb)
            print(f"produce {mb} MB, not tiered:          {plain}", flush=True)
            tiered = produce(broker.bootstrap, "tiered", n, value, args.rate_mb)
            print(f"produce {mb} MB while the copier runs: {tiered}", flush=True)
            local = Path(tmp) / "data" / "tiered-0"
            t0 = time.perf_counter()
            wait_for(lambda: sum(f.stat().st_size for f in local.glob("*.log")) < 8 * SEGMENT, timeout=600)
            caught_up = round(time.perf_counter() - t0, 2)
            local_start = min(int(f.name[:20]) for f in local.glob("*.log"))
            consume(broker.bootstrap, "plain", 0, 1, args.value_bytes)   # warm-up: creates __consumer_offsets
            from_remote = consume(broker.bootstrap, "tiered", 0, local_start, args.value_bytes)
            print(f"consume {local_start} records from remote segments: {from_remote}", flush=True)
            from_local = consume(broker.bootstrap, "plain", 0, local_start, args.value_bytes)
            print(f"consume {local_start} records from local segments:  {from_local}", flush=True)
            remote_mb = round(sum(p.stat().st_size for p in remote.rglob("*.log")) / MB, 1)
        finally:
            broker.stop()
    after = uptime()
    print(f"uptime before: {before}\nuptime after:  {after}")
    print(json.dumps({"mb": mb, "value_bytes": args.value_bytes, "produce_plain": plain, "produce_tiered": tiered,
                      "copier_caught_up_s": caught_up, "remote_mb": remote_mb, "consume_remote": from_remote,
                      "consume_local": from_local, "uptime_before": before, "uptime_after": after}))


if __name__ == "__main__":
    main()
