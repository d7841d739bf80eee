"""End-to-end throughput of a real kcompat broker, driven by confluent-kafka (librdkafka).

    python3 bench/produce_consume.py [--quick] [--partitions N] [--producers N]
                                     [--records-small N] [--records-large N]

Starts ``python -m kcompat serve`` on a free port with a temporary ``log.dirs`` and runs, each on
its own topic (created up front with ``--partitions`` partitions):

1. produce ``--records-small`` (1,000,000) records of 100 bytes, acks=1;
2. produce ``--records-large`` (200,000) records of 1 KiB, acks=1;
3. consume the 100-byte topic back (assign, from the beginning, until every record is read);
4. consume the 1 KiB topic back the same way.

Produce time runs from the first ``produce()`` call to the end of ``flush()`` (the last delivery
report); with ``--producers N`` the records are split over N producer processes that start together,
and the time runs from the earliest first ``produce()`` to the latest ``flush()`` end. Consume time
runs from ``assign()`` to the last record read. MB = 10^6 bytes of record values. The broker's
peak private memory is the maximum of ``RssAnon`` in ``/proc/<broker pid>/status``, sampled every
50 ms over the whole run (page cache and mapped files do not count). The broker's CPU time per
phase (utime + stime from ``/proc/<pid>/stat``), the client's (all threads of the producer or
consumer process: Python and librdkafka) and everything else on the machine ("other", from
``/proc/stat``: other processes, kernel softirq work) are printed too: on a small machine the broker
and the client share the cores, and other load skews the numbers.

Targets are printed with PASS/FAIL markers; nothing is asserted (exit status 0) unless ``--check``
is given. The last line of output is a one-line JSON summary.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: tests.support.broker_process

from bench.proc_stats import PeriodicSampler, busy_cpu_seconds, proc_cpu_seconds  # noqa: E402

SMALL = 100
LARGE = 1024
MB = 1_000_000

# Targets (issue): produce 100 B >= 250k msg/s; produce 1 KiB >= 150 MB/s; consume >= 300 MB/s
# (applied to the 1 KiB consume: 300 MB/s of 100-byte values would be 3M msg/s through the Python
# client); broker peak RssAnon < 300 MB.
TARGET_PRODUCE_SMALL_MSGS = 250_000
TARGET_PRODUCE_LARGE_MBS = 150.0
TARGET_CONSUME_MBS = 300.0
TARGET_PEAK_RSS_ANON_MB = 300.0
OTHER_LOAD_WARN = 0.25  # warn when other processes use more than this many CPUs during a phase

# -- client settings (what a throughput-minded user sets; printed with the results) -------------

PRODUCER_CONFIG = {
    "acks": 1,
    "enable.idempotence": False,
    "compression.type": "none",
    "linger.ms": 20,                          # default 5
    "batch.size": 1_000_000,                  # bytes per partition batch (default 1,000,000)
    "batch.num.messages": 1_000_000,          # default 10,000: the cap that matters for 100 B records
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,  # 1 GiB of client-side buffer: produce() never blocks
    "message.max.bytes": 1_000_000,           # request size cap (broker message.max.bytes is 1048588)
    "max.in.flight.requests.per.connection": 5,
    "delivery.report.only.error": True,       # no per-record Python callback on success
    "socket.send.buffer.bytes": 4 * 1024 * 1024,
}

CONSUMER_CONFIG = {
    "group.id": "kcompat-bench",              # required by the client; offsets are assigned, never committed
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,    # 256 MiB of prefetch per partition
    "receive.message.max.bytes": 128 * 1024 * 1024,
    "socket.receive.buffer.bytes": 4 * 1024 * 1024,
    "check.crcs": False,                      # default
}
CONSUME_BATCH = 10_000


# -- broker process sampling -----------------------------------------------------------------------

class Scraper(threading.Thread):
    """Scrapes ``http://<address>/metrics`` every ``interval`` s (what Prometheus does, faster),
    counting scrapes and their bytes, until stopped."""

    def __init__(self, address: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.address = address
        self.interval = interval
        self.scrapes = 0
        self.bytes = 0
        self.failures = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        import urllib.request
        while not self._stop_event.wait(self.interval):
            try:
                with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=10) as r:
                    self.bytes += len(r.read())
                self.scrapes += 1
            except OSError:
                self.failures += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join(15)


class BrokerSampler(PeriodicSampler):
    """Samples the broker's RssAnon every ``interval`` s; keeps the overall and per-phase peaks."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(interval, "rss-sampler")
        self.pid = pid
        self.peak_kb = 0
        self.phase_peak_kb = 0
        self.samples = 0

    def rss_anon_kb(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
        return 0

    def sample(self) -> None:
        kb = self.rss_anon_kb()
        self.samples += 1
        if kb > self.peak_kb:
            self.peak_kb = kb
        if kb > self.phase_peak_kb:
            self.phase_peak_kb = kb

    def new_phase(self) -> None:
        self.phase_peak_kb = self.rss_anon_kb()
def _snapshot(broker_pid: int) -> tuple[float, float, float]:
    """(machine busy CPU s, broker CPU s, this process's CPU s) at this moment."""
    return busy_cpu_seconds(), proc_cpu_seconds(broker_pid), time.process_time()


def _cpu_split(a, b) -> dict:
    """CPU seconds between two snapshots: broker, client (this process, all threads: Python and
    librdkafka's) and other (everything else on the machine: other processes, kernel threads)."""
    busy, broker, client = (y - x for x, y in zip(a, b))
    return {"broker_cpu_s": broker, "client_cpu_s": client, "other_cpu_s": max(0.0, busy - broker - client)}


# -- producing -------------------------------------------------------------------------------------

def _produce_worker(bootstrap: str, topic: str, count: int, size: int, config: dict, barrier, results,
                    broker_pid: int) -> None:
    """Produce ``count`` records of ``size`` bytes to ``topic``; report times, errors and CPU."""
    from confluent_kafka import Producer

    errors = []

    def on_error(err, msg=None):
        errors.append(str(err))

    cfg = dict(config, **{"bootstrap.servers": bootstrap, "error_cb": on_error, "on_delivery": on_error})
    producer = Producer(cfg)
    producer.list_topics(topic, timeout=30)  # connect and learn the leader before the clock starts
    value = os.urandom(size)
    produce = producer.produce
    poll = producer.poll
    if barrier is not None:
        barrier.wait()
    s0 = _snapshot(broker_pid)
    t0 = time.monotonic()
    for i in range(count):
        try:
            produce(topic, value)
        except BufferError:  # client queue full: serve delivery reports and retry
            poll(0.005)
            produce(topic, value)
        if not i & 0x3FFFF:
            poll(0)
    remaining = producer.flush(120)
    t1 = time.monotonic()
    s1 = _snapshot(broker_pid)
    if remaining:
        errors.append(f"{remaining} records still undelivered after flush")
    results.put((t0, t1, errors[:5], len(errors), count, s0, s1))


def produce_phase(bootstrap: str, topic: str, count: int, size: int, producers: int, broker_pid: int) -> dict:
    ctx = mp.get_context("spawn")  # librdkafka is not fork-safe; the parent holds an AdminClient
    results = ctx.Queue()
    barrier = ctx.Barrier(producers) if producers > 1 else None
    shares = [count // producers + (1 if i < count % producers else 0) for i in range(producers)]
    procs = [ctx.Process(target=_produce_worker,
                         args=(bootstrap, topic, n, size, PRODUCER_CONFIG, barrier, results, broker_pid))
             for n in shares]
    for p in procs:
        p.start()
    out = []
    while len(out) < len(procs):
        try:
            out.append(results.get(timeout=1.0))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a producer process failed (exit codes {dead})") from None
    for p in procs:
        p.join()
    t0 = min(r[0] for r in out)
    t1 = max(r[1] for r in out)
    errors = [e for r in out for e in r[2]]
    n_errors = sum(r[3] for r in out)
    # machine and broker CPU from the first worker to start to the last to finish; client CPU summed
    first = min(out, key=lambda r: r[0])
    last = max(out, key=lambda r: r[1])
    cpu = _cpu_split(first[5][:2] + (0.0,), last[6][:2] + (0.0,))
    cpu["client_cpu_s"] = sum(r[6][2] - r[5][2] for r in out)
    cpu["other_cpu_s"] = max(0.0, cpu["other_cpu_s"] - cpu["client_cpu_s"])
    return {"records": sum(r[4] for r in out), "seconds": t1 - t0, "errors": n_errors, "error_samples": errors,
            **cpu}


# -- consuming -------------------------------------------------------------------------------------

def consume_phase(bootstrap: str, topic: str, partitions: int, expected: int, broker_pid: int) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    errors = []
    consumer = Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": bootstrap,
                                                 "error_cb": lambda e: errors.append(str(e))}))
    consumer.list_topics(topic, timeout=30)
    records = 0
    value_bytes = 0
    idle_deadline = None
    s0 = _snapshot(broker_pid)
    t0 = time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    consume = consumer.consume
    while records < expected:
        msgs = consume(num_messages=CONSUME_BATCH, timeout=1.0)
        if not msgs:
            idle_deadline = idle_deadline or time.monotonic() + 30
            if time.monotonic() > idle_deadline:
                errors.append(f"no records for 30 s after {records} of {expected}")
                break
            continue
        idle_deadline = None
        for m in msgs:
            err = m.error()
            if err is not None:
                errors.append(str(err))
                continue
            records += 1
            value_bytes += len(m.value())
    t1 = time.monotonic()
    s1 = _snapshot(broker_pid)
    consumer.close()
    return {"records": records, "seconds": t1 - t0, "value_bytes": value_bytes, "errors": len(errors),
            **_cpu_split(s0, s1),
            "error_samples": errors[:5]}


# -- reporting -------------------------------------------------------------------------------------

def _mark(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records-small", type=int, default=1_000_000, help="100-byte records (default 1,000,000)")
    ap.add_argument("--records-large", type=int, default=200_000, help="1 KiB records (default 200,000)")
    ap.add_argument("--quick", action="store_true", help="10x fewer records (a smoke test)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions per topic (default 1)")
    ap.add_argument("--producers", type=int, default=1, help="producer processes sharing each produce phase")
    ap.add_argument("--data-dir", type=Path,
                    help="broker log.dirs, new or empty (default: a temporary directory, removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and broker log")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--http", action="store_true",
                    help="serve the HTTP listener and scrape /metrics every --scrape-interval s meanwhile")
    ap.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes with --http")
    args = ap.parse_args(argv)
    if args.quick:
        args.records_small //= 10
        args.records_large //= 10

    import confluent_kafka
    from confluent_kafka import libversion
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.broker_process import BrokerProcess

    if args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        ap.error(f"--data-dir {args.data_dir} is not empty")
    tmp = Path(tempfile.mkdtemp(prefix="kcompat-bench-"))
    data_dir = args.data_dir or tmp / "data"
    overrides = {}
    if args.http:
        from kcompat.testing.ports import free_ports
        overrides["http.listeners"] = f"HTTP://127.0.0.1:{free_ports(1)[0]}"
    broker = BrokerProcess(data_dir, overrides, log_path=tmp / "broker.log")
    print(f"kcompat produce/consume benchmark: python {platform.python_version()}, "
          f"confluent-kafka {confluent_kafka.__version__} (librdkafka {libversion()[0]}), {os.cpu_count()} CPUs, "
          f"{args.partitions} partition(s) per topic, "
          f"{args.producers} producer process(es)")
    print(f"producer config: {json.dumps(PRODUCER_CONFIG, sort_keys=True)}")
    print(f"consumer config: {json.dumps(CONSUMER_CONFIG, sort_keys=True)}, consume(num_messages={CONSUME_BATCH})")
    broker.start()
    pid = broker.proc.pid
    print(f"broker pid {pid} at {broker.bootstrap}, data in {data_dir}")
    sampler = BrokerSampler(pid)
    sampler.start()
    scraper = Scraper(overrides["http.listeners"].split("://", 1)[1], args.scrape_interval) if args.http else None
    if scraper is not None:
        scraper.start()
        print(f"scraping http://{scraper.address}/metrics every {args.scrape_interval:g} s")
    phases = []
    try:
        topics = {SMALL: "bench-100B", LARGE: "bench-1KiB"}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(t, num_partitions=args.partitions, replication_factor=1)
                                       for t in topics.values()])
        for f in futures.values():
            f.result(30)
        del admin, futures  # close its connection now, not at broker shutdown
        counts = {SMALL: args.records_small, LARGE: args.records_large}

        def run(name, kind, size, fn):
            sampler.new_phase()
            r = fn()
            r.update(phase=name, kind=kind, size=size, peak_rss_anon_mb=sampler.phase_peak_kb * 1024 / MB)
            r.setdefault("value_bytes", r["records"] * size)
            r["msgs_per_s"] = r["records"] / r["seconds"] if r["seconds"] > 0 else 0.0
            r["mb_per_s"] = r["value_bytes"] / MB / r["seconds"] if r["seconds"] > 0 else 0.0
            phases.append(r)
            print(f"{name:<16} {r['records']:>10,} records {r['seconds']:8.2f} s {r['msgs_per_s']:>12,.0f} msg/s "
                  f"{r['mb_per_s']:8.1f} MB/s   broker CPU {r['broker_cpu_s']:6.2f} s "
                  f"({100 * r['broker_cpu_s'] / max(r['seconds'], 1e-9):3.0f}%), "
                  f"client CPU {r['client_cpu_s']:5.2f} s, "
                  f"other {r['other_cpu_s']:4.2f} s, RssAnon peak {r['peak_rss_anon_mb']:6.1f} MB"
                  + (f"   ERRORS {r['errors']}: {r['error_samples']}" if r["errors"] else ""), flush=True)
            if r["other_cpu_s"] > OTHER_LOAD_WARN * r["seconds"]:
                print(f"  WARNING: other processes used {r['other_cpu_s'] / r['seconds']:.1f} of {os.cpu_count()} "
                      f"CPUs during this phase; its numbers are skewed", flush=True)

        for size in (SMALL, LARGE):
            run(f"produce {'100 B' if size == SMALL else '1 KiB'}", "produce", size,
                lambda size=size: produce_phase(broker.bootstrap, topics[size], counts[size], size,
                                                args.producers, pid))
        for size in (SMALL, LARGE):
            run(f"consume {'100 B' if size == SMALL else '1 KiB'}", "consume", size,
                lambda size=size: consume_phase(broker.bootstrap, topics[size], args.partitions, counts[size], pid))
    finally:
        if scraper is not None:
            scraper.stop()
            print(f"/metrics scraped {scraper.scrapes} times ({scraper.bytes / max(1, scraper.scrapes) / 1024:.0f} "
                  f"KiB each), {scraper.failures} failures")
        try:
            sampler.stop()
        finally:
            try:
                broker.stop()
            except Exception as e:  # report, but still print the numbers
                print(f"broker stop: {e}")
                broker.kill9()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp} (broker log: {tmp / 'broker.log'})")

    by = {p["phase"]: p for p in phases}
    peak_mb = sampler.peak_kb * 1024 / MB
    checks = [
        ("produce 100 B msg/s", by["produce 100 B"]["msgs_per_s"], ">=", TARGET_PRODUCE_SMALL_MSGS),
        ("produce 1 KiB MB/s", by["produce 1 KiB"]["mb_per_s"], ">=", TARGET_PRODUCE_LARGE_MBS),
        ("consume 1 KiB MB/s", by["consume 1 KiB"]["mb_per_s"], ">=", TARGET_CONSUME_MBS),
        ("broker peak RssAnon MB", peak_mb, "<", TARGET_PEAK_RSS_ANON_MB),
    ]
    results = []
    print(f"broker peak RssAnon over the whole run: {peak_mb:.1f} MB ({sampler.samples} samples)")
    print("targets:")
    for name, value, op, target in checks:
        ok = value >= target if op == ">=" else value < target
        results.append(ok)
        print(f"  {_mark(ok)}  {name:<24} {value:>12,.1f}  (target {op} {target:,})")
    print(f"  info  consume 100 B MB/s       {by['consume 100 B']['mb_per_s']:>12,.1f}  "
          f"({by['consume 100 B']['msgs_per_s']:,.0f} msg/s; no target)")
    skewed = [p["phase"] for p in phases if p["other_cpu_s"] > OTHER_LOAD_WARN * p["seconds"]]
    if skewed:
        print(f"  WARNING: other load during {', '.join(skewed)}: rerun on an idle machine")
    errors = sum(p["errors"] for p in phases)
    complete = all(p["records"] == counts[p["size"]] for p in phases)
    summary = {
        "partitions": args.partitions, "producers": args.producers, "errors": errors, "complete": complete,
        "peak_rss_anon_mb": round(peak_mb, 1), "pass": all(results) and complete and not errors,
        "skewed_by_other_load": skewed,
        "phases": {p["phase"].replace(" ", "_"): {"records": p["records"], "seconds": round(p["seconds"], 3),
                                                  "msgs_per_s": round(p["msgs_per_s"]),
                                                  "mb_per_s": round(p["mb_per_s"], 1),
                                                  "broker_cpu_s": round(p["broker_cpu_s"], 2),
                                                  "client_cpu_s": round(p["client_cpu_s"], 2),
                                                  "other_cpu_s": round(p["other_cpu_s"], 2)} for p in phases},
    }
    print(json.dumps(summary, separators=(",", ":")))
    if args.check and not summary["pass"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
