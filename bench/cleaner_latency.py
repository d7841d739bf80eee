"""Produce and fetch latency of a real kcompat broker with and without the log cleaner at work.

    python3 bench/cleaner_latency.py [--records N] [--seconds S] [--rate R]
                                     [--keys K] [--value-bytes B] [--segment-bytes B]
                                     [--fetch-wait-ms MS] [--keep]

Shows whether log compaction stalls produce or fetch. It starts ``python -m kcompat serve`` (port
0, a temporary ``log.dirs``, ``log.cleaner.backoff.ms=500``) and creates one compacted topic of one
partition (``cleanup.policy=compact``, ``segment.bytes`` 1 MiB so the log is ~100 segments,
``min.cleanable.dirty.ratio=0.01``) with ``min.compaction.lag.ms`` one hour: nothing in it is
cleanable yet. It pre-fills the topic with ``--records`` (1,000,000) keyed updates over ``--keys``
(1,000) keys of ``--value-bytes`` (100) bytes, then runs the same load twice:

- **A (baseline)**: the cleaner has nothing to do (every record is younger than the lag);
- **B (cleaning)**: one ``--warmup`` second into the load, an IncrementalAlterConfigs sets the
  topic's ``min.compaction.lag.ms`` to 0; at its next check (at most ~1 s later) the cleaner starts
  compacting the ~1,000,000-record log in its worker process, installs the result on the broker's
  thread, and keeps cleaning the segments that roll under the load (the dirty ratio threshold is
  1%).

The load, per phase: ``--warmup`` (1) s + ``--seconds`` (15) s of keyed records at a fixed
``--rate`` (2,000/s) from one confluent-kafka producer (acks=1, linger.ms=0, idempotence off; the
schedule never waits for acknowledgements, so a stall shows up as latency, not as fewer records),
and one consumer in another process tailing the partition (assigned at the end offset,
``fetch.wait.max.ms`` ``--fetch-wait-ms``, default librdkafka's 500). Measured per record:
**produce latency**, librdkafka's ``Message.latency()`` (``produce()`` to the delivery report being
served by ``poll()`` in the producer process), and **end-to-end fetch latency**, from just before
``produce()`` (a wall-clock time carried in the value) to the consumer's ``poll()`` returning it.
Statistics cover the records sent in the ``--seconds`` window after the warm-up: p50 / p99 / max
per phase and the ratio B/A, the records whose end-to-end latency reached 0.9 x
``fetch.wait.max.ms`` (a fetch that waited out its maximum wait), and for B the worst latencies
around each install and a per-second table of the window.

Cleaning is checked, not assumed: from the broker log's cleaner lines (``cleaning offsets [a, b)``
when a cleaning starts, ``cleaned up to offset ... in ...s: <records/bytes before -> after>`` when
its install completes, with the broker's timestamps) the script prints each cleaning relative to
the window; it also samples the partition's ``.log`` bytes and segment count every 0.2 s, and after
B reads the partition from its start (records left of those produced, distinct keys). CPU seconds
per phase: broker process, its worker processes (the log cleaner), the two client processes, and
everything else on the machine (other load makes the numbers noisy: a warning is printed).

No target: it prints numbers and always exits 0. The last line is a one-line JSON summary. The
default run takes about 45 s.
"""

from __future__ import annotations

import argparse
import calendar
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import re
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: tests.support.broker_process

from bench.proc_stats import PeriodicSampler, busy_cpu_seconds, proc_cpu_seconds  # noqa: E402

TOPIC = "cleaner-latency"
LAG_BLOCKED_MS = 3_600_000        # min.compaction.lag.ms before phase B: nothing cleanable
OTHER_LOAD_WARN = 0.25            # warn when other processes use more than this many CPUs
TS = struct.Struct("<d")          # send time (time.time()) at the start of every load value

BROKER_OVERRIDES = {"log.cleaner.backoff.ms": "500"}  # check for cleanable logs every tick (~1 s)

LOAD_PRODUCER_CONFIG = {
    "acks": 1,
    "linger.ms": 0,
    "enable.idempotence": False,
    "compression.type": "none",
}
PREFILL_PRODUCER_CONFIG = {
    "acks": 1,
    "linger.ms": 20,
    "enable.idempotence": False,
    "compression.type": "none",
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}
CONSUMER_CONFIG = {
    "group.id": "cleaner-latency-bench",   # required by the client; partitions are assigned
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.min.bytes": 1,
}
DEFAULT_FETCH_WAIT_MS = 500   # librdkafka's default fetch.wait.max.ms

_LOG_TS = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z "


# -- measuring helpers -----------------------------------------------------------------------------
def _descendants(pid: int) -> list[int]:
    """Every live descendant process of ``pid`` (the broker's log-cleaner workers)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out

def _cpu_snapshot(broker_pid: int, workers: list[int]) -> dict:
    return {"busy": busy_cpu_seconds(), "broker": proc_cpu_seconds(broker_pid),
            "workers": {w: proc_cpu_seconds(w) for w in workers}, "producer": time.process_time()}


def _cpu_split(a: dict, b: dict, consumer_cpu_s: float) -> dict:
    workers = sum(b["workers"].get(w, a["workers"][w]) - a["workers"][w] for w in a["workers"])
    broker = b["broker"] - a["broker"]
    client = b["producer"] - a["producer"] + consumer_cpu_s
    other = max(0.0, b["busy"] - a["busy"] - broker - workers - client)
    return {"broker_cpu_s": broker, "cleaner_cpu_s": workers, "client_cpu_s": client, "other_cpu_s": other}


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _stats(values: list[float]) -> dict:
    """p50 / p99 / max in milliseconds."""
    v = sorted(values)
    return {"n": len(v), "p50_ms": _pct(v, 0.50) * 1e3, "p99_ms": _pct(v, 0.99) * 1e3,
            "max_ms": (v[-1] * 1e3) if v else float("nan")}


class SizeSampler(PeriodicSampler):
    """Samples the partition directory every ``interval`` s: (time, bytes of ``*.log``, segments)."""

    def __init__(self, part_dir: Path, interval: float = 0.2) -> None:
        super().__init__(interval, "size-sampler")
        self.part_dir = part_dir
        self.samples: list[tuple[float, int, int]] = []

    def sample(self) -> tuple[float, int, int]:
        size = segs = 0
        try:
            with os.scandir(self.part_dir) as it:
                for e in it:
                    if e.name.endswith(".log"):
                        try:
                            size += e.stat().st_size
                            segs += 1
                        except FileNotFoundError:
                            pass
        except FileNotFoundError:
            pass
        s = (time.time(), size, segs)
        self.samples.append(s)
        return s


# -- the consumer (its own process: no GIL shared with the producer's schedule) --------------------

def _consumer_main(bootstrap: str, topic: str, config: dict, ready, control, results) -> None:
    from confluent_kafka import Consumer, TopicPartition

    errors: list[str] = []
    c = Consumer(dict(config, **{"bootstrap.servers": bootstrap,
                                          "error_cb": lambda e: errors.append(str(e))}))
    c.list_topics(topic, timeout=30)
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, high)])
    t_end = time.time() + 0.5
    while time.time() < t_end:            # connected and fetching before the load starts
        c.poll(0.05)
    ready.put(high)
    cpu0 = time.process_time()
    got: list[tuple[float, float]] = []   # (send time, end-to-end latency)
    expected = None
    deadline = None
    unpack = TS.unpack_from
    while True:
        if expected is None:
            try:
                expected = control.get_nowait()
                deadline = time.time() + 20
            except queue.Empty:
                pass
        if expected is not None and (len(got) >= expected or time.time() > deadline):
            break
        # poll(), not consume(num_messages=...): a batch consume() waits for a full batch or its
        # timeout, which would add up to the timeout to every record's latency
        m = c.poll(0.05)
        if m is None:
            continue
        now = time.time()
        if m.error() is not None:
            errors.append(str(m.error()))
            continue
        sent = unpack(m.value())[0]
        got.append((sent, now - sent))
    cpu = time.process_time() - cpu0
    c.close()
    results.put({"start_offset": high, "records": got, "errors": errors[:5], "n_errors": len(errors),
                 "cpu_s": cpu})


# -- phases ------------------------------------------------------------------------------------------

def prefill(bootstrap: str, records: int, keys: int, value_bytes: int) -> float:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer(dict(PREFILL_PRODUCER_CONFIG, **{"bootstrap.servers": bootstrap,
                                                   "on_delivery": lambda err, msg: errors.append(str(err))}))
    key_list = [b"key-%06d" % k for k in range(keys)]
    rnd = random.Random(1)
    value = rnd.randbytes(value_bytes)
    t0 = time.monotonic()
    for i in range(records):
        try:
            p.produce(TOPIC, value, key_list[rnd.randrange(keys)])
        except BufferError:
            p.poll(0.01)
            p.produce(TOPIC, value, key_list[rnd.randrange(keys)])
        if not i & 0xFFFF:
            p.poll(0)
    left = p.flush(120)
    if left or errors:
        raise RuntimeError(f"pre-fill: {left} undelivered, errors {errors[:3]}")
    return time.monotonic() - t0


def load_phase(name: str, bootstrap: str, admin, broker_pid: int, sampler: SizeSampler, args,
               enable_cleaning: bool) -> dict:
    """One phase: warm-up + window at a fixed rate; for B, cleaning is enabled at the warm-up's end."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    ctx = mp.get_context("spawn")  # librdkafka is not fork-safe
    ready, control, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    cons_cfg = dict(CONSUMER_CONFIG, **{"fetch.wait.max.ms": args.fetch_wait_ms})
    cons = ctx.Process(target=_consumer_main, args=(bootstrap, TOPIC, cons_cfg, ready, control, results), daemon=True)
    cons.start()
    ready.get(timeout=60)

    delivered: list[tuple[float, float]] = []   # (send time, produce latency)
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
            return
        lat = msg.latency()
        delivered.append((TS.unpack_from(msg.value())[0], lat if lat is not None else float("nan")))

    p = Producer(dict(LOAD_PRODUCER_CONFIG, **{"bootstrap.servers": bootstrap, "on_delivery": on_delivery}))
    p.list_topics(TOPIC, timeout=30)     # connected, leader known
    key_list = [b"key-%06d" % k for k in range(args.keys)]
    rnd = random.Random(2)
    pad = rnd.randbytes(max(0, args.value_bytes - TS.size))
    rate = args.rate
    n_warm = int(args.warmup * rate)
    n_total = n_warm + int(args.seconds * rate)
    alter_future = None
    t_alter = None
    workers = _descendants(broker_pid)
    produce, poll, pack = p.produce, p.poll, TS.pack
    t0 = time.time() + 0.05
    for i in range(n_total):
        if i == n_warm:
            cpu0 = _cpu_snapshot(broker_pid, workers)
            size0 = sampler.sample()
            if enable_cleaning:
                t_alter = time.time()
                res = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
                    ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
                alter_future = admin.incremental_alter_configs([res])
        target = t0 + i / rate
        while True:
            d = target - time.time()
            if d <= 0:
                break
            if d > 0.002:
                poll(d - 0.001)           # serve delivery reports while waiting
            else:
                time.sleep(d)
        produce(TOPIC, pack(time.time()) + pad, key_list[rnd.randrange(args.keys)])
        poll(0)
    t_window_end = time.time()
    cpu1 = _cpu_snapshot(broker_pid, workers)
    left = p.flush(60)
    control.put(n_total - left - len(errors))
    cons_out = results.get(timeout=90)
    cons.join(10)
    if alter_future is not None:
        for f in alter_future.values():
            f.result(30)
    window_start = t0 + n_warm / rate
    prod = [(s, lat) for s, lat in delivered if s >= window_start]
    e2e = [(s, lat) for s, lat in cons_out["records"] if s >= window_start]
    out = {
        "phase": name, "window": (window_start, t_window_end), "t_alter": t_alter,
        "sent": n_total, "delivered": len(delivered), "consumed": len(cons_out["records"]),
        "produce_errors": len(errors) + left, "error_samples": errors[:5] + cons_out["errors"],
        "consume_errors": cons_out["n_errors"], "start_offset": cons_out["start_offset"],
        "produce": _stats([lat for _, lat in prod]), "e2e": _stats([lat for _, lat in e2e]),
        "produce_raw": prod, "e2e_raw": e2e, "size_at_start": size0,
        **_cpu_split(cpu0, cpu1, cons_out["cpu_s"]),
    }
    return out


# -- the broker log ----------------------------------------------------------------------------------

def _log_time(date: str, ms: str) -> float:
    return calendar.timegm(time.strptime(date, "%Y-%m-%dT%H:%M:%S")) + int(ms) / 1000


def cleanings(log_text: str) -> list[dict]:
    """The cleanings of the bench partition in the broker log: start, install, offsets, stats."""
    name = re.escape(f"{TOPIC}-0")
    start_re = re.compile(_LOG_TS + r".*" + name + r": cleaning offsets \[(\d+), (\d+)\) \(dirty ratio ([\d.]+)")
    done_re = re.compile(_LOG_TS + r".*" + name + r": cleaned up to offset (\d+) in ([\d.]+)s: (\d+) records/(\d+) "
                         r"bytes -> (\d+) records/(\d+) bytes")
    bad_re = re.compile(_LOG_TS + r".*" + name + r".*(cleaning abandoned|cleaning failed)(.*)")
    out: list[dict] = []
    for line in log_text.splitlines():
        m = start_re.match(line)
        if m:
            out.append({"start": _log_time(m[1], m[2]), "first": int(m[3]), "upper": int(m[4]),
                        "ratio": float(m[5]), "end": None})
            continue
        m = done_re.match(line)
        if m and out and out[-1]["end"] is None:
            out[-1].update(end=_log_time(m[1], m[2]), seconds=float(m[4]), records_read=int(m[5]),
                           bytes_read=int(m[6]), records_kept=int(m[7]), bytes_kept=int(m[8]))
            continue
        m = bad_re.match(line)
        if m and out and out[-1]["end"] is None:
            out[-1].update(end=_log_time(m[1], m[2]), failed=(m[3] + m[4]).strip())
    return out


def read_back(bootstrap: str) -> dict:
    """Records from the log start to the end, and distinct keys (after phase B)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(dict(CONSUMER_CONFIG, **{"bootstrap.servers": bootstrap}))
    tp = TopicPartition(TOPIC, 0)
    low, high = c.get_watermark_offsets(tp, timeout=30)
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    n, keys, last = 0, set(), low - 1
    deadline = time.time() + 60
    while last < high - 1 and time.time() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            if m.error() is None:
                n += 1
                keys.add(m.key())
                last = m.offset()
    c.close()
    return {"log_start": low, "high_watermark": high, "records": n, "keys": len(keys)}


# -- main --------------------------------------------------------------------------------------------

def _fmt(s: dict) -> str:
    return f"p50 {s['p50_ms']:7.2f}  p99 {s['p99_ms']:7.2f}  max {s['max_ms']:8.2f} ms  (n={s['n']:,})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="pre-filled keyed updates (default 1,000,000)")
    ap.add_argument("--keys", type=int, default=1000, help="distinct keys (default 1,000)")
    ap.add_argument("--value-bytes", type=int, default=100, help="value size (default 100)")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured window per phase (default 15)")
    ap.add_argument("--warmup", type=float, default=1.0, help="load before the window, not measured (default 1)")
    ap.add_argument("--rate", type=int, default=2000, help="records/s of the load (default 2,000)")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20, help="topic segment.bytes (default 1 MiB)")
    ap.add_argument("--fetch-wait-ms", type=int, default=DEFAULT_FETCH_WAIT_MS,
                    help=f"consumer fetch.wait.max.ms (default {DEFAULT_FETCH_WAIT_MS}, librdkafka's)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and the broker log")
    args = ap.parse_args(argv)

    import confluent_kafka
    from confluent_kafka import libversion
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.broker_process import BrokerProcess

    tmp = Path(tempfile.mkdtemp(prefix="kcompat-cleaner-bench-"))
    data_dir = tmp / "data"
    broker = BrokerProcess(data_dir, overrides=BROKER_OVERRIDES, log_path=tmp / "broker.log")
    topic_config = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_bytes),
                    "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": str(LAG_BLOCKED_MS)}
    print(f"kcompat log cleaner latency benchmark: python {platform.python_version()}, confluent-kafka "
          f"{confluent_kafka.__version__} (librdkafka {libversion()[0]}), {os.cpu_count()} CPUs")
    print(f"broker overrides: {json.dumps(BROKER_OVERRIDES)}; topic {TOPIC} (1 partition): {json.dumps(topic_config)}")
    print(f"load: {args.rate:,} records/s for {args.warmup:g} s warm-up + {args.seconds:g} s window, "
          f"{args.keys:,} keys, {args.value_bytes} B values; producer {json.dumps(LOAD_PRODUCER_CONFIG)}; "
          f"consumer {json.dumps(dict(CONSUMER_CONFIG, **{'fetch.wait.max.ms': args.fetch_wait_ms}))}")
    t_begin = time.time()
    broker.start()
    pid = broker.proc.pid
    print(f"broker pid {pid} at {broker.bootstrap}, data in {data_dir}", flush=True)
    sampler = SizeSampler(data_dir / f"{TOPIC}-0")
    phases: dict[str, dict] = {}
    readback: dict = {}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                      config=topic_config)])[TOPIC].result(30)
        secs = prefill(broker.bootstrap, args.records, args.keys, args.value_bytes)
        sampler.start()
        _, size, segs = sampler.sample()
        print(f"pre-fill: {args.records:,} records in {secs:.1f} s; partition {size / 1e6:.1f} MB in {segs} "
              f"segments", flush=True)
        for name, enable in (("A", False), ("B", True)):
            r = load_phase(name, broker.bootstrap, admin, pid, sampler, args, enable)
            phases[name] = r
            w0, w1 = r["window"]
            print(f"phase {name} ({'baseline, nothing cleanable' if not enable else 'cleaning enabled'}): "
                  f"{r['sent']:,} sent, {r['delivered']:,} delivered, {r['consumed']:,} consumed "
                  f"(from offset {r['start_offset']:,}); window {w1 - w0:.1f} s")
            print(f"  produce latency   {_fmt(r['produce'])}")
            print(f"  end-to-end fetch  {_fmt(r['e2e'])}")
            print(f"  CPU s in window: broker {r['broker_cpu_s']:.2f}, cleaner worker {r['cleaner_cpu_s']:.2f}, "
                  f"clients {r['client_cpu_s']:.2f}, other {r['other_cpu_s']:.2f}"
                  + (f"   ERRORS produce {r['produce_errors']} consume {r['consume_errors']}: {r['error_samples']}"
                     if r["produce_errors"] or r["consume_errors"] else ""), flush=True)
            if r["other_cpu_s"] > OTHER_LOAD_WARN * (w1 - w0):
                print(f"  WARNING: other processes used {r['other_cpu_s'] / (w1 - w0):.2f} of {os.cpu_count()} "
                      f"CPUs during this window; its numbers are skewed", flush=True)
        sampler.stop()
        readback = read_back(broker.bootstrap)
    finally:
        admin = None  # close its connection before the broker stops
        if sampler.is_alive():
            sampler.stop()
        try:
            broker.stop()
        except Exception as e:  # report, but still print the numbers
            print(f"broker stop: {e}")
            broker.kill9()
        log_text = broker.log_text()
        if args.keep:
            print(f"kept {tmp} (broker log: {tmp / 'broker.log'})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    a, b = phases["A"], phases["B"]
    w0, w1 = b["window"]
    cl = cleanings(log_text)
    print(f"cleanings of {TOPIC}-0 (times relative to the start of B's window; the window is 0.0 .. {w1 - w0:.1f} s; "
          f"cleaning enabled at {b['t_alter'] - w0:+.2f} s):")
    for c in cl:
        end = f"{c['end'] - w0:+7.2f} s" if c["end"] is not None else "  (not finished)"
        what = (f"{c['records_read']:,} records/{c['bytes_read'] / 1e6:.1f} MB -> {c['records_kept']:,} records/"
                f"{c['bytes_kept'] / 1e6:.2f} MB in {c['seconds']:.2f} s" if "records_read" in c
                else c.get("failed", ""))
        print(f"  {c['start'] - w0:+7.2f} s .. {end}  offsets [{c['first']:,}, {c['upper']:,})  {what}")
        if c["end"] is not None and w0 - 1 <= c["end"] <= w1:
            # the worst latencies of the records sent from 1 s before the install line to 0.5 s after
            near = []
            for kind in ("produce", "e2e"):
                cand = [(lat, s) for s, lat in b[kind + "_raw"] if c["end"] - 1.0 <= s <= c["end"] + 0.5]
                if cand:
                    lat, s = max(cand)
                    near.append(f"{kind} {lat * 1e3:.1f} ms (sent {1e3 * (s - c['end']):+.0f} ms)")
            print(f"      worst around the install (-1 s .. +0.5 s): {', '.join(near)}")
    if not cl:
        print("  NONE: the cleaner did not clean during the run")
    in_window = [c for c in cl if c["start"] < w1 and (c["end"] or w1) > w0]
    busy = sum(min(c["end"] or w1, w1) - max(c["start"], w0) for c in in_window)
    samples = [s for s in sampler.samples if w0 <= s[0] <= w1]
    s_start = b["size_at_start"]
    s_min = min(samples, key=lambda s: s[1]) if samples else s_start
    s_end = samples[-1] if samples else s_start
    print(f"  cleaning in progress for {busy:.1f} s of the {w1 - w0:.1f} s window ({len(in_window)} cleaning(s)); "
          f"partition .log bytes: {s_start[1] / 1e6:.1f} MB in {s_start[2]} segments at the window start, "
          f"min {s_min[1] / 1e6:.1f} MB at {s_min[0] - w0:+.1f} s, {s_end[1] / 1e6:.1f} MB in {s_end[2]} segments "
          f"at the end")
    if readback:
        produced = args.records + a["sent"] + b["sent"]
        print(f"  read back after B: {readback['records']:,} records in offsets [{readback['log_start']:,}, "
              f"{readback['high_watermark']:,}) of {produced:,} produced, {readback['keys']:,} distinct keys")

    intervals = [(c["start"], c["end"] or w1) for c in cl]   # cleanings in progress
    # records whose fetch waited out (nearly) the whole fetch.wait.max.ms: a parked fetch not
    # woken by the appends that followed
    slow_ms = 0.9 * args.fetch_wait_ms
    waited = {n: sum(1 for _, lat in r["e2e_raw"] if lat * 1e3 >= slow_ms) for n, r in phases.items()}
    print("per second of B's window (ms; C = a cleaning in progress, I = an install completed in that second):")
    print("     s    produce p50    p99    max     e2e p50    p99    max")
    for sec in range(int(w1 - w0 + 0.999)):
        lo, hi = w0 + sec, w0 + sec + 1
        p = _stats([lat for s, lat in b["produce_raw"] if lo <= s < hi])
        e = _stats([lat for s, lat in b["e2e_raw"] if lo <= s < hi])
        mark = ("C" if any(x < hi and y > lo for x, y in intervals) else " ") + \
               ("I" if any(c["end"] is not None and lo <= c["end"] < hi and "records_read" in c for c in cl) else " ")
        print(f"  {sec:4d} {mark} {p['p50_ms']:10.2f} {p['p99_ms']:6.2f} {p['max_ms']:6.2f}  "
              f"{e['p50_ms']:10.2f} {e['p99_ms']:6.2f} {e['max_ms']:6.2f}")

    def ratio(x, y):
        return x / y if y > 0 else float("nan")

    print("summary (ms):                       p50      p99      max")
    rows = [("produce  A (baseline)", a["produce"]), ("produce  B (cleaning)", b["produce"]),
            ("e2e      A (baseline)", a["e2e"]), ("e2e      B (cleaning)", b["e2e"])]
    for label, s in rows:
        print(f"  {label:<30} {s['p50_ms']:8.2f} {s['p99_ms']:8.2f} {s['max_ms']:8.2f}   n={s['n']:,}")
    ratios = {}
    for kind in ("produce", "e2e"):
        ratios[kind] = {q: ratio(b[kind][q + "_ms"], a[kind][q + "_ms"]) for q in ("p50", "p99", "max")}
        print(f"  B/A {kind:<26} {ratios[kind]['p50']:8.2f} {ratios[kind]['p99']:8.2f} {ratios[kind]['max']:8.2f}")
    print(f"  records with e2e >= {slow_ms:.0f} ms (0.9 x fetch.wait.max.ms): A {waited['A']:,}, B {waited['B']:,}")
    skewed = [n for n, r in phases.items() if r["other_cpu_s"] > OTHER_LOAD_WARN * (r["window"][1] - r["window"][0])]
    if skewed:
        print(f"  WARNING: other load during phase(s) {', '.join(skewed)}: rerun on an idle machine")
    print(f"total run time {time.time() - t_begin:.0f} s")

    def rnd(s):
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items()}

    summary = {
        "records": args.records, "rate": args.rate, "seconds": args.seconds, "fetch_wait_ms": args.fetch_wait_ms,
        "e2e_waited_fetch_max_wait": waited,
        "A": {"produce": rnd(a["produce"]), "e2e": rnd(a["e2e"]), "cleaner_cpu_s": round(a["cleaner_cpu_s"], 2),
              "broker_cpu_s": round(a["broker_cpu_s"], 2), "other_cpu_s": round(a["other_cpu_s"], 2)},
        "B": {"produce": rnd(b["produce"]), "e2e": rnd(b["e2e"]), "cleaner_cpu_s": round(b["cleaner_cpu_s"], 2),
              "broker_cpu_s": round(b["broker_cpu_s"], 2), "other_cpu_s": round(b["other_cpu_s"], 2)},
        "ratio_B_over_A": {k: {q: round(v, 2) for q, v in r.items()} for k, r in ratios.items()},
        "cleanings": len(cl), "cleanings_in_window": len(in_window), "cleaning_seconds_in_window": round(busy, 2),
        "records_cleaned": sum(c.get("records_read", 0) for c in cl),
        "records_retained": sum(c.get("records_kept", 0) for c in cl),
        "readback": readback,
        "errors": sum(r["produce_errors"] + r["consume_errors"] for r in phases.values()),
        "skewed_by_other_load": skewed,
    }
    print(json.dumps(summary, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
