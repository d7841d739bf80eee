"""The client side of ``bench/cluster_compare.py``: what it runs against either cluster, with
confluent-kafka (librdkafka), and the machine-load accounting around it.

- :func:`latency_run`: a paced producer process (acks=all, linger.ms=0, max.in.flight=5) and a
  consumer process (default ``fetch.wait.max.ms``) measuring per-record end-to-end latency: the
  producer's ``time.time_ns()`` at ``produce()`` travels in the value, the consumer subtracts it from
  its clock when ``poll()`` hands the record over (same machine, same clock).
- :func:`load_topic` / :func:`consume_pass`: fill a topic, then read it all back from the beginning
  (a plain ``assign``), with librdkafka's statistics (fetch requests, bytes per fetch, round trips).
- :class:`LoadMeter`: load average, CPU seconds of each broker (its process group), of the clients
  and of everything else on the machine (``/proc``).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import struct
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from proc_stats import busy_cpu_seconds

MB = 1_000_000
_STAMP = struct.Struct("<qI")  # send time (ns since the epoch), sequence number
_TICK = os.sysconf("SC_CLK_TCK")
SLOW_MS = 400.0  # end-to-end latencies above this count as stalls (fetch.wait.max.ms is 500)
LATE_READ_MS = 300.0  # a record read this long after its acknowledgement was read late


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by rank; nan for none."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- machine load -------------------------------------------------------------------------------

def _group_cpu() -> dict[int, float]:
    """CPU seconds (utime + stime) per process group, over every process alive now."""
    out: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pgrp = int(fields[2])
        out[pgrp] = out.get(pgrp, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
    return out


class LoadMeter:
    """Snapshots of machine load; :meth:`between` gives what happened from one to another.

    ``brokers``: label -> pid of a broker started in a session of its own (its process group
    holds the broker and its worker processes). Client CPU is this process's (``time.process_time``,
    librdkafka's threads included) plus what worker processes report (``extra_client_cpu``);
    ``other`` is the machine's busy CPU minus brokers and clients: tests or benchmarks next door."""

    def __init__(self, brokers: dict[str, int]) -> None:
        self.brokers = dict(brokers)

    def snapshot(self) -> dict:
        groups = _group_cpu()
        return {"t": time.monotonic(), "busy": busy_cpu_seconds(), "self": time.process_time(),
                "brokers": {k: groups.get(pid, 0.0) for k, pid in self.brokers.items()},
                "loadavg": os.getloadavg()[0]}

    @staticmethod
    def between(a: dict, b: dict, extra_client_cpu: float = 0.0) -> dict:
        """Seconds, loadavg (1 min, at the start and end), CPU seconds per broker, of all brokers,
        of the clients, of everything else, and the machine's busy share of its cores."""
        brokers = {k: round(b["brokers"][k] - a["brokers"][k], 2) for k in a["brokers"]}
        total = sum(brokers.values())
        clients = b["self"] - a["self"] + extra_client_cpu
        busy = b["busy"] - a["busy"]
        seconds = b["t"] - a["t"]
        return {"seconds": round(seconds, 2), "loadavg": [round(a["loadavg"], 2), round(b["loadavg"], 2)],
                "broker_cpu": brokers, "brokers_cpu_s": round(total, 2), "clients_cpu_s": round(clients, 2),
                "other_cpu_s": round(max(0.0, busy - total - clients), 2),
                "machine_busy": round(busy / seconds / (os.cpu_count() or 1), 2) if seconds > 0 else None}


def wait_quiet(meter: LoadMeter, limit: float = 0.2, window: float = 1.0, timeout: float = 30.0) -> float:
    """Wait until the brokers together use less than ``limit`` cores over ``window`` seconds (the
    followers have caught up, nothing flushes; three idle Kafka JVMs use a few percent of a core
    each); returns the seconds waited (``timeout`` at most)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        a = meter.snapshot()
        time.sleep(window)
        b = meter.snapshot()
        if LoadMeter.between(a, b)["brokers_cpu_s"] < limit * window:
            break
    return round(time.monotonic() - t0, 1)


# -- topics ---------------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    """Create ``topic`` and wait until every partition is led with a full ISR.

    The admin client reads the cluster's Metadata first: librdkafka 2.10+ retires its bootstrap
    connections once it has learned the brokers, and a CreateTopics in flight on one of them
    fails with _DESTROY_BROKER (seen against Kafka's 3-node cluster). If that still happens the
    request is sent again, and TOPIC_ALREADY_EXISTS then means the first one was done."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)
    for attempt in range(3):
        try:
            admin.create_topics([NewTopic(topic, partitions, rf, config=configs)],
                                operation_timeout=30)[topic].result(60)
            break
        except KafkaException as e:
            code = e.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 0:
                break
            if code != KafkaError._DESTROY_BROKER or attempt == 2:
                raise
            print(f"  create_topic {topic}: {e.args[0].str()}; sending it again", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition led, as the clients will see it
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic}: partitions not all led with a full ISR after 60 s")


# -- end-to-end latency -----------------------------------------------------------------------------

LATENCY_PRODUCER = {"acks": "all", "linger.ms": 0, "max.in.flight.requests.per.connection": 5,
                    "enable.idempotence": False}


def _latency_producer(bootstrap, topic, rate, size, warmup_s, seconds, measuring, out) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **LATENCY_PRODUCER, "log_level": 3})
    p.list_topics(topic, timeout=10)
    pad = b"p" * max(0, size - _STAMP.size)
    warm = int(rate * warmup_s)
    total = warm + int(rate * seconds)
    acks: list[float] = []
    errors: list[str] = []
    late = 0

    ack_ms: dict[int, float] = {}   # seq -> acknowledgement latency (ms), measured records

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
            return
        seq = _STAMP.unpack_from(msg.value())[1]
        if seq >= warm:
            ms = msg.latency() * 1000.0
            acks.append(ms)
            ack_ms[seq] = ms

    cpu0 = time.process_time()
    t0 = time.monotonic()
    for i in range(total):
        target = t0 + i / rate
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.05:
            late += 1
        if i == warm:
            measuring.set()
        p.produce(topic, _STAMP.pack(time.time_ns(), i) + pad, on_delivery=on_delivery)
        p.poll(0)
    sent_s = time.monotonic() - t0
    left = p.flush(60)
    out.put({"sent": total, "warmup": warm, "send_seconds": round(sent_s, 2), "late_sends": late,
             "errors": len(errors) + left, "error_sample": errors[:3],
             "ack_p50_ms": round(pct(acks, 0.5), 2), "ack_p99_ms": round(pct(acks, 0.99), 2),
             "ack_max_ms": round(max(acks, default=float("nan")), 2), "ack_ms": ack_ms,
             "cpu_s": time.process_time() - cpu0})


def _latency_consumer(bootstrap, topic, partitions, ready, expected_q, out, debug_log=None) -> None:
    debug = {}
    if debug_log:   # librdkafka's own logger writes to stderr, from C: no Python in the fetch path
        fd = os.open(debug_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 2)
        debug = {"debug": "fetch,protocol", "log_level": 7}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "log_level": 3, **debug})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    cpu0 = time.process_time()
    seen: dict[int, tuple[float, int, int, float]] = {}   # seq -> (latency ms, partition, offset, receive s)
    dups = 0
    expected = None
    deadline = None
    ready.set()
    while True:
        if expected is None and not expected_q.empty():
            expected = expected_q.get()
            deadline = time.monotonic() + 60
        if expected is not None and (len(seen) >= expected or time.monotonic() > deadline):
            break
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            continue
        now = time.time_ns()
        sent, seq = _STAMP.unpack_from(m.value())
        if seq in seen:
            dups += 1
        seen[seq] = ((now - sent) / 1e6, m.partition(), m.offset(), now / 1e9)
    c.close()
    out.put({"seen": seen, "dups": dups, "cpu_s": time.process_time() - cpu0})


def _sleep_probe(stop, out, tick: float = 0.005, report_ms: float = 50.0) -> None:
    """Sleep ``tick`` seconds in a loop and note every wake-up late by more than ``report_ms``:
    (wall-clock time of the wake-up, ms late). A late wake-up means the machine did not run a
    ready process for that long (CPU starvation, or a stall of the whole machine)."""
    late: list[tuple[float, float]] = []
    while not stop.is_set():
        t0 = time.monotonic()
        time.sleep(tick)
        over = (time.monotonic() - t0 - tick) * 1000.0
        if over > report_ms:
            late.append((time.time(), round(over, 1)))
    out.put(late)


def latency_run(bootstrap: str, topic: str, partitions: int, *, rate: float, size: int, warmup_s: float,
                seconds: float, meter: LoadMeter, debug_log: str | None = None) -> dict:
    """``rate`` records/s of ``size`` bytes for ``warmup_s`` (not counted) then ``seconds``; the
    end-to-end latency of every record sent after the warm-up: p50/p99/p99.9/max (ms), how many
    took over 400 ms (grouped into episodes, :func:`_stalls`), records missing or duplicated; how
    long after the producer's acknowledgement the consumer got each record (p99, max, and how many
    over 300 ms: with acks=all the high watermark had passed the record, so this is the consumer's
    fetch path alone); the producer's acknowledgement latency; the late wake-ups of a sleeping probe
    process (CPU starvation); the machine's load over the measured part. ``debug_log``: a file for
    the consumer's librdkafka fetch/protocol debug log (every Fetch request and response)."""
    ctx = mp.get_context("spawn")
    measuring, ready, probe_stop = ctx.Event(), ctx.Event(), ctx.Event()
    pout, cin, cout, probe_out = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Queue()
    probe = ctx.Process(target=_sleep_probe, args=(probe_stop, probe_out))
    probe.start()
    consumer = ctx.Process(target=_latency_consumer, args=(bootstrap, topic, partitions, ready, cin, cout, debug_log))
    consumer.start()
    if not ready.wait(180):   # spawning a Python process takes long on a loaded machine
        consumer.kill()
        raise RuntimeError("latency consumer did not start")
    producer = ctx.Process(target=_latency_producer,
                           args=(bootstrap, topic, rate, size, warmup_s, seconds, measuring, pout))
    producer.start()
    measuring.wait(warmup_s + 120)
    a = meter.snapshot()
    prod = pout.get(timeout=warmup_s + seconds + 300)
    b = meter.snapshot()
    cin.put(prod["sent"])
    cons = cout.get(timeout=300)
    probe_stop.set()
    late = probe_out.get(timeout=30)
    producer.join(30)
    consumer.join(30)
    probe.join(30)
    warm = prod["warmup"]
    measured = {s: v for s, v in cons["seen"].items() if s >= warm}
    lat = [v[0] for v in measured.values()]
    slow = {s: v for s, v in measured.items() if v[0] > SLOW_MS}
    ack_ms = prod.pop("ack_ms")
    # how long after its acknowledgement (acks=all: the high watermark had passed it) the consumer
    # got each record; a parked fetch that missed the high-watermark advance shows up here as up
    # to fetch.wait.max.ms (500 ms)
    after_ack = {seq: v[0] - ack_ms[seq] for seq, v in measured.items() if seq in ack_ms}
    expected = prod["sent"] - warm
    return {"records": len(measured), "missing": expected - len(measured), "duplicates": cons["dups"],
            "p50_ms": round(pct(lat, 0.5), 2), "p99_ms": round(pct(lat, 0.99), 2),
            "p999_ms": round(pct(lat, 0.999), 2), "max_ms": round(max(lat, default=float("nan")), 2),
            "over_400ms": len(slow),
            "read_after_ack_p99_ms": round(pct(list(after_ack.values()), 0.99), 2),
            "read_after_ack_max_ms": round(max(after_ack.values(), default=float("nan")), 2),
            "read_over_300ms_after_ack": sum(d > LATE_READ_MS for d in after_ack.values()),
            "stalls": _stalls(slow, after_ack, late),
            "probe_late_max_ms": max((ms for _, ms in late), default=0.0),
            "probe_late_over_100ms": sum(ms > 100 for _, ms in late),
            "producer": {k: v for k, v in prod.items() if k != "cpu_s"},
            "load": LoadMeter.between(a, b, prod["cpu_s"] + cons["cpu_s"])}


def _stalls(slow: dict, after_ack: dict, late: list[tuple[float, float]]) -> list[dict]:
    """The records over 400 ms grouped into episodes (each received within 1 s of the previous
    one): the wall-clock receive time of the first (s since the epoch) and its (partition, offset),
    how many records, on which partitions, the worst end-to-end latency (ms), how many of them the
    consumer got over 300 ms after their acknowledgement (else the delay was in the produce and
    replication path, before the high watermark passed them), and the longest late wake-up of the
    sleep probe (:func:`_sleep_probe`) during the episode: close to the episode's latency, the
    whole machine stalled."""
    episodes: list[dict] = []
    for seq, (ms, part, offset, recv) in sorted(slow.items(), key=lambda kv: kv[1][3]):
        if not episodes or recv - episodes[-1]["_last"] > 1.0:
            episodes.append({"_last": recv, "received": round(recv, 3), "records": 0, "partitions": set(),
                             "max_ms": 0.0, "read_late_after_ack": 0, "first_offset": (part, offset)})
        e = episodes[-1]
        e["_last"] = recv
        e["records"] += 1
        e["partitions"].add(part)
        e["max_ms"] = round(max(e["max_ms"], ms), 1)
        e["read_late_after_ack"] += after_ack.get(seq, 0.0) > LATE_READ_MS
    for e in episodes:
        start = e["received"] - e["max_ms"] / 1000.0
        e["probe_late_ms"] = max((ms for t, ms in late if start <= t <= e["_last"] + 0.1), default=0.0)
        del e["_last"]
        e["partitions"] = sorted(e["partitions"])
    return episodes


# -- records already there ------------------------------------------------------------------------

# linger.ms long enough that every batch fills up to batch.size: both clusters store the same
# batches (~1 MB, 967 records), whatever their acknowledgement latency
LOAD_PRODUCER = {"acks": "all", "linger.ms": 100, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                 "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": False}


def produce_round_robin(p: Producer, topic: str, value: bytes, records: int, partitions: int, on_delivery) -> None:
    """Produce ``records`` copies of ``value`` to ``topic``, record i to partition i % ``partitions``,
    waiting out a full local queue (BufferError) and serving delivery reports every 1000 records;
    the caller flushes."""
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)


def load_topic(bootstrap: str, topic: str, partitions: int, records: int, size: int, meter: LoadMeter) -> dict:
    """Produce ``records`` of ``size`` bytes round-robin over the partitions (acks=all); MB/s and load."""
    p = Producer({"bootstrap.servers": bootstrap, **LOAD_PRODUCER, "log_level": 3})
    p.list_topics(topic, timeout=10)
    value = b"v" * size
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
    a = meter.snapshot()
    produce_round_robin(p, topic, value, records, partitions, on_delivery)
    left = p.flush(300)
    b = meter.snapshot()
    load = LoadMeter.between(a, b)
    return {"records": records, "mb_s": round(records * size / MB / load["seconds"], 1),
            "errors": len(errors) + left, "load": load}


def consume_pass(bootstrap: str, topic: str, partitions: int, records: int, meter: LoadMeter,
                 conf: dict | None = None) -> dict:
    """Read ``records`` from the beginning of every partition with a new consumer (``assign``,
    librdkafka's defaults plus ``conf``): seconds from ``assign()`` to the last record, MB/s of
    values, broker CPU seconds per GB, the load, and from librdkafka's statistics per broker the
    Fetch requests sent, the bytes received per response and the round-trip times (ms);
    ``first_record_ms``: from ``assign()`` to the first batch of records in hand; ``leaders``:
    partition -> leader node id (one broker leading all would serve the whole read alone);
    ``fetch_mb_s``: MB/s from ``assign()`` until librdkafka had *fetched* the last record (its
    statistics every 100 ms: every partition's ``next_offset`` at the end), the rate the brokers
    delivered at, apart from how fast this Python loop takes records from librdkafka's queues
    (with a queue larger than the topic the two differ; with librdkafka's default 64 MiB queue
    per partition, the fetcher pauses ``fetch.queue.backoff.ms`` whenever the queue is full)."""
    stats: list[dict] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bulk-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "statistics.interval.ms": 100, "log_level": 3,
                  "stats_cb": lambda s: stats.append(json.loads(s)), **(conf or {})})
    md = c.list_topics(topic, timeout=10).topics[topic]
    leaders = {p: md.partitions[p].leader for p in range(partitions)}
    ends = {str(p): c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    n = nbytes = 0
    a = meter.snapshot()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = time.monotonic() + 600
    first = None
    while n < records and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is not None:
                raise KafkaException(m.error())
            n += 1
            nbytes += len(m)
        if first is None and n:
            first = time.monotonic()
    b = meter.snapshot()
    c.poll(1.2)   # one more statistics callback after the last fetch
    c.close()
    load = LoadMeter.between(a, b)
    gb = nbytes / 1e9
    fetched = _fetched_at(stats, topic, ends)
    return {"records": n, "mb_s": round(nbytes / MB / load["seconds"], 1),
            "fetch_mb_s": round(nbytes / MB / (fetched - a["t"]), 1) if fetched and fetched > a["t"] else None,
            "first_record_ms": round((first - a["t"]) * 1000) if first else None, "leaders": leaders,
            "broker_cpu_s_per_gb": round(load["brokers_cpu_s"] / gb, 2) if gb else None,
            "fetch": _fetch_stats(stats), "load": load}


def _fetched_at(stats: list[dict], topic: str, ends: dict[str, int]) -> float | None:
    """``time.monotonic()`` of the first statistics in which every partition's next fetch offset
    reached its end offset (librdkafka's ``ts`` is CLOCK_MONOTONIC in µs, as ``time.monotonic``)."""
    for s in stats:
        parts = s.get("topics", {}).get(topic, {}).get("partitions", {})
        if all(parts.get(p, {}).get("next_offset", -1) >= end for p, end in ends.items()):
            return s["ts"] / 1e6
    return None


def _fetch_stats(stats: list[dict]) -> dict:
    """Per broker (node id): Fetch requests, responses' mean size (bytes) and round-trip p50/p99/max
    (ms, over librdkafka's per-interval windows) from the statistics callbacks."""
    if not stats:
        return {}
    out = {}
    last = stats[-1]
    for b in last.get("brokers", {}).values():
        if b.get("nodeid", -1) < 0:
            continue
        fetches = b.get("req", {}).get("Fetch", 0)
        rtts = [s["brokers"][b["name"]]["rtt"] for s in stats if b["name"] in s.get("brokers", {})]
        rtts = [r for r in rtts if r.get("cnt", 0) > 0]
        out[str(b["nodeid"])] = {
            "fetches": fetches, "bytes_per_response": round(b.get("rxbytes", 0) / max(1, b.get("rx", 1))),
            "rtt_p50_ms": round(pct([r["p50"] / 1000 for r in rtts], 0.5), 2),
            "rtt_p99_ms": round(max((r["p99"] / 1000 for r in rtts), default=float("nan")), 2),
            "rtt_max_ms": round(max((r["max"] / 1000 for r in rtts), default=float("nan")), 2)}
    return out
