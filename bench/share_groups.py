"""Share groups (KIP-932) against consumer groups on one kcompat broker, with Kafka 4.3.1's own
Java tools and client.

    python3 bench/share_groups.py [--rounds 3] [--records-100 300000] [--records-1k 100000]

Throughput: one topic of 3 partitions per record size (100 B and 1 KiB values), filled first.
Each round alternates:

- ``share``: three ``bench/java/PerfClient.java`` processes with a ``KafkaShareConsumer`` each in
  one fresh share group (``share.auto.offset.reset=earliest`` set as a GROUP config; implicit
  acknowledgement: each poll acknowledges the records of the one before, the last ones are
  committed before the process reports);
- ``group``: the same three processes with a ``KafkaConsumer`` each in one fresh classic consumer
  group (``auto.offset.reset=earliest``, auto-commit), one partition each once the group settles.

Figure: records/s over the wall time from starting the processes to the last record any of them
received (JVM start and group join included in both; every record is read exactly once in both,
checked), and the ratio share/group (the issue's floor: 0.5).

Redelivery latency: a share consumer (``tests/share/java/ShareClient.java`` in ``hold`` mode)
acquires records and is killed with SIGKILL while a second one is polling; the figure is the time
from the kill to the second consumer receiving the first of the held records again, with
``group.share.record.lock.duration.ms=5000``. The holder is killed 2 s after it acquired, so the
expected answers are about 3 s from the kill and 5 s from the acquisition (plus up to one poll);
both are printed. Prints ``/proc/loadavg`` at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402

from conformance import maven  # noqa: E402
from conformance.reference import java_command  # noqa: E402
from kcompat.testing import Broker  # noqa: E402
from tests.share.test_share_consumers import CLIENT, set_group_configs  # noqa: E402

CONFIGS = {"group.share.record.lock.duration.ms": "5000", "group.share.min.record.lock.duration.ms": "1000",
           "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
           "group.initial.rebalance.delay.ms": "0"}


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def fill(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    value = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % 3)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


PERF_CLIENT = ROOT / "bench" / "java" / "PerfClient.java"


def run_mode(lib: Path, bootstrap: str, topic: str, n: int, mode: str, idle_ms: int = 3000) -> float:
    """Three PerfClient processes of ``mode`` (share / group) in one fresh group; records/s from
    starting them to the last record any of them received."""
    group = f"{mode}-{uuid.uuid4().hex[:8]}"
    if mode == "share":
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    cmd = java_command(lib, str(PERF_CLIENT), [bootstrap, group, topic, mode, str(idle_ms)], heap="512m")
    start = time.time()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(3)]
    lasts, total = [], 0
    for p in procs:
        out, _ = p.communicate(timeout=600)
        line = next(x for x in out.splitlines() if x.startswith("LAST "))
        _l, at, count = line.split()
        lasts.append(int(at) / 1000.0)
        total += int(count)
    assert total == n, f"{mode}: {total} records read of {n}"
    return n / (max(lasts) - start)


def redelivery(lib: Path, bootstrap: str) -> float:
    topic = f"redeliver-{uuid.uuid4().hex[:6]}"
    group = f"rg-{uuid.uuid4().hex[:6]}"
    fill(bootstrap, topic, 300, 100)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})

    def client(mode: str):
        cmd = java_command(lib, str(CLIENT), [bootstrap, group, topic, mode, "1000000000", "60000"], heap="256m")
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    holder = client("hold")
    held = set()
    for line in holder.stdout:
        if line.startswith("R "):
            held.add(int(line.split()[2]))
        if line.startswith("HOLDING"):
            acquired_at = time.monotonic()
            break
    other = client("accept")
    seen = threading.Event()
    killed_at: list[float] = []

    def read():
        for line in other.stdout:
            if line.startswith("R ") and int(line.split()[2]) in held and killed_at:
                seen.set()
                return

    threading.Thread(target=read, daemon=True).start()
    time.sleep(2.0)   # the second consumer has joined and polls (it gets nothing: all is held)
    holder.kill()
    killed_at.append(time.monotonic())
    assert seen.wait(60), "the held records never came back"
    now = time.monotonic()
    other.kill()
    return now - killed_at[0], now - acquired_at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records-100", type=int, default=300_000)
    ap.add_argument("--records-1k", type=int, default=100_000)
    args = ap.parse_args()
    lib = maven.resolve_kafka("4.3.1")
    print(f"loadavg at start: {loadavg()}  cpus: {os.cpu_count()}", flush=True)
    with Broker(CONFIGS) as b:
        bs = b.bootstrap_servers
        sizes = {100: args.records_100, 1024: args.records_1k}
        topics = {}
        for size, n in sizes.items():
            topics[size] = f"perf-{size}"
            b.create_topic(topics[size], 3)
            fill(bs, topics[size], n, size)
        results: dict[tuple[int, str], list[float]] = {}
        for r in range(args.rounds):
            for size, n in sizes.items():
                for mode in ("share", "group"):
                    rate = run_mode(lib, bs, topics[size], n, mode)
                    results.setdefault((size, mode), []).append(rate)
                    print(f"round {r + 1} {size:>5} B {mode:<8} {rate:>10.0f} records/s", flush=True)
        print("\nmedians (records/s):")
        for size in sizes:
            share = statistics.median(results[(size, "share")])
            cons = statistics.median(results[(size, "group")])
            print(f"  {size:>5} B  share {share:>9.0f}  consumer group {cons:>9.0f}  ratio {share / cons:.2f}")
        lat = [redelivery(lib, bs) for _ in range(args.rounds)]
        print(f"\nredelivery after kill -9 (lock 5000 ms; the holder is killed 2 s after it acquired):"
              f" from the kill median {statistics.median(x for x, _ in lat):.2f} s, from the acquisition"
              f" median {statistics.median(y for _, y in lat):.2f} s"
              f" (runs: {', '.join(f'{x:.2f}/{y:.2f}' for x, y in lat)})")
    print(f"loadavg at end: {loadavg()}")


if __name__ == "__main__":
    main()
