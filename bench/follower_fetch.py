"""Fetch from the closest replica (KIP-392): bytes that cross racks per GB consumed, and the consume
rate, with the consumer's rack (``client.rack``) against without it, side by side (issue 26).

    python3 bench/follower_fetch.py [--pairs 3] [--records 300000] [--size 1024] [--partitions 6]

Each run starts a fresh 3-node kcompat cluster (tests/support/racks.py: node n on rack-a/b/c, RF 3,
``replica.selector.class`` = RackAwareReplicaSelector), produces ``--records`` records of ``--size``
bytes into ``--partitions`` partitions (acks=all, leaders spread over the racks), then one
librdkafka consumer in rack-a reads everything from the beginning (``assign``), timed from the
assignment to the last record. Runs alternate ``client.rack=rack-a`` and no rack. Cross-rack bytes
are the bytes served to consumers by brokers outside rack-a (the brokers' served-bytes counters,
logged at shutdown). Prints per run and the medians, with the load, and a JSON line; no target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.racks import rack_cluster, rack_of, served  # noqa: E402

CLIENT_RACK = "rack-a"


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(60)
    deadline = time.monotonic() + 60
    while any(p.leader < 0 or len(p.isrs) < 3 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()):
        assert time.monotonic() < deadline, "partitions without a full ISR"
        time.sleep(0.1)
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20,
                     "queue.buffering.max.kbytes": 1 << 20})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0


def consume(bootstrap: str, topic: str, records: int, partitions: int, rack: str | None) -> float:
    """Seconds to read every record from the beginning."""
    conf = {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20, "queued.max.messages.kbytes": 1 << 20}
    if rack:
        conf["client.rack"] = rack
    c = ck.Consumer(conf)
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    t0 = time.monotonic()
    n = 0
    while n < records:
        for m in c.consume(10000, 5):
            if m.error() is None:
                n += 1
        assert time.monotonic() - t0 < 600, f"read {n} of {records}"
    elapsed = time.monotonic() - t0
    c.close()
    return elapsed


def one_run(with_rack: bool, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="kcompat-racks-") as tmp:
        cluster = rack_cluster(Path(tmp), selector=True).start()
        try:
            topic = "bench"
            produce(cluster.bootstrap, topic, args.records, args.size, args.partitions)
            load = os.getloadavg()[0]
            seconds = consume(cluster.bootstrap, topic, args.records, args.partitions,
                              CLIENT_RACK if with_rack else None)
        finally:
            counts = served(cluster, topic)
    total = sum(a + b for a, b in counts.values())
    cross = sum(a + b for node, (a, b) in counts.items() if rack_of(node) != CLIENT_RACK)
    gb = total / 1e9
    return {"client_rack": with_rack, "seconds": seconds, "mb_per_s": total / 1e6 / seconds, "served_bytes": total,
            "cross_rack_bytes": cross, "cross_rack_per_gb": cross / gb if gb else 0.0,
            "from_followers": sum(b for _, b in counts.values()), "load": load}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    runs = []
    for i in range(args.pairs):
        for with_rack in (True, False):
            r = one_run(with_rack, args)
            runs.append(r)
            print(f"pair {i + 1} client.rack={'rack-a' if with_rack else '(none)':7s} {r['mb_per_s']:7.1f} MB/s "
                  f"({r['seconds']:.1f} s)  cross-rack {r['cross_rack_bytes'] / 1e6:8.1f} MB of "
                  f"{r['served_bytes'] / 1e6:.1f} MB served ({r['cross_rack_per_gb'] / 1e6:.0f} MB/GB), "
                  f"from followers {r['from_followers'] / 1e6:.1f} MB, load {r['load']:.2f}", flush=True)
    summary = {}
    for label, with_rack in (("rack", True), ("no_rack", False)):
        rs = [r for r in runs if r["client_rack"] == with_rack]
        summary[label] = {"mb_per_s": round(statistics.median(r["mb_per_s"] for r in rs), 1),
                          "cross_rack_mb_per_gb": round(statistics.median(r["cross_rack_per_gb"] for r in rs) / 1e6, 1),
                          "load": round(statistics.mean(r["load"] for r in rs), 2)}
    less = 1 - summary["rack"]["cross_rack_mb_per_gb"] / summary["no_rack"]["cross_rack_mb_per_gb"] \
        if summary["no_rack"]["cross_rack_mb_per_gb"] else 0.0
    rate = summary["rack"]["mb_per_s"] / summary["no_rack"]["mb_per_s"]
    print(f"\nmedians: cross-rack {summary['rack']['cross_rack_mb_per_gb']} MB/GB with client.rack, "
          f"{summary['no_rack']['cross_rack_mb_per_gb']} MB/GB without ({less:.1%} less); consume rate "
          f"{summary['rack']['mb_per_s']} vs {summary['no_rack']['mb_per_s']} MB/s ({rate:.2f}x)")
    print(json.dumps({"bench": "follower_fetch", "pairs": args.pairs, "records": args.records, "size": args.size,
                      **summary, "cross_rack_reduction": round(less, 4), "rate_ratio": round(rate, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
