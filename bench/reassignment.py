"""Partition reassignment benchmark (issue 17): moving N GB of partition data onto a new broker with
Kafka's ``kafka-reassign-partitions.sh``, without and with a replication throttle.

    python3 bench/reassignment.py [--gb 1.0] [--throttle-mb 20] [--partitions 4] [--modes none,throttled]

For each mode a fresh cluster: nodes 1-3 brokers and controller voters, node 4 a broker only (the
new broker, registered but hosting nothing). A topic of ``--partitions`` (4) partitions, replication
factor 2 on brokers 1-3, is filled with ``--gb`` GB (10^9 bytes of 10 KB record values, spread over
the partitions; acks=1, then one acks=all record per partition so the followers have caught up). Then a probe producer (confluent-kafka, acks=all, ``linger.ms=0``, 100 B records,
200/s round-robin over the partitions of the same topic) runs while Kafka 4.3.1's
``kafka-reassign-partitions.sh --execute`` replaces the follower replica of every partition by
broker 4 (``--throttle`` ``--throttle-mb`` MB/s in mode ``throttled``), so broker 4 copies the whole
``--gb``. The move is timed from the start of ``--execute`` until ListPartitionReassignments lists
nothing (polled every 200 ms), then ``--verify`` clears the throttle.

Prints per mode: data size, move time and MB/s, and the probe's produce latency (librdkafka's
``Message.latency()``: ``produce()`` to delivery report) p50 / p99 / max for 5 s before the move
(idle, after 2 s of warm-up) and during the move; the machine load (``uptime``). Last line: a JSON
summary. The move time includes the tool's JVM start (a few seconds). As in Kafka, the throttle's
rate is measured over ``replication.quota.window.num`` (11) windows of 1 s counted as at least 10 s,
so about 10 s x the throttle (200 MB at 20 MB/s) goes at full speed before the throttle holds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster_clients import pct, produce_round_robin  # noqa: E402
from conformance import maven  # noqa: E402
from conformance.clients.java import JavaTools  # noqa: E402
from kcompat.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest  # noqa: E402
from kcompat.testing import wire  # noqa: E402
from kcompat.testing.cluster import Cluster, wait_until  # noqa: E402
from tests.support.reassign import ReassignTool, replicas_of  # noqa: E402

TOPIC = "bulk"
VALUE = 10_000


class Probe:
    """acks=all producer of 100 B records at ``rate``/s; latencies (s) of delivered records."""

    def __init__(self, bootstrap: str, partitions: int, rate: int = 200) -> None:
        self.partitions = partitions
        self.rate = rate
        self.latencies: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                               "enable.idempotence": True})
        self._t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg) -> None:
        if err is None:
            self.latencies.append(msg.latency())
        else:
            self.errors += 1

    def _run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            self._p.produce(TOPIC, b"p" * 100, partition=i % self.partitions, on_delivery=self._cb)
            i += 1
            self._p.poll(0)
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self._p.flush(60)

    def start(self) -> "Probe":
        self._t.start()
        return self

    def take(self) -> list[float]:
        """The latencies recorded so far (and start a new series)."""
        out, self.latencies = self.latencies, []
        return out

    def stop(self) -> None:
        self._stop.set()
        self._t.join(90)


def fill(bootstrap: str, partitions: int, total: int) -> float:
    """Write ``total`` bytes of values; returns seconds."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                     "queue.buffering.max.kbytes": 512 * 1024, "compression.type": "none"})
    t0 = time.monotonic()
    produce_round_robin(p, TOPIC, os.urandom(VALUE), total // VALUE, partitions, None)
    assert p.flush(600) == 0
    # acks=1 left the followers behind (still in the ISR, within replica.lag.time.max.ms): one
    # acks=all record per partition returns once every follower has caught up
    settle = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 600_000})
    for i in range(partitions):
        settle.produce(TOPIC, b"settle", partition=i)
    assert settle.flush(600) == 0
    return time.monotonic() - t0


def reassigning(bootstrap: str) -> bool:
    resp = wire.call(bootstrap.split(",")[0], ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), 0)
    return bool(resp.topics)


def run_mode(mode: str, args, lib: Path, root: Path) -> dict:
    (root / mode).mkdir(parents=True, exist_ok=True)
    cluster = Cluster(root / mode, n=4, roles=["broker,controller"] * 3 + ["broker"])
    cluster.start()
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        layout = [[1 + i % 3, 1 + (i + 1) % 3] for i in range(args.partitions)]
        admin.create_topics([NewTopic(TOPIC, args.partitions, replica_assignment=layout)])[TOPIC].result(60)
        total = int(args.gb * 1e9)
        fill_s = fill(bootstrap, args.partitions, total)
        wait_until(lambda: all(len(i) == 2 for _r, i, _l in replicas_of(admin, TOPIC).values()), 600, "full ISRs")
        probe = Probe(bootstrap, args.partitions).start()
        time.sleep(2)
        probe.take()        # connection set-up and metadata: not part of the idle figure
        time.sleep(5)
        idle = probe.take()
        plan = {(TOPIC, p): [r[0], 4] for p, r in enumerate(layout)}
        tools = JavaTools(str(lib), root / mode)
        tool = ReassignTool(tools, bootstrap, root / mode)
        throttle = int(args.throttle_mb * 1e6) if mode == "throttled" else None
        t0 = time.monotonic()
        tool.execute(plan, throttle=throttle)
        wait_until(lambda: not reassigning(bootstrap), 3600, "the move to finish", interval=0.2)
        move_s = time.monotonic() - t0
        during = probe.take()
        tool.verify_until_done(plan)
        probe.stop()
        assert all(4 in r for r, _i, _l in replicas_of(admin, TOPIC).values())
        return {"mode": mode, "gb": args.gb, "fill_s": round(fill_s, 1), "move_s": round(move_s, 1),
                "move_mb_s": round(total / 1e6 / move_s, 1), "throttle_mb_s": args.throttle_mb if throttle else None,
                "idle_p50_ms": round(pct(idle, 0.5) * 1000, 1), "idle_p99_ms": round(pct(idle, 0.99) * 1000, 1),
                "move_p50_ms": round(pct(during, 0.5) * 1000, 1), "move_p99_ms": round(pct(during, 0.99) * 1000, 1),
                "move_max_ms": round(max(during) * 1000, 1) if during else None,
                "probe_records": len(during), "probe_errors": probe.errors}
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GB (10^9 bytes) of partition data to move (1.0)")
    ap.add_argument("--throttle-mb", type=float, default=20.0, help="--throttle of the throttled mode, MB/s (20)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--modes", default="none,throttled")
    ap.add_argument("--data-dir", help="where the clusters' data goes (default: a temporary dir)")
    args = ap.parse_args()
    lib = maven.resolve_kafka("4.3.1")
    results = []
    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        for mode in args.modes.split(","):
            r = run_mode(mode, args, lib, Path(tmp))
            results.append(r)
            print(f"{mode:>9}: {r['gb']} GB moved in {r['move_s']} s ({r['move_mb_s']} MB/s; fill {r['fill_s']} s); "
                  f"produce latency idle p50/p99 {r['idle_p50_ms']}/{r['idle_p99_ms']} ms, during the move "
                  f"p50/p99/max {r['move_p50_ms']}/{r['move_p99_ms']}/{r['move_max_ms']} ms "
                  f"({r['probe_records']} records, {r['probe_errors']} errors)", flush=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime: {load}")
    print(json.dumps({"reassignment": results, "uptime": load}))


if __name__ == "__main__":
    main()
